"""`inspect` against cuobjdump, on libraries nvcc builds here for chosen architecture sets."""

import json
import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from conftest import run_cli
from gpucompat.errors import UserError
from gpucompat.knowledge.fatbin import inspect

NVCC = shutil.which("nvcc")


def cuobjdump() -> str | None:
    try:
        import nvidia  # the nvidia-cuda-cuobjdump wheel (test extra) puts it under nvidia/cu13/bin
    except ImportError:
        return shutil.which("cuobjdump")
    for base in nvidia.__path__:
        for candidate in Path(base).glob("cu*/bin/cuobjdump"):
            candidate.chmod(0o755)
            return str(candidate)
    return shutil.which("cuobjdump")


KERNEL = """
__global__ void add(float *a, const float *b, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] += b[i]; }
extern "C" void launch(float *a, const float *b, int n) { add<<<(n + 255) / 256, 256>>>(a, b, n); }
"""
ARCH_SETS = {
    "plain": ["-gencode", "arch=compute_75,code=sm_75", "-gencode", "arch=compute_90a,code=sm_90a",
              "-gencode", "arch=compute_90,code=compute_90", "-gencode", "arch=compute_120,code=sm_120"],
    "compressed": ["-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_86,code=[sm_86,compute_86]", "-Xfatbin", "-compress-all"],
    "blackwell": ["-gencode", "arch=compute_100f,code=sm_100f", "-gencode", "arch=compute_103a,code=sm_103a",
                  "-gencode", "arch=compute_120a,code=sm_120a", "-gencode", "arch=compute_80,code=compute_80"],
    # PTX that is not forward compatible: arch-specific (only CC 9.0) and family-specific (CC 11.x)
    "specific_ptx": ["-gencode", "arch=compute_90a,code=compute_90a", "-gencode", "arch=compute_110f,code=[sm_110f,compute_110f]",
                     "-gencode", "arch=compute_80,code=compute_80"],
}


@pytest.fixture(scope="module")
def libraries(tmp_path_factory):
    if not NVCC:
        pytest.skip("nvcc is not on PATH: no CUDA binaries can be built here to check inspect against")
    work = tmp_path_factory.mktemp("cuda")
    (work / "k.cu").write_text(KERNEL)
    built = {}
    for name, flags in ARCH_SETS.items():
        library = work / f"lib{name}.so"
        subprocess.run([NVCC, "-shared", "-Xcompiler", "-fPIC", "-o", str(library), str(work / "k.cu"), *flags], check=True, capture_output=True)
        built[name] = library
    return built


def listed(tool: str, flag: str, library: Path) -> set[str]:
    text = subprocess.run([tool, flag, str(library)], capture_output=True, text=True, check=True).stdout
    return {m.group(1) for m in re.finditer(r"\.(sm_\d+[af]?)\.(?:cubin|ptx)", text)}


@pytest.mark.parametrize("name", sorted(ARCH_SETS))
def test_inspect_agrees_with_cuobjdump(libraries, name):
    tool = cuobjdump()
    if not tool:
        pytest.skip("cuobjdump is not available (pip install nvidia-cuda-cuobjdump, part of the test extra)")
    found = inspect(str(libraries[name]))
    assert set(found["sass"]) == listed(tool, "--list-elf", libraries[name])
    assert {p.replace("compute_", "sm_") for p in found["ptx"]} == listed(tool, "--list-ptx", libraries[name])
    assert found["ptx_isa"] == ["9.0"]  # nvcc 13.0 writes PTX ISA 9.0


