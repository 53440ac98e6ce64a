"""The libraries inside a wheel, read with bounds: by `gpucompat inspect WHEEL` and by `knowledge update` alike.

Before a byte is inflated, the sizes the zip's central directory declares are checked (check_members): a library
past MEMBER_LIMIT, or one past RATIO_FROM that inflates more than RATIO_LIMIT times its compressed size (or all of
them together so), is refused with one sentence naming it, its size and the bound. zipfile never inflates a member
past its declared size (it stops there and checks the CRC), so the declared size bounds what is read.

Then each library is read as a stream (member_archs), never whole: the probe's fat-binary reader (probe/fatbin.py)
asks an image for its ELF header, its section table, the section names and the .nv_fatbin section's container and
entry headers, and _Inflated serves those from a member that can only be inflated forward. The first pass goes
through the whole member once, keeping its first bytes and its last TAIL bytes (where the section table and, as ld
lays them out, the section names sit) and walking every fat-binary container it meets (FatbinStream). When the
section names are among what was kept and that walk entered .nv_fatbin at rest, its containers inside the section
are the answer. Otherwise (names that lld puts before a large .strtab, or a walk that a stray magic number outside
the section carried into it) the member is inflated again from its start, as far as the probe's own reader needs.
Memory stays under 25 MiB whatever the member's size (the kept bytes, and at most CONTAINERS containers' headers);
time is a pass or two over it, and at most the probe reader's MAX_SECONDS (probe/fatbin.py): a library past that, or past its bounds on
fat-binary containers and entries (probe/fatbin.py), is refused with one sentence (past_bound).
"""

from __future__ import annotations

import struct
import zipfile
from collections.abc import Callable
from typing import IO

from ..errors import UserError
from ..probe.fatbin import (ELF64_HEADER, FATBIN_MAGIC, MAX_CONTAINER_ENTRIES, MAX_ENTRIES, Archs, PastBound, Truncated, _File,
                            check_time, count_entry, deadline, fatbin_section, scan)

# libtorch_cuda.so, the largest CUDA library wheels carry, is 1.5-2 GiB in builds whose kernels are not compressed (480 MiB
# in torch 2.14.1, whose kernels are; cuBLASLt 517 MiB): twice the largest, and ZIP64's threshold.
MEMBER_LIMIT = 4 << 30
# 5,705 libraries in 239 real wheels compress at most 18.8:1 (libgomp, 2 MiB) and 6.3:1 above 16 MiB
# (docs/reliability.md, "Bounds"); deflate reaches 1,032:1 on zeros, which is what a bomb inflates.
RATIO_LIMIT = 100
RATIO_FROM = 64 << 20  # below this a library may be mostly padding (a stub aligned to 2 MiB pages) and costs little anyway


