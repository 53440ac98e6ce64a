"""A package index read as pip and uv read it, and the kernels of the wheels it serves read without downloading them.

An index is a PEP 691 JSON or PEP 503 HTML simple API (PyPI, a site's mirror, any URL uv takes as --index), or a
wheelhouse: a folder of wheel files (uv's --find-links). A wheel on a server that honours HTTP range requests is
read as a zip from its end: the central directory first, then only the members that are CUDA libraries, each checked
against archive.py's bounds and streamed through its fat-binary reader (as `inspect` reads a wheel), so a torch wheel
of 540 MB costs the bytes of its CUDA libraries, not its whole; `fetched` counts every byte that came over the wire. A server that ignores Range gets no download at
all (NoRanges): the caller infers instead.

What the index lists is not what it serves: a release counts only once a file of it was read and checked
(`Index.check`: its PEP 658 metadata, hash-checked; else a 4-byte range read of the file's head; else, for a file
up to WHOLE_LIMIT, the file itself, hash-checked against the index's hash). A link with another scheme than
http(s) (javascript:, file:, data:), one that leaves the index's host (PyPI's file host excepted) or goes from
https to http is refused, and each refusal is one sentence in `Index.refused`.
"""

from __future__ import annotations

import hashlib
import io
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
from ..probe.fatbin import Archs
from .archive import wheel_libraries, zip_member

JSON_ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"
CHUNK = 8 << 20  # bytes read ahead per range request while a member streams (never past the member's end)
WHOLE_LIMIT = 32 << 20  # a file up to this size may be fetched whole to check it (a server without ranges or metadata)
MAX_REFUSED = 20  # refusal sentences kept per update (then one counting the rest)
HASHES = ("sha512", "sha384", "sha256", "sha224", "sha1", "md5")  # PEP 503's, strongest first
FILE_HOSTS = {"pypi.org": ("files.pythonhosted.org",), "www.pypi.org": ("files.pythonhosted.org",),
              "test.pypi.org": ("test-files.pythonhosted.org",)}  # an index whose files live on another host of its own
MAGIC = (b"PK\x03\x04", b"\x1f\x8b")  # a wheel or zip, a .tar.gz: the first bytes a served file must have


class NoRanges(Exception):
    """The server answered a range request with the whole file: reading kernels would mean downloading it."""


class IndexFailed(UserError):
    """The index did not answer as an index: one sentence, and the update changes nothing."""


class NotServed(Exception):
    """The index lists a file that it does not serve as listed (404, a hash mismatch, another size, not a wheel):
    the release is not learned from it. The message is the one sentence the update reports."""


@dataclass(frozen=True)
class IndexFile:
    filename: str
    url: str  # an http(s) URL, or a path in a wheelhouse
    size: int | None = None
    yanked: bool = False
    hashes: tuple = ()  # ((algorithm, hex digest), ...) as the index gives them (PEP 691 "hashes", PEP 503 "#sha256=")
    metadata: tuple | bool = False  # PEP 658/714: the file's METADATA is served at url + ".metadata"; a tuple holds its hashes

    def hash(self) -> tuple[str, str] | None:
        """The strongest hash the index gives for the file (None: none)."""
        return _strongest(self.hashes)


def _strongest(hashes) -> tuple[str, str] | None:
    given = {name.lower(): value.lower() for name, value in hashes if isinstance(name, str) and isinstance(value, str)}
    return next(((name, given[name]) for name in HASHES if name in given and re.fullmatch(r"[0-9a-f]{32,128}", given[name])), None)


def _hash_pairs(value) -> tuple:
    """PEP 691's {"sha256": "..."} or PEP 503's "sha256=..." as ((name, digest), ...); () for anything else."""
    if isinstance(value, dict):
        return tuple((k, v) for k, v in value.items() if isinstance(k, str) and isinstance(v, str))
    if isinstance(value, str) and "=" in value:
        name, _, digest = value.partition("=")
        return ((name, digest),)
    return ()


def _metadata_flag(value) -> tuple | bool:
    """PEP 658's data-dist-info-metadata / PEP 714's core-metadata: False, True (served, no hash) or its hashes."""
    if value is None or value is False or value == "false":
        return False
    return _hash_pairs(value) or True