def test_directory_wheel_and_cli(libraries, tmp_path):
    directory = inspect(str(libraries["plain"].parent))
    assert {"sm_75", "sm_80", "sm_90a", "sm_103a"} <= set(directory["sass"]) and len(directory["files"]) == len(ARCH_SETS)
    wheel = tmp_path / "fake_cuda_pkg-1.0-py3-none-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.write(libraries["compressed"], "fake_cuda_pkg/lib/libkernels.so")
        archive.writestr("fake_cuda_pkg/__init__.py", "")
    from_wheel = inspect(str(wheel))
    assert from_wheel["sass"] == ["sm_80", "sm_86"] and from_wheel["ptx"] == ["compute_86"]
    data = json.loads(run_cli("inspect", str(libraries["blackwell"]), "--json", check=0).stdout)
    assert data["sass"] == ["sm_100", "sm_103a", "sm_120a"] and data["ptx"] == ["compute_80"]
    specific = inspect(str(libraries["specific_ptx"]))  # compute_90a must not read as compute_90, which every later GPU could JIT
    assert specific["sass"] == ["sm_110"] and specific["ptx"] == ["compute_80", "compute_90a", "compute_110f"]


def test_no_kernels_and_bad_targets(tmp_path):
    plain = tmp_path / "notes.so"
    plain.write_bytes(b"not an ELF at all")
    assert inspect(str(plain))["files"] == []
    with pytest.raises(UserError, match="no distribution of that name"):
        inspect("gpucompat-no-such-distribution")
    with pytest.raises(UserError, match="neither a file"):
        inspect(str(tmp_path / "missing" / "lib.so"))
    bad = tmp_path / "broken.whl"
    bad.write_text("zip? no")
    with pytest.raises(UserError, match="not a readable wheel"):
        inspect(str(bad))


# -- damaged and hostile input: only a result or one UserError sentence, never another exception --

import struct  # noqa: E402

from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

from gpucompat.knowledge.fatbin import ARCH_SPECIFIC, KIND_ELF, KIND_PTX, inspect_bytes  # noqa: E402
from gpucompat.probe.fatbin import FAMILY_SPECIFIC  # noqa: E402

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def fatbin_entry(kind: int, sm: int, code_version: int = 0, flags: int = 0, payload: bytes = b"\0" * 24) -> bytes:
    padded = payload + b"\0" * (-len(payload) % 8)
    header = struct.pack("<HHIIIIIII", kind, 0x0101, 64, len(padded), 0, len(payload), 0, code_version, sm)
    header += b"\0" * (0x28 - len(header)) + struct.pack("<Q", flags)
    return header + b"\0" * (64 - len(header)) + padded


def synthetic_elf(entries: bytes | None = None) -> bytes:
    """A little-endian ELF64 image with .shstrtab and a .nv_fatbin holding these fatbin_entry()s (by default
    sm_80, sm_90a and compute_86), laid out as nvcc writes it."""
    if entries is None:
        entries = (fatbin_entry(KIND_ELF, 80) + fatbin_entry(KIND_ELF, 90, flags=ARCH_SPECIFIC)
                   + fatbin_entry(KIND_PTX, 86, code_version=(9 << 16) | 0))
    fatbin = struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(entries)) + entries
    names = b"\0.shstrtab\0.nv_fatbin\0"
    names_at, fatbin_at = 64, 64 + len(names)
    shoff = fatbin_at + len(fatbin) + (-(fatbin_at + len(fatbin)) % 8)
    section = struct.Struct("<IIQQQQIIQQ")
    table = (section.pack(*[0] * 10) + section.pack(1, 3, 0, 0, names_at, len(names), 0, 0, 1, 0)
             + section.pack(11, 1, 2, 0, fatbin_at, len(fatbin), 0, 0, 8, 0))
    header = b"\x7fELF\x02\x01\x01" + b"\0" * 9 + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, shoff, 0, 64, 0, 0, 64, 3, 1)
    body = header + names + fatbin
    return body + b"\0" * (shoff - len(body)) + table


SYNTHETIC = synthetic_elf()
# where the parser reads: ELF header fields, the section table, the fat-binary container and entry headers
HOT = [0x28, 0x3A, 0x3C, 0x3E, SYNTHETIC.index(b"\x50\xed\x55\xba"), len(SYNTHETIC) - 192, len(SYNTHETIC) - 64]


