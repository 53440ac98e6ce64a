"""`current`: the interpreter running gpucompat, as it is. Nothing is installed."""

from __future__ import annotations

import sys
from pathlib import Path

from ..model import ResolvedStack


def install_commands(resolved: ResolvedStack, env_dir: Path, wheelhouse: str | None, offline: bool) -> list[list[str]]:
    return []


def interpreter(resolved: ResolvedStack, env_dir: Path) -> str:
    return sys.executable
