"""`uv`: one virtual environment per distinct resolved stack, installed from its pins.

The pins are complete (resolved on the submit side), so the install runs with
--no-deps: what is installed is exactly what was resolved. With a wheelhouse it
uses no index at all, for compute nodes without internet.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ..model import ResolvedStack
from ..resolve import index_args, uv_bin


def python_request(python: str) -> str:
    """Prefer the running interpreter's own path when versions match: no discovery needed."""
    running = f"{sys.version_info[0]}.{sys.version_info[1]}"
    return sys.executable if python == running else python


def install_commands(resolved: ResolvedStack, env_dir: Path, wheelhouse: str | None, offline: bool) -> list[list[str]]:
    uv = uv_bin()
    requirements = env_dir.parent / f"{env_dir.name}.requirements.txt"
    requirements.parent.mkdir(parents=True, exist_ok=True)
    requirements.write_text("\n".join(resolved.pins) + "\n")
    index = index_args(resolved.stack.index_url, wheelhouse, offline)
    return [
        [uv, "venv", "--quiet", "--clear", "--python", python_request(resolved.stack.python), str(env_dir)],
        [uv, "pip", "install", "--python", str(env_dir / "bin" / "python"), "--no-deps", *index, "-r", str(requirements)],
    ]


def interpreter(resolved: ResolvedStack, env_dir: Path) -> str:
    return str(env_dir / "bin" / "python")
