"""A local conda channel of real packages, built without conda-build (there is none here).

Each package is a real .tar.bz2 in conda's layout (info/index.json, info/paths.json, info/files,
then the payload), indexed with py-rattler's indexer. Public channels cannot be reached from this
machine, so their packages are replaced by:

- python: bin/python is a symbolic link to the interpreter running the tests (a conda-forge
  python could not be fetched); the probe is standard library only, so that is all it needs;
- cuda-version: the metapackage as conda-forge builds it, constraining cudatoolkit and cuda-cudart
  to its CUDA minor series;
- cuda-cudart: lib/libcudart.so.12 taken from NVIDIA's PyPI wheel nvidia-cuda-runtime-cu12 of the
  same version, the library the probe's cuda-runtime adapter loads.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

# CUDA runtime versions packaged: the wheel's version is the package's.
CUDART = ("12.4.127", "12.6.77")
PYTHON = f"{sys.version_info[0]}.{sys.version_info[1]}.{sys.version_info[2]}"


def wheel_cache() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gpucompat-tests" / "wheels"


def cudart_library(version: str) -> bytes:
    """libcudart.so.12 from nvidia-cuda-runtime-cu12==version, downloaded once with pip."""
    cache = wheel_cache()
    found = sorted(cache.glob(f"nvidia_cuda_runtime_cu12-{version}-*.whl"))
    if not found:
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                        "--platform", "manylinux2014_x86_64", "-d", str(cache), f"nvidia-cuda-runtime-cu12=={version}"],
                       check=True, capture_output=True, timeout=300)
        found = sorted(cache.glob(f"nvidia_cuda_runtime_cu12-{version}-*.whl"))
    with zipfile.ZipFile(found[0]) as wheel:
        return wheel.read("nvidia/cuda_runtime/lib/libcudart.so.12")


def package(channel: Path, subdir: str, name: str, version: str, build: str, depends=(), constrains=(),
            files: dict[str, bytes] | None = None, links: dict[str, str] | None = None) -> Path:
    """One package archive in conda's layout; returns its path."""
    index = {"name": name, "version": version, "build": build, "build_number": 0, "depends": list(depends),
             "constrains": list(constrains), "subdir": subdir, "license": "see the package's source", "timestamp": 1700000000000}
    if subdir == "noarch":
        index["noarch"] = "generic"
    else:
        index.update(platform="linux", arch="x86_64")
    paths = []
    out = channel / subdir / f"{name}-{version}-{build}.tar.bz2"
    out.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(out, "w:bz2") as tar:
        def add(member: str, data: bytes, mode: int = 0o644) -> None:
            info = tarfile.TarInfo(member)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))

        for member, data in (files or {}).items():
            add(member, data, 0o755 if member.startswith("bin/") or ".so" in member else 0o644)
            paths.append({"_path": member, "path_type": "hardlink", "sha256": hashlib.sha256(data).hexdigest(), "size_in_bytes": len(data)})
        for member, target in (links or {}).items():
            info = tarfile.TarInfo(member)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
            paths.append({"_path": member, "path_type": "softlink"})
        add("info/index.json", json.dumps(index).encode())
        add("info/paths.json", json.dumps({"paths": paths, "paths_version": 1}).encode())
        add("info/files", "".join(p["_path"] + "\n" for p in paths).encode())
    return out


def series(version: str) -> str:
    return ".".join(version.split(".")[:2])


def build_channel(channel: Path) -> Path:
    """The channel: python, cuda-version 12.4 and 12.6, cuda-cudart 12.4.127 and 12.6.77; indexed."""
    import rattler.index

    package(channel, "linux-64", "python", PYTHON, "h0_gpucompat_test", links={"bin/python": sys.executable})
    for version in CUDART:
        minor = series(version)
        upper = f"{minor.split('.')[0]}.{int(minor.split('.')[1]) + 1}.0a0"
        package(channel, "noarch", "cuda-version", minor, "h0",
                constrains=[f"cudatoolkit {minor}|{minor}.*", f"cuda-cudart >={minor},<{upper}", "__cuda >=12"])
        package(channel, "linux-64", "cuda-cudart", version, "h0_gpucompat_test", depends=[f"cuda-version >={minor},<{upper}"],
                files={"lib/libcudart.so.12": cudart_library(version)})
    asyncio.run(rattler.index.index_fs(channel, write_zst=False, write_shards=False))
    return channel
