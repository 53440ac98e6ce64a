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
    assert {"sm_75", "sm_80", "sm_90a", "sm_103a"} <= set(directory["sass"]) and len(directory["files"]) == 3
    wheel = tmp_path / "fake_cuda_pkg-1.0-py3-none-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.write(libraries["compressed"], "fake_cuda_pkg/lib/libkernels.so")
        archive.writestr("fake_cuda_pkg/__init__.py", "")
    from_wheel = inspect(str(wheel))
    assert from_wheel["sass"] == ["sm_80", "sm_86"] and from_wheel["ptx"] == ["compute_86"]
    data = json.loads(run_cli("inspect", str(libraries["blackwell"]), "--json", check=0).stdout)
    assert data["sass"] == ["sm_100", "sm_103a", "sm_120a"] and data["ptx"] == ["compute_80"]


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
