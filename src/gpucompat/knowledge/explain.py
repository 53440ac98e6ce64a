"""`gpucompat explain`: a stack spec and a GPU -> the prediction, offline, in one object."""

from __future__ import annotations

import re

from ..errors import UserError
from ..plan import parse_spec
from . import tables
from .rules import predict

_DRIVER = re.compile(r"^\d{3}(\.\d{1,3}){0,2}$")
_CC = re.compile(r"^\d{1,2}\.\d$")
DEFAULT_VARIANT = {"torch": "default", "tensorflow": "and-cuda", "jax": "cpu", "cupy": "cuda12x", "cuda-runtime": "default"}


def target(gpu: str | None, cc: str | None, driver: str) -> dict:
    if bool(gpu) == bool(cc):
        raise UserError("give the GPU as either --gpu NAME or --cc X.Y (one of them).")
    if not _DRIVER.match(driver):
        raise UserError(f"--driver {driver!r} is not a driver version like '535.104.05'.")
    if gpu:
        row = tables.gpu(gpu)
        if row is None:
            raise UserError(f"unknown GPU {gpu!r}; give --cc X.Y instead, or a name as the driver reports it (e.g. 'NVIDIA A100-SXM4-40GB').")
        cc, source = row["cc"], row["source"]
    else:
        if not _CC.match(cc):
            raise UserError(f"--cc {cc!r} is not a compute capability like '8.0'.")
        source = None
    supported = tables.driver_cuda(driver)
    return {"gpu": gpu, "matched": row["name"] if gpu else None, "cc": cc, "cc_source": source, "driver": driver,
            "driver_cuda": supported["cuda"] if supported else None}


def explain(spec: str, gpu: str | None, cc: str | None, driver: str, python: str | None = None) -> dict:
    framework, version, variant = parse_spec(spec)
    if version is None or not version[0].isdigit():
        raise UserError(f"{spec!r}: explain needs one exact version, e.g. {framework}==2.4.1.")
    if python is not None and not re.match(r"^3\.\d{1,2}$", python):
        raise UserError(f"--python {python!r} is not a Python version like '3.11'.")
    where = target(gpu, cc, driver)
    variant = variant or DEFAULT_VARIANT[framework]
    release = version
    if framework == "torch" and variant != "default" and "+" not in version:
        release = f"{version}+{variant}"
    prediction = predict(framework, release, variant, where["cc"], driver, python)
    return {"spec": spec, "target": {**where, "python": python}, **prediction.to_dict()}