def _size(count: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if count >= 1 << shift:
            return f"{count / (1 << shift):,.1f} {unit}"
    return f"{count:,} bytes"


def _shown(name: str) -> str:
    return repr(name if len(name) <= 80 else "..." + name[-77:])


def check_members(where: str, members, outcome: str) -> None:
    """Refuse, before anything is inflated, libraries (zipfile.ZipInfo) whose declared sizes pass the bounds: one
    sentence naming `where`, the member, its size and the bound, ending with `outcome` (what was not done)."""
    total = packed = 0
    for info in members:
        size, stored = info.file_size, info.compress_size
        if size > MEMBER_LIMIT:
            raise UserError(f"{where}: {_shown(info.filename)} inflates to {_size(size)}, past the {_size(MEMBER_LIMIT)} that "
                            f"one library may take (libtorch_cuda.so, the largest CUDA library wheels carry, is about 2 GiB); {outcome}.")
        if size > RATIO_FROM and size > RATIO_LIMIT * stored:
            raise UserError(f"{where}: {_shown(info.filename)} inflates from {_size(stored)} to {_size(size)} "
                            f"({size // max(stored, 1):,}:1), past the {RATIO_LIMIT}:1 that no real library comes near "
                            f"(they compress at most 7:1 above 16 MiB), so it is a zip bomb; {outcome}.")
        total, packed = total + size, packed + stored
    if total > RATIO_FROM and total > RATIO_LIMIT * packed:
        raise UserError(f"{where}: its {len(members):,} libraries together inflate from {_size(packed)} to {_size(total)} "
                        f"({total // max(packed, 1):,}:1), past the {RATIO_LIMIT}:1 that no real library comes near, "
                        f"so it is a zip bomb; {outcome}.")


def past_bound(where: str, member: str, exc: PastBound, outcome: str) -> UserError:
    """The sentence for a library past the reader's bounds: `where`, the member, what was counted and the bound."""
    return UserError(f"{where}: {_shown(member)} {exc}; {outcome}.")


def wheel_libraries(archive: zipfile.ZipFile, where: str, wanted: Callable[[str], bool], outcome: str) -> list[zipfile.ZipInfo]:
    """The members `wanted` picks, in file order (one pass over a remote file), checked against the bounds."""
    members = sorted((i for i in archive.infolist() if not i.is_dir() and wanted(i.filename)), key=lambda i: i.header_offset)
    check_members(where, members, outcome)
    return members


# -- one member, streamed ---------------------------------------------------------------------------------

class FatbinStream:
    """The fat-binary walk of probe/fatbin.scan over bytes that arrive in pieces, holding only a few header bytes:
    every container met anywhere in the image is walked and kept with the end it claims (at most CONTAINERS of them),
    and `within(start, end)` gives the kernels of those inside a section, where the walk is the probe's own. Past
    CONTAINERS, or the probe reader's bounds on entries, it stops walking: scan reads the section again and judges."""

    CONTAINERS = 10_000  # a real image has a few thousand at most (libcublasLt.so.13: 2,782); past this, read again

    def __init__(self) -> None:
        self.at = 0  # stream offset of self.pending[0]
        self.pending = bytearray()
        self.containers: list[tuple[int, int, Archs]] = []  # (offset, the end its header claims, its kernels)
        self.overflow = False
        self.entries = 0  # in all the containers met
        self.skip = 0  # bytes to pass over (an entry's payload)
        self.left = 0  # bytes of the current container still to walk

    def feed(self, data: bytes) -> None:
        if not self.overflow:
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
                    self.skip = self.left
                    continue
                if len(self.pending) < 0x30:
                    return
                archs = self.containers[-1][2]
                step = count_entry(archs, self.pending)
                self.skip = self.left if step is None else min(step, self.left)  # None: no entry, the container ends
                if step is not None:
                    self.entries += 1
                    if archs.entries > MAX_CONTAINER_ENTRIES or self.entries > MAX_ENTRIES:  # scan, in the section, judges
                        self.overflow, self.pending = True, bytearray()
                        return
                continue
            found = self.pending.find(FATBIN_MAGIC)
            if found < 0:
                self._drop(max(0, len(self.pending) - 3))
                return
            if len(self.pending) < found + 16:
                self._drop(found)
                return
            if len(self.containers) >= self.CONTAINERS:
                self.overflow, self.pending = True, bytearray()
                return
            _magic, _version, header_size, fat_size = struct.unpack_from("<IHHQ", self.pending, found)
            length = max(4, header_size + fat_size)  # as scan: the next container is looked for 4 bytes on at least
            self.containers.append((self.at + found, self.at + found + length, Archs()))
            self._drop(found)
            self.skip, self.left = min(header_size, length), length

    def within(self, start: int, end: int) -> Archs | None:
        """The kernels of the containers in [start, end), exactly as scan(image, start, end) reads them; None where
        this walk cannot tell: a container outside claimed bytes past `start` (so the walk was not looking for one
        where scan begins to), one inside claims bytes past `end` (scan stops there), or too many were met."""
        if self.overflow:
            return None
        found = Archs()
        for offset, claimed, archs in self.containers:
            if offset < start < claimed or (start <= offset < end and claimed > end):
                return None
            if start <= offset < end:
                found.merge(archs)
        return found


class _Inflated(_File):
    """A member of `size` bytes as the probe's reader reads a file (slices and find()), inflated forward from
    `open_member()`: its first HEAD bytes, its last TAIL bytes and the last WINDOW bytes inflated are kept; any other
    byte behind means inflating it again from its start, at most PASSES times (then Truncated: no kernels)."""

    HEAD, TAIL, WINDOW, CHUNK, PASSES = 64 << 10, 8 << 20, 4 << 20, 1 << 20, 5

    def __init__(self, open_member: Callable[[], IO[bytes]], size: int):
        super().__init__(-1, size)
        self.open_member, self.handle, self.passes, self.pos = open_member, None, 0, 0
        self.head, self.tail, self.tail_from = bytearray(), bytearray(), max(0, size - self.TAIL)
        self.recent: list[bytes] = []  # the last pieces inflated, WINDOW bytes and at most one piece more
        self.recent_at = 0  # where the first of them begins
        self.observer: FatbinStream | None = None  # fed every byte of the first pass, in order
        self.deadline = deadline()  # for all its passes: past it, PastBound

    def _read(self, at: int, count: int) -> bytes:
        count = max(0, min(count, self.size - at))
        for first, kept in ((0, self.head), (self.tail_from, self.tail)):
            if first <= at and at + count <= first + len(kept):
                return bytes(kept[at - first:at - first + count])
        if self.handle is None or at < self.recent_at:  # behind all that is kept: inflate again from the start
            self._restart()
        before = self._recent(at) if at < self.pos else b""
        if not before:
            self._forward(at)
        if len(before) >= count:
            return before[:count]
        return before + self._pull(count - len(before)) if self.pos == at + len(before) else before

    def _recent(self, at: int) -> bytes:
        """The bytes from `at` to where inflating has come, out of the recent pieces."""
        pieces, first = [], self.recent_at
        for piece in self.recent:
            if first + len(piece) > at:
                pieces.append(piece[max(0, at - first):])
            first += len(piece)
        return b"".join(pieces)

    def _restart(self) -> None:
        if self.handle is not None:
            self.handle.close()
        if self.passes >= self.PASSES:
            raise Truncated
        self.passes += 1
        self.handle, self.pos, self.recent, self.recent_at = self.open_member(), 0, [], 0

    def _forward(self, to: int) -> None:
        while self.pos < to and self._pull(min(self.CHUNK, to - self.pos)):
            pass

    def _pull(self, count: int) -> bytes:
        """The next `count` bytes (fewer at the member's end), kept where they are to be kept."""
        check_time(self.deadline)
        data = self.handle.read(count)[:count] if count > 0 else b""
        at, self.pos = self.pos, self.pos + len(data)
        if len(self.head) == at < self.HEAD:
            self.head += data[:self.HEAD - at]
        held = self.tail_from + len(self.tail)
        if at <= held < self.pos and held < self.size:
            self.tail += data[held - at:]
        self.recent.append(data)
        while self.pos - self.recent_at - len(self.recent[0]) >= self.WINDOW:  # kept whole: no byte is copied
            self.recent_at += len(self.recent.pop(0))
        if self.observer is not None:
            self.observer.feed(data)
        return data

    def drain(self) -> None:
        """The rest of the first pass, to the member's end."""
        self._forward(self.size)

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()
            self.handle = None


def member_archs(open_member: Callable[[], IO[bytes]], size: int) -> tuple[Archs, str]:
    """The kernels of one library of `size` bytes (inflated), read as a stream from `open_member()` (called again
    for each further pass), and how it was read. Truncated bytes or a damaged image have no kernels, as inspect_bytes
    says of them; zipfile's errors (a CRC that does not match) and PastBound (probe/fatbin.py's bounds) pass through."""
    inflated = _Inflated(open_member, size)
    try:
        stream = inflated.observer = FatbinStream()
        head = inflated[:ELF64_HEADER]
        if head[:4] != b"\x7fELF" or len(head) < 6 or head[4] != 2 or head[5] != 1:
            return Archs(), "no ELF64 image"  # nothing else is read: the probe's reader finds no section in it either
        inflated.drain()
        inflated.observer = None
        try:
            section = fatbin_section(inflated)
            if section is None:
                return Archs(), _how(inflated)
            start, end = section[0], section[0] + section[1]
            found = stream.within(start, end)
            if found is None:
                found = scan(inflated, start, end, inflated.deadline)  # the probe's own walk over the section, inflated again as far as it
        except Truncated:
            return Archs(), _how(inflated) + ", damaged: no kernels"
        return found, _how(inflated)
    finally:
        inflated.close()


def _how(inflated: _Inflated) -> str:
    return "streamed" if inflated.passes <= 1 else f"streamed, {inflated.passes} passes"


def zip_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, where: str, outcome: str) -> tuple[Archs, str]:
    """member_archs of one member of an open zip file; past the reader's bounds, a UserError naming `where` and the
    member, ending with `outcome` (what was not done)."""
    try:
        return member_archs(lambda: archive.open(info), info.file_size)
    except PastBound as exc:
        raise past_bound(where, info.filename, exc, outcome) from None
