"""CUDA fat binaries read in pure Python (standard library, 3.8+): the SASS architectures and PTX
versions inside an ELF image's `.nv_fatbin` section.

Read the ELF section headers, take the `.nv_fatbin` section, and walk its fat-binary containers
(magic 0xBA55ED50, a 16-byte header, then entries of 64 to 112 bytes, each followed by its payload
padded to 8 bytes). Only entry headers are read, so compressed payloads (zstd or the older scheme)
cost nothing. Per entry: kind (1 PTX, 2 ELF/SASS), the SM number, the code version (for PTX, the
PTX ISA version, which names the toolkit that made it) and flags (0x100000: arch-specific
`sm_XYa` / `compute_XYa`; 0x200000: family-specific, kept for PTX as `compute_XYf`, while family SASS reads as
plain `sm_XY`, as cuobjdump lists it and as it runs). Layout checked against cuobjdump --list-elf/--list-ptx on binaries built by nvcc 13
(tests/test_inspect.py). The probe reads a CUDA library it mapped with it (the library rung);
gpucompat's `inspect` (knowledge/fatbin.py) reads wheels and directories with it.

A file is read by offset (os.pread) in small pieces, never mapped: a library copied over in place while it
is read comes up short, which is Truncated (or Shrank), where a mapping would kill the process with SIGBUS.
An image that holds far more containers or entries than any real CUDA library, or takes longer to read than one
may, is PastBound (the bounds below): a few MB of minimal entries would otherwise take minutes.
"""

from __future__ import annotations

import os
import stat
import struct
import time
from dataclasses import dataclass, field

FATBIN_MAGIC = struct.pack("<I", 0xBA55ED50)
KIND_PTX, KIND_ELF, KIND_ELF_ALT = 1, 2, 0x10
ARCH_SPECIFIC = 0x100000
FAMILY_SPECIFIC = 0x200000
_ENTRY = struct.Struct("<HHIIIIIII")  # kind, ?, header size, padded payload size, ?, payload size, ?, code version, sm


@dataclass
class Archs:
    sass: set[str] = field(default_factory=set)
    ptx: set[str] = field(default_factory=set)
    ptx_isa: set[str] = field(default_factory=set)  # PTX ISA versions ("9.0" = CUDA 13.0)
    entries: int = 0

    def merge(self, other: "Archs") -> None:
        self.sass |= other.sass
        self.ptx |= other.ptx
        self.ptx_isa |= other.ptx_isa
        self.entries += other.entries


def _arch_key(name: str) -> tuple:
    digits = "".join(c for c in name if c in "0123456789")
    return (int(digits or 0), name)


class Truncated(Exception):
    """An ELF image whose header or section table points past its end."""


class Shrank(Truncated):
    """A file that became shorter while it was read (copied over in place, or truncated)."""


# Bounds on what one image's .nv_fatbin may hold and how long reading one library may take (issue 41), each about ten
# times what real CUDA libraries hold. Counted with this reader on the 28 libraries with kernels in the nvidia-* 13.x,
# torch 2.14.1 and torchvision wheels on the machine this was written on (docs/reliability.md, "Bounds"): at most 2,782
# containers (libcublasLt.so.13), 16 entries in one container (libcusolver.so.12; nvcc writes one per -gencode target,
# and every SM there is, SASS and PTX, is under a hundred) and 5,737 entries in all (libcublasLt.so.13; torch 1.7.1's
# libtorch_cuda.so, 4,402, docs/evidence/wheels). The slowest real library, libtorch_cuda.so (480 MiB, streamed out
# of its wheel), takes about 3 s, and its whole wheel under 20 s on two cores shared with five other jobs; a library
# may take 120 s (the bounds on entries stop a flood long before: the time is for what they do not foresee).
MAX_CONTAINERS, MAX_CONTAINER_ENTRIES, MAX_ENTRIES, MAX_SECONDS = 30_000, 1_000, 60_000, 120.0
REAL_MOST = {"containers": "2,782", "container entries": "16", "entries": "5,737", "seconds": "under 20 s"}


class PastBound(Exception):
    """An image past one of the bounds above; str() is what was counted and the bound, as a sentence's predicate
    ("has 1,001 entries in one fat-binary container, past the 1,000 ...")."""


def past_entries(in_container: int, in_image: int) -> PastBound | None:
    if in_container > MAX_CONTAINER_ENTRIES:
        return PastBound(f"has {in_container:,} entries in one fat-binary container, past the {MAX_CONTAINER_ENTRIES:,} one may "
                         f"hold (real CUDA libraries hold at most {REAL_MOST['container entries']}), so it is no real CUDA library")
    if in_image > MAX_ENTRIES:
        return PastBound(f"has {in_image:,} fat-binary entries, past the {MAX_ENTRIES:,} one library may hold "
                         f"(real CUDA libraries hold at most {REAL_MOST['entries']}), so it is no real CUDA library")
    return None


