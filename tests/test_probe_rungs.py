"""The probe's compute rungs, what it records as loaded, and the environment it records.

Every test runs the real probe.pyz (a subprocess with this interpreter) or its real parsing
and NVRTC functions. This machine has no GPU: each rung must say why it could not run.
The ladder itself is driven by a tiny fake `cupy` package put on PYTHONPATH, because
nothing else here gets past the device stage.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import have_torch
from gpucompat.analysis import classify
from gpucompat.model import Observation, ResolvedStack, Stack
from gpucompat.probe import adapter_cuda_runtime, cuda_ctypes, ladder, records
from gpucompat.probe_build import probe_pyz


def run_probe(tmp_path, framework, stages="import,device,compute", env=None, name=None):
    result = tmp_path / f"{name or framework}.json"
    proc = subprocess.run([sys.executable, str(probe_pyz()), "--framework", framework, "--result", str(result), "--stages", stages],
                          capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})})
    return proc, json.loads(result.read_text())


def rungs(record):
    return {r["name"]: r for r in record["facts"]["rungs"]}


# --- /proc/self/maps ------------------------------------------------------------------------

# Lines as /proc/<pid>/maps writes them (a PyTorch+CUDA process, shortened): several mappings
# per library, anonymous and special regions, a path with a space, a deleted file.
MAPS = """\
55d0c8a00000-55d0c8a2b000 r--p 00000000 fd:01 1835123                    /usr/bin/python3.12
55d0c9e1d000-55d0ca1f6000 rw-p 00000000 00:00 0                          [heap]
7f2a10000000-7f2a10021000 rw-p 00000000 00:00 0
7f2a3c200000-7f2a3c4a1000 r--p 00000000 fd:01 2623451                    /usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04
7f2a3c4a1000-7f2a3d0e2000 r-xp 002a1000 fd:01 2623451                    /usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04
7f2a3d0e2000-7f2a3d9c5000 r--p 00ee2000 fd:01 2623451                    /usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04
7f2a3e000000-7f2a3e1f0000 r-xp 00000000 fd:01 2623470                    /usr/lib/x86_64-linux-gnu/libnvidia-ptxjitcompiler.so.580.159.04
7f2a40000000-7f2a40080000 r--p 00000000 fd:01 3145802                    /opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcudart.so.13
7f2a40080000-7f2a400e8000 r-xp 00080000 fd:01 3145802                    /opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcudart.so.13
7f2a41000000-7f2a47a00000 r-xp 00000000 fd:01 3145811                    /opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcublasLt.so.13
7f2a48000000-7f2a48700000 r-xp 00000000 fd:01 3145809                    /opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcublas.so.13
7f2a49000000-7f2a49200000 r-xp 00000000 fd:01 3145830                    /opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib/libcudnn.so.9
7f2a49400000-7f2a49a00000 r-xp 00000000 fd:01 3145833                    /opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib/libcudnn_graph.so.9
7f2a4a000000-7f2a4c000000 r-xp 00000000 fd:01 3145840                    /opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib/libnvrtc.so.13
7f2a4c000000-7f2a4c600000 r-xp 00000000 fd:01 3145841                    /opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib/libnvrtc-builtins.so.13.0
7f2a4d000000-7f2a4e000000 r-xp 00000000 fd:01 3145845                    /opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib/libnvJitLink.so.13
7f2a4f000000-7f2a4f100000 r-xp 00000000 fd:01 3145850                    /opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcufft.so.12
7f2a50000000-7f2a50010000 r-xp 00000000 fd:01 4194305                    /usr/local/cuda-12.4/lib64/libcudart.so.12.4.127
7f2a51000000-7f2a51010000 r-xp 00000000 fd:01 4194306                    /home/a user/my env/lib/libcudart.so
7f2a52000000-7f2a52010000 r-xp 00000000 fd:01 4194307                    /tmp/old/libcudart.so.11.0 (deleted)
7f2a53000000-7f2a53100000 r-xp 00000000 fd:01 1835201                    /usr/lib/x86_64-linux-gnu/libc.so.6
7f2a54000000-7f2a54010000 r-xp 00000000 fd:01 1835290                    /usr/lib/x86_64-linux-gnu/libcudadebugger.so.1
7ffd2b3fe000-7ffd2b41f000 rw-p 00000000 00:00 0                          [stack]
7ffd2b5e4000-7ffd2b5e8000 r--p 00000000 00:00 0                          [vvar]
"""


def test_parse_maps_names_each_cuda_library_once_with_the_version_in_its_file_name():
    site = "/opt/torch/.venv/lib/python3.12/site-packages/nvidia"
    assert records.parse_maps(MAPS) == [
        {"name": "libcuda", "path": "/usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04", "version": "580.159.04"},
        {"name": "libnvidia-ptxjitcompiler", "path": "/usr/lib/x86_64-linux-gnu/libnvidia-ptxjitcompiler.so.580.159.04",
         "version": "580.159.04"},
        {"name": "libcudart", "path": f"{site}/cu13/lib/libcudart.so.13", "version": "13"},
        {"name": "libcublasLt", "path": f"{site}/cu13/lib/libcublasLt.so.13", "version": "13"},
        {"name": "libcublas", "path": f"{site}/cu13/lib/libcublas.so.13", "version": "13"},
        {"name": "libcudnn", "path": f"{site}/cudnn/lib/libcudnn.so.9", "version": "9"},
        {"name": "libcudnn_graph", "path": f"{site}/cudnn/lib/libcudnn_graph.so.9", "version": "9"},
        {"name": "libnvrtc", "path": f"{site}/cu13/lib/libnvrtc.so.13", "version": "13"},
        {"name": "libnvrtc-builtins", "path": f"{site}/cu13/lib/libnvrtc-builtins.so.13.0", "version": "13.0"},
        {"name": "libnvJitLink", "path": f"{site}/cu13/lib/libnvJitLink.so.13", "version": "13"},
        {"name": "libcufft", "path": f"{site}/cu13/lib/libcufft.so.12", "version": "12"},  # the library rungs' libraries too
        {"name": "libcudart", "path": "/usr/local/cuda-12.4/lib64/libcudart.so.12.4.127", "version": "12.4.127"},
        {"name": "libcudart", "path": "/home/a user/my env/lib/libcudart.so", "version": None},
        {"name": "libcudart", "path": "/tmp/old/libcudart.so.11.0", "version": "11.0"},
    ]
    assert records.parse_maps("") == [] and records.parse_maps("garbage\n\n7f-7f r-xp 0 0:0 0\n") == []


def test_the_probe_records_what_it_mapped_after_every_stage(tmp_path):
    proc, result = run_probe(tmp_path, "cuda-runtime", stages="import")
    assert result["finished"] and isinstance(result["loaded_libraries"], list)
    imported = result["stages"]["import"]
    if not imported["ok"]:  # no libcudart on this machine: nothing of CUDA mapped
        assert "no libcudart found" in imported["error"]["message"]
        assert not [lib for lib in result["loaded_libraries"] if lib["name"] == "libcudart"]
        return
    cudart = [lib for lib in result["loaded_libraries"] if lib["name"] == "libcudart"]
    assert len(cudart) == 1 and os.path.isfile(cudart[0]["path"]), result["loaded_libraries"]
    assert os.path.basename(cudart[0]["path"]).startswith("libcudart.so")


# --- the environment that changes loading ---------------------------------------------------

def test_the_probe_records_the_variables_that_change_cuda_loading(tmp_path):
    env = {"CUDA_FORCE_PTX_JIT": "1", "CUDA_CACHE_DISABLE": "1", "CUDA_VISIBLE_DEVICES": "", "NVIDIA_VISIBLE_DEVICES": "all",
           "XLA_FLAGS": "--xla_gpu_cuda_data_dir=/opt/cuda", "JAX_PLATFORMS": "cuda", "JAX_ENABLE_X64": "1",
           "TF_CUDA_COMPUTE_CAPABILITIES": "8.0", "TF_CLI_CONFIG_FILE": "/x/.terraformrc", "CUPY_CACHE_DIR": "/tmp/k",
           "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "TORCH_CUDA_ARCH_LIST": "9.0", "NCCL_DEBUG": "INFO",
           "LD_LIBRARY_PATH": "/nowhere/lib64"}
    proc, result = run_probe(tmp_path, "tensorflow", stages="import", env=env)
    recorded = result["system"]["cuda_env"]
    for name in ("CUDA_FORCE_PTX_JIT", "CUDA_CACHE_DISABLE", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "XLA_FLAGS",
                 "JAX_PLATFORMS", "TF_CUDA_COMPUTE_CAPABILITIES", "CUPY_CACHE_DIR", "PYTORCH_CUDA_ALLOC_CONF",
                 "TORCH_CUDA_ARCH_LIST", "LD_LIBRARY_PATH"):
        assert recorded[name] == env[name], name
    for name in ("NCCL_DEBUG", "JAX_ENABLE_X64", "TF_CLI_CONFIG_FILE", "HOME", "PATH"):
        assert name not in recorded, name
    assert "env" not in result["system"]  # one copy: analysis reads cuda_env (and "env" of probes before v2)


# --- each framework's rungs on a machine with no GPU ----------------------------------------

@pytest.mark.skipif(not have_torch(), reason="torch is not installed in this interpreter")
def test_torch_rungs_say_why_they_could_not_run_without_a_gpu(tmp_path):
    proc, result = run_probe(tmp_path, "torch", stages="import,compute")
    compute = result["stages"]["compute"]
    steps = rungs(compute)
    assert list(steps) == ["elementwise", "blas", "cudnn", "cufft", "cusolver", "cusparse", "nccl"]
    assert compute["facts"]["failed_rung"] == "elementwise"
    assert steps["elementwise"]["ok"] is False and steps["elementwise"]["error"]["message"]  # e.g. not compiled with CUDA
    assert compute["error"] == steps["elementwise"]["error"]  # the stage takes its rung's error as its own
    for name in list(steps)[1:]:  # each library rung says why it did not run
        assert steps[name] == {"name": name, "ok": None, "skipped": True, "reason": "not run: the elementwise rung failed",
                               "duration_s": 0.0}
    assert "rel_error" not in compute["facts"] and "running" not in compute


@pytest.mark.parametrize("framework", ["jax", "cupy", "tensorflow"])
def test_a_missing_framework_never_reaches_its_rungs(tmp_path, framework):
    import importlib.util

    if importlib.util.find_spec(framework):
        pytest.skip(f"{framework} is installed here")
    proc, result = run_probe(tmp_path, framework)
    assert proc.returncode == 1 and result["stages"]["import"]["error"]["type"] == "ModuleNotFoundError"
    assert list(result["stages"]) == ["import"]


def test_cuda_runtime_rungs_say_why_they_could_not_run_without_a_gpu(tmp_path):
    proc, result = run_probe(tmp_path, "cuda-runtime", stages="import,compute")
    imported = result["stages"]["import"]
    if not imported["ok"]:  # no libcudart here: the import stage says so, and nothing else runs
        assert imported["error"]["type"] == "ImportError" and "no libcudart found" in imported["error"]["message"]
        assert list(result["stages"]) == ["import"]
        return
    compute = result["stages"]["compute"]
    steps = rungs(compute)
    assert list(steps) == ["memcpy", "jit_sass", "jit_ptx"] and compute["facts"]["failed_rung"] == "memcpy"
    assert "cudaMalloc: cudaError" in steps["memcpy"]["error"]["message"]  # no driver: the runtime says which call failed
    assert compute["error"]["message"] == steps["memcpy"]["error"]["message"]
    reason = cuda_ctypes.NVRTC_NOT_FOUND if imported["facts"]["nvrtc_library"] is None else "not run: the memcpy rung failed"
    for name in ("jit_sass", "jit_ptx"):
        assert steps[name]["skipped"] is True and steps[name]["ok"] is None and steps[name]["reason"] == reason


def _wheel_layout(root, relative):
    """An nvidia wheel's directory layout with an (empty, so unloadable) libnvrtc in it."""
    library = root / relative
    library.parent.mkdir(parents=True)
    library.write_bytes(b"")
    return library


