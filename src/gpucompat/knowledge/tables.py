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


def version(text: str | None) -> Version | None:
    try:
        return Version(text) if text else None
    except InvalidVersion:
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
    found = None
    have = version(driver)
    if have is None:
        return None
    for row in table("cuda_drivers"):
        if version(row["toolkit_driver_min"]) <= have and (found is None or Version(row["cuda"]) > Version(found["cuda"])):
            found = row
    return found


def cuda_row(cuda: str) -> dict | None:
    return next((r for r in table("cuda_drivers") if r["cuda"] == minor_series(cuda)), None)


def compat_floor(major: int) -> dict | None:
    """The row giving the minor-version-compatibility floor of a CUDA major (its x.0 row)."""
    row = next((r for r in table("cuda_drivers") if r["cuda"] == f"{major}.0"), None)
    return row if row and row["compat_driver_min"] else None


def cuda_archs(cuda: str) -> dict | None:
    """The sm_XY list nvcc of that CUDA can build for (nearest older release if not listed)."""
    want, found = version(minor_series(cuda)), None
    if want is None:
        return None
    for row in table("cuda_archs"):
        if Version(row["cuda"]) <= want and (found is None or Version(row["cuda"]) > Version(found["cuda"])):
            found = row
    return found


# -- frameworks ------------------------------------------------------------------------------

def torch_default(release: str) -> dict | None:
    return next((r for r in table("torch_pypi_default") if r["release"] == minor_series(release)), None)


def torch_build(release: str, variant: str) -> dict | None:
    return next((r for r in table("torch_builds") if r["release"] == minor_series(release) and r["variant"] == variant), None)


def tensorflow_build(release: str) -> dict | None:
    return next((r for r in table("tensorflow_builds") if r["release"] == minor_series(release)), None)


def jax_build(release: str, variant: str) -> dict | None:
    """The newest row for this variant that is not newer than the release."""
    want, found = version(release.split("+")[0]), None
    if want is None:
        return None
    for row in table("jax_builds"):
        if row["variant"] == variant and Version(row["from_version"]) <= want:
            if found is None or Version(row["from_version"]) > Version(found["from_version"]):
                found = row
    return found