def past_containers(count: int) -> PastBound | None:
    if count > MAX_CONTAINERS:
        return PastBound(f"has {count:,} fat-binary containers, past the {MAX_CONTAINERS:,} one library may hold "
                         f"(real CUDA libraries hold at most {REAL_MOST['containers']}), so it is no real CUDA library")
    return None


def deadline() -> float:
    """When a read that begins now must end (time.monotonic())."""
    return time.monotonic() + MAX_SECONDS


def check_time(until: float) -> None:
    if time.monotonic() >= until:
        raise PastBound(f"was still being read after {MAX_SECONDS:.0f} s, the time one library may take "
                        f"(the slowest real CUDA library, libtorch_cuda.so, takes {REAL_MOST['seconds']})")


ELF64_HEADER, SECTION_HEADER = 64, struct.Struct("<IIQQQQI")  # name, type, flags, addr, offset, size, link
# Bounds on what one image may make the reader hold or walk, whatever its size says: its section table is read in
# pieces of TABLE_PIECE; more than MAX_SECTIONS sections (a linked library has under a hundred; an object built with
# -ffunction-sections, tens of thousands) is a damaged image; an entry naming an SM past 999 or a PTX ISA past 99.99
# counts as an entry but adds no name, so the names an image gives stay a few thousand at most.
TABLE_PIECE, MAX_SECTIONS = 1 << 20, 1 << 20
_CONTAINER, _FLAGS = struct.Struct("<IHHQ"), struct.Struct("<Q")  # magic, version, header size, fat size; an entry's flags


class _File:
    """A file read by offset, in the pieces asked for; what lies past its end now reads short (never a SIGBUS).
    len() is the size it had when opened; slices and find() are those of bytes."""

    BLOCK = 1 << 16  # entry headers sit a payload apart, often within one block: one read serves several

    def __init__(self, fd: int, size: int):
        self.fd, self.size = fd, size
        self.block_at, self.block = 0, b""

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, key):
        if not isinstance(key, slice):
            piece = self[key:key + 1]
            if not piece:
                raise IndexError(key)
            return piece[0]
        start, stop = max(0, key.start or 0), min(self.size, self.size if key.stop is None else key.stop)
        if stop <= start:
            return b""
        if not (self.block_at <= start and stop <= self.block_at + len(self.block)):
            self.block_at, self.block = start, self._read(start, max(stop - start, self.BLOCK))
        return self.block[start - self.block_at:stop - self.block_at]

    def _read(self, at: int, count: int) -> bytes:
        if hasattr(os, "pread"):
            return os.pread(self.fd, count, at)
        os.lseek(self.fd, at, 0)
        return os.read(self.fd, count)

    def find(self, needle: bytes, start: int, end: int) -> int:
        """bytes.find over [start, end), read in windows that grow from 4 KiB (the next container is usually
        right there) to 1 MiB (a gap of payload)."""
        window, at = 4096, max(0, start)
        while at < end:
            piece = self[at:min(end, at + window)]
            hit = piece.find(needle)
            if hit >= 0:
                return at + hit
            if at + len(piece) >= end or len(piece) < window:  # the end, or the file came up short
                return -1
            at += len(piece) - len(needle) + 1
            window = min(window * 2, 1 << 20)
        return -1


def _unpack(layout: struct.Struct, data, at: int) -> tuple:
    """layout's fields at `at`, read as a slice (a file's or bytes'); Truncated if they lie past the end."""
    raw = data[at:at + layout.size]
    if at < 0 or len(raw) < layout.size:
        raise Truncated
    return layout.unpack(raw)