def test_nvrtc_is_found_in_the_cuda_12_and_13_wheel_layouts(tmp_path, monkeypatch):
    cu13 = _wheel_layout(tmp_path / "site13", "nvidia/cu13/lib/libnvrtc.so.13")
    cu12 = _wheel_layout(tmp_path / "site12", "nvidia/cuda_nvrtc/lib/libnvrtc.so.12")
    (cu12.parent / "libnvrtc-builtins.so.12.4").write_bytes(b"")  # never taken for libnvrtc itself
    (cu12.parent / "libnvrtc.alt.so.12").write_bytes(b"")
    beside = _wheel_layout(tmp_path / "toolkit", "lib64/libnvrtc.so.12.4.127")
    monkeypatch.setattr(sys, "path", [str(tmp_path / "site13"), str(tmp_path / "site12")])
    assert cuda_ctypes.find_nvrtc() == str(cu13)
    monkeypatch.setattr(sys, "path", [str(tmp_path / "site12")])
    assert cuda_ctypes.find_nvrtc() == str(cu12)
    assert cuda_ctypes.find_nvrtc(near=str(beside.parent / "libcudart.so.12")) == str(beside)  # the runtime's own first


def test_a_broken_libnvrtc_is_a_fact_of_the_import_stage_and_the_jit_rungs_wait_for_memcpy(tmp_path):
    if cuda_ctypes.find_nvrtc():
        pytest.skip("a libnvrtc is already on sys.path here; it may sit beside libcudart and be taken first")
    site = tmp_path / "site"
    library = _wheel_layout(site, "nvidia/cu13/lib/libnvrtc.so.13")
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))}
    proc, result = run_probe(tmp_path, "cuda-runtime", stages="import,compute", env=env)
    imported = result["stages"]["import"]
    if not imported["ok"]:
        pytest.skip("no libcudart on this machine, so the JIT rungs are never reached")
    assert imported["facts"]["nvrtc_library"] == str(library) and imported["facts"]["nvrtc_error"]
    steps = rungs(result["stages"]["compute"])
    assert steps["jit_ptx"]["reason"] == steps["jit_sass"]["reason"] == "not run: the memcpy rung failed"


