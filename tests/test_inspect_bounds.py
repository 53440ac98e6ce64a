"""Issue 36 item 2 and issue 41 item 5, what `inspect` reads: a wheel's libraries are checked against stated bounds before anything is
inflated and read as streams (knowledge/archive.py), by `inspect` and by `knowledge update` alike; a file on disk is
read in pieces, whatever its section table says; a library of far more fat-binary containers or entries than real ones
hold (millions of minimal entries: 58 s before) is refused at probe/fatbin.py's bounds.

The bombs are built here without ever holding what they inflate to: a deflate stream of repeated blocks, each
compressed once and ended with a full flush (which leaves no state behind, so the same bytes can be written again),
in a ZIP64 file written by hand. Each command runs through the real CLI inside a small wrapper that reports the
peak memory of its one child (ru_maxrss of RUSAGE_CHILDREN)."""

from __future__ import annotations

import io
import json
import os
import random
import struct
import subprocess
import sys
import zipfile
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import run_cli
from gpucompat.errors import UserError
from gpucompat.knowledge import archive
from gpucompat.knowledge.archive import FatbinStream, member_archs
from gpucompat.knowledge.fatbin import _shown, inspect
from gpucompat.probe import fatbin as probe_fatbin
from gpucompat.probe.fatbin import ARCH_SPECIFIC, KIND_ELF, KIND_PTX, PastBound, fatbin_section, inspect_bytes, read_file
from test_inspect import SYNTHETIC, fatbin_entry, synthetic_elf

MIB = 1 << 20
PEAK_BOUND = 300 * MIB  # what inspect may take, whatever a wheel inflates to (a plain run takes about 60 MB here)


# -- wheels written by hand -----------------------------------------------------------------------------------------

def segments_stream(segments: list[tuple[bytes, int]]) -> tuple[list[tuple[bytes, int]], int, int, int]:
    """Each (data, times) compressed once as a raw deflate block ended by a full flush (the last one ended), as
    (compressed, times); with the inflated size, the compressed size and the CRC-32 of the whole."""
    out, size, packed, crc = [], 0, 0, 0
    for number, (data, times) in enumerate(segments):
        last = number == len(segments) - 1
        if last and times > 1:  # the final block must end the stream: write it once, after the repeats
            return segments_stream([*segments[:-1], (data, times - 1), (data, 1)])
        compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
        block = compressor.compress(data) + compressor.flush(zlib.Z_FINISH if last else zlib.Z_FULL_FLUSH)
        out.append((block, times))
        size, packed = size + len(data) * times, packed + len(block) * times
        for _ in range(times):
            crc = zlib.crc32(data, crc)
    return out, size, packed, crc


def zip64_wheel(path: Path, members: dict[str, list[tuple[bytes, int]]], declared: dict[str, int] | None = None) -> Path:
    """A ZIP64 file whose members are deflated from repeated segments; `declared` forges a member's uncompressed size
    in the central directory (the local header keeps the true one)."""
    central = b""
    with open(path, "wb") as handle:
        for name, segments in members.items():
            blocks, size, packed, crc = segments_stream(segments)
            offset, raw = handle.tell(), name.encode()
            handle.write(struct.pack("<IHHHHHIIIHH", 0x04034B50, 45, 0, 8, 0, 0x21, crc, 0xFFFFFFFF, 0xFFFFFFFF, len(raw), 20)
                         + raw + struct.pack("<HHQQ", 1, 16, size, packed))
            for block, times in blocks:
                for _ in range(times):
                    handle.write(block)
            shown = (declared or {}).get(name, size)
            central += (struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 0x031E, 45, 0, 8, 0, 0x21, crc, 0xFFFFFFFF, 0xFFFFFFFF,
                                    len(raw), 28, 0, 0, 0, 0o644 << 16, 0xFFFFFFFF)
                        + raw + struct.pack("<HHQQQ", 1, 24, shown, packed, offset))
        at = handle.tell()
        handle.write(central)
        end64 = handle.tell()
        handle.write(struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, len(members), len(members), len(central), at))
        handle.write(struct.pack("<IIQI", 0x07064B50, 0, end64, 1))
        handle.write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(members), len(members), len(central), 0xFFFFFFFF, 0))
    return path


