"""CUDA's own wheels (nvidia-*) and the rules over packages installed together.

A requirements file pins more than a framework: the cuDNN, cuBLAS, NCCL and CUDA runtime wheels
it loads, JAX's CUDA plugin beside jaxlib, a CuPy wheel. Each rule here judges one such fact,
with its source: a library wheel needs a driver that runs its CUDA major; torch pins its libraries
exactly; the cu11 and cu12 wheels of one library overwrite each other; a JAX plugin of another
version than jaxlib is not used; two CuPy wheels in one environment break CuPy.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from . import tables
from .rules import FAIL, PASS, UNCERTAIN, Reason, driver_rule

DOTTED = re.compile(r"[0-9]+(?:\.[0-9]+)*", re.ASCII)
NVIDIA_WHEEL = re.compile(r"nvidia-(?P<component>[a-z0-9-]+?)(?:-cu(?P<major>[0-9]{2}))?", re.ASCII)
MIXED_SOURCE = ("https://github.com/pytorch/pytorch/issues/147001 (the -cu11 and -cu12 wheels of a library install into the same "
                "nvidia/<library>/ directory and overwrite each other; torch then preloads the wrong libcudart)")
PLUGIN_SOURCE = ("https://github.com/jax-ml/jax/blob/1082251cde876f91608b403d1995b5e0025f0398/jaxlib/plugin_support.py "
                 "(check_plugin_version: a plugin whose version differs from jaxlib's 'will not be used')")
CUPY_SOURCE = ("https://github.com/cupy/cupy/blob/main/cupy/_environment.py (_detect_duplicate_installation: 'CuPy may not "
               "function correctly because multiple CuPy packages are installed')")


@dataclass(frozen=True)
class CudaWheel:
    """One of CUDA's own wheels: which library, for which CUDA major (and, for the runtime and NVRTC, which minor)."""

    package: str
    version: str | None
    library: str
    cuda_major: int | None
    cuda: str | None  # the CUDA minor series its version names ("12.4"), where the version is CUDA's own
    source: str


@lru_cache(maxsize=None)
def _components() -> dict:
    return {row["component"]: row for row in tables.table("cuda_wheels")}


def cuda_wheel(package: str, version: str | None) -> CudaWheel | None:
    """nvidia-cudnn-cu12 9.1.0.70 -> cuDNN for CUDA 12; nvidia-cuda-runtime 13.0.96 (CUDA 13 drops the suffix) -> CUDA 13.0;
    None for a name that is none of CUDA's component wheels (nvidia-ml-py is NVML's bindings, not a CUDA library)."""
    found = NVIDIA_WHEEL.fullmatch(package)
    row = _components().get(found.group("component")) if found else None
    if row is None:
        return None
    parts = [p for p in (version or "").split(".") if p.isdigit()]
    major = int(found.group("major")) if found.group("major") else None
    if major is None and row["version_is"] in ("cuda", "major") and parts:
        major = int(parts[0])
    cuda = f"{parts[0]}.{parts[1]}" if row["version_is"] == "cuda" and len(parts) >= 2 else None
    return CudaWheel(package, version, row["library"], major, cuda, row["source"])


def wheel_rule(wheel: CudaWheel, driver: str | None) -> Reason:
    """A library built for CUDA major M needs a driver that runs CUDA M (from 11 on, any driver at or above
    the major's minor-version floor); the runtime wheel is judged by its own minor, as a runtime is."""
    name = f"{wheel.library} ({wheel.package})"
    if wheel.cuda_major is None:
        return Reason(name, UNCERTAIN, f"{wheel.package} {wheel.version or ''} does not say which CUDA it is built for".replace("  ", " "), wheel.source)
    if wheel.cuda:  # a version that is CUDA's own (the runtime, NVRTC, cuda-toolkit): judged by its minor, as a runtime is
        judged = driver_rule(wheel.cuda, driver)
        return Reason(name, judged.verdict, judged.text, judged.source or wheel.source, judged.code, judged.stage, judged.warning, judged.confidence)
    judged = driver_rule(f"{wheel.cuda_major}.0", driver)
    if judged.verdict == PASS:
        text = f"built for CUDA {wheel.cuda_major}.x, which driver {driver} runs"
    else:
        text = f"built for CUDA {wheel.cuda_major}.x: " + judged.text.replace(f"CUDA runtime {wheel.cuda_major}.0 is", f"CUDA {wheel.cuda_major} is")
    return Reason(name, judged.verdict, text, f"{wheel.source} ; {judged.source}" if judged.source else wheel.source,
                  judged.code, judged.stage, None, judged.confidence)