# --- real NVRTC, no GPU needed --------------------------------------------------------------

def test_ptx_isa_is_read_from_the_ptx_text():
    ptx = b"//\n// Generated by NVIDIA NVVM Compiler\n//\n\n.version 9.5\n.target sm_90\n.address_size 64\n\0"
    assert cuda_ctypes.ptx_isa(ptx) == "9.5" and cuda_ctypes.ptx_isa(".version 8.4\n.target sm_52") == "8.4"
    assert cuda_ctypes.ptx_isa("// no version here") is None


NVRTC = cuda_ctypes.find_nvrtc()


@pytest.mark.skipif(not NVRTC, reason="no libnvrtc in this interpreter (pip install nvidia-cuda-nvrtc to run this test)")
def test_nvrtc_compiles_the_axpy_kernel_to_ptx_and_to_sass():
    nvrtc = cuda_ctypes.load_nvrtc(NVRTC)
    version = cuda_ctypes.nvrtc_version(nvrtc)
    assert nvrtc.has_cubin and nvrtc.archs and 75 in nvrtc.archs
    ptx, log = cuda_ctypes.nvrtc_compile(nvrtc, "compute_75", "ptx")
    assert ptx.endswith(b"\0") and b".entry axpy" in ptx and b".target sm_75" in ptx
    isa = cuda_ctypes.ptx_isa(ptx)
    assert isa and int(isa.split(".")[0]) >= 7  # CUDA 11.x made PTX ISA 7.x, 12.x 8.x, 13.x 9.x
    assert int(isa.split(".")[0]) == int(version.split(".")[0]) - 4
    cubin, log = cuda_ctypes.nvrtc_compile(nvrtc, "sm_75", "cubin")
    assert cubin[:4] == b"\x7fELF"
    with pytest.raises(cuda_ctypes.NvrtcError, match=r"NVRTC_ERROR_INVALID_OPTION \(5\).*gpu-architecture"):
        cuda_ctypes.nvrtc_compile(nvrtc, "sm_1", "cubin")


