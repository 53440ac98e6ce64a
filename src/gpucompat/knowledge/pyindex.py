"""A package index read as pip and uv read it, and the kernels of the wheels it serves read without downloading them.

An index is a PEP 691 JSON or PEP 503 HTML simple API (PyPI, a site's mirror, any URL uv takes as --index), or a
wheelhouse: a folder of wheel files (uv's --find-links). A wheel on a server that honours HTTP range requests is
read as a zip from its end: the central directory first, then only the members that are CUDA libraries, each
streamed through the fat-binary walk below, so a torch wheel of 540 MB costs the bytes of its CUDA libraries, not
its whole; `fetched` counts every byte that came over the wire. A server that ignores Range gets no download at
all (NoRanges): the caller infers instead.
"""

from __future__ import annotations

import io
import json
import re
import struct
import urllib.error
import urllib.parse
import urllib.request
import zipfile
import zlib
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

from ..errors import UserError
from ..probe.fatbin import ELF64_HEADER, FATBIN_MAGIC, Archs, Truncated, count_entry, fatbin_section, inspect_bytes

JSON_ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"
CHUNK = 8 << 20  # bytes read ahead per range request while a member streams (never past the member's end)
IN_MEMORY = 64 << 20  # a CUDA library up to this size (uncompressed) is read whole by the probe's reader


class NoRanges(Exception):
    """The server answered a range request with the whole file: reading kernels would mean downloading it."""


class IndexFailed(UserError):
    """The index did not answer as an index: one sentence, and the update changes nothing."""


@dataclass(frozen=True)
class IndexFile:
    filename: str
    url: str  # an http(s) URL, or a path in a wheelhouse
    size: int | None = None
    yanked: bool = False


def normalize(name: str) -> str:
    """PEP 503's normalized project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


class _Links(HTMLParser):
    """The anchors of a PEP 503 project page: (href, text, yanked)."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str, bool]] = []
        self._open: tuple[str, bool] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            found = dict(attrs)
            self._open = (found.get("href") or "", "data-yanked" in found)

    def handle_data(self, data):
        if self._open is not None:
            self.links.append((self._open[0], data.strip(), self._open[1]))
            self._open = None


class Index:
    """One index or wheelhouse, with the bytes read from it so far."""

    def __init__(self, url: str | None = None, wheelhouse: str | None = None, timeout: float = 60.0):
        self.url, self.wheelhouse, self.timeout = (url.rstrip("/") + "/" if url else None), wheelhouse, timeout
        self.fetched = 0  # bytes of wheels read (range requests, or a wheelhouse's files)
        self.pages = 0  # bytes of index pages read

    @property
    def label(self) -> str:
        """How sources name it: "PyPI" for pypi.org, else its URL or the wheelhouse's folder."""
        if self.wheelhouse:
            return f"the wheelhouse {self.wheelhouse}"
        host = urllib.parse.urlsplit(self.url or "").hostname or ""
        return "PyPI" if host in ("pypi.org", "www.pypi.org") else self.url.rstrip("/")

    def _get(self, url: str, headers: dict | None = None):
        try:
            return urllib.request.urlopen(urllib.request.Request(url, headers={"User-Agent": "gpucompat-knowledge-update", **(headers or {})}),
                                          timeout=self.timeout)
        except urllib.error.HTTPError:
            raise
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise IndexFailed(f"the index {self.label} does not answer ({getattr(exc, 'reason', None) or exc}); nothing was changed.") from None

    def files(self, project: str) -> list[IndexFile] | None:
        """Every file the index lists for a project; None where the index has no such project (404)."""
        if self.wheelhouse:
            prefix = normalize(project).replace("-", "_")
            folder = Path(self.wheelhouse)
            found = []
            for path in sorted(folder.iterdir()):
                if path.suffix == ".whl" and normalize(path.name.split("-", 1)[0]).replace("-", "_") == prefix:
                    found.append(IndexFile(path.name, str(path), path.stat().st_size))
            return found or None
        page = urllib.parse.urljoin(self.url, normalize(project) + "/")
        try:
            response = self._get(page, {"Accept": JSON_ACCEPT})
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise IndexFailed(f"the index {self.label} answered {exc.code} for {project}; nothing was changed.") from None
        with response:
            body = response.read()
            kind = response.headers.get("Content-Type", "")
        self.pages += len(body)
        try:
            if "json" in kind:
                data = json.loads(body)
                return [IndexFile(f["filename"], urllib.parse.urljoin(page, f["url"]), f.get("size"), bool(f.get("yanked")))
                        for f in data.get("files", [])]
            links = _Links()
            links.feed(body.decode("utf-8", "replace"))
        except (ValueError, KeyError, TypeError, AttributeError):
            raise IndexFailed(f"the index {self.label} answered for {project} with a page that is no simple-API page; nothing was changed.") from None
        return [IndexFile(text or href.rsplit("/", 1)[-1].split("#")[0], urllib.parse.urljoin(page, href.split("#")[0]), None, yanked)
                for href, text, yanked in links.links]

    def open(self, item: IndexFile) -> io.RawIOBase:
        """A seekable reader of one wheel: a wheelhouse's file, or range requests (NoRanges where the server ignores them)."""
        if self.wheelhouse:
            return _Counted(open(item.url, "rb"), self)
        return RangeFile(item.url, self)


