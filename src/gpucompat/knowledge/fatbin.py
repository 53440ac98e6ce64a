"""`gpucompat inspect`: the SASS architectures and PTX versions inside CUDA binaries (a file, a
directory, a wheel, or an installed framework), read with the probe's pure-Python fat-binary
reader (probe/fatbin.py), which the probe's library rung also uses inside jobs.
"""

from __future__ import annotations

import zipfile
import zlib
from functools import lru_cache
from importlib import metadata
from pathlib import Path

from ..errors import UserError
from ..probe.fatbin import ARCH_SPECIFIC, KIND_ELF, KIND_PTX, Archs, Truncated, _arch_key, inspect_bytes, read_file  # noqa: F401 (re-exported)

def inspect_file(path: Path, strict: bool = False) -> Archs:
    """Kernels in one file. `strict` (a file named on the command line): a file that cannot be
    read or an ELF image cut short is a UserError; in a directory it just has no kernels."""
    try:
        return read_file(path)
    except Truncated:
        if strict:
            raise UserError(f"{_shown(str(path))} is truncated or not an ELF file: its section table or .nv_fatbin lies past its end.") from None
    except (OSError, ValueError) as exc:  # unreadable, a FIFO or device that cannot be mapped
        if strict:
            raise UserError(f"cannot read {_shown(str(path))}: {exc.__class__.__name__}.") from None
    return Archs()


def _shown(text: str) -> str:
    return repr(text if len(text) <= 80 else text[:77] + "...")


def _is_library(name: str) -> bool:
    base = name.rsplit("/", 1)[-1]
    return base.endswith((".so", ".o", ".cubin", ".fatbin")) or ".so." in base


def _result(target: str, per_file: dict[str, Archs]) -> dict:
    total = Archs()
    for archs in per_file.values():
        total.merge(archs)
    return {
        "target": target,
        "sass": sorted(total.sass, key=_arch_key),
        "ptx": sorted(total.ptx, key=_arch_key),
        "ptx_isa": sorted(total.ptx_isa, key=lambda v: tuple(int(p) for p in v.split("."))),
        "files": [
            {"file": name, "sass": sorted(a.sass, key=_arch_key), "ptx": sorted(a.ptx, key=_arch_key), "entries": a.entries}
            for name, a in sorted(per_file.items()) if a.entries
        ],
    }


def inspect(target: str) -> dict:
    """A .so/.o file, a directory (searched recursively), a wheel, or an installed distribution."""
    if not target.strip():  # Path('') is '.', which would scan the working directory
        raise UserError("the target is empty; give a .so/.o file, a directory, a wheel or an installed distribution such as torch.")
    if len(target) > 4096 or "\0" in target:
        raise UserError(f"{_shown(target)} is not a usable path or distribution name (too long, or a NUL byte).")
    path = Path(target)
    try:
        is_file, is_dir, exists = path.is_file(), path.is_dir(), path.exists()
    except OSError as exc:  # a name too long for the filesystem, a loop of links
        raise UserError(f"cannot look at {_shown(target)}: {exc.__class__.__name__}.") from None
    if is_file and path.suffix == ".whl":
        try:
            with zipfile.ZipFile(path) as wheel:
                return _result(target, {n: inspect_bytes(wheel.read(n)) for n in wheel.namelist() if _is_library(n)})
        except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, OSError, ValueError):
            raise UserError(f"{_shown(target)} is not a readable wheel (zip) file.") from None
    if is_file:
        return _result(target, {str(path): inspect_file(path, strict=True)})
    if is_dir:
        return _result(target, {str(p): inspect_file(p) for p in sorted(path.rglob("*")) if p.is_file() and _is_library(p.name)})
    if exists or "/" in target:
        raise UserError(f"{_shown(target)} is neither a file, a directory, a wheel nor an installed distribution.")
    try:
        dist = metadata.distribution(target)
    except (metadata.PackageNotFoundError, ValueError):
        raise UserError(f"{_shown(target)} is not a path and no distribution of that name is installed in {__import__('sys').executable}.") from None
    files = [Path(dist.locate_file(f)) for f in dist.files or [] if _is_library(str(f))]
    return _result(target, {str(p): inspect_file(p) for p in files if p.is_file()})


# Where each framework's own kernels live, as installed distributions.
KERNEL_DISTRIBUTIONS = {"torch": ("torch",), "jax": ("jax-cuda13-plugin", "jax-cuda12-plugin", "jaxlib")}


def installed_archs(framework: str) -> tuple[list[str], list[str], str] | None:
    """(sass, ptx, source) read from the installed framework's binaries, for the predictor."""
    found = _installed_archs(framework)
    return (list(found[0]), list(found[1]), found[2]) if found else None


@lru_cache(maxsize=None)
def _installed_archs(framework: str) -> tuple[tuple[str, ...], tuple[str, ...], str] | None:
    # Once per process: reading a framework's fat binaries takes seconds, and a sweep asks per cell.
    for name in KERNEL_DISTRIBUTIONS.get(framework, ()):
        try:
            metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        found = inspect(name)
        if found["sass"] or found["ptx"]:
            return tuple(found["sass"]), tuple(found["ptx"]), f"gpucompat inspect {name} (fat binaries of the installed build)"
    return None