# --- the ladder, driven by a fake cupy ------------------------------------------------------

FAKE_CUPY = '''
"""A stand-in for cupy with one GPU that is not there: FAKE_CUPY_MODE picks how it breaks."""
import os
import signal
import types

import numpy

__version__ = "0.0+fake"
MODE = os.environ.get("FAKE_CUPY_MODE", "")
NO_KERNEL = "cudaErrorNoKernelImageForDevice: no kernel image is available for execution on the device"


def _called(what):
    with open(os.environ["FAKE_CUPY_CALLS"], "a") as handle:
        handle.write(what + "\\n")


def _raw(value):
    return value.a if isinstance(value, ndarray) else value


class ndarray:
    def __init__(self, a):
        self.a = numpy.array(a)

    def __mul__(self, other):
        return ndarray(self.a * _raw(other))

    def __add__(self, other):
        return ndarray(self.a + _raw(other))

    def __matmul__(self, other):
        _called("matmul")
        if MODE == "crash-in-blas":
            os.kill(os.getpid(), signal.SIGKILL)
        if MODE == "cublas-fails":  # maps a cuBLAS (FAKE_CUBLAS, built by tests/test_gpu_state.py), then fails as cuBLAS says
            import ctypes
            ctypes.CDLL(os.environ["FAKE_CUBLAS"])
            raise RuntimeError("CUDA error: CUBLAS_STATUS_INTERNAL_ERROR when calling `cublasLtMatmul( ltHandle, ...)`")
        return ndarray(self.a @ _raw(other) * (1.5 if MODE == "wrong-blas" else 1.0))

    def get(self):
        return self.a


def asarray(a):
    return ndarray(a)


def asnumpy(x):
    return x.a


def sin(x):
    _called("sin")
    if MODE == "no-kernel-image":
        raise RuntimeError(NO_KERNEL)
    return ndarray(numpy.sin(x.a))


def _fft(x):
    _called("fft")
    return ndarray(numpy.fft.fft(x.a))


def _solve(a, b):
    _called("solve")
    return ndarray(numpy.linalg.solve(a.a, b.a))


fft = types.SimpleNamespace(fft=_fft)
linalg = types.SimpleNamespace(solve=_solve)


class RawKernel:
    def __init__(self, source, name):
        _called("RawKernel " + name)
        self.source = source

    def __call__(self, grid, block, args):
        a, x, y, n = args
        y.a[:] = a * x.a + y.a


from . import cuda  # noqa: E402
'''

