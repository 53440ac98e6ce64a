"""PTX a run-time compiler emits against what the driver's JIT accepts.

Minor-version compatibility lets a newer CUDA runtime run on an older driver of the same major, but it does
not cover PTX JIT: the driver JIT-compiles PTX only up to the PTX ISA of its own CUDA (ptx_isa.csv). NVRTC of
CUDA X writes PTX of X's ISA, so where a stack compiles at run time and hands PTX to the driver, X's ISA must
not be newer than the driver's. Measured on the lent H100 (docs/evidence/verdicts-h100): NVRTC 13.5's PTX
(ISA 9.5) gave CUDA_ERROR_UNSUPPORTED_PTX_VERSION under driver 580.159.04 (CUDA 13.0), while SASS that the
same NVRTC compiled for sm_90 ran. A compiler that writes SASS for the GPU in hand never asks the driver's JIT;
one whose targets end before the GPU can only hand it PTX.
"""

from __future__ import annotations

from packaging.version import Version

from . import tables
from .arch import toolkit_window_rule
from .reasons import FAIL, PASS, Reason

RULE = "PTX JIT by the driver"
EVIDENCE = "docs/evidence/verdicts-h100/check-nvrtc-13.5.json"


def isa(cuda: str | None) -> dict | None:
    """The ptx_isa.csv row of a CUDA minor series ('12.6' -> PTX ISA 8.5), or None where the table has none."""
    series = tables.minor_series(cuda) if cuda else None
    return next((r for r in tables.table("ptx_isa") if r["cuda"] == series), None)


def driver_isa(driver: str | None) -> tuple[dict, dict] | None:
    """(the driver's CUDA row, its PTX ISA row): the newest PTX ISA this driver's JIT accepts; None where either is not known."""
    have = tables.driver_cuda(driver) if driver else None
    loads = isa(have["cuda"]) if have else None
    return (have, loads) if loads else None


def ptx_jit_rule(compiler: str, compiler_cuda: str | None, driver: str | None, sm: str, only_ptx: bool) -> Reason | None:
    """Whether PTX from `compiler` (of CUDA `compiler_cuda`) is JIT-compiled by this driver. `only_ptx`: the compiler has
    no SASS target for `sm`, so the GPU runs nothing but that PTX. A compiler newer in ISA than the driver fails where
    only PTX can run (PTX_TOOLCHAIN_TOO_NEW) and is a warning on a pass where its SASS runs. None where there is nothing
    to say: the ISA or the driver is not known, or SASS runs and the driver accepts the PTX too."""
    emitted, loads = isa(compiler_cuda), driver_isa(driver)
    if emitted is None or loads is None:
        return None
    have, accepted = loads
    source = f"{emitted['source']} ; {accepted['source']} ; {have['source']} ; {EVIDENCE}"
    said = (f"{compiler} of CUDA {emitted['cuda']} writes PTX ISA {emitted['ptx_isa']}; driver {driver} (CUDA {have['cuda']}) "
            f"JIT-compiles PTX up to ISA {accepted['ptx_isa']}")
    newer = Version(emitted["ptx_isa"]) > Version(accepted["ptx_isa"])
    confidence = "medium" if "medium" in (emitted["confidence"], accepted["confidence"]) else "high"
    if not newer:
        return Reason(RULE, PASS, f"{said}, so the PTX it hands the driver for {sm} loads", source, confidence=confidence) if only_ptx else None
    if only_ptx:
        return Reason(RULE, FAIL, f"{said}: {compiler} has no SASS target for {sm}, so it hands the driver PTX, which the driver refuses "
                      f"(CUDA_ERROR_UNSUPPORTED_PTX_VERSION; minor-version compatibility does not cover PTX JIT)", source,
                      "PTX_TOOLCHAIN_TOO_NEW", "compute", confidence=confidence)
    return Reason(RULE, PASS, f"{said}: the SASS it compiles for {sm} runs, its PTX does not load", source, confidence=confidence,
                  warning=f"PTX from {compiler} of CUDA {emitted['cuda']} (ISA {emitted['ptx_isa']}) is refused by driver {driver} "
                  f"(CUDA_ERROR_UNSUPPORTED_PTX_VERSION): code that JIT-compiles only PTX of this toolkit fails here")


def runtime_ptx_rule(cuda: str, cc: str | None, driver: str | None) -> Reason | None:
    """A cuda-runtime stack's NVRTC (the nvidia-cuda-nvrtc wheel of the runtime's own CUDA series, space.py) judged by
    ptx_jit_rule: only PTX where the toolkit has no SASS target the GPU runs (a GPU newer than every target)."""
    if cc is None:
        return None
    window = toolkit_window_rule(cuda, cc)
    major, minor = cc.split(".")
    return ptx_jit_rule("NVRTC", cuda, driver, f"sm_{major}{minor}", only_ptx=bool(window.source and window.warning))
