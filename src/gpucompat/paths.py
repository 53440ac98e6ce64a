"""Where gpucompat keeps what it downloads and builds on this machine (PyPI metadata, environments, the probe)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    root = os.environ.get("GPUCOMPAT_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "gpucompat"
    )
    return Path(root)


def data_dir() -> Path:
    """Where gpucompat keeps its database and job directories by default."""
    return Path(os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share")) / "gpucompat"


def default_url() -> str:
    """The database a command uses without --db: $GPUCOMPAT_DB, else a SQLite file under data_dir()."""
    return os.environ.get("GPUCOMPAT_DB") or f"sqlite:///{data_dir() / 'gpucompat.db'}"