FAKE_CUDA = '''
from . import nvrtc, runtime  # noqa: F401
'''

FAKE_CUPYX_SPARSE = '''
import os

import numpy


class csr_matrix:
    def __init__(self, data, shape):
        values, (rows, cols) = data
        self.full = numpy.zeros(shape)
        self.full[rows.a, cols.a] = values.a

    def __matmul__(self, other):
        with open(os.environ["FAKE_CUPY_CALLS"], "a") as handle:
            handle.write("sparse\\n")
        import cupy

        return cupy.ndarray(self.full @ other.a)
'''

FAKE_RUNTIME = '''
def runtimeGetVersion():
    return 12040


def driverGetVersion():
    return 12080


def getDeviceCount():
    return 1


def getDeviceProperties(index):
    return {"name": b"Fake GPU", "major": 9, "minor": 0, "totalGlobalMem": 80 << 30}
'''

FAKE_NVRTC = '''
def getVersion():
    return (12, 4)
'''


@pytest.fixture
def fake_cupy(tmp_path):
    package = tmp_path / "fake" / "cupy"
    (package / "cuda").mkdir(parents=True)
    (package / "__init__.py").write_text(textwrap.dedent(FAKE_CUPY))
    (package / "cuda" / "__init__.py").write_text(FAKE_CUDA)
    (package / "cuda" / "runtime.py").write_text(FAKE_RUNTIME)
    (package / "cuda" / "nvrtc.py").write_text(FAKE_NVRTC)
    sparse = tmp_path / "fake" / "cupyx" / "scipy" / "sparse"
    sparse.mkdir(parents=True)
    for folder in (sparse.parent.parent, sparse.parent):
        (folder / "__init__.py").write_text("")
    (sparse / "__init__.py").write_text(FAKE_CUPYX_SPARSE)
    calls = tmp_path / "calls.txt"
    calls.write_text("")

    def run(mode):
        env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path / "fake"), os.environ.get("PYTHONPATH")])),
               "FAKE_CUPY_MODE": mode, "FAKE_CUPY_CALLS": str(calls)}
        proc, result = run_probe(tmp_path, "cupy", env=env, name=mode)
        return proc, result, calls.read_text().split()

    return run


def verdict(result, **observation):
    stack = Stack("cupy", "installed", "installed", "current", "current")
    return classify(ResolvedStack(stack, ok=True), Observation(**{"facts": result, "returncode": 0, **observation}))


