"""The knowledge a user learned after install (`gpucompat knowledge update`): CSV rows with the packaged
tables' columns, kept beside the store, never in the packaged data/ files.

tables.table() puts these rows before the packaged ones, so every rule sees them and a lookup that
takes the first match takes the learned row where both hold one (only newest_releases in practice:
an update learns releases newer than the packaged tables). Each row's source says
"learned from <index> on <date>".

Layout: $GPUCOMPAT_KNOWLEDGE, else <data dir>/knowledge (beside gpucompat.db), is a symbolic link to a
folder written whole by one update (<table>.csv and learned.json). An update writes a new folder and
swaps the link in one rename, so a failed or interrupted update leaves the old knowledge as it was.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
from pathlib import Path

from ..errors import UserError
from ..paths import data_dir

META = "learned.json"


def overlay_path() -> Path:
    """Where the learned knowledge lives (a link to the folder the last update wrote)."""
    override = os.environ.get("GPUCOMPAT_KNOWLEDGE")
    return Path(override) if override else data_dir() / "knowledge"


def rows(name: str) -> tuple[dict, ...]:
    """The learned rows of one table (none where nothing was learned)."""
    path = overlay_path() / f"{name}.csv"
    try:
        handle = path.open(newline="", encoding="utf-8")
    except OSError:  # no overlay (the common case), or one that cannot be read: the packaged tables stand
        return ()
    with handle:
        return tuple(csv.DictReader(handle))


def meta() -> dict:
    """What the last update said about itself (index, date, releases learned, newest per package); {} if none."""
    try:
        return json.loads((overlay_path() / META).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def replace(tables: dict[str, tuple[list[str], list[dict]]], about: dict) -> Path:
    """Write a whole new overlay ({table: (columns, rows)} and its learned.json), then swap it in with one rename.
    Nothing the readers see changes until that rename; an exception before it leaves the old overlay."""
    import tempfile  # here, not at the top: every explain imports this module, only an update writes

    link = overlay_path()
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.exists() and not link.is_symlink():
        raise UserError(f"{link} is a folder, not the link gpucompat keeps its learned knowledge under; move it away and run the update again.")
    folder = Path(tempfile.mkdtemp(prefix=f".{link.name}-", dir=link.parent))
    try:
        for name, (columns, table_rows) in tables.items():
            with (folder / f"{name}.csv").open("w", newline="", encoding="utf-8") as handle:
                writer = csv.DictWriter(handle, fieldnames=columns, lineterminator="\n", extrasaction="ignore")
                writer.writeheader()
                writer.writerows(table_rows)
        (folder / META).write_text(json.dumps(about, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        folder.chmod(0o755)
        previous = link.resolve() if link.is_symlink() else None
        swap = link.parent / f".{link.name}-link-{os.getpid()}"
        if swap.is_symlink():
            swap.unlink()
        os.symlink(folder.name, swap)
        os.replace(swap, link)  # the one step readers see
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    if previous is not None and previous != folder and previous.parent == link.parent:
        shutil.rmtree(previous, ignore_errors=True)
    return folder
