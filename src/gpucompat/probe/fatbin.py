"""CUDA fat binaries read in pure Python (standard library, 3.8+): the SASS architectures and PTX
versions inside an ELF image's `.nv_fatbin` section.

Read the ELF section headers, take the `.nv_fatbin` section, and walk its fat-binary containers
(magic 0xBA55ED50, a 16-byte header, then entries of 64 to 112 bytes, each followed by its payload
padded to 8 bytes). Only entry headers are read, so compressed payloads (zstd or the older scheme)
cost nothing. Per entry: kind (1 PTX, 2 ELF/SASS), the SM number, the code version (for PTX, the
PTX ISA version, which names the toolkit that made it) and flags (0x100000: arch-specific
`sm_XYa`). Layout checked against cuobjdump --list-elf/--list-ptx on binaries built by nvcc 13
(tests/test_inspect.py). The probe reads a CUDA library it mapped with it (the library rung);
gpucompat's `inspect` (knowledge/fatbin.py) reads wheels and directories with it.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass, field

FATBIN_MAGIC = struct.pack("<I", 0xBA55ED50)
KIND_PTX, KIND_ELF, KIND_ELF_ALT = 1, 2, 0x10
ARCH_SPECIFIC = 0x100000
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


ELF64_HEADER, SECTION_HEADER = 64, struct.Struct("<IIQQQQI")  # name, type, flags, addr, offset, size, link


def fatbin_section(data) -> tuple[int, int] | None:
    """(offset, size) of .nv_fatbin in a little-endian ELF64 image; None if it is not one or
    has no such section; Truncated if its header, section table or that section lies past the end."""
    if len(data) < 6 or data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None
    if len(data) < ELF64_HEADER:
        raise Truncated
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if not shoff:
        return None  # no section table: nothing to find

    def header(index: int) -> tuple:
        at = shoff + index * shentsize
        if shentsize < SECTION_HEADER.size or at + SECTION_HEADER.size > len(data):
            raise Truncated
        return SECTION_HEADER.unpack_from(data, at)

    if shnum == 0 or shstrndx == 0xFFFF:  # more sections than the header fields hold: the real numbers sit in section 0
        first = header(0)
        shnum = shnum or first[5]
        shstrndx = first[6] if shstrndx == 0xFFFF else shstrndx
    if not 0 < shstrndx < shnum:
        return None  # no section names: nothing to find
    if shoff + shnum * shentsize > len(data):
        raise Truncated
    names_at = header(shstrndx)[4]
    for index in range(shnum):
        name, _type, _flags, _addr, offset, size, _link = header(index)
        start = names_at + name
        if start + len(b".nv_fatbin") < len(data) and data[start:start + 11] == b".nv_fatbin\0":
            if offset + size > len(data):
                raise Truncated
            return offset, size
    return None


def scan(data, start: int = 0, end: int | None = None) -> Archs:
    """Every fat-binary container between start and end. Reads only inside [start, end) and
    stops at whatever does not fit, so any bytes at all give a result, never an exception."""
    end = len(data) if end is None else max(0, min(end, len(data)))
    found = Archs()
    pos = data.find(FATBIN_MAGIC, max(0, start), end)
    while 0 <= pos and pos + 16 <= end:
        _magic, _version, header_size, fat_size = struct.unpack_from("<IHHQ", data, pos)
        entry, container_end = pos + header_size, min(pos + header_size + fat_size, end)
        while entry + 0x30 <= container_end:  # the entry fields read below end at 0x30
            kind, _, size, padded, _, _, _, code_version, sm = _ENTRY.unpack_from(data, entry)
            if size < 64:
                break
            flags, = struct.unpack_from("<Q", data, entry + 0x28)
            found.entries += 1
            if kind == KIND_PTX:
                found.ptx.add(f"compute_{sm}")
                found.ptx_isa.add(f"{code_version >> 16}.{code_version & 0xFFFF}")
            elif kind in (KIND_ELF, KIND_ELF_ALT):
                found.sass.add(f"sm_{sm}{'a' if flags & ARCH_SPECIFIC else ''}")
            entry += size + padded
        pos = data.find(FATBIN_MAGIC, max(container_end, pos + 4), end)
    return found


def _kernels(data) -> Archs:
    """The kernels in one image; Truncated for a damaged ELF image."""
    section = fatbin_section(data)
    return scan(data, section[0], section[0] + section[1]) if section else Archs()


def inspect_bytes(data) -> Archs:
    """The kernels in one image; a damaged ELF image counts as having none (see inspect_file)."""
    try:
        return _kernels(data)
    except Truncated:
        return Archs()


def read_file(path) -> Archs:
    """The kernels in one file, mapped rather than read (CUDA libraries run to hundreds of MB, and only
    their headers are read). Raises Truncated for a damaged ELF image, OSError or ValueError for a
    file that cannot be read or mapped."""
    with open(path, "rb") as handle:
        if handle.seek(0, 2) == 0:  # an empty file cannot be mapped
            return Archs()
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return _kernels(data)