ENTRIES = fatbin_entry(KIND_ELF, 80) + fatbin_entry(KIND_ELF, 90, flags=ARCH_SPECIFIC) + fatbin_entry(KIND_PTX, 86, code_version=9 << 16)


def large_library(filler_mib: int) -> list[tuple[bytes, int]]:
    """An ELF image of about `filler_mib` MiB as ld lays one out: the header, .nv_fatbin (sm_80, sm_90a, compute_86)
    in its first MiB, then `filler_mib` MiB of code-like bytes (zeros with a 16 KiB random run per MiB: it compresses
    about 60:1, inside the bound), then .shstrtab and the section table at its end."""
    fatbin = struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(ENTRIES)) + ENTRIES
    names = b"\0.shstrtab\0.nv_fatbin\0"
    names_at = MIB + filler_mib * MIB
    shoff = names_at + len(names) + (-len(names) % 8)
    section = struct.Struct("<IIQQQQIIQQ")
    table = (section.pack(*[0] * 10) + section.pack(1, 3, 0, 0, names_at, len(names), 0, 0, 1, 0)
             + section.pack(11, 1, 2, 0, 4096, len(fatbin), 0, 0, 8, 0))
    header = b"\x7fELF\x02\x01\x01" + b"\0" * 9 + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, shoff, 0, 64, 0, 0, 64, 3, 1)
    first = header + b"\0" * (4096 - len(header)) + fatbin
    filler = bytes(MIB - 16384) + random.Random(36).randbytes(16384)
    last = names + b"\0" * (-len(names) % 8) + table
    return [(first + b"\0" * (MIB - len(first)), 1), (filler, filler_mib), (last, 1)]


def entry_flood(blocks: int, per_container: int = 0) -> tuple[list[tuple[bytes, int]], int]:
    """A library whose .nv_fatbin is `blocks` blocks of 16,000 minimal sm_80 entries (a 64-byte header, no payload) and
    one entry whose payload is 8 KiB of random bytes (so it compresses about 90:1, inside the ratio bound); all in one
    container, or in containers of `per_container` entries each. With the number of entries."""
    minimal = fatbin_entry(KIND_ELF, 80, payload=b"")
    noisy = fatbin_entry(KIND_ELF, 80, payload=random.Random(41).randbytes(8 << 10))
    if per_container:
        one = struct.pack("<IHHQ", 0xBA55ED50, 1, 16, 64 * per_container) + minimal * per_container
        block = one * (16000 // per_container) + struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(noisy)) + noisy
        outer = b""
    else:
        block = minimal * 16000 + noisy
        outer = struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(block) * blocks)
    fatbin = len(outer) + len(block) * blocks
    names = b"\0.shstrtab\0.nv_fatbin\0"
    names_at = 4096 + fatbin
    shoff = names_at + len(names) + (-(names_at + len(names)) % 8)
    section = struct.Struct("<IIQQQQIIQQ")
    table = (section.pack(*[0] * 10) + section.pack(1, 3, 0, 0, names_at, len(names), 0, 0, 1, 0)
             + section.pack(11, 1, 2, 0, 4096, fatbin, 0, 0, 8, 0))
    header = b"\x7fELF\x02\x01\x01" + b"\0" * 9 + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, shoff, 0, 64, 0, 0, 64, 3, 1)
    first = header + b"\0" * (4096 - len(header)) + outer
    last = names + b"\0" * (shoff - names_at - len(names)) + table
    return [(first, 1), (block, blocks), (last, 1)], blocks * (16000 // (per_container or 16000) * (per_container or 16000) + 1)


def measured(*args: str) -> tuple[subprocess.CompletedProcess, int]:
    """The CLI run as a user runs it, and its peak resident memory in bytes."""
    wrapper = ("import resource, subprocess, sys; code = subprocess.run(sys.argv[1:]).returncode; "
               "print('peak', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(code)")
    proc = subprocess.run([sys.executable, "-c", wrapper, sys.executable, "-m", "gpucompat", *args],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "NO_COLOR": "1"}, check=False)
    *said, peak = proc.stderr.rstrip("\n").split("\n")
    proc.stderr = "\n".join(said) + ("\n" if said else "")
    return proc, int(peak.split()[1]) * 1024


