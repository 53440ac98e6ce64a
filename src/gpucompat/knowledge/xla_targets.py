"""The GPU targets the XLA inside each JAX CUDA build can generate code for (data/xla_targets.csv, read from the
plugin wheels by tools/build_xla_targets.py); frameworks/jax.py's `xla_rule` judges a GPU by them.

JAX compiles its kernels with XLA, whose LLVM knows a fixed list of targets. For a GPU newer than any it knows,
XLA falls back to the most recent target below the GPU (openxla/xla GetSmName). From Hopper on, that target's code
is arch-specific (`sm_90a`, `sm_101a`): it runs on that architecture only, and no ptxas or nvJitLink compiles it
for a later one ("ptxas fatal : Program with .target 'sm_90a' cannot be compiled to future architecture"). So a
build whose XLA does not target the GPU fails at its first compiled kernel, whatever the driver or compiler.
Where the fallback target is a plain one (before Hopper), its PTX carries forward and ptxas compiles it for the
newer GPU, without the GPU's own instructions: a pass with a warning. Where it is family-specific (`sm_100f`) and
the GPU of the same family, XLA's newer code uses it (ResolveSupportedComputeCapability): a pass with a warning.
"""

from __future__ import annotations

from functools import lru_cache

import re

from packaging.version import Version

from . import tables
from .tables import version

TABLE = "xla_targets"


def sm_key(name: str) -> tuple[int, str]:
    """sm_90 < sm_90a < sm_100: by number, then the plain name before its a/f variants."""
    return int(name[3:].rstrip("af")), name


def package(variant: str, release: str) -> str:
    """Whose XLA a jax[variant] of this release runs: the CUDA 13 or 12 plugin, or jaxlib's own CUDA wheel (before 0.4.31)."""
    if variant.startswith("cuda13"):
        return "jax-cuda13-pjrt"
    want = version(release)
    if variant != "cuda12" and want is not None and want <= Version("0.4.30"):
        return "jaxlib"
    return "jax-cuda12-pjrt"


@lru_cache(maxsize=None)  # the tables do not change within a process (tables.table is cached too)
def _rows(name: str) -> tuple[dict, ...]:
    return tuple(sorted((r for r in tables.table(TABLE) if r["package"] == name), key=lambda r: Version(r["release"])))


def targets_of(name: str, release: str) -> dict | None:
    """The xla_targets.csv row of one release of a package, or None where the table does not hold it."""
    return next((r for r in _rows(name) if Version(r["release"]) == Version(release)), None)


def plain_targets(row: dict) -> list[int]:
    return sorted(int(t[3:]) for t in row["targets"].split(";") if re.fullmatch(r"sm_[0-9]+", t))


def first_targeting(name: str, sm: int) -> dict | None:
    """The first release of a package (the CUDA 12 plugin for jaxlib's own wheels) whose XLA targets sm_<sm>."""
    rows = _rows("jax-cuda12-pjrt" if name == "jaxlib" else name)
    return next((r for r in rows if sm in plain_targets(r)), None)