def fatbin_section(data) -> tuple[int, int] | None:
    """(offset, size) of .nv_fatbin in a little-endian ELF64 image; None if it is not one or
    has no such section; Truncated if its header, section table or that section lies past the end."""
    head = data[:ELF64_HEADER]
    if len(head) < 6 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
        return None
    if len(head) < ELF64_HEADER:
        raise Truncated
    shoff, = struct.unpack_from("<Q", head, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", head, 0x3A)
    if not shoff:
        return None  # no section table: nothing to find

    def header(index: int) -> tuple:
        if shentsize < SECTION_HEADER.size or shoff + index * shentsize + SECTION_HEADER.size > len(data):
            raise Truncated
        return _unpack(SECTION_HEADER, data, shoff + index * shentsize)

    if shnum == 0 or shstrndx == 0xFFFF:  # more sections than the header fields hold: the real numbers sit in section 0
        first = header(0)
        shnum = shnum or first[5]
        shstrndx = first[6] if shstrndx == 0xFFFF else shstrndx
    if not 0 < shstrndx < shnum:
        return None  # no section names: nothing to find
    if shoff + shnum * shentsize > len(data) or shnum > MAX_SECTIONS:
        raise Truncated
    names_at = header(shstrndx)[4]
    per = max(1, TABLE_PIECE // shentsize)
    for first in range(0, shnum, per):  # the section table in pieces of at most TABLE_PIECE (one piece: a few KiB)
        table = data[shoff + first * shentsize:shoff + min(shnum, first + per) * shentsize]
        if len(table) < (min(shnum, first + per) - first) * shentsize:
            raise Truncated
        for index in range(min(shnum, first + per) - first):
            name, _type, _flags, _addr, offset, size, _link = SECTION_HEADER.unpack_from(table, index * shentsize)
            start = names_at + name
            if start + len(b".nv_fatbin") < len(data) and data[start:start + 11] == b".nv_fatbin\0":
                if offset + size > len(data):
                    raise Truncated
                return offset, size
    return None


def count_entry(found: Archs, fields) -> int | None:
    """Add one container entry, from its first 0x30 bytes, to `found`: the bytes from it to the next entry, or
    None where these bytes are no entry (a header under 64 bytes). knowledge/archive.py's streamed walk uses it too."""
    kind, _, size, padded, _, _, _, code_version, sm = _ENTRY.unpack_from(fields)
    if size < 64:
        return None
    flags, = _FLAGS.unpack_from(fields, 0x28)
    found.entries += 1
    if sm > 999:  # no GPU has it: a damaged entry, which adds no name (so the names an image gives stay few)
        return size + padded
    if kind == KIND_PTX:
        # arch-specific PTX (compute_90a) JIT-compiles for that CC alone, family PTX (compute_110f) within its
        # major: the suffix must stay, or the PTX would read as forward compatible (cuobjdump: sm_90a.ptx, sm_110f.ptx)
        found.ptx.add(f"compute_{sm}{'a' if flags & ARCH_SPECIFIC else 'f' if flags & FAMILY_SPECIFIC else ''}")
        if code_version >> 16 < 100 and code_version & 0xFFFF < 100:
            found.ptx_isa.add(f"{code_version >> 16}.{code_version & 0xFFFF}")
    elif kind in (KIND_ELF, KIND_ELF_ALT):
        found.sass.add(f"sm_{sm}{'a' if flags & ARCH_SPECIFIC else ''}")
    return size + padded


def scan(data, start: int = 0, end: int | None = None, until: float | None = None) -> Archs:
    """Every fat-binary container between start and end. Reads only inside [start, end) and stops at whatever does
    not fit, so any bytes at all give a result; PastBound, the one exception, for more containers or entries than the
    bounds above, or a read past `until` (time.monotonic(); by default MAX_SECONDS from now)."""
    end = len(data) if end is None else max(0, min(end, len(data)))
    until = deadline() if until is None else until
    found, containers = Archs(), 0
    pos = data.find(FATBIN_MAGIC, max(0, start), end)
    try:
        while 0 <= pos and pos + 16 <= end:
            containers += 1
            if containers > MAX_CONTAINERS:
                raise past_containers(containers)
            if not containers & 0xFF:
                check_time(until)
            _magic, _version, header_size, fat_size = _unpack(_CONTAINER, data, pos)
            entry, container_end, before = pos + header_size, min(pos + header_size + fat_size, end), found.entries
            while entry + 0x30 <= container_end:  # the entry fields read below end at 0x30
                fields = data[entry:entry + 0x30]
                if len(fields) < 0x30:
                    raise Truncated
                step = count_entry(found, fields)
                if step is None:
                    break
                if found.entries - before > MAX_CONTAINER_ENTRIES or found.entries > MAX_ENTRIES:
                    raise past_entries(found.entries - before, found.entries)
                if not found.entries & 0x3FF:
                    check_time(until)
                entry += step
            pos = data.find(FATBIN_MAGIC, max(container_end, pos + 4), end)
    except Truncated:  # a file that came up short while it was read: what was read stands (read_file says it shrank)
        pass
    return found


def _kernels(data) -> Archs:
    """The kernels in one image; Truncated for a damaged ELF image, PastBound past the bounds."""
    section = fatbin_section(data)
    return scan(data, section[0], section[0] + section[1]) if section else Archs()


def inspect_bytes(data) -> Archs:
    """The kernels in one image; a damaged ELF image counts as having none (see inspect_file); PastBound past the bounds."""
    try:
        return _kernels(data)
    except Truncated:
        return Archs()


def read_file(path) -> Archs:
    """The kernels in one file, read by offset (CUDA libraries run to hundreds of MB, and only their headers are
    read). Raises Truncated for a damaged ELF image, Shrank for a file cut short while it was read, PastBound for an
    image past the bounds (more fat-binary containers or entries than real libraries hold, or too long a read), OSError or
    ValueError for a file that cannot be read or is not a regular file (opened without waiting on a named pipe)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError("not a regular file")
        data = _File(fd, info.st_size)
        try:
            found = _kernels(data)
        except Truncated:
            if os.fstat(fd).st_size < info.st_size:
                raise Shrank from None
            raise
        if os.fstat(fd).st_size < info.st_size:  # cut short under us: what was read may be missing kernels
            raise Shrank
        return found
    finally:
        os.close(fd)