def refused(proc: subprocess.CompletedProcess) -> str:
    """The one sentence of a refusal: exit 2, one line, no traceback."""
    assert proc.returncode == 2, proc.stderr
    text = proc.stderr.strip()
    assert text.startswith("error:") and "\n" not in text and "Traceback" not in text and text.endswith("."), text
    return text


# -- inspect ------------------------------------------------------------------------------------------------------

def test_a_member_inflating_to_4_gib_of_zeros_is_refused_before_it_is_read(tmp_path):
    """The issue's wheel: about 4 MB inflating to 4 GiB reached 6.4 GB of memory in 30 s."""
    wheel = zip64_wheel(tmp_path / "bomb-1.0-py3-none-any.whl", {"bomb/__init__.py": [(b"", 1)], "bomb/libbomb.so": [(bytes(MIB), 4096)]})
    assert wheel.stat().st_size < 5 * MIB
    proc, peak = measured("inspect", str(wheel))
    text = refused(proc)
    assert "'bomb/libbomb.so' inflates from 4.1 MiB to 4.0 GiB (1,011:1), past the 100:1 that no real library comes near" in text
    assert text.endswith("so it is a zip bomb; nothing of it was read.")
    assert peak < PEAK_BOUND


def test_a_member_past_the_size_bound_is_refused_whatever_its_ratio(tmp_path):
    """The central directory declares 5 GiB for a member that is a few bytes: the declared size alone refuses it."""
    wheel = zip64_wheel(tmp_path / "big-1.0-py3-none-any.whl", {"big/libhuge.so.1": [(SYNTHETIC, 1)]}, {"big/libhuge.so.1": 5 << 30})
    text = refused(run_cli("inspect", str(wheel)))
    assert text == (f"error: {_shown(str(wheel))}: 'big/libhuge.so.1' inflates to 5.0 GiB, past the 4.0 GiB that one library may take "
                    "(libtorch_cuda.so, the largest CUDA library wheels carry, is about 2 GiB); nothing of it was read.")


def test_many_small_members_that_together_are_a_bomb_are_refused(tmp_path):
    """Each member stays under the 64 MiB from which a ratio counts; together they inflate 1,000:1."""
    members = {f"many/lib{n}.so": [(bytes(MIB), 48)] for n in range(8)}
    text = refused(run_cli("inspect", str(zip64_wheel(tmp_path / "many-1.0-py3-none-any.whl", members))))
    assert "its 8 libraries together inflate from 388.8 KiB to 384.0 MiB (1,011:1), past the 100:1" in text


def test_a_member_that_inflates_past_its_declared_size_is_cut_there(tmp_path):
    """A central directory that declares less than the member holds: zipfile inflates no further than declared, and the
    CRC-32 of what was inflated does not match, so the wheel is one sentence (no memory past the declared size)."""
    wheel = zip64_wheel(tmp_path / "liar-1.0-py3-none-any.whl", {"liar/libliar.so": large_library(64)}, {"liar/libliar.so": 2 * MIB})
    proc, peak = measured("inspect", str(wheel))
    assert refused(proc) == f"error: {_shown(str(wheel))} is not a readable wheel (zip) file."
    assert peak < PEAK_BOUND


def test_a_large_library_is_streamed_in_bounded_memory_and_read_as_before(tmp_path):
    """1 GiB of library, 60:1 (inside the bound): read, with its kernels found past a GiB of other bytes, in a small
    fraction of its size (the reader before held it whole: over 1 GiB)."""
    wheel = zip64_wheel(tmp_path / "large-1.0-py3-none-any.whl", {"large/liblarge.so": large_library(1024)})
    proc, peak = measured("inspect", str(wheel), "--json")
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout)
    assert (found["sass"], found["ptx"], found["ptx_isa"]) == (["sm_80", "sm_90a"], ["compute_86"], ["9.0"])
    assert found["files"] == [{"file": "large/liblarge.so", "sass": ["sm_80", "sm_90a"], "ptx": ["compute_86"], "entries": 3}]
    assert peak < PEAK_BOUND


