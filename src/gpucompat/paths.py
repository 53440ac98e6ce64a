"""Where gpucompat keeps what it downloads and builds on this machine (PyPI metadata, environments, the probe)."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

from .errors import UserError


def cache_dir() -> Path:
    root = os.environ.get("GPUCOMPAT_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "gpucompat"
    )
    return Path(root)


def data_dir() -> Path:
    """Where gpucompat keeps its database and job directories by default."""
    return Path(os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share")) / "gpucompat"


def config_dir() -> Path:
    """Where a user's settings live: config.toml, the site's signing key and the keys it trusts (signing.py)."""
    return Path(os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")) / "gpucompat"


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


# -- files a user names --------------------------------------------------------------------------------

def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"),
                       (stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "something other than a file"


def open_user_file(path: str | os.PathLike, what: str) -> BinaryIO:
    """A file a user named (a plan, a requirements or lock file and the files it includes, a bundle), opened for
    reading, or one sentence: only a regular file is read. Opened without blocking, so a named pipe is refused at
    once instead of waiting for a writer for ever; the type is checked on what was opened (fstat), not on the name."""
    shown = repr(str(path)[:200])
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise UserError(f"{what} {shown} does not exist.") from None
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # what open() says of a socket
            raise UserError(f"{what} {shown} is a socket, not a regular file.") from None
        raise UserError(f"cannot read {what} {shown}: {exc.strerror or exc.__class__.__name__}.") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise UserError(f"{what} {shown} is {_kind(mode)}, not a regular file.")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_user_file(path: str | os.PathLike, what: str, limit: int, why: str) -> bytes:
    """The whole of a file a user named (open_user_file), at most `limit` bytes: counted while it is read, as
    the size a file reports can be wrong (it grows while read); past it, one sentence ending in `why`."""
    shown = repr(str(path)[:200])
    with open_user_file(path, what) as handle:
        try:
            data = handle.read(limit + 1)
        except OSError as exc:
            raise UserError(f"cannot read {what} {shown}: {exc.strerror or exc.__class__.__name__}.") from None
    if len(data) > limit:
        raise UserError(f"{what} {shown} is larger than {size_words(limit)}; {why}")
    return data


def read_user_text(path: str | os.PathLike, what: str, limit: int, why: str) -> str:
    """read_user_file as UTF-8 text (a byte order mark, which Windows editors write, is no part of it); a file in
    another encoding (UTF-16, Latin-1) is one sentence."""
    return _utf8(read_user_file(path, what, limit, why), f"{what} {str(path)[:200]!r}")


def read_user_stream(stream: BinaryIO, what: str, limit: int, why: str) -> str:
    """Text piped in (`explain -r -`), bounded and decoded as read_user_text does: `< /dev/zero` is one sentence."""
    data = stream.read(limit + 1)
    if len(data) > limit:
        raise UserError(f"{what} is larger than {size_words(limit)}; {why}")
    return _utf8(data, what)


def _utf8(data: bytes, shown: str) -> str:
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):  # the byte order mark Windows editors write when saving "Unicode"
        raise UserError(f"{shown} is not UTF-8 text (it is UTF-16); save it as UTF-8.")
    if b"\0" in data:  # UTF-16 text of ASCII without a mark decodes as UTF-8, a NUL byte in every other place
        raise UserError(f"{shown} is not UTF-8 text (it holds NUL bytes: UTF-16?); save it as UTF-8.")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise UserError(f"{shown} is not UTF-8 text; save it as UTF-8.") from None


def size_words(count: int) -> str:
    """1048576 -> '1 MiB': a bound as a refusal says it."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if count >= 1 << shift and count % (1 << shift) == 0:
            return f"{count >> shift} {unit}"
    return f"{count:,} bytes"
