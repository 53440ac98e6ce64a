"""The knowledge tables in data/*.csv, loaded once, with the lookups the rules need.

Every row carries its `source`; lookups return the row so a verdict can cite it.
"""

from __future__ import annotations

import csv
import re
from functools import lru_cache
from pathlib import Path

from packaging.version import InvalidVersion, Version

DATA = Path(__file__).with_name("data")


@lru_cache(maxsize=None)
def table(name: str) -> tuple[dict, ...]:
    with (DATA / f"{name}.csv").open(newline="", encoding="utf-8") as handle:
        return tuple(csv.DictReader(handle))


MAX_VERSION_CHARS = 64  # no real version is longer; int() refuses numbers of thousands of digits


def version(text: str | None) -> Version | None:
    """A version, or None for anything that is not one (never an exception)."""
    if not text or len(text) > MAX_VERSION_CHARS:
        return None
    try:
        return Version(text)
    except (InvalidVersion, ValueError):
        return None


def minor_series(text: str) -> str:
    """'2.4.1+cu121' -> '2.4'."""
    return ".".join(text.split("+")[0].split(".")[:2])


# -- GPUs ------------------------------------------------------------------------------------

_VENDOR_WORDS = {"nvidia", "tesla", "geforce"}


def _tokens(name: str) -> list[str]:
    words = re.split(r"[\s\-_]+", name.lower().strip())
    return [w for w in words if w and w not in _VENDOR_WORDS]


def gpu(name: str) -> dict | None:
    """The table row for a device name as drivers report it ('NVIDIA A100-SXM4-40GB',
    'Tesla V100-PCIE-16GB', 'NVIDIA GeForce RTX 4090'): the longest table name whose
    words begin the reported name, ignoring NVIDIA/Tesla/GeForce and form factors after it."""
    reported = _tokens(name)
    best, best_len = None, 0
    for row in table("gpus"):
        words = _tokens(row["name"])
        if words and len(words) > best_len and all(_same_word(r, w) for r, w in zip(reported, words)) and len(reported) >= len(words):
            best, best_len = row, len(words)
    return best


def _same_word(reported: str, known: str) -> bool:
    # Kepler boards report a cooling suffix: 'Tesla K40m', 'Tesla K20c'.
    return reported == known or (reported[:-1] == known and reported[-1] in "mc" and known[-1].isdigit())


# -- drivers and CUDA ------------------------------------------------------------------------

def driver_cuda(driver: str) -> dict | None:
    """The newest CUDA whose toolkit driver minimum this driver meets (the row)."""
    have = version(driver)
    eligible = [r for r in table("cuda_drivers") if have is not None and version(r["toolkit_driver_min"]) <= have]
    return max(eligible, key=lambda r: Version(r["cuda"]), default=None)


def cuda_row(cuda: str) -> dict | None:
    return next((r for r in table("cuda_drivers") if r["cuda"] == minor_series(cuda)), None)


def compat_floor(major: int) -> dict | None:
    """The row giving the minor-version-compatibility floor of a CUDA major (its x.0 row)."""
    row = next((r for r in table("cuda_drivers") if r["cuda"] == f"{major}.0"), None)
    return row if row and row["compat_driver_min"] else None


def _newest_at_most(rows, column: str, want: Version | None) -> dict | None:
    """The row with the newest version in `column` that is not newer than `want`."""
    eligible = [r for r in rows if want is not None and Version(r[column]) <= want]
    return max(eligible, key=lambda r: Version(r[column]), default=None)


def cuda_known(cuda: str) -> bool:
    """Whether the tables know CUDA of this major at all. Any minor of a known major is judged
    by the major's documented rules (backward and minor-version compatibility)."""
    want = version(minor_series(cuda))
    return want is not None and any(Version(r["cuda"]).major == want.major for r in table("cuda_drivers"))


def newest_cuda() -> dict:
    """The row of the newest CUDA release in the tables."""
    return max(table("cuda_drivers"), key=lambda r: Version(r["cuda"]))


def cuda_archs(cuda: str) -> dict | None:
    """The sm_XY list nvcc of that CUDA can build for (nearest older release of the same
    major if not listed: architectures are dropped only at a new major)."""
    want = version(minor_series(cuda))
    row = _newest_at_most(table("cuda_archs"), "cuda", want)
    return row if row and Version(row["cuda"]).major == want.major else None


# -- frameworks ------------------------------------------------------------------------------

def torch_default(release: str) -> dict | None:
    return next((r for r in table("torch_pypi_default") if r["release"] == minor_series(release)), None)


def torch_build(release: str, variant: str) -> dict | None:
    return next((r for r in table("torch_builds") if r["release"] == minor_series(release) and r["variant"] == variant), None)


def tensorflow_build(release: str) -> dict | None:
    return next((r for r in table("tensorflow_builds") if r["release"] == minor_series(release)), None)


def newest_release(framework: str) -> dict | None:
    """The newest release series whose facts the tables hold, for frameworks whose rows are
    open-ended ('from this version on'): past it the rows would be a guess."""
    return next((r for r in table("newest_releases") if r["framework"] == framework), None)


def _past_newest(framework: str, release: str) -> bool:
    newest, want = newest_release(framework), version(minor_series(release))
    return want is None or (newest is not None and want > Version(newest["newest"]))


def jax_build(release: str, variant: str) -> dict | None:
    """The newest row for this variant that is not newer than the release; None past the
    newest release the tables know."""
    if _past_newest("jax", release):
        return None
    rows = [r for r in table("jax_builds") if r["variant"] == variant]
    return _newest_at_most(rows, "from_version", version(release.split("+")[0]))


def cupy_build(release: str, variant: str) -> dict | None:
    """The row saying CuPy's release series ships this variant (cupy-cuda12x, ...), or None."""
    want = version(release.split("+")[0])
    if want is None:
        return None
    return next((r for r in table("cupy_builds") if r["variant"] == variant and int(r["series"]) == want.major
                 and (not r["from_version"] or want >= Version(r["from_version"]))), None)