def test_the_ladder_stops_at_the_first_failing_rung(fake_cupy):
    proc, result, calls = fake_cupy("no-kernel-image")
    compute = result["stages"]["compute"]
    steps = rungs(compute)
    assert proc.returncode == 1 and result["finished"] and compute["facts"]["failed_rung"] == "elementwise"
    assert steps["elementwise"]["ok"] is False and "cudaErrorNoKernelImageForDevice" in steps["elementwise"]["error"]["message"]
    assert compute["error"] == steps["elementwise"]["error"] and compute["error"]["type"] == "RuntimeError"
    assert [(r["name"], r["ok"], r.get("skipped")) for r in compute["facts"]["rungs"]] == [
        ("elementwise", False, None), ("blas", None, True), ("cufft", None, True), ("cusolver", None, True),
        ("cusparse", None, True), ("jit", None, True)]
    assert "matmul" not in calls and "sin" in calls and "RawKernel" not in calls  # blas and jit never ran
    outcome = verdict(result)
    assert (outcome.code, outcome.stage) == ("ARCH_UNSUPPORTED", "compute")


def test_wrong_numbers_in_a_later_rung_are_compute_wrong_and_what_passed_before_stays(fake_cupy):
    proc, result, calls = fake_cupy("wrong-blas")
    compute = result["stages"]["compute"]
    steps = rungs(compute)
    assert steps["elementwise"]["ok"] is True and steps["elementwise"]["expected"] == "relative error <= 1e-03 against float64"
    assert float(steps["elementwise"]["found"]) < 1e-6
    assert steps["blas"]["ok"] is False and steps["blas"]["rel_error"] > 0.4 and "relative error" in compute["reason"]
    assert compute["facts"]["failed_rung"] == "blas" and compute["facts"]["rel_error"] == steps["blas"]["rel_error"]
    assert steps["jit"]["skipped"] and "RawKernel" not in calls
    assert verdict(result).code == "COMPUTE_WRONG"


def test_every_rung_passing_is_a_pass_with_the_worst_error(fake_cupy):
    proc, result, calls = fake_cupy("")
    compute = result["stages"]["compute"]
    assert proc.returncode == 0 and compute["ok"] and "failed_rung" not in compute["facts"]
    assert [r["name"] for r in compute["facts"]["rungs"]] == ["elementwise", "blas", "cufft", "cusolver", "cusparse", "jit"]
    assert all(r["ok"] is True and r["expected"] and r["found"] for r in compute["facts"]["rungs"])
    assert compute["facts"]["rel_error"] == max(r["rel_error"] for r in compute["facts"]["rungs"])
    assert compute["facts"]["nvrtc_version"] == "12.4" and calls == ["sin", "matmul", "fft", "solve", "sparse", "RawKernel", "axpy"]
    blas = rungs(compute)["blas"]
    assert blas["library"] == {"name": "libcublas", "files": []}  # nothing of CUDA is mapped into the stand-in
    assert verdict(result).code == "PASS"


def test_a_crash_inside_a_rung_leaves_the_rungs_before_it(fake_cupy):
    proc, result, calls = fake_cupy("crash-in-blas")
    assert proc.returncode == -9 and not result["finished"] and result["current_stage"] == "compute"
    compute = result["stages"]["compute"]
    assert compute["running"] is True and [r["name"] for r in compute["facts"]["rungs"]] == ["elementwise"]
    assert compute["facts"]["rungs"][0]["ok"] is True and isinstance(result["loaded_libraries"], list)
    outcome = verdict(result, returncode=None, signal=9)
    assert (outcome.code, outcome.stage) == ("CRASHED", "compute") and "SIGKILL" in outcome.summary


# --- cuda-runtime's two JIT rungs: the verdict from what each found -------------------------
# Records shaped as the probe writes them, with the facts measured on an H100 (driver 580.159.04,
# CUDA 13.0) in the issue: PTX from NVRTC 13.5 (.version 9.5) fails to load, its SASS runs.

def _driver_failure(call, code, name, text):
    try:
        raise cuda_ctypes.DriverError(call, code, name, text)
    except cuda_ctypes.DriverError as exc:
        return {"error": records._error(exc), "cuda_error": {"call": call, "name": name, "code": code, "text": text}}


PTX_TOO_NEW = _driver_failure("cuModuleLoadData", 222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
                              "the provided PTX was compiled with an unsupported toolchain.")
JIT_FACTS = {"nvrtc_version": "13.5", "ptx_isa": "9.5", "driver_cuda_version": "13.0"}


def jit(name, ok, target, **more):
    return {"name": name, "ok": ok, "target": target, **more}


