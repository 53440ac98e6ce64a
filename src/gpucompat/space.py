"""The version space: which versions a plan means, and what to install for each.

Versions come from the PyPI JSON API (https://pypi.org/pypi/NAME/json), cached on
disk; `offline` uses only the cache. Exact version lists never touch the network.
"""

from __future__ import annotations

import json
import sys
import time

from packaging.version import InvalidVersion, Version

from .errors import UserError
from .model import Stack, StackSpec
from .paths import cache_dir

PYPI_JSON = "https://pypi.org/pypi/{name}/json"
PYTORCH_INDEX = "https://download.pytorch.org/whl/{variant}"
CACHE_TTL_S = 24 * 3600


def cuda_runtime_package(series: str) -> str:
    """The PyPI wheel that carries libcudart for a CUDA minor series like '12.4'."""
    major = Version(series).major
    if major == 11:
        return "nvidia-cuda-runtime-cu11"
    if major == 12:
        return "nvidia-cuda-runtime-cu12"
    if major >= 13:
        return "nvidia-cuda-runtime"  # from CUDA 13 the wheel dropped the -cuXX suffix
    raise UserError(f"cuda-runtime {series}: PyPI has libcudart wheels for CUDA 11 and newer only.")


def cuda_nvrtc_package(series: str) -> str:
    """The PyPI wheel that carries libnvrtc for a CUDA minor series like '12.4' (the probe's JIT rungs)."""
    return cuda_runtime_package(series).replace("-runtime", "-nvrtc")


def requirements_for(framework: str, version: str, variant: str) -> tuple[tuple[str, ...], str | None]:
    """(pip requirements, priority index URL or None) for one point of the space."""
    if framework == "torch":
        index = None if variant == "default" else PYTORCH_INDEX.format(variant=variant)
        return (f"torch=={version}",), index
    if framework == "tensorflow":
        package = {"and-cuda": "tensorflow[and-cuda]", "gpu": "tensorflow-gpu"}.get(variant, "tensorflow")
        return (f"{package}=={version}",), None
    if framework == "jax":
        return ((f"jax=={version}",) if variant == "cpu" else (f"jax[{variant}]=={version}",)), None
    if framework == "cupy":
        return (f"cupy-{variant}=={version}",), None
    if framework == "cuda-runtime":
        # NVRTC of the same minor series: the probe compiles a kernel with it to SASS and to PTX
        return (f"{cuda_runtime_package(version)}=={version}.*", f"{cuda_nvrtc_package(version)}=={version}.*"), None
    raise UserError(f"unknown framework {framework!r}.")


def release_versions(name: str, offline: bool = False) -> list[Version]:
    """Final, non-yanked releases of a PyPI project that have files, oldest first."""
    path = cache_dir() / "pypi" / f"{name}.json"
    fresh = path.exists() and time.time() - path.stat().st_mtime < CACHE_TTL_S
    if not fresh and not offline:
        import urllib.error  # here: explain's install commands read this module, and urllib with ssl costs ~8 ms
        import urllib.request

        try:
            with urllib.request.urlopen(PYPI_JSON.format(name=name), timeout=30) as response:
                data = json.load(response)
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                raise UserError(f"PyPI has no project named {name!r}.") from None
            raise UserError(f"PyPI answered {exc.code} for {name!r}; try again, or use --offline with a warm cache.") from None
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            if not path.exists():
                raise UserError(f"cannot reach PyPI for {name!r} ({exc}); give exact versions, or run once with network to fill the cache.") from None
            print(f"warning: cannot reach PyPI for {name!r}; using the cached list", file=sys.stderr)
        else:
            releases = [
                version for version, files in data.get("releases", {}).items()
                if files and not all(f.get("yanked") for f in files)
            ]
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(releases))
            tmp.replace(path)
    if not path.exists():
        raise UserError(f"offline, and no cached version list for {name!r}; run once with network or give exact versions.")
    parsed = []
    for text in json.loads(path.read_text()):
        try:
            version = Version(text)
        except InvalidVersion:
            continue
        if not version.is_prerelease and not version.is_devrelease and not version.is_postrelease:
            parsed.append(version)
    return sorted(parsed)


