"""The knowledge tables in data/*.csv, loaded once, with the lookups the rules need.

Every row carries its `source`; lookups return the row so a verdict can cite it.
"""

from __future__ import annotations

import csv
from functools import lru_cache
from pathlib import Path

from packaging.version import InvalidVersion, Version

from . import gpus, overlay

DATA = Path(__file__).with_name("data")


@lru_cache(maxsize=None)
def table(name: str) -> tuple[dict, ...]:
    """The packaged rows, after the rows `gpucompat knowledge update` learned (overlay.py), if any."""
    with (DATA / f"{name}.csv").open(newline="", encoding="utf-8") as handle:
        return overlay.rows(name) + tuple(csv.DictReader(handle))


MAX_VERSION_CHARS = 64  # no real version is longer; int() refuses numbers of thousands of digits


def version(text: str | None) -> Version | None:
    """A version, or None for anything that is not one (never an exception)."""
    if not text or not isinstance(text, str) or len(text) > MAX_VERSION_CHARS:
        return None
    return _version(text)


@lru_cache(maxsize=8192)  # the rules compare the same few hundred table versions thousands of times for a pool
def _version(text: str) -> Version | None:
    try:
        return Version(text)
    except (InvalidVersion, ValueError):
        return None


@lru_cache(maxsize=4096)
def minor_series(text: str) -> str:
    """'2.4.1+cu121' -> '2.4'."""
    return ".".join(text.split("+")[0].split(".")[:2])


# -- GPUs ------------------------------------------------------------------------------------

def gpu(name: str) -> dict | None:
    """The row for a GPU name as drivers report it (curated table first, then pci.ids): see gpus.lookup."""
    return gpus.lookup(name)


# -- drivers and CUDA ------------------------------------------------------------------------

@lru_cache(maxsize=1024)  # the nearest yes and a pool ask it for the same few drivers many times
def driver_cuda(driver: str, trusted_only: bool = False) -> dict | None:
    """The CUDA this driver's libcuda reports (nvidia-smi's "CUDA Version"): its branch's (driver_branch_cuda.csv), since
    every release of a branch reports the same; a cuda_drivers row with the branch's CUDA, source and confidence. Table 3's
    toolkit driver minimum is not the driver's own version (520.56.06 is R520, CUDA 11.8, though Table 3 lists 11.8 from
    520.61.05); a branch the table does not hold (before R410, when a branch was not yet one CUDA release: 384.69 failed
    CUDA 9.0, which Table 3 gives from 384.81, tools/facts/accuracy_cases_other.csv tf-027) falls back to the newest CUDA whose toolkit driver minimum this driver
    meets. With trusted_only, rows whose confidence is low are passed over."""
    have = version(driver)
    branch = next((r for r in table("driver_branch_cuda") if have is not None and r["branch"] == str(have.major)
                   and not (trusted_only and r["confidence"] == "low")), None)
    if branch is not None:
        return {**(cuda_row(branch["cuda"]) or {}), "cuda": branch["cuda"], "confidence": branch["confidence"], "source": branch["source"]}
    eligible = [r for r in table("cuda_drivers") if have is not None and version(r["toolkit_driver_min"]) <= have
                and not (trusted_only and r.get("confidence") == "low")]
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
    return want is not None and want.major in _cuda_majors()


@lru_cache(maxsize=1)  # the driver rule asks cuda_known for every prediction: the nearest yes's ~120 candidates
def _cuda_majors() -> frozenset[int]:
    return frozenset(version(r["cuda"]).major for r in table("cuda_drivers"))


@lru_cache(maxsize=1)  # table() is read once per process; the driver rule asks this for every prediction
def newest_cuda() -> dict:
    """The row of the newest CUDA release in the tables."""
    return max(table("cuda_drivers"), key=lambda r: version(r["cuda"]))


def cuda_archs(cuda: str) -> dict | None:
    """The sm_XY list nvcc of that CUDA can build for (nearest older release of the same
    major if not listed: architectures are dropped only at a new major)."""
    want = version(minor_series(cuda))
    row = _newest_at_most(table("cuda_archs"), "cuda", want)
    return row if row and Version(row["cuda"]).major == want.major else None


# -- which driver branches drive a GPU ---------------------------------------------------------

