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
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterable

from .errors import UserError
from .model import ResolvedStack, Stack

_PIN = re.compile(r"^([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?==([^\s;]+)")

# uv's own words for "I could not ask", from its error and cause chain (uv 0.13: `error: Failed to
# fetch`, exit 2), against "I asked and the index said no" (`No solution found`, exit 1). Checked
# in order; each is tested with a real uv in tests/test_uv_causes.py.
_COULD_NOT_ASK = (
    ("disk", re.compile(r"No space left on device|Disk quota exceeded|os error 28\b|os error 122\b", re.I)),
    # envs/conda.py's INSTALLER on a node with no micromamba, mamba, conda nor py-rattler (its own words)
    ("installer", re.compile(r"no conda installer here", re.I)),
    ("python-download", re.compile(r"python-build-standalone|No interpreter found for Python|No download found for request"
                                   r"|managed Python download|Failed to download .*cpython", re.I)),
    ("offline-cache", re.compile(r"network was disabled|not found in the cache|Network connectivity is disabled", re.I)),
    ("wheelhouse", re.compile(r"not found in the provided package locations", re.I)),
    ("index", re.compile(r"Connection refused|HTTP status server error|status code 5[0-9][0-9]|Hash mismatch", re.I)),
    ("network", re.compile(r"dns error|error resolving DNS|tcp connect error|timed out|Connection reset|certificate|tls handshake"
                           r"|error sending request|Request failed after|network is unreachable|No route to host"
                           # micromamba (libcurl's words): "Download error (6) Couldn't resolve host name",
                           # github.com/mamba-org/mamba/issues/3536; "Download error (28) Timeout was reached",
                           # github.com/mamba-org/mamba/issues/3454
                           r"|Download error \([0-9]+\) (?:Couldn't resolve host|Timeout was reached|Couldn't connect)"
                           # conda: "CondaHTTPError: HTTP 000 CONNECTION FAILED for url", github.com/conda/conda/issues/11367
                           r"|HTTP 000 CONNECTION FAILED", re.I)),
)


def could_not_ask(text: str, wheelhouse: bool = False) -> str | None:
    """The cause (a key of model.UNTESTED_CAUSES) when uv's output says it could not get an answer
    about the stack, not that the stack is impossible; None when the index did answer."""
    for cause, pattern in _COULD_NOT_ASK:
        if pattern.search(text or ""):
            return cause
    if wheelhouse and "No solution found" in (text or ""):
        return "wheelhouse"  # a wheelhouse is a partial copy: missing wheels say nothing of the index
    return None


def resolution_cause(returncode: int, text: str, wheelhouse: bool) -> str | None:
    """None: the index answered and the stack is impossible (uv exits 1 with "No solution found").
    Else why uv could not ask; "resolver" where uv failed otherwise (exit 2) and names no known cause."""
    error = text[text.find("error:"):] if "error:" in text else text  # warnings before it are not the failure
    cause = could_not_ask(error, wheelhouse)
    if cause or (returncode == 1 and "No solution found" in error):
        return cause
    return "resolver"  # uv failed in a way that says nothing about the stack (exit 2 with no known cause)


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
            text=True, env=uv_env(), timeout=300,
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