def newest_per_minor(versions: list[Version]) -> list[Version]:
    """The newest patch release of each major.minor series, oldest series first."""
    best: dict[tuple[int, int], Version] = {}
    for version in versions:
        series = (version.major, version.minor)
        if series not in best or version > best[series]:
            best[series] = version
    return [best[s] for s in sorted(best)]


def pick_versions(spec: str | tuple[str, ...], available: list[Version]) -> list[Version]:
    """'latest:N' -> newest N minor series; a range -> every minor series in it (newest patch of each)."""
    if spec.startswith("latest:"):
        return newest_per_minor(available)[-int(spec.split(":", 1)[1]):]
    from packaging.specifiers import SpecifierSet  # here: explain's install lines import this module, never a range (~10 ms)

    allowed = SpecifierSet(spec)
    return newest_per_minor([v for v in available if v in allowed])


def _cuda_series(offline: bool) -> list[Version]:
    series: set[Version] = set()
    for name in ("nvidia-cuda-runtime-cu11", "nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime"):
        for version in release_versions(name, offline):
            if version.major >= 11:
                series.add(Version(f"{version.major}.{version.minor}"))
    return sorted(series)


def _expand_conda(spec: StackSpec, offline: bool, platform: str) -> list[Stack]:
    """A conda stack: versions from its channels' repodata (the seed's `conda search`), conda match specs."""
    from .envs import conda

    versions = list(spec.versions) if isinstance(spec.versions, tuple) else None
    if versions is None:
        available = []
        for text in conda.available_versions(spec, offline, platform):
            try:
                available.append(Version(text))
            except InvalidVersion:  # conda allows versions PEP 440 does not ("1.0.0_1"): not in a range
                continue
        picked = pick_versions(spec.versions, available)
        if not picked:
            raise UserError(f"no {conda.PACKAGES[spec.framework]} release in {', '.join(spec.channels)} matches {spec.versions!r}.")
        versions = [f"{v.major}.{v.minor}" if spec.framework == "cuda-runtime" else str(v) for v in picked]
    return [Stack(spec.framework, version, variant, python, "conda", conda.match_specs(spec.framework, version, variant, python),
                  channels=spec.channels)
            for version in versions for variant in spec.variants for python in spec.pythons]


def _query_name(spec: StackSpec) -> str:
    if spec.framework == "cupy":
        return f"cupy-{spec.variants[0]}"
    return spec.framework


def expand(spec: StackSpec, offline: bool = False, platform: str = "x86_64-manylinux_2_28") -> list[Stack]:
    """Every Stack a [[stacks]] table means: versions x variants x Pythons (conda's from `platform`'s subdir)."""
    if spec.env == "current":
        return [Stack(spec.framework, "installed", "installed", "current", "current")]
    if spec.env == "container":  # the image decides version and Python: its probe says which
        return [Stack(spec.framework, "installed", "installed", "image", "container", image=spec.image, runtime=spec.runtime)]
    if spec.env == "conda":
        return _expand_conda(spec, offline, platform)
    if isinstance(spec.versions, tuple):
        versions = list(spec.versions)
    else:
        available = _cuda_series(offline) if spec.framework == "cuda-runtime" else release_versions(_query_name(spec), offline)
        picked = pick_versions(spec.versions, available)
        if not picked:
            raise UserError(f"no {spec.framework} release matches {spec.versions!r}.")
        if spec.framework == "cuda-runtime":
            versions = [f"{v.major}.{v.minor}" for v in picked]
        else:
            versions = [str(v) for v in picked]
    stacks = []
    for version in versions:
        for variant in spec.variants:
            requirements, index = requirements_for(spec.framework, version, variant)
            for python in spec.pythons:
                stacks.append(Stack(spec.framework, version, variant, python, spec.env, requirements, index))
    return stacks
