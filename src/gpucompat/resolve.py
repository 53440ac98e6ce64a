"""Resolution on the submit side: `uv pip compile` for the cell's Python and platform.

An impossible stack becomes a ResolvedStack with ok=False and uv's own message,
before any job exists. The pins tell the stack's CUDA runtime and cuDNN versions.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Iterable

from .envs import current as current_env
from .envs.uv import index_args, uv_bin
from .errors import UserError
from .knowledge.signatures import could_not_ask
from .model import ResolvedStack, Stack

_PIN = re.compile(r"^([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?==([^\s;]+)")

def resolution_cause(returncode: int, text: str, wheelhouse: bool) -> str | None:
    """None: the index answered and the stack is impossible (uv exits 1 with "No solution found").
    Else why uv could not ask; "resolver" where uv failed otherwise (exit 2) and names no known cause."""
    error = text[text.find("error:"):] if "error:" in text else text  # warnings before it are not the failure
    cause = could_not_ask(error, wheelhouse)
    if cause or (returncode == 1 and "No solution found" in error):
        return cause
    return "resolver"  # uv failed in a way that says nothing about the stack (exit 2 with no known cause)


def uv_env() -> dict[str, str]:
    # Never let uv try to download a Python: compute nodes and this submit side may be offline.
    # A wide COLUMNS keeps uv from wrapping its messages: they are stored and shown as sentences.
    return {**os.environ, "UV_PYTHON_DOWNLOADS": "never", "UV_NO_PROGRESS": "1", "COLUMNS": "10000"}


def default_index() -> str:
    """The index uv resolves against when a stack names none (uv's own settings, else PyPI)."""
    return os.environ.get("UV_DEFAULT_INDEX") or os.environ.get("UV_INDEX_URL") or "https://pypi.org/simple"


def check_indexes(stacks: list[Stack], wheelhouse: str | None, offline: bool, timeout: float = 20.0) -> None:
    """One request to each index the stacks need, before anything is stored: an index that does not
    answer would make every cell "could not test", so it is one sentence and exit 2 instead.
    Any HTTP answer below 500 counts (a 404 is an answer); refused, unreachable, 5xx do not."""
    if wheelhouse or offline:
        return
    asked: dict[str, str] = {}
    for stack in stacks:
        if stack.env != "uv" or not stack.requirements:
            continue
        name = re.split(r"[\[=<>!~;\s]", stack.requirements[0], maxsplit=1)[0]
        for index in filter(None, (stack.index_url, default_index())):
            asked.setdefault(index, name)
    for index, name in asked.items():
        url = f"{index.rstrip('/')}/{name}/"
        if index.startswith("file:"):
            if not Path(urllib.request.url2pathname(index[5:].removeprefix("//"))).is_dir():
                raise UserError(f"the package index {index} is not a directory here; check the plan or uv's index settings.")
            continue
        try:
            with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout):
                pass
        except urllib.error.HTTPError as exc:
            if exc.code >= 500:
                raise UserError(f"the package index {index} answered {exc.code} ({exc.reason}) to {url}; retry later, or use --wheelhouse.") from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            why = getattr(exc, "reason", None) or exc
            raise UserError(f"the package index {index} does not answer ({why}); check the network or the plan's "
                            "variants, or use --offline (uv's cache) or --wheelhouse.") from None


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
    if stack.env == "current" and not current_env.importable(stack.framework):
        # nothing to test: not the stack's fault, so no verdict (UNTESTED), never an invalid combination
        return ResolvedStack(stack, ok=False, error=f"no {stack.framework} in {sys.executable}", cause="not-installed")
    if stack.env in ("current", "container"):  # nothing to resolve: what is there is tested (an image is pulled in the job)
        return ResolvedStack(stack, ok=True)
    if stack.env == "conda":  # solved by py-rattler into an explicit lock, not by uv
        from .envs import conda

        return conda.resolve(stack, platform, offline)
    command = [
        uv_bin(), "pip", "compile", "-", "--python-version", stack.python, "--python-platform", platform,
        "--no-header", "--no-annotate", "--no-build", *index_args(stack.index_url, wheelhouse, offline),
    ]
    try:
        proc = subprocess.run(
            command, input="\n".join(stack.requirements) + "\n", capture_output=True,
            encoding="utf-8", errors="replace", env=uv_env(), timeout=300,
        )
    except subprocess.TimeoutExpired:
        return ResolvedStack(stack, ok=False, error="uv pip compile did not finish within 300 s", cause="network")
    if proc.returncode != 0:
        error = _error_text(proc.stderr) or f"uv exited {proc.returncode}"
        return ResolvedStack(stack, ok=False, error=error, cause=resolution_cause(proc.returncode, error, bool(wheelhouse)))
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