def normalize(name: str) -> str:
    """PEP 503's normalized project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


class _Links(HTMLParser):
    """The anchors of a PEP 503 project page: (href, text, yanked, PEP 658 metadata attribute or None)."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str, bool, str | None]] = []
        self._open: tuple[str, bool, str | None] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            found = dict(attrs)
            metadata = found.get("data-core-metadata", found.get("data-dist-info-metadata"))
            self._open = (found.get("href") or "", "data-yanked" in found,
                          None if metadata is None and "data-core-metadata" not in found and "data-dist-info-metadata" not in found
                          else (metadata or "true"))

    def handle_data(self, data):
        if self._open is not None:
            self.links.append((self._open[0], data.strip(), self._open[1], self._open[2]))
            self._open = None


class Index:
    """One index or wheelhouse, with the bytes read from it so far."""

    def __init__(self, url: str | None = None, wheelhouse: str | None = None, timeout: float = 60.0, hosts: tuple = ()):
        self.url, self.wheelhouse, self.timeout = (url.rstrip("/") + "/" if url else None), wheelhouse, timeout
        self.fetched = 0  # bytes of wheels read (range requests, whole files, or a wheelhouse's files)
        self.pages = 0  # bytes of index pages read
        self.checked = 0  # bytes read to check that a listed file is served (metadata files, 4-byte range reads)
        self.refused: list[str] = []  # one sentence per link refused or listed file not served
        self._refused_more = 0
        self._listed: dict[str, list[IndexFile] | None] = {}  # project -> its files (a page is read once per update)
        self._whole: dict[str, bytes] = {}  # url -> a file fetched whole and hash-checked (read from memory after)
        split = urllib.parse.urlsplit(self.url or "")
        self.scheme, self.netloc = split.scheme.lower(), split.netloc.lower()
        self.hosts = {self.netloc, *FILE_HOSTS.get((split.hostname or "").lower(), ()), *(h.lower() for h in hosts)}

    def refuse(self, sentence: str) -> None:
        """Keep one sentence for the update's report (the first MAX_REFUSED, then a count)."""
        if sentence in self.refused:
            return
        if len(self.refused) < MAX_REFUSED:
            self.refused.append(sentence)
        else:
            self._refused_more += 1

    @property
    def refusals(self) -> list[str]:
        more = [f"{self._refused_more} more links or files were refused for the same reasons."] if self._refused_more else []
        return self.refused + more

    def _link(self, project: str, href: str, page: str) -> str | None:
        """The absolute URL of a link on a project page, or None where it is refused (and why is kept)."""
        shown = href if len(href) <= 80 else href[:77] + "..."
        scheme = urllib.parse.urlsplit(href.strip()).scheme.lower()
        if scheme and scheme not in ("http", "https"):
            kind = {"javascript": "runs script, it is no file", "file": "reads this machine's own files, not the index's",
                    "data": "carries its bytes in the page, not from the index"}.get(scheme, "is no http(s) address")
            self.refuse(f"refused the link {shown!r} on {project}'s page of {self.label}: a {scheme}: link {kind}.")
            return None
        url = urllib.parse.urljoin(page, href.strip())
        split = urllib.parse.urlsplit(url)
        if split.netloc.lower() not in self.hosts:
            self.refuse(f"refused the link {shown!r} on {project}'s page of {self.label}: it leaves the index's host "
                        f"{self.netloc} for {split.netloc or 'no host'} (name that host with --files-host to allow it).")
            return None
        if self.scheme == "https" and split.scheme.lower() != "https":
            self.refuse(f"refused the link {shown!r} on {project}'s page of {self.label}: it goes from https to {split.scheme or 'no scheme'}.")
            return None
        return url

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
        """Every file the index lists for a project (refused links left out); None where the index has no such
        project (404). A project's page is read once per Index."""
        if project not in self._listed:
            self._listed[project] = self._files(project)
        return self._listed[project]

    def _files(self, project: str) -> list[IndexFile] | None:
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
                from .overlay import bounded_json

                data = bounded_json(body.decode("utf-8"), f"{project}'s page of {self.label}")
                found = []
                for f in data.get("files", []):
                    url = self._link(project, f["url"], page)
                    size = f.get("size")
                    if url is not None:
                        found.append(IndexFile(str(f["filename"]), url, size if isinstance(size, int) and size >= 0 else None,
                                               bool(f.get("yanked")), _hash_pairs(f.get("hashes")),
                                               _metadata_flag(f.get("core-metadata", f.get("dist-info-metadata")))))
                return found
            links = _Links()
            links.feed(body.decode("utf-8", "replace"))
        except UserError as exc:
            raise IndexFailed(f"{exc}; nothing was changed.") from None
        except (ValueError, KeyError, TypeError, AttributeError):
            raise IndexFailed(f"the index {self.label} answered for {project} with a page that is no simple-API page; nothing was changed.") from None
        found = []
        for href, text, yanked, metadata in links.links:
            url = self._link(project, href, page)
            if url is not None:
                fragment = urllib.parse.urlsplit(url).fragment
                found.append(IndexFile(text or url.rsplit("/", 1)[-1].split("#")[0], url.split("#")[0], None, yanked,
                                       _hash_pairs(fragment), _metadata_flag(metadata)))
        return found

    # -- is a listed file served? ------------------------------------------------------------------------

    def check(self, item: IndexFile) -> str:
        """How a listed file was found served: "metadata" (its PEP 658 metadata, hash-checked), "range" (its first
        bytes by a range request), "whole" (the file, hash-checked) or "wheelhouse". NotServed where it is not."""
        name = item.filename
        if self.wheelhouse:
            try:
                with open(item.url, "rb") as handle:
                    head = handle.read(4)
            except OSError as exc:
                raise NotServed(f"{name} in {self.label} cannot be read ({exc.strerror or exc}).") from None
            if not head.startswith(MAGIC):
                raise NotServed(f"{name} in {self.label} is no wheel (it does not begin as a zip file does).")
            return "wheelhouse"
        if isinstance(item.metadata, tuple) and _strongest(item.metadata):
            algorithm, digest = _strongest(item.metadata)
            data = self._body(item.url + ".metadata", f"{name}'s metadata", limit=4 << 20)
            self.checked += len(data)
            if hashlib.new(algorithm, data).hexdigest() != digest:
                raise NotServed(f"{name}'s metadata from {self.label} does not match the index's {algorithm} hash, so the release is not learned from it.")
            text = data.decode("utf-8", "replace")
            version = name.split("-")[1] if name.count("-") >= 2 else ""
            stated = re.search(r"^Version: *(\S+)", text, re.M)
            if version and (stated is None or stated.group(1) != version):
                raise NotServed(f"{name}'s metadata from {self.label} states version {stated.group(1) if stated else 'none'}, not {version}.")
            return "metadata"
        response = self._open_file(item, {"Range": "bytes=0-3"})
        with response:
            span = response.headers.get("Content-Range", "")
            if response.status == 206 and re.fullmatch(r"bytes 0-[0-9]+/[0-9]+", span):
                head = response.read(4)
                self.checked += len(head)
                total = int(span.rsplit("/", 1)[1])
                if item.size is not None and total != item.size:
                    raise NotServed(f"{self.label} serves {name} with {total:,} bytes, not the {item.size:,} its page lists.")
                if not head.startswith(MAGIC):
                    raise NotServed(f"{self.label} serves {name} as something that is no wheel (it does not begin as a zip file does).")
                return "range"
            length = response.headers.get("Content-Length", "")
            size = item.size if item.size is not None else (int(length) if length.isdigit() else None)
            expected = item.hash()
            if expected is None:
                raise NotServed(f"{self.label} ignores range requests, serves no metadata for {name} and gives no hash for it, "
                                "so nothing it serves can be checked.")
            if size is None or size > WHOLE_LIMIT:
                raise NotServed(f"{self.label} ignores range requests and serves no metadata for {name}, so checking it would mean "
                                f"downloading {'all' if size is None else f'{size:,} bytes'} of it; it is not learned.")
            data = response.read(WHOLE_LIMIT + 1)
        self.fetched += len(data)
        if len(data) > WHOLE_LIMIT:
            raise NotServed(f"{self.label} sends more of {name} than the size it gives.")
        if hashlib.new(expected[0], data).hexdigest() != expected[1]:
            raise NotServed(f"{name} from {self.label} does not match the index's {expected[0]} hash, so the release is not learned from it.")
        self._whole[item.url] = data
        return "whole"

    def size_of(self, item: IndexFile) -> int | None:
        """A listed file's size: the index's size metadata, else a HEAD request's Content-Length (None: not said).
        NotServed where the HEAD request finds no file."""
        if item.size is not None or self.wheelhouse:
            return item.size
        request = urllib.request.Request(item.url, method="HEAD", headers={"User-Agent": "gpucompat-knowledge-update"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                length = response.headers.get("Content-Length", "")
        except urllib.error.HTTPError as exc:
            if exc.code in (403, 404, 410):
                raise NotServed(f"{self.label} lists {item.filename} but answers {exc.code} for it, so no release is learned from it.") from None
            return None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise IndexFailed(f"the index {self.label} does not answer ({getattr(exc, 'reason', None) or exc}); nothing was changed.") from None
        return int(length) if length.isdigit() else None

    def _open_file(self, item: IndexFile, headers: dict):
        try:
            return self._get(item.url, headers)
        except urllib.error.HTTPError as exc:
            if exc.code in (403, 404, 410):
                raise NotServed(f"{self.label} lists {item.filename} but answers {exc.code} for it, so no release is learned from it.") from None
            raise IndexFailed(f"the index {self.label} answered {exc.code} for {item.filename}; nothing was changed.") from None

    def _body(self, url: str, what: str, limit: int) -> bytes:
        try:
            response = self._get(url)
        except urllib.error.HTTPError as exc:
            if exc.code in (403, 404, 410):
                raise NotServed(f"{self.label} declares {what} but answers {exc.code} for it.") from None
            raise IndexFailed(f"the index {self.label} answered {exc.code} for {what}; nothing was changed.") from None
        with response:
            data = response.read(limit + 1)
        if len(data) > limit:
            raise NotServed(f"{what} from {self.label} is larger than {limit:,} bytes, which no metadata file is.")
        return data

    def open(self, item: IndexFile) -> io.RawIOBase:
        """A seekable reader of one wheel: a wheelhouse's file, or range requests (NoRanges where the server ignores them)."""
        if self.wheelhouse:
            return _Counted(open(item.url, "rb"), self)
        if item.url in self._whole:  # fetched whole to check it: read from memory
            return io.BytesIO(self._whole[item.url])
        return RangeFile(item.url, self, item)


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

    def __init__(self, url: str, index: Index, item: IndexFile | None = None):
        self.url, self.index, self.pos = url, index, 0
        self.blocks: dict[int, bytes] = {}
        self.until = None  # where reading ahead stops: the end of the member being read (wheel_archs sets it)
        item = item or IndexFile(url.rsplit("/", 1)[-1], url)
        response = index._open_file(item, {"Range": "bytes=-65536"})  # the zip's end: its central directory, usually
        with response:
            span = response.headers.get("Content-Range", "")
            if response.status != 206 or not re.fullmatch(r"bytes [0-9]+-[0-9]+/[0-9]+", span):
                raise NoRanges(url)  # closed unread: nothing of the body is downloaded
            self.size = int(span.rsplit("/", 1)[1])
            if item.size is not None and self.size != item.size:
                raise NotServed(f"{index.label} serves {item.filename} with {self.size:,} bytes, not the {item.size:,} its page lists.")
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


def is_library(name: str) -> bool:
    base = name.rsplit("/", 1)[-1]
    return base.endswith(".so") or ".so." in base


def wheel_archs(index: Index, item: IndexFile, wanted) -> tuple[Archs, list[str]]:
    """The kernels of a wheel's CUDA libraries (`wanted(member name)` picks which count), and the members read.
    NoRanges where the server ignores range requests; IndexFailed where it fails or the file is no wheel; a UserError
    (one sentence) where a library passes archive.py's bounds on its size or compression ratio, before any is read, or
    the reader's bounds on fat-binary containers, entries and time (probe/fatbin.py) as it is read."""
    handle = index.open(item)
    try:
        with zipfile.ZipFile(handle) as archive:
            found, read = Archs(), []
            # in file order, each checked against the bounds before a byte of any is inflated (archive.py)
            where = f"{item.filename} from {index.label}"
            for info in wheel_libraries(archive, where, lambda name: is_library(name) and wanted(name), "nothing was changed"):
                # the local header repeats the name and may carry its own extra field: a little slack past the data
                handle.until = info.header_offset + 30 + 2 * len(info.filename.encode()) + len(info.extra) + info.compress_size + 1024
                archs, how = zip_member(archive, info, where, "nothing was changed")  # past the reader's bounds: one sentence
                found.merge(archs)
                read.append(f"{info.filename.rsplit('/', 1)[-1]} ({how})")
            return found, read
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, struct.error) as exc:
        raise IndexFailed(f"{item.filename} from {index.label} is not a readable wheel ({exc.__class__.__name__}); nothing was changed.") from None
    finally:
        handle.close()