class _Counted(io.RawIOBase):
    """A local file whose reads count as fetched bytes (a wheelhouse on shared storage costs reads too)."""

    def __init__(self, handle, index: Index):
        self.handle, self.index = handle, index

    def readable(self):
        return True

    def seekable(self):
        return True

    def seek(self, offset, whence=0):
        return self.handle.seek(offset, whence)

    def tell(self):
        return self.handle.tell()

    def read(self, size=-1):
        data = self.handle.read(size)
        self.index.fetched += len(data)
        return data

    def close(self):
        self.handle.close()
        super().close()


class RangeFile(io.RawIOBase):
    """A remote file read through HTTP range requests, so zipfile can seek in it. Bytes are fetched in aligned
    blocks kept in a small cache (zipfile goes back to each member's local header), a miss fetching at least CHUNK
    bytes in one request, so no byte is fetched twice while its block is cached."""

    BLOCK, KEEP = 64 << 10, 2 * CHUNK // (64 << 10)  # 64 KiB blocks, two read-aheads of them held

    def __init__(self, url: str, index: Index):
        self.url, self.index, self.pos = url, index, 0
        self.blocks: dict[int, bytes] = {}
        self.until = None  # where reading ahead stops: the end of the member being read (wheel_archs sets it)
        try:
            response = index._get(url, {"Range": "bytes=-65536"})  # the zip's end: its central directory, usually
        except urllib.error.HTTPError as exc:
            raise IndexFailed(f"the index {index.label} answered {exc.code} for {url.rsplit('/', 1)[-1]}; nothing was changed.") from None
        with response:
            span = response.headers.get("Content-Range", "")
            if response.status != 206 or not re.fullmatch(r"bytes [0-9]+-[0-9]+/[0-9]+", span):
                raise NoRanges(url)  # closed unread: nothing of the body is downloaded
            self.size = int(span.rsplit("/", 1)[1])
            self.tail = response.read()
        self.tail_at = self.size - len(self.tail)
        index.fetched += len(self.tail)

    def readable(self):
        return True

    def seekable(self):
        return True

    def tell(self):
        return self.pos

    def seek(self, offset, whence=0):
        self.pos = offset if whence == 0 else self.pos + offset if whence == 1 else self.size + offset
        return self.pos

    def _fetch(self, first: int, last: int) -> None:
        """Blocks first..last (inclusive) into the cache, in one request."""
        start, end = first * self.BLOCK, min(self.tail_at, (last + 1) * self.BLOCK) - 1
        try:
            response = self.index._get(self.url, {"Range": f"bytes={start}-{end}"})
        except urllib.error.HTTPError as exc:
            raise IndexFailed(f"the index {self.index.label} answered {exc.code} while {self.url.rsplit('/', 1)[-1]} was read; "
                              "nothing was changed.") from None
        with response:
            if response.status != 206:
                raise NoRanges(self.url)
            data = response.read()
        self.index.fetched += len(data)
        if len(data) != end - start + 1:
            raise IndexFailed(f"the index {self.index.label} cut {self.url.rsplit('/', 1)[-1]} short; nothing was changed.")
        for number in range(first, last + 1):
            self.blocks.pop(number, None)
            self.blocks[number] = data[(number - first) * self.BLOCK:(number - first + 1) * self.BLOCK]
        while len(self.blocks) > self.KEEP:
            del self.blocks[next(iter(self.blocks))]  # the oldest first

    def read(self, size=-1):
        size = self.size - self.pos if size is None or size < 0 else min(size, self.size - self.pos)
        pieces = []
        while size > 0:
            if self.pos >= self.tail_at:  # the end, fetched first
                piece = self.tail[self.pos - self.tail_at:self.pos - self.tail_at + size]
            else:
                end = min(self.pos + size, self.tail_at)
                first, last = self.pos // self.BLOCK, (end - 1) // self.BLOCK
                missing = [n for n in range(first, last + 1) if n not in self.blocks]
                if missing:
                    stop = min(self.tail_at, self.until or self.tail_at)
                    ahead = max(missing[-1], min(missing[0] + CHUNK // self.BLOCK, stop // self.BLOCK + 1) - 1)
                    self._fetch(missing[0], min(ahead, (self.tail_at - 1) // self.BLOCK))
                joined = b"".join(self.blocks[n] for n in range(first, last + 1))
                piece = joined[self.pos - first * self.BLOCK:end - first * self.BLOCK]
            if not piece:
                break
            pieces.append(piece)
            self.pos += len(piece)
            size -= len(piece)
        return b"".join(pieces)


# -- kernels of one member, streamed -----------------------------------------------------------------

class FatbinStream:
    """The fat-binary walk of probe/fatbin.scan over bytes that arrive in pieces, holding only a few headers:
    containers anywhere in the image are read, and at the end only those inside the image's .nv_fatbin
    section count (its section table and names sit at the image's end, which is kept)."""

    TAIL = 8 << 20

    def __init__(self) -> None:
        self.at = 0  # stream offset of self.pending[0]
        self.pending = bytearray()
        self.head = b""
        self.tail = bytearray()
        self.containers: list[tuple[int, Archs]] = []
        self.skip = 0  # bytes to pass over (an entry's payload)
        self.left = 0  # bytes of the current container still to walk

    def feed(self, data: bytes) -> None:
        if len(self.head) < ELF64_HEADER:
            self.head += data[:ELF64_HEADER - len(self.head)]
        self.tail += data
        if len(self.tail) > self.TAIL:
            del self.tail[:len(self.tail) - self.TAIL]
        self.pending += data
        self._walk()

    def _drop(self, count: int) -> None:
        del self.pending[:count]
        self.at += count

    def _walk(self) -> None:
        while True:
            if self.skip:
                step = min(self.skip, len(self.pending))
                self._drop(step)
                self.skip -= step
                self.left = max(0, self.left - step)
                if self.skip:
                    return
            if self.left:  # at an entry header inside a container
                if self.left < 0x30:
                    self.skip, self.left = self.left, self.left
                    continue
                if len(self.pending) < 0x30:
                    return
                step = count_entry(self.containers[-1][1], self.pending)
                self.skip = self.left if step is None else min(step, self.left)  # None: no entry, the container ends
                continue
            found = self.pending.find(FATBIN_MAGIC)
            if found < 0:
                self._drop(max(0, len(self.pending) - 3))
                return
            if len(self.pending) < found + 16:
                self._drop(found)
                return
            _magic, _version, header_size, fat_size = struct.unpack_from("<IHHQ", self.pending, found)
            self.containers.append((self.at + found, Archs()))
            self._drop(found)
            self.skip, self.left = header_size, header_size + fat_size

    def result(self, total: int) -> tuple[Archs, bool]:
        """(the kernels, whether .nv_fatbin was found to bound them: else every container counted)."""
        bounds = self._section(total)
        found = Archs()
        for offset, archs in self.containers:
            if bounds is None or bounds[0] <= offset < bounds[1]:
                found.merge(archs)
        return found, bounds is not None

    def _section(self, total: int) -> tuple[int, int] | None:
        """[start, end) of .nv_fatbin, read by the probe's reader from the head and tail kept; None where it is not there."""
        try:
            found = fatbin_section(_Ends(self.head, self.tail, total))
        except Truncated:  # the section table or names lie outside what was kept, or past the end
            return None
        return (found[0], found[0] + found[1]) if found else None


class _Ends:
    """An image of `size` bytes of which only the head and the tail were kept, sliced as bytes are (all that
    fatbin_section asks of an image): a slice of anything else reads empty, which it takes as Truncated."""

    def __init__(self, head: bytes, tail: bytearray, size: int):
        self.head, self.tail, self.size = head, tail, size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, key: slice) -> bytes:
        start, stop = max(0, key.start or 0), min(self.size, self.size if key.stop is None else key.stop)
        tail_at = self.size - len(self.tail)
        if start >= tail_at:
            return self.tail[start - tail_at:stop - tail_at]
        return self.head[start:stop] if stop <= len(self.head) else b""


def member_archs(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> tuple[Archs, str]:
    """The kernels of one library in a wheel, and how they were read."""
    if info.file_size <= IN_MEMORY:
        return inspect_bytes(archive.read(info)), "read whole"
    stream = FatbinStream()
    with archive.open(info) as handle:
        while chunk := handle.read(1 << 20):
            stream.feed(chunk)
    found, bounded = stream.result(info.file_size)
    return found, "streamed" + ("" if bounded else " (no .nv_fatbin section found: every container counted)")


def is_library(name: str) -> bool:
    base = name.rsplit("/", 1)[-1]
    return base.endswith(".so") or ".so." in base


def wheel_archs(index: Index, item: IndexFile, wanted) -> tuple[Archs, list[str]]:
    """The kernels of a wheel's CUDA libraries (`wanted(member name)` picks which count), and the members read.
    NoRanges where the server ignores range requests; IndexFailed where it fails or the file is no wheel."""
    handle = index.open(item)
    try:
        with zipfile.ZipFile(handle) as archive:
            found, read = Archs(), []
            for info in sorted(archive.infolist(), key=lambda i: i.header_offset):  # in file order: one pass
                if is_library(info.filename) and wanted(info.filename):
                    # the local header repeats the name and may carry its own extra field: a little slack past the data
                    handle.until = info.header_offset + 30 + 2 * len(info.filename.encode()) + len(info.extra) + info.compress_size + 1024
                    archs, how = member_archs(archive, info)
                    found.merge(archs)
                    read.append(f"{info.filename.rsplit('/', 1)[-1]} ({how})")
            return found, read
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, struct.error) as exc:
        raise IndexFailed(f"{item.filename} from {index.label} is not a readable wheel ({exc.__class__.__name__}); nothing was changed.") from None
    finally:
        handle.close()