def test_a_file_whose_section_table_says_a_gib_is_read_in_pieces(tmp_path):
    """A sparse file (no disk) whose header gives 16,000 sections of 65,535 bytes: the table was read in one piece
    (1 GiB of memory); now in pieces of 1 MiB, and the file has no kernels."""
    library = tmp_path / "libsparse.so"
    header = b"\x7fELF\x02\x01\x01" + b"\0" * 9 + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, 64, 0, 64, 0, 0, 65535, 16000, 1)
    with open(library, "wb") as handle:
        handle.write(header)
        handle.truncate(64 + 16000 * 65535)
    proc, peak = measured("inspect", str(library), "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["files"] == [] and peak < PEAK_BOUND


# -- bounded in time: entries and containers (issue 41 item 5) -----------------------------------------------------

@pytest.mark.parametrize(("per_container", "sentence"), [
    (0, "has 1,001 entries in one fat-binary container, past the 1,000 one may hold (real CUDA libraries hold at most 16)"),
    (1, "has 30,001 fat-binary containers, past the 30,000 one library may hold (real CUDA libraries hold at most 2,782)"),
])
def test_a_wheel_of_millions_of_minimal_entries_is_refused_at_the_bounds(tmp_path, per_container, sentence):
    """The issue's wheel: about 15 MB, inside every size bound, of 18 million minimal entries (in one container, or one
    in each), read for 58 s (one a container) and 22 s (all in one). Now refused once the bound is passed, in about
    3 s on this machine (benchmarks/inspect_flood.py; no timing asserted here)."""
    segments, entries = entry_flood(1150, per_container)
    wheel = zip64_wheel(tmp_path / "flood-1.0-py3-none-any.whl", {"flood/libflood.so": segments})
    assert wheel.stat().st_size < 20 * MIB and entries > 18_000_000
    archive.check_members("flood", zipfile.ZipFile(wheel).infolist(), "")  # inside the size and ratio bounds
    proc, peak = measured("inspect", str(wheel))
    assert refused(proc) == (f"error: {_shown(str(wheel))}: 'flood/libflood.so' {sentence}, so it is no real CUDA library; "
                             "none of its kernels are listed.")
    assert peak < PEAK_BOUND


def test_a_library_on_disk_past_the_entries_of_an_image_is_refused_and_skipped_in_a_directory(tmp_path):
    """4,000 containers of 16 entries (each within its bounds): 64,000 entries in all, past 60,000."""
    library = tmp_path / "libmany.so"
    container = struct.pack("<IHHQ", 0xBA55ED50, 1, 16, 16 * len(fatbin_entry(KIND_ELF, 80))) + fatbin_entry(KIND_ELF, 80) * 16
    library.write_bytes(synthetic_elf_of_containers(container * 4000))
    with pytest.raises(PastBound):
        read_file(library)  # the probe's library rung names it unread, as it does a damaged file
    text = refused(run_cli("inspect", str(library)))
    assert text == (f"error: {_shown(str(library))} has 60,001 fat-binary entries, past the 60,000 one library may hold "
                    "(real CUDA libraries hold at most 5,737), so it is no real CUDA library; none of its kernels are listed.")
    found = json.loads(run_cli("inspect", str(tmp_path), "--json", check=0).stdout)
    assert found["files"] == [] and found["skipped"] == [{"file": str(library), "why": "past a bound: " + text.split(" ", 2)[2][:-len("; none of its kernels are listed.")]}]


def synthetic_elf_of_containers(fatbin: bytes) -> bytes:
    """An ELF image as test_inspect.synthetic_elf lays one out, with these bytes (containers) as its .nv_fatbin."""
    names = b"\0.shstrtab\0.nv_fatbin\0"
    section = struct.Struct("<IIQQQQIIQQ")
    shoff = 4096 + len(fatbin) + (-len(fatbin) % 8)
    table = (section.pack(*[0] * 10) + section.pack(1, 3, 0, 0, 64, len(names), 0, 0, 1, 0)
             + section.pack(11, 1, 2, 0, 4096, len(fatbin), 0, 0, 8, 0))
    header = b"\x7fELF\x02\x01\x01" + b"\0" * 9 + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, shoff, 0, 64, 0, 0, 64, 3, 1)
    body = header + names + b"\0" * (4096 - len(header) - len(names)) + fatbin
    return body + b"\0" * (shoff - len(body)) + table