def driver_branches(cc: str | None, gpu: str | None) -> dict | None:
    """The gpu_driver_branches.csv rows for a GPU: {'architecture', 'first', 'last', 'l4t'} (a bound with no row is
    None). A product row (matched by name as gpus.csv rows are, longest name first) outranks its architecture's row
    for the same bound; the architecture comes from the compute capability, or from a product row where the
    compute capability is not known. None where neither says which architecture it is."""
    found = _driver_branches(cc, gpu)
    return dict(found) if found is not None else None


@lru_cache(maxsize=1024)  # every rule about the driver asks it, for each of the nearest yes's candidates: one GPU, read once
def _driver_branches(cc: str | None, gpu: str | None) -> dict | None:
    rows = table("gpu_driver_branches")
    named: dict = {}
    for row in rows:
        length = gpus.words_begin(gpu, row["gpu"]) if gpu and row["gpu"] else 0
        if length and length > named.get(row["bound"], (0, None))[0]:
            named[row["bound"]] = (length, row)
    product = {bound: row for bound, (_length, row) in named.items()}
    cc = cc or next((row["cc"] for row in product.values()), None) or ((gpus.lookup(gpu) or {}).get("cc") if gpu else None)
    family = [row for row in rows if not row["gpu"] and cc in row["cc"].split(";")]
    if not family and not product:
        return None
    found = {bound: product.get(bound) or next((r for r in family if r["bound"] == bound), None) for bound in ("first", "last", "l4t")}
    return {"architecture": (family or list(product.values()))[0]["architecture"], **found}


def named_drivers() -> list[str]:
    """Every driver number the knowledge names as a minimum (of a CUDA release or a framework build), oldest first."""
    found = {r[c] for r in table("cuda_drivers") for c in ("toolkit_driver_min", "compat_driver_min") if r[c]}
    found |= {r["min_driver"] for r in table("jax_builds") if r["min_driver"]}
    return sorted(found, key=Version)


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


def past_newest(framework: str, release: str) -> bool:
    newest, want = newest_release(framework), version(minor_series(release))
    return want is None or (newest is not None and want > Version(newest["newest"]))


def jax_build(release: str, variant: str) -> dict | None:
    """The newest row for this variant that is not newer than the release; None past the
    newest release the tables know."""
    if past_newest("jax", release):
        return None
    want = version(release.split("+")[0])
    row = _newest_at_most([r for r in table("jax_builds") if r["variant"] == variant], "from_version", want)
    retired = row is not None and row.get("to_version") and want > Version(row["to_version"])
    return None if retired else row


def cupy_packages(variant: str) -> list[dict]:
    """PyPI's releases of cupy-<variant>, one row per CuPy major series (first and last version)."""
    return [r for r in table("cupy_packages") if r["variant"] == variant]


def newest_cupy() -> Version:
    return max(Version(r["last_version"]) for r in table("cupy_packages"))


@lru_cache(maxsize=None)
def _peaks_by_name() -> dict:
    return {gpus.key(row["gpu"]): row for row in table("gpu_peaks")}


def gpu_peak(name: str) -> dict | None:
    """The datasheet row for this board (peaks differ by board, so the name must match it, not just the chip)."""
    return _peaks_by_name().get(gpus.key(name or ""))


def known_defects(framework: str) -> list[dict]:
    return [r for r in table("known_defects") if r["framework"] == framework]


# -- wheels per Python -----------------------------------------------------------------------

@lru_cache(maxsize=None)
def _wheel_rows() -> dict[str, list[dict]]:
    index: dict = {}
    for row in table("python_wheels"):
        index.setdefault(row["package"], []).append(row)
    return index


@lru_cache(maxsize=None)  # the nearest yes asks for one package's wheels ~120 times
def _wheel_index(package: str) -> tuple[dict, Version | None]:
    """(its rows by release, its newest release): the version column of one package's rows, parsed once."""
    releases = {Version(row["version"]): row for row in _wheel_rows().get(package, ())}
    return releases, max(releases, default=None)


def python_wheels(package: str, release: str) -> tuple[dict | None, Version | None]:
    """(the row of PyPI's file list for this package and release, or None; the newest release
    the table holds for the package, or None when it holds none)."""
    releases, newest = _wheel_index(package)
    want = version(release.split("+")[0])
    return (releases.get(want) if want else None), newest
