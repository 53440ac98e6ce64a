"""Where gpucompat keeps what it downloads and builds on this machine (PyPI metadata, environments, the probe)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    root = os.environ.get("GPUCOMPAT_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "gpucompat"
    )
    return Path(root)