def test_a_library_past_the_time_one_may_take_is_refused(tmp_path, monkeypatch):
    """The time bound, with the budget at 0 s (a real one reads in seconds; 120 s is the bound): the streamed reader and
    the reader of files both stop, with one sentence."""
    monkeypatch.setattr(probe_fatbin, "MAX_SECONDS", 0)
    wheel = zip64_wheel(tmp_path / "slow-1.0-py3-none-any.whl", {"slow/libslow.so": large_library(4)})
    with pytest.raises(UserError) as caught:
        inspect(str(wheel))
    assert str(caught.value) == (f"{_shown(str(wheel))}: 'slow/libslow.so' was still being read after 0 s, the time one library may "
                                 "take (the slowest real CUDA library, libtorch_cuda.so, takes under 20 s); none of its kernels are listed.")
    many = tmp_path / "libmany.so"
    many.write_bytes(synthetic_elf_of_containers((struct.pack("<IHHQ", 0xBA55ED50, 1, 16, 64) + fatbin_entry(KIND_ELF, 80, payload=b"")) * 300))
    with pytest.raises(PastBound, match="was still being read after 0 s"):
        read_file(many)


def test_knowledge_updates_reader_refuses_the_same_flood(tmp_path):
    from gpucompat.knowledge.pyindex import Index, IndexFile, wheel_archs

    segments, _entries = entry_flood(1150)
    wheel = zip64_wheel(tmp_path / "torch-2.99.0-cp312-cp312-manylinux_2_28_x86_64.whl", {"torch/lib/libtorch_cuda.so": segments})
    with pytest.raises(UserError) as caught:
        wheel_archs(Index(wheelhouse=str(tmp_path)), IndexFile(wheel.name, str(wheel), wheel.stat().st_size), lambda name: True)
    assert str(caught.value) == (f"{wheel.name} from the wheelhouse {tmp_path}: 'torch/lib/libtorch_cuda.so' has 1,001 entries in one "
                                 "fat-binary container, past the 1,000 one may hold (real CUDA libraries hold at most 16), so it is "
                                 "no real CUDA library; nothing was changed.")


# -- knowledge update reads wheels through the same check -------------------------------------------------------------

def test_knowledge_updates_reader_refuses_the_same_bomb(tmp_path):
    from gpucompat.knowledge.pyindex import Index, IndexFile, wheel_archs

    wheel = zip64_wheel(tmp_path / "torch-2.99.0-cp312-cp312-manylinux_2_28_x86_64.whl",
                        {"torch/lib/libtorch_cuda.so": [(bytes(MIB), 1024)]})
    index = Index(wheelhouse=str(tmp_path))
    with pytest.raises(UserError) as caught:
        wheel_archs(index, IndexFile(wheel.name, str(wheel), wheel.stat().st_size), lambda name: True)
    assert str(caught.value) == (f"{wheel.name} from the wheelhouse {tmp_path}: 'torch/lib/libtorch_cuda.so' inflates from 1.0 MiB "
                                 "to 1.0 GiB (1,011:1), past the 100:1 that no real library comes near (they compress at most 7:1 "
                                 "above 16 MiB), so it is a zip bomb; nothing was changed.")
    assert index.fetched < 64 << 10  # the central directory, not the member


# -- the streamed reader is the probe's reader ------------------------------------------------------------------------

def streamed(image: bytes) -> tuple:
    found, _how = member_archs(lambda: io.BytesIO(image), len(image))
    return found.sass, found.ptx, found.ptx_isa, found.entries


def whole(image: bytes) -> tuple:
    found = inspect_bytes(image)
    return found.sass, found.ptx, found.ptx_isa, found.entries


@pytest.fixture
def small_windows(monkeypatch):
    """Kept bytes and reads far smaller than an image, so every path of _Inflated is taken on a few hundred bytes."""
    for name, value in {"HEAD": 64, "TAIL": 96, "WINDOW": 160, "CHUNK": 37, "BLOCK": 48}.items():
        monkeypatch.setattr(archive._Inflated, name, value)