def test_a_synthetic_elf_is_read_like_nvcc_output():
    found = inspect_bytes(SYNTHETIC)
    assert (found.sass, found.ptx, found.ptx_isa, found.entries) == ({"sm_80", "sm_90a"}, {"compute_86"}, {"9.0"}, 3)


def test_arch_and_family_specific_ptx_keep_their_suffix():
    """Flags as nvcc 13.0 writes them: PTX compute_90a (0x108011), compute_110f (0x208011); SASS sm_110f reads as sm_110."""
    found = inspect_bytes(synthetic_elf(fatbin_entry(KIND_PTX, 90, code_version=9 << 16, flags=ARCH_SPECIFIC)
                                        + fatbin_entry(KIND_PTX, 110, code_version=9 << 16, flags=FAMILY_SPECIFIC)
                                        + fatbin_entry(KIND_ELF, 110, flags=FAMILY_SPECIFIC)))
    assert (found.sass, found.ptx) == ({"sm_110"}, {"compute_90a", "compute_110f"})


def result_or_user_error(data: bytes, where: Path) -> None:
    """inspect_bytes never raises; inspect() of the same bytes as a file gives a result or a UserError."""
    inspect_bytes(data)
    where.write_bytes(data)
    try:
        result = inspect(str(where))
    except UserError as exc:
        assert "truncated or not an ELF file" in str(exc) and "\n" not in str(exc)
    else:
        assert set(result) == {"target", "sass", "ptx", "ptx_isa", "files"}


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz") / "lib.so"


@FUZZ
@given(st.binary(max_size=2048), st.booleans())
def test_random_bytes_are_no_kernels_or_one_sentence(scratch, data, elf_magic):
    result_or_user_error((b"\x7fELF\x02\x01" if elf_magic else b"") + data, scratch)


@FUZZ
@given(st.data())
def test_truncated_and_mutated_synthetic_elf(scratch, data):
    image = bytearray(SYNTHETIC[:data.draw(st.integers(0, len(SYNTHETIC)), label="cut")])
    for _ in range(data.draw(st.integers(0, 4), label="mutations")):
        if not image:
            break
        at = data.draw(st.sampled_from([p for p in HOT if p < len(image)] or [0]) | st.integers(0, len(image) - 1), label="at")
        patch = data.draw(st.binary(min_size=1, max_size=8), label="bytes")
        image[at:at + len(patch)] = patch
    result_or_user_error(bytes(image), scratch)


@FUZZ
@given(st.data())
def test_truncated_and_mutated_nvcc_library(libraries, scratch, data):
    real = libraries["plain"].read_bytes()
    shoff, = struct.unpack_from("<Q", real, 0x28)
    image = bytearray(real[:data.draw(st.integers(0, len(real)), label="cut")])
    if image and data.draw(st.booleans(), label="mutate"):
        at = data.draw(st.sampled_from([0x28, 0x3A, 0x3C, 0x3E, min(shoff + 0x18, len(real) - 8)]) | st.integers(0, len(image) - 1), label="at")
        patch = data.draw(st.binary(min_size=1, max_size=8), label="bytes")
        image[at:at + len(patch)] = patch
    result_or_user_error(bytes(image), scratch)


def test_a_truncated_library_is_one_sentence_on_the_command_line(tmp_path):
    cut = tmp_path / "libcut.so"
    cut.write_bytes(SYNTHETIC[:100])  # the header survives; the section table it points to does not
    proc = run_cli("inspect", str(cut))
    assert proc.returncode == 2 and proc.stderr.startswith("error:") and "truncated or not an ELF file" in proc.stderr
    assert "Traceback" not in proc.stderr and "struct" not in proc.stderr
    in_a_directory = inspect(str(tmp_path))  # among other files it just has no kernels
    assert in_a_directory["files"] == []


@pytest.mark.parametrize("target", ["", " ", "\t\n"])
def test_an_empty_target_is_refused_not_the_working_directory(target):
    with pytest.raises(UserError, match="the target is empty"):
        inspect(target)


def test_an_overlong_target_is_one_sentence():
    with pytest.raises(UserError, match="not a usable path"):
        inspect("a" * 5000)
