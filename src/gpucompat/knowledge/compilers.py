"""The run-time compilers a build's pip requirements bring (knowledge/data/compiler_pins.csv) and the targets each
release of them knows (knowledge/data/runtime_compilers.csv, measured from NVIDIA's wheels): what TensorFlow's XLA,
JAX's XLA and CuPy's NVRTC compile with as they run."""

from __future__ import annotations

import re

from packaging.version import Version

from . import tables
from .tables import version


def compiler_pin(framework: str, variant: str, release: str) -> dict | None:
    """The run-time compiler a build's pip requirements bring (knowledge/data/compiler_pins.csv): the row in force."""
    want = version(release.split("+")[0])
    rows = [r for r in tables.table("compiler_pins") if r["framework"] == framework and r["variant"] == variant
            and want is not None and Version(r["from_version"]) <= want]
    return max(rows, key=lambda r: Version(r["from_version"]), default=None)


def compiler_targets(compiler: str, release: str, package: str | None = None) -> dict | None:
    """The targets a ptxas or NVRTC release knows, measured from NVIDIA's wheel (knowledge/data/runtime_compilers.csv)."""
    return next((r for r in tables.table("runtime_compilers") if r["compiler"] == compiler and r["version"] == release
                 and (package is None or r["package"] == package)), None)


def knows(row: dict, major: int, minor: int) -> bool:
    return f"sm_{major}{minor}" in row["sm"].split(";")


def ptxas_pin(framework: str, variant: str, release: str) -> tuple[dict, str, str, dict, dict] | None:
    """The ptxas a build's pip requirements bring: (pin row, package, oldest version allowed, targets of that oldest,
    targets of the version pip installs today). A pin is `pkg==V` (TensorFlow) or `pkg>=V[,<W]` (JAX)."""
    pin = compiler_pin(framework, variant, release)
    found = pin and re.fullmatch(r"\s*([A-Za-z0-9_.-]+?)\s*(?:==|>=)\s*([0-9.]+)\s*(?:,\s*<\s*[0-9.]+\s*)?", pin["requirement"])
    if not found:
        return None
    package, floor = found.groups()
    lowest, given = compiler_targets("ptxas", floor, package), compiler_targets("ptxas", pin["resolves_to"], package)
    return (pin, package, floor, lowest, given) if lowest and given else None