def in_toolkit(wheels: list[CudaWheel], toolkit: str | None) -> list[CudaWheel]:
    """CUDA 13's wheels have no -cuXX suffix, and some keep their own version numbers (nvidia-cufft 12.0.0.61 is CUDA
    13.0's): such a wheel belongs to the CUDA that the set's cuda-toolkit metapackage, or its CUDA-versioned wheels, name."""
    unsuffixed = [w for w in wheels if not ((found := NVIDIA_WHEEL.fullmatch(w.package)) and found.group("major"))]
    majors = {w.cuda_major for w in unsuffixed if w.cuda_major}
    if toolkit:
        majors = {int(toolkit.split(".")[0])}
    if len(majors) != 1:
        return wheels
    major = majors.pop()
    return [w if w.cuda_major else CudaWheel(w.package, w.version, w.library, major, None,
                                             f"{w.source} ; without a -cuXX suffix it is the CUDA {major} toolkit's this set installs")
            for w in wheels]


# -- torch's own pins ------------------------------------------------------------------------------

@lru_cache(maxsize=None)
def _torch_pins() -> dict:
    pins: dict = {}
    for row in tables.table("torch_cuda_pins"):
        pins.setdefault(row["release"], {})[row["package"]] = row
    return pins


def torch_pins(release: str) -> dict[str, dict]:
    """package -> row: the CUDA wheels PyPI's default torch wheel of this exact release pins with ==; {} where not known."""
    return _torch_pins().get(release.split("+")[0], {})


def pin_rule(release: str, package: str, pinned: str) -> Reason | None:
    """A pin that differs from the one torch itself requires: pip cannot install both (None: torch pins no such wheel, or agrees)."""
    row = torch_pins(release).get(package)
    if row is None or tables.version(row["version"]) == tables.version(pinned):
        return None
    return Reason(f"torch's own pin of {package}", FAIL, f"torch {release.split('+')[0]} requires {package}=={row['version']}; the set pins "
                  f"{pinned}, so pip cannot install both", row["source"], "ENV_UNRESOLVABLE", "resolve")


# -- rules over the whole set ----------------------------------------------------------------------

def majors_rule(members: list[tuple[str, int]]) -> Reason | None:
    """Wheels built for different CUDA majors in one environment ([(what, major)]): None when they agree."""
    majors = sorted({major for _what, major in members})
    if len(majors) < 2:
        return None
    groups = "; ".join(f"CUDA {m}: {', '.join(sorted({w for w, mm in members if mm == m}))}" for m in majors)
    return Reason("one CUDA major", FAIL, f"the set mixes CUDA majors ({groups}): the wheels of one library for two CUDA majors "
                  "install into the same directory and overwrite each other, so which one the framework loads depends on the "
                  "install order", MIXED_SOURCE, "IMPORT_FAILED", "import")


def jax_plugin_rule(jaxlib: str | None, plugin: str, plugin_version: str | None) -> Reason | None:
    """A JAX CUDA plugin of another version than jaxlib is ignored, and JAX runs on the CPU (None when they match or one is unpinned)."""
    if not jaxlib or not plugin_version:
        return None
    dotted = [DOTTED.match(v) for v in (jaxlib, plugin_version)]  # plugin_support.py compares the dotted prefix
    if all(dotted) and dotted[0].group(0) == dotted[1].group(0):
        return None
    return Reason(f"{plugin} beside jaxlib", FAIL, f"{plugin} {plugin_version} differs from jaxlib {jaxlib}: jaxlib does not use a plugin "
                  "of another version, so JAX sees no GPU", PLUGIN_SOURCE, "NO_DEVICE", "device")


def cupy_rule(packages: list[str]) -> Reason | None:
    """More than one CuPy package in one environment (None for at most one)."""
    if len(packages) < 2:
        return None
    return Reason("one CuPy package", FAIL, f"the set installs {', '.join(sorted(packages))}: they install the same cupy module over "
                  "each other, and CuPy warns that it may not work", CUPY_SOURCE, "IMPORT_FAILED", "import")
