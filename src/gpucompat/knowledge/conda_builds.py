"""Which conda-forge build of a package conda would resolve, judged as conda judges it.

A conda package carries its CUDA through its build's own run requirements: conda-forge's `cupy` has one build per CUDA
(knowledge/data/conda_cupy_builds.csv, from the feedstock's history: tools/build_conda_cupy.py), tied from CUDA 12 on to
`cuda-version >=12,<13` (which needs `__cuda >=12`, the driver's CUDA) and before that to `cudatoolkit` (>=11.2,<12 for
builds of CUDA 11.2 on; the same minor before). So the environment's cuda-version/cudatoolkit pin picks the build, and
without one the driver's CUDA does (conda picks the newest CUDA the driver's `__cuda` allows). A conda-forge cupy is
never PyPI's cupy-cuda12x: only the build's CUDA is shared with that wheel's rules.

Version specs are read with py-rattler (conda's own MatchSpec/VersionSpec grammar) where it is installed
(gpucompat[conda]); without it, an exact version or a `X.Y.*` series is all that is read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from packaging.version import Version

from . import tables

TABLE = "knowledge/data/conda_cupy_builds.csv"


@dataclass(frozen=True)
class CondaBuild:
    package: str
    version: str | None  # None where no release of the table matches
    cuda: str | None  # the build's CUDA compiler version ('12.9'); None where none fits
    builds: tuple[str, ...]  # every CUDA conda-forge built that release for
    why: str  # one sentence: how the build was chosen, or why none can be
    source: str

    @property
    def variant(self) -> str | None:
        """The PyPI wheel of the same CUDA, whose rules judge the build's CUDA (cuda12x; cuda102 before 11.2)."""
        if self.cuda is None:
            return None
        cuda = Version(self.cuda)
        return f"cuda{cuda.major}x" if cuda >= Version("11.2") else f"cuda{cuda.major}{cuda.minor}"


def _matches(spec: str, version: str) -> bool:
    """conda's version spec ('13.3.*', '>=13,<14', '13.3.0') against one version."""
    if not spec:
        return True
    if spec.startswith("==") and spec.endswith("*"):  # the Pin's '==14.1.*' is conda's `cupy=14.1`; to conda '==14.1.*' is 14.1 itself
        spec = spec[2:]
    try:
        from rattler import Version as CondaVersion
        from rattler import VersionSpec
    except ImportError:  # gpucompat[conda] not installed: an exact version or a series only
        plain = spec.lstrip("=")
        return version == plain or (plain.endswith("*") and version.startswith(plain.rstrip("*")))
    try:
        return VersionSpec(spec).matches(CondaVersion(version))
    except Exception:  # py-rattler's InvalidVersionSpecError and kin: a spec it cannot read matches nothing
        return False


def _allows(build_cuda: Version, pinned: Version) -> bool:
    """Whether an environment pinning CUDA `pinned` (cuda-version or cudatoolkit) admits a build of `build_cuda`."""
    if build_cuda >= Version("11.2"):  # cuda-version >=MAJOR,<MAJOR+1, or cudatoolkit >=11.2,<12
        return build_cuda.major == pinned.major
    return (build_cuda.major, build_cuda.minor) == (pinned.major, pinned.minor)


def _driver_allows(build_cuda: Version, driver_cuda: Version) -> bool:
    """__cuda >= the build's major (from 11.2 on: minor-version compatibility); before 11.2 its own minor."""
    if build_cuda >= Version("11.2"):
        return build_cuda.major <= driver_cuda.major
    return build_cuda <= driver_cuda


def cupy(version: str | None, specifier: str, pinned_cuda: str | None, driver: str | None) -> CondaBuild:
    """The conda-forge cupy build conda would resolve for this pin, the environment's CUDA pin and the driver."""
    rows = tables.table("conda_cupy_builds")
    spec = f"=={version}" if version else specifier
    matching = [r for r in rows if _matches(spec, r["version"])]
    if not matching:
        newest = max((r["version"] for r in rows), key=Version)
        return CondaBuild("cupy", None, None, (), f"conda-forge's cupy builds in the tables ({rows[0]['version']} to {newest}) have no "
                          f"release matching {spec or 'any version'}", TABLE)
    row = max(matching, key=lambda r: Version(r["version"]))  # conda takes the newest release the spec admits
    builds = tuple(row["cuda_builds"].split(";"))
    cudas = [Version(c) for c in builds]
    listed = ", ".join(f"CUDA {c}" for c in builds)
    if pinned_cuda:
        pinned = tables.version(pinned_cuda)
        fits = [c for c in cudas if pinned is not None and _allows(c, pinned)]
        if not fits:
            return CondaBuild("cupy", row["version"], None, builds, f"conda-forge's cupy {row['version']} has builds for {listed}, "
                              f"none for the environment's CUDA {pinned_cuda}, so conda cannot solve it", row["source"])
        chosen = max(fits)
        return CondaBuild("cupy", row["version"], str(chosen), builds, f"the environment pins CUDA {pinned_cuda}: conda-forge's cupy "
                          f"{row['version']} build for CUDA {chosen} (its builds: {listed})", row["source"])
    have = tables.driver_cuda(driver) if driver else None
    if have is None:
        return CondaBuild("cupy", row["version"], None, builds, f"conda-forge's cupy {row['version']} has builds for {listed}; with no "
                          "cuda-version pin conda picks by the driver's CUDA (__cuda), which is not known", row["source"])
    driver_cuda = Version(have["cuda"])
    fits = [c for c in cudas if _driver_allows(c, driver_cuda)]
    if not fits:
        return CondaBuild("cupy", row["version"], None, builds, f"conda-forge's cupy {row['version']} has builds for {listed}; driver "
                          f"{driver} supports CUDA {driver_cuda} (__cuda), which none of them accepts", f"{row['source']} ; {have['source']}")
    chosen = max(fits)
    return CondaBuild("cupy", row["version"], str(chosen), builds, f"no cuda-version pin: conda takes the newest build driver {driver}'s "
                      f"__cuda ({driver_cuda}) accepts, conda-forge's cupy {row['version']} for CUDA {chosen} (its builds: {listed})",
                      row["source"])


_BUILD_CUDA = re.compile(r"cuda_?([0-9]{2})\.?([0-9])", re.ASCII)


def build_cuda(build: str | None) -> str | None:
    """The CUDA a conda build string names (pytorch's py311_cuda12.1_cudnn9_0, cuda118py311h...), else None."""
    found = _BUILD_CUDA.search(build or "")
    return f"{int(found.group(1))}.{found.group(2)}" if found else None
