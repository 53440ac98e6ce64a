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


def sqlite_readonly(path: Path) -> tuple[str, dict[str, str]]:
    """How to open a SQLite file for reading only, leaving no -wal/-shm behind: (the database to open, the URI
    query that goes with it; none: open the path itself and set PRAGMA query_only). The store and explain's
    sqlite3 reader (answers/observed.py) both open a store read-only this way.

    SQLite creates -wal and -shm beside a WAL database even for a mode=ro reader, and only a
    writable connection deletes them again at its last close. So: where we could write, open
    normally and let PRAGMA query_only refuse every write; where a writer's -wal is there,
    mode=ro reads it and creates nothing; where we cannot write and no -wal is there, the
    database is at rest and immutable=1 is the only way to read it that creates nothing (mode=ro
    leaves -wal/-shm it cannot remove, or fails with "unable to open database file" in a directory
    it cannot create them in). immutable=1 also skips locking: someone with more rights than ours,
    writing meanwhile, could make a read fail or miss the newest rows (never change them).
    """
    from urllib.parse import quote

    if Path(f"{path}-wal").exists():
        mode = {"mode": "ro"}
    elif os.access(path, os.W_OK) and os.access(path.parent, os.W_OK | os.X_OK):
        return str(path), {}
    else:
        mode = {"mode": "ro", "immutable": "1"}
    return "file:" + quote(os.path.abspath(path)), mode
