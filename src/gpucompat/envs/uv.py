"""`uv`: one virtual environment per distinct resolved stack, installed from its pins.

The pins are complete (resolved on the submit side), so the install runs with
--no-deps: what is installed is exactly what was resolved. With a wheelhouse it
uses no index at all, for compute nodes without internet.
"""

from __future__ import annotations

import shlex
import shutil
import sys
import sysconfig
from functools import lru_cache
from pathlib import Path

from ..model import ResolvedStack


def python_request(python: str, same_machine: bool) -> str:
    """On this machine, prefer the running interpreter's own path when versions match (no discovery);
    on a node, the version: uv finds or downloads it there."""
    running = f"{sys.version_info[0]}.{sys.version_info[1]}"
    return sys.executable if same_machine and python == running else python


def install_script(resolved: ResolvedStack, env_dir: str, requirements: str, wheelhouse: str | None, offline: bool,
                   uv: str, same_machine: bool) -> str:
    """install.sh: build exactly the resolved environment at env_dir from the pins in `requirements`
    (the file requirements_text() fills), with the stack's Python, index, wheelhouse and offline mode."""
    index = index_args(resolved.stack.index_url, wheelhouse, offline)
    commands = [
        [uv, "venv", "--quiet", "--clear", "--python", python_request(resolved.stack.python, same_machine), env_dir],
        [uv, "pip", "install", "--python", f"{env_dir}/bin/python", "--no-deps", *index, "-r", requirements],
    ]
    return "set -e\n" + "".join(shlex.join(command) + "\n" for command in commands)


def requirements_text(resolved: ResolvedStack) -> str:
    return "\n".join(resolved.pins) + "\n"


def interpreter(resolved: ResolvedStack, env_dir: Path | str) -> str:
    return f"{env_dir}/bin/python"


@lru_cache(maxsize=1)
def uv_bin() -> str:
    """The uv executable that ships with the `uv` package this tool depends on, else uv on PATH."""
    try:
        from uv import find_uv_bin

        return find_uv_bin()
    except (ImportError, FileNotFoundError, TypeError):  # TypeError: uv's finder on some Pythons
        beside = Path(sysconfig.get_path("scripts")) / "uv"
        return str(beside) if beside.exists() else (shutil.which("uv") or "uv")


def index_args(index_url: str | None, wheelhouse: str | None, offline: bool) -> list[str]:
    if wheelhouse:
        return ["--no-index", "--find-links", wheelhouse]
    args = ["--index", index_url] if index_url else []
    return args + (["--offline"] if offline else [])
