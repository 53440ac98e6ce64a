"""The CUDA runtime's rules (the nvidia-cuda-runtime wheels): the driver against the runtime, and whether the runtime's
toolkit can target the GPU."""

from __future__ import annotations

from ..arch import runtime_targets_rule
from ..reasons import Prediction, Reason
from ..rules import driver_rule
from ..tables import minor_series, version

JUDGES_PRERELEASES = False
LISTS_EVERY_BUILD = False  # its one build per release is the release


def rules(release: str, variant: str, cc: str | None, driver: str | None, python: str | None = None, cuda_runtime: str | None = None,
          arch: tuple | None = None) -> tuple[list[Reason], dict]:
    cuda = cuda_runtime or release
    targets = runtime_targets_rule(cuda, cc) if version(minor_series(cuda)) is not None else None
    return [driver_rule(cuda, driver), *([targets] if targets else [])], {"cuda_runtime": minor_series(cuda)}


def wheel_package(variant: str) -> str | None:
    return None  # the tables hold no file list of the runtime's wheels


def suggest(release: str, cc: str | None, driver: str | None, prediction: Prediction) -> str | None:
    return None
