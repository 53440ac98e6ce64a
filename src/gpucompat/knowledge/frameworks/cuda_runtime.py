"""The CUDA runtime's rules (the nvidia-cuda-runtime wheels): the driver against the runtime, whether the runtime's
toolkit can target the GPU, and whether the driver's JIT takes the PTX its NVRTC writes (ptx.py: minor-version
compatibility does not cover PTX JIT)."""

from __future__ import annotations

from ..arch import runtime_targets_rule
from ..ptx import runtime_ptx_rule
from ..reasons import FAIL, Prediction, Reason
from ..rules import driver_rule
from ..tables import minor_series, version

JUDGES_PRERELEASES = False
LISTS_EVERY_BUILD = False  # its one build per release is the release


def rules(release: str, variant: str, cc: str | None, driver: str | None, python: str | None = None, cuda_runtime: str | None = None,
          arch: tuple | None = None) -> tuple[list[Reason], dict]:
    cuda = cuda_runtime or release
    known = version(minor_series(cuda)) is not None
    targets = runtime_targets_rule(cuda, cc) if known else None
    jit = runtime_ptx_rule(cuda, cc, driver) if known and (targets is None or targets.verdict != FAIL) else None
    return [driver_rule(cuda, driver), *([targets] if targets else []), *([jit] if jit else [])], {"cuda_runtime": minor_series(cuda)}


def wheel_package(variant: str) -> str | None:
    return None  # the tables hold no file list of the runtime's wheels


def suggest(release: str, cc: str | None, driver: str | None, prediction: Prediction) -> str | None:
    return None
