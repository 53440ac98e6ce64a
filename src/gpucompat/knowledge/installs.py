"""A PASS only for what installs: each release's GPU install line as uv resolved it against PyPI, for the
Pythons the release has wheels for (install_checks.csv, made by tools/build_install_checks.py). An install
line that does not resolve is the stack's ENV_UNRESOLVABLE, said with uv's own reason and the nearest release
of the same build that does resolve (tensorflow[and-cuda] 2.15.0 -> 2.15.0.post1). Builds the tool could not
reach (torch's +cuXXX builds on PyTorch's own index) have no row: nothing is said of them here.
"""

from __future__ import annotations

from functools import lru_cache

from packaging.version import Version

from . import tables


@lru_cache(maxsize=None)  # the nearest yes asks it for each of its ~120 candidates; the table does not change in a process
def _rows(framework: str, variant: str) -> tuple[dict, ...]:
    variant = "default" if variant == "plain" else variant  # plain tensorflow (2.1-2.13), as typed or as read for a GPU
    return tuple(r for r in tables.table("install_checks") if r["framework"] == framework and r["variant"] == variant
                 and tables.version(r["release"]) is not None)


def unresolvable(framework: str, release: str, variant: str, python: str | None) -> dict | None:
    """The row of an install line uv could not resolve (for PYTHON, or for every Python when PYTHON is not
    given), with `nearest`: the nearest release of the same build that resolves; None where it resolves or is unknown."""
    rows = _rows(framework, variant)
    row = next((r for r in rows if r["release"] == release), None)
    if row is None or row["resolves"] == "yes":
        return None
    failing = row["failing_pythons"].split(";") if row["failing_pythons"] else []
    if row["resolves"] == "some" and (python is None or python not in failing):
        return None  # it resolves for some Pythons, this one among them (or none was named)
    this = Version(release)
    resolving = sorted((r for r in rows if r["resolves"] == "yes"), key=lambda r: (abs(_distance(Version(r["release"]), this)), Version(r["release"]) < this))
    return {**row, "nearest": resolving[0]["release"] if resolving else None}


def _distance(a: Version, b: Version) -> float:
    """How far apart two releases are, in (major, minor, micro, post) steps: 2.15.0 and 2.15.0.post1 are nearest."""
    def key(v: Version):
        return (v.major * 1e6 + v.minor * 1e3 + v.micro) * 10 + (v.post or 0) * 0.01
    return key(a) - key(b)