def test_ptx_too_new_for_the_driver_while_sass_runs_passes_with_a_warning():
    sass, ptx = jit("jit_sass", True, "sm_90"), jit("jit_ptx", False, "compute_90", **PTX_TOO_NEW)
    failed, warning = adapter_cuda_runtime.jit_outcome(dict(JIT_FACTS), sass, ptx)
    assert failed is None and ptx["tolerated"] is True
    assert warning.startswith("CUDA_ERROR_UNSUPPORTED_PTX_VERSION (222): PTX from NVRTC 13.5 (PTX ISA 9.5) cannot be "
                              "JIT-compiled by this driver (it supports CUDA 13.0), while the SASS for sm_90")
    result = {"system": {"libcuda": True, "driver_cuda_version": "13.0"}, "finished": True, "current_stage": "done",
              "stages": {"import": {"ok": True, "facts": {"cuda_runtime": "13.0"}},
                         "device": {"ok": True, "facts": {"devices": [{"name": "NVIDIA H100 80GB HBM3", "cc": "9.0"}]}},
                         "compute": {"ok": True, "facts": {"rungs": [sass, ptx]}, "warnings": [warning]}}}
    stack = Stack("cuda-runtime", "13.0", "default", "3.12", "uv")
    outcome = classify(ResolvedStack(stack, ok=True), Observation(facts=result, returncode=0))
    assert outcome.code == "PASS" and any("CUDA_ERROR_UNSUPPORTED_PTX_VERSION" in w for w in outcome.warnings)


def test_the_other_jit_outcomes():
    ok_sass, ok_ptx = jit("jit_sass", True, "sm_90"), jit("jit_ptx", True, "compute_90")
    bad_sass = jit("jit_sass", False, "sm_90", **_driver_failure("cuModuleLoadData", 209, "CUDA_ERROR_NO_BINARY_FOR_GPU",
                                                                     "no kernel image is available for execution on the device"))
    assert adapter_cuda_runtime.jit_outcome(dict(JIT_FACTS), ok_sass, ok_ptx) == (None, None)
    both = jit("jit_ptx", False, "compute_90", **PTX_TOO_NEW)
    assert adapter_cuda_runtime.jit_outcome(dict(JIT_FACTS), bad_sass, both) == (both, None) and "tolerated" not in both
    assert adapter_cuda_runtime.jit_outcome(dict(JIT_FACTS), bad_sass, ok_ptx) == (bad_sass, None)
    disabled = jit("jit_ptx", False, "compute_90", **_driver_failure("cuModuleLoadData", 223, "CUDA_ERROR_JIT_COMPILATION_DISABLED",
                                                                     "PTX JIT compilation was disabled"))
    assert adapter_cuda_runtime.jit_outcome(dict(JIT_FACTS), ok_sass, disabled) == (disabled, None)  # only 222 is tolerated
    no_sass = {"name": "jit_sass", "ok": None, "skipped": True, "reason": "NVRTC 12.4 cannot compile SASS for sm_100"}
    failed, warning = adapter_cuda_runtime.jit_outcome({"nvrtc_version": "12.4"}, no_sass, jit("jit_ptx", True, "compute_90"))
    assert failed is None and "its PTX for compute_90 ran by the driver's JIT" in warning


def test_both_jit_rungs_failing_is_the_ptx_error_and_classifies_as_ptx_toolchain_too_new():
    facts = dict(JIT_FACTS, rungs=[jit("memcpy", True, None), jit("jit_sass", False, "sm_90", **PTX_TOO_NEW),
                                   jit("jit_ptx", False, "compute_90", **PTX_TOO_NEW)])
    failed, _ = adapter_cuda_runtime.jit_outcome(facts, facts["rungs"][1], facts["rungs"][2])
    with pytest.raises(ladder.RungFailed) as stopped:
        ladder.finish_ladder(facts, failed)
    assert facts["failed_rung"] == "jit_ptx" and "CUDA_ERROR_UNSUPPORTED_PTX_VERSION (222)" in stopped.value.outcome["error"]["message"]
    result = {"system": {"libcuda": True, "driver_cuda_version": "13.0"}, "finished": True, "current_stage": "done",
              "stages": {"import": {"ok": True, "facts": {}}, "device": {"ok": True, "facts": {}},
                         "compute": {"ok": False, "facts": facts, **stopped.value.outcome}}}
    outcome = classify(ResolvedStack(Stack("cuda-runtime", "13.5", "default", "3.12", "uv"), ok=True),
                       Observation(facts=result, returncode=1))
    assert (outcome.code, outcome.stage) == ("PTX_TOOLCHAIN_TOO_NEW", "compute")
