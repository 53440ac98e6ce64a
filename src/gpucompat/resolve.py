"""Resolution on the submit side: `uv pip compile` for the cell's Python and platform.

An impossible stack becomes a ResolvedStack with ok=False and uv's own message,
before any job exists. The pins tell the stack's CUDA runtime and cuDNN versions.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sysconfig
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterable

from .model import ResolvedStack, Stack

_PIN = re.compile(r"^([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?==([^\s;]+)")


@lru_cache(maxsize=1)
def uv_bin() -> str:
    """The uv executable that ships with the `uv` package this tool depends on, else uv on PATH."""
    try:
        from uv import find_uv_bin

        return find_uv_bin()
    except (ImportError, FileNotFoundError, TypeError):  # TypeError: uv's finder on some Pythons
        beside = Path(sysconfig.get_path("scripts")) / "uv"
        return str(beside) if beside.exists() else (shutil.which("uv") or "uv")


def uv_env() -> dict[str, str]:
    # Never let uv try to download a Python: compute nodes and this submit side may be offline.
    # A wide COLUMNS keeps uv from wrapping its messages: they are stored and shown as sentences.
    return {**os.environ, "UV_PYTHON_DOWNLOADS": "never", "UV_NO_PROGRESS": "1", "COLUMNS": "10000"}


def index_args(index_url: str | None, wheelhouse: str | None, offline: bool) -> list[str]:
    if wheelhouse:
        return ["--no-index", "--find-links", wheelhouse]
    args = ["--index", index_url] if index_url else []
    return args + (["--offline"] if offline else [])


def parse_pins(text: str) -> tuple[str, ...]:
    pins = []
    for line in text.splitlines():
        match = _PIN.match(line.strip())
        if match:
            pins.append(f"{match.group(1).lower().replace('_', '-')}=={match.group(2)}")
    return tuple(pins)


def cuda_versions(pins: Iterable[str]) -> tuple[str | None, str | None]:
    """(CUDA runtime 'X.Y', cuDNN 'X.Y.Z') from pins, or None where the pins do not say."""
    cuda = cudnn = None
    for pin in pins:
        name, _, version = pin.partition("==")
        numbers = version.split("+")[0].split(".")
        if re.fullmatch(r"nvidia-cuda-runtime(-cu\d+)?", name):
            cuda = ".".join(numbers[:2])
        elif re.fullmatch(r"nvidia-cudnn-cu\d+", name):
            cudnn = ".".join(numbers[:3])
        elif name == "torch" and cuda is None:
            local = re.search(r"\+cu(\d+)(\d)$", version)
            if local:  # torch==2.7.0+cu128 -> 12.8
                cuda = f"{local.group(1)}.{local.group(2)}"
    return cuda, cudnn


def _error_text(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if not line.startswith("warning: The requested Python version")]
    return "\n".join(lines).strip()[-4000:]


def resolve_one(stack: Stack, platform: str, wheelhouse: str | None = None, offline: bool = False) -> ResolvedStack:
    if stack.env == "current":
        return ResolvedStack(stack, ok=True)
    command = [
        uv_bin(), "pip", "compile", "-", "--python-version", stack.python, "--python-platform", platform,
        "--no-header", "--no-annotate", "--no-build", *index_args(stack.index_url, wheelhouse, offline),
    ]
    try:
        proc = subprocess.run(
            command, input="\n".join(stack.requirements) + "\n", capture_output=True,
            text=True, env=uv_env(), timeout=300,
        )
    except subprocess.TimeoutExpired:
        return ResolvedStack(stack, ok=False, error="uv pip compile did not finish within 300 s")
    if proc.returncode != 0:
        return ResolvedStack(stack, ok=False, error=_error_text(proc.stderr) or f"uv exited {proc.returncode}")
    pins = parse_pins(proc.stdout)
    cuda, cudnn = cuda_versions(pins)
    return ResolvedStack(stack, ok=True, pins=pins, cuda_runtime=cuda, cudnn=cudnn)


def resolve_all(
    stacks: list[Stack], platform: str, wheelhouse: str | None = None, offline: bool = False,
    workers: int = 8, on_done: Callable[[ResolvedStack], None] | None = None,
) -> list[ResolvedStack]:
    """Resolve in parallel (uv is mostly waiting on the index); results keep the input order."""
    def work(stack: Stack) -> ResolvedStack:
        result = resolve_one(stack, platform, wheelhouse, offline)
        if on_done:
            on_done(result)
        return result

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        return list(pool.map(work, stacks))