def lld_layout(stray: bytes = b"") -> bytes:
    """.nv_fatbin, then .shstrtab, then a large .strtab before the section table (as lld lays out xla_cuda_plugin.so),
    with `stray` bytes in front of .nv_fatbin (code that holds the container magic as an immediate)."""
    fatbin = struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(ENTRIES)) + ENTRIES
    names = b"\0.shstrtab\0.nv_fatbin\0.strtab\0"
    fatbin_at = 64 + len(stray) + (-(64 + len(stray)) % 8)
    names_at = fatbin_at + len(fatbin)
    strtab_at, strtab = names_at + len(names), b"\0" * 3000
    shoff = strtab_at + len(strtab) + (-(strtab_at + len(strtab)) % 8)
    section = struct.Struct("<IIQQQQIIQQ")
    table = (section.pack(*[0] * 10) + section.pack(1, 3, 0, 0, names_at, len(names), 0, 0, 1, 0)
             + section.pack(11, 1, 2, 0, fatbin_at, len(fatbin), 0, 0, 8, 0) + section.pack(22, 3, 0, 0, strtab_at, len(strtab), 0, 0, 1, 0))
    header = b"\x7fELF\x02\x01\x01" + b"\0" * 9 + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, shoff, 0, 64, 0, 0, 64, 4, 1)
    body = header + stray + b"\0" * (fatbin_at - 64 - len(stray)) + fatbin + names + strtab
    return body + b"\0" * (shoff - len(body)) + table


def test_names_before_a_large_strtab_and_a_stray_magic_are_read_as_the_probe_reads_them(small_windows):
    plain = lld_layout()
    assert streamed(plain) == whole(plain) == ({"sm_80", "sm_90a"}, {"compute_86"}, {"9.0"}, 3)
    # `cmp $0xba55ed50, %eax` before the section: its "container" claims 2**60 bytes, carrying the first pass's walk
    # over the real one; the section is then walked again from its start, as the probe walks it
    stray = b"\x3d" + struct.pack("<IHHQ", 0xBA55ED50, 1, 16, 1 << 60)
    image = lld_layout(stray)
    stream = FatbinStream()
    stream.feed(image)
    start, size = fatbin_section(image)
    assert stream.within(start, start + size) is None
    found, how = member_archs(lambda: io.BytesIO(image), len(image))
    assert (found.sass, found.ptx, found.entries) == ({"sm_80", "sm_90a"}, {"compute_86"}, 3) and "passes" in how


def test_a_container_of_no_length_does_not_stop_the_walk():
    """A magic followed by a header and a size of 0 once made the walk find the same container for ever."""
    stream = FatbinStream()
    stream.feed(struct.pack("<IHHQ", 0xBA55ED50, 1, 0, 0) * 3 + b"\0" * 64)
    assert [offset for offset, _end, _archs in stream.containers] == [0, 16, 32]


def test_the_names_an_image_gives_stay_few():
    """Entries naming no GPU (an SM past 999, a PTX ISA past 99.99) count, but add no name: memory stays bounded."""
    entries = b"".join(fatbin_entry(KIND_ELF, 1000 + n) + fatbin_entry(KIND_PTX, 80, code_version=(200 + n) << 16) for n in range(50))
    found = inspect_bytes(synthetic_elf(entries))
    assert (found.sass, found.ptx, found.ptx_isa, found.entries) == (set(), {"compute_80"}, set(), 100)


IMAGES = [SYNTHETIC, lld_layout(), lld_layout(b"\x3d" + struct.pack("<IHHQ", 0xBA55ED50, 1, 16, 5000))]
# where the reader looks: ELF header fields, the section table at the end, the container in each image (and the stray one)
HOT = st.sampled_from([0x28, 0x3A, 0x3C, 0x3E, -192, -128, -64, 64, 65, 86, 88, 0x5C, 0x60]) | st.integers(0, 4000)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.sampled_from(IMAGES), st.floats(0, 1), st.lists(st.tuples(HOT, st.binary(min_size=1, max_size=8)), max_size=4))
def test_the_streamed_reader_agrees_with_the_probes_on_damaged_images(small_windows, base, kept, patches):
    image = bytearray(base[:round(kept * len(base))])
    for at, patch in patches:
        at %= max(1, len(image))  # a negative place counts from the end
        image[at:at + len(patch)] = patch
    assert streamed(bytes(image)) == whole(bytes(image))
