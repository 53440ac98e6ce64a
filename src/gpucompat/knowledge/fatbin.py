"""`gpucompat inspect`: the SASS architectures and PTX versions inside CUDA binaries (a file, a
directory, a wheel, or an installed framework), read with the probe's pure-Python fat-binary
reader (probe/fatbin.py), which the probe's library rung also uses inside jobs. Files are read by
offset, a few pieces at a time; a wheel's libraries are checked against archive.py's bounds on
size and compression ratio, then streamed (archive.py), so memory stays under 25 MiB whatever the size. A library
that holds far more fat-binary containers or entries than any real one, or takes longer to read than one may
(probe/fatbin.py's bounds), is one sentence on the command line and a skipped file in a directory.
"""

from __future__ import annotations

import os
import stat
import zipfile
import zlib
from functools import lru_cache
from importlib import metadata
from pathlib import Path

from ..errors import UserError
from ..probe.fatbin import ARCH_SPECIFIC, KIND_ELF, KIND_PTX, Archs, PastBound, Shrank, Truncated, _arch_key, inspect_bytes, read_file  # noqa: F401 (re-exported)
from .archive import wheel_libraries, zip_member

NOT_LISTED = "none of its kernels are listed"  # what inspect did not do, after a refusal


def inspect_file(path: Path, strict: bool = False, skipped: dict[str, str] | None = None) -> Archs:
    """Kernels in one file. `strict` (a file named on the command line): a file that cannot be
    read or an ELF image cut short is a UserError; in a directory it has no kernels, and is named
    in `skipped` (path -> why) where one is given."""
    try:
        return read_file(path)
    except Shrank:  # read by offset, never mapped: a file cut short under us is a sentence, not a SIGBUS
        if strict:
            raise UserError(f"{_shown(str(path))} became shorter while it was read (copied over or truncated meanwhile); "
                            "inspect it again once it is whole.") from None
        why = "changed while read"
    except Truncated:
        if strict:
            raise UserError(f"{_shown(str(path))} is truncated or not an ELF file: its section table or .nv_fatbin lies past its end.") from None
        why = "truncated ELF"
    except PastBound as exc:  # millions of minimal entries would take minutes: refused at bounds real libraries stay far under
        if strict:
            raise UserError(f"{_shown(str(path))} {exc}; {NOT_LISTED}.") from None
        why = f"past a bound: {exc}"
    except (OSError, ValueError) as exc:  # unreadable, vanished, a FIFO or device that cannot be mapped
        if strict:
            raise UserError(f"cannot read {_shown(str(path))}: {exc.__class__.__name__}.") from None
        why = exc.__class__.__name__
    if skipped is not None:
        skipped[str(path)] = why
    return Archs()


def _walk(folder: Path, skipped: dict[str, str]) -> dict[str, Archs]:
    """Every library under `folder`, read; folders that cannot be listed and files that cannot be read or
    vanish while it walks (a build writing, a cache being pruned) go into `skipped` and the walk goes on."""
    def unlisted(exc: OSError) -> None:
        if not isinstance(exc, FileNotFoundError):  # a folder removed while walking had nothing to say
            skipped[exc.filename or str(folder)] = exc.__class__.__name__

    found = {}
    for root, dirs, names in os.walk(folder, onerror=unlisted):
        dirs.sort()
        for name in sorted(names):
            if not _is_library(name):
                continue
            path = Path(root) / name
            try:
                regular = stat.S_ISREG(path.stat().st_mode)
            except FileNotFoundError:  # gone since the folder was listed
                continue
            except OSError as exc:  # a folder that can be listed but not entered
                skipped[str(path)] = exc.__class__.__name__
                continue
            if regular:
                found[str(path)] = inspect_file(path, skipped=skipped)
    return found


def _shown(text: str) -> str:
    return repr(text if len(text) <= 80 else text[:77] + "...")


def _is_library(name: str) -> bool:
    base = name.rsplit("/", 1)[-1]
    return base.endswith((".so", ".o", ".cubin", ".fatbin")) or ".so." in base


def _result(target: str, per_file: dict[str, Archs], skipped: dict[str, str] | None = None) -> dict:
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
        # files and folders a walk could not read (path, why): the kernels above are those of the rest
        **({} if skipped is None else {"skipped": [{"file": name, "why": why} for name, why in sorted(skipped.items())]}),
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
        return _result(target, _wheel(path, target))
    if is_file:
        return _result(target, {str(path): inspect_file(path, strict=True)})
    if is_dir:
        skipped: dict[str, str] = {}
        return _result(target, _walk(path, skipped), skipped)
    if exists or "/" in target:
        raise UserError(f"{_shown(target)} is neither a file, a directory, a wheel nor an installed distribution.")
    try:
        dist = metadata.distribution(target)
    except (metadata.PackageNotFoundError, ValueError):
        raise UserError(f"{_shown(target)} is not a path and no distribution of that name is installed in {__import__('sys').executable}.") from None
    files = [Path(dist.locate_file(f)) for f in dist.files or [] if _is_library(str(f))]
    skipped = {}
    return _result(target, {str(p): inspect_file(p, skipped=skipped) for p in files if _exists(p)}, skipped)


def _wheel(path: Path, target: str) -> dict[str, Archs]:
    """The kernels of each library in a wheel, each checked against archive.py's bounds (before anything is inflated)
    and streamed, never held whole."""
    try:
        with zipfile.ZipFile(path) as wheel:
            members = wheel_libraries(wheel, _shown(target), _is_library, "nothing of it was read")
            return {info.filename: zip_member(wheel, info, _shown(target), NOT_LISTED)[0] for info in members}
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, OSError, ValueError):
        raise UserError(f"{_shown(target)} is not a readable wheel (zip) file.") from None


def _exists(path: Path) -> bool:
    """A file a distribution's RECORD lists and that is there (a stat that fails is left to inspect_file to name)."""
    try:
        return path.is_file()
    except OSError:
        return True


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
