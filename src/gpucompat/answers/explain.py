"""`gpucompat explain`: a stack spec and a GPU -> the prediction, offline, in one object."""

from __future__ import annotations

from ..errors import UserError
from ..knowledge import tables
from ..knowledge.rules import predict_stack
from ..plan import CC_VERSION, DRIVER_VERSION, PYTHON_VERSION, parse_spec

MAX_SPEC_CHARS = 200
DEFAULT_VARIANT = {"torch": "default", "tensorflow": "and-cuda", "jax": "cpu", "cupy": "cuda12x", "cuda-runtime": "default"}


def target(gpu: str | None, cc: str | None, driver: str) -> dict:
    if bool(gpu) == bool(cc):
        raise UserError("give the GPU as either --gpu NAME or --cc X.Y (one of them).")
    if not isinstance(driver, str) or not DRIVER_VERSION.fullmatch(driver):
        raise UserError(f"--driver {str(driver)[:40]!r} is not a driver version like '535.104.05'.")
    row = None
    if gpu:
        if len(gpu) > MAX_SPEC_CHARS:
            raise UserError(f"--gpu is {len(gpu)} characters long; a GPU name needs at most {MAX_SPEC_CHARS}.")
        row = tables.gpu(gpu)  # an unknown name is not an error: the prediction says it cannot judge
        cc = row["cc"] if row else None
    elif not CC_VERSION.fullmatch(cc):
        raise UserError(f"--cc {cc[:40]!r} is not a compute capability like '8.0'.")
    supported = tables.driver_cuda(driver)
    return {"gpu": gpu, "matched": row["name"] if row else None, "cc": cc, "cc_source": row["source"] if row else None,
            "cc_confidence": row.get("confidence", "high") if row else None, "driver": driver,
            "driver_cuda": supported["cuda"] if supported else None}


def explain(spec: str, gpu: str | None, cc: str | None, driver: str, python: str | None = None) -> dict:
    if len(spec) > MAX_SPEC_CHARS:
        raise UserError(f"the stack spec is {len(spec)} characters long; a spec like torch==2.4.1 needs at most {MAX_SPEC_CHARS}.")
    framework, version, variant = parse_spec(spec)
    if version is None or not (version[:1].isascii() and version[:1].isdigit()):
        raise UserError(f"{spec[:60]!r}: explain needs one exact version, e.g. {framework}==2.4.1.")
    if len(version) > tables.MAX_VERSION_CHARS or tables.version(version) is None:
        raise UserError(f"{spec[:60]!r}: the version is not a release number of at most {tables.MAX_VERSION_CHARS} characters, like 2.4.1.")
    if framework == "cuda-runtime" and tables.version(version).major == 0:
        # No CUDA release is numbered 0.x (CUDA began at 1.0): a typo, said plainly rather than judged 'uncertain'.
        raise UserError(f"cuda-runtime {version} is not a CUDA release; give a CUDA version such as 12.4.")
    if python is not None and not PYTHON_VERSION.fullmatch(python):
        raise UserError(f"--python {python[:20]!r} is not a Python version from 3.8 to 3.15, like '3.11'.")
    where = target(gpu, cc, driver)
    variant = variant or DEFAULT_VARIANT[framework]
    release = version
    if framework == "torch" and variant != "default" and "+" not in version:
        release = f"{version}+{variant}"
    prediction = predict_stack(framework, release, variant, where["cc"], driver, python)
    return {"spec": spec, "target": {**where, "python": python}, **prediction.to_dict()}
