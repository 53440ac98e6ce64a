#!/usr/bin/env python3
"""gpucompat probe: run inside the environment under test; report facts, decide nothing.

One file, standard library only, CPython 3.8+: it is copied into every job and run
by whatever interpreter the stack under test provides. Stages run in order
(import -> device -> compute), each in its own try block, and the JSON result is
rewritten before and after every stage (and after every rung of the compute stage),
so a crash or a kill still leaves evidence of how far it got. A stage that is running
is already in result["stages"] with "running": true. The parent process enforces
timeouts and reads the verdict.

    python probe.py --framework torch --result result.json

What loaded, and what changes loading
-------------------------------------
result["loaded_libraries"], rewritten with every write: the CUDA libraries mapped into
this process, read from /proc/self/maps (parse_maps), each path once, in map order:

    [{"name": "libcudart", "path": "/.../nvidia/cu13/lib/libcudart.so.13", "version": "13"},
     {"name": "libcuda", "path": "/usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04", "version": "580.159.04"}]

("version" is what follows ".so." in the file name, None where nothing does.)
result["system"]["cuda_env"]: every environment variable that changes how CUDA loads
or JIT-compiles kernels (cuda_env).

The compute stage climbs rungs
------------------------------
Each framework's compute stage is a ladder of rungs, each recorded in
record["facts"]["rungs"] as

    {"name": "blas", "ok": true, "expected": "relative error <= 1e-03 against float64",
     "found": "2.1e-07", "rel_error": 2.1e-07, "duration_s": 0.01}

with "error" (an exception: type, message, traceback) or "reason" (a check that did not
hold) when "ok" is false. A rung that did not run is {"name", "ok": null, "skipped": true,
"reason"}. The ladder stops at the first failing rung: the stage record takes that rung's
"error" or "reason" as its own and facts["failed_rung"] names it; the rungs after it are
recorded as skipped ("not run: the X rung failed"). facts["op"], facts["rel_error"] (the
worst rung that measured one) and facts["tolerance"] stay as before.

    torch, tensorflow:  elementwise (sin(a)*b+a), blas (matmul, cuBLAS)
    jax:                elementwise, blas (dot, HIGHEST), jit (jax.jit of a small function)
    cupy:               elementwise, blas, jit (a RawKernel compiled by NVRTC)
    cuda-runtime:       memcpy (1 MiB round trip), jit_sass, jit_ptx

cuda-runtime's JIT rungs: the import stage looks for libnvrtc beside libcudart, in the
wheels on sys.path (nvidia/cu13/lib for CUDA 13, nvidia/cuda_nvrtc/lib for 11 and 12)
and then by the loader's search. The compute stage compiles one axpy kernel with it
twice, to SASS (--gpu-architecture=sm_XY, nvrtcGetCUBIN, NVRTC 11.1+) and to PTX
(compute_XY; facts["ptx_isa"] is its ".version"), loads each image with the driver API
(cuModuleLoadData in the runtime's primary context), launches it and checks the numbers.
Both are tried once memcpy passed; facts["jit"] = {"sass": {...}, "ptx": {...}} says for
each whether it loaded and ran, with the driver's error name and code. Verdicts:

    - both run: the stage passes;
    - SASS runs, PTX fails with CUDA_ERROR_UNSUPPORTED_PTX_VERSION (222): the stage passes
      with a warning (this NVRTC's PTX is newer than the driver can JIT-compile);
    - PTX fails otherwise, or both fail: the stage fails with the PTX error;
    - SASS fails, PTX runs: the stage fails with the SASS error;
    - this NVRTC does not know sm_XY (a GPU newer than the toolkit): jit_sass is skipped
      and jit_ptx compiles for the newest compute_ it knows below XY; if that runs, the
      stage passes with a warning ("ran by the driver's JIT");
    - no libnvrtc: both are skipped with the reason, and the stage passes on memcpy.

The bench stage (only with --bench, after compute passed) measures how fast the stack runs:
matrix products per data type, device copy, pinned host<->device transfers, launch latency,
and the cloud-Slurm seed's small CNN training loop with the time to its first step; every
figure carries NVML's clocks, power, temperature and throttle reasons before and after it
(see "The bench rung" below). A figure that cannot be made is recorded with its reason.
Asked for, it also runs the workloads in N processes sharing the GPU ("Sharing one GPU"),
data-parallel training over N GPUs with torchrun and ddp_worker.py beside this file
("Scaling over GPUs"), and torch.profiler around a window of training steps; NVML samples
at 10 Hz while it runs, and result["log"] keeps the job's own log records (pid, thread, time).
"""

import argparse
import ctypes
import glob
import json
import logging
import os
import platform
import random
import re
import signal
import socket
import sys
import time
import traceback
import warnings

PROBE_VERSION = 2
STAGES = ("import", "device", "compute")
MATRIX_N = 256
TOLERANCE = 1e-3  # relative Frobenius error allowed against the float64 reference
EXPECTED = "relative error <= %.0e against float64" % TOLERANCE


class StageFailed(Exception):
    """A stage (or rung) ran but found what stops the ladder (no device, wrong numbers)."""


class RungSkipped(Exception):
    """A rung that cannot run here for a reason that is not a failure of the stack."""


class RungFailed(Exception):
    """The compute ladder stopped: carries the failing rung's error or reason for the stage."""

    def __init__(self, rung):
        Exception.__init__(self, rung.get("reason") or (rung.get("error") or {}).get("message", ""))
        self.outcome = {"error": rung["error"]} if "error" in rung else {"reason": rung.get("reason", "")}


def _error(exc):
    return {
        "type": type(exc).__name__,
        "message": str(exc)[-4000:],
        "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-8000:],
    }


def _cuda_version(number):
    """12040 -> '12.4' (the encoding of cudaRuntimeGetVersion / cuDriverGetVersion)."""
    if not number:
        return None
    return "%d.%d" % (number // 1000, (number % 1000) // 10)


# ---------------------------------------------------------------------------
# What is loaded, and the environment that changes loading
# ---------------------------------------------------------------------------

_LIBRARY = re.compile(
    r"^(libcuda|libcudart|libnvrtc(?:-builtins)?(?:\.alt)?|libcublasLt|libcublas|libcudnn(?:_[A-Za-z0-9_]+)?"
    r"|libnvJitLink|libnvptxcompiler|libnvidia-ptxjitcompiler)\.so(?:\.([0-9][0-9A-Za-z.]*))?$"
)


def parse_maps(text):
    """/proc/<pid>/maps text -> the CUDA libraries mapped: [{name, path, version}], each path once."""
    found, seen = [], set()
    for line in text.splitlines():
        fields = line.split(None, 5)  # address perms offset dev inode pathname
        if len(fields) < 6 or not fields[5].startswith("/"):
            continue
        path = fields[5].rstrip()
        if path.endswith(" (deleted)"):
            path = path[:-len(" (deleted)")]
        match = _LIBRARY.match(os.path.basename(path))
        if match and path not in seen:
            seen.add(path)
            found.append({"name": match.group(1), "path": path, "version": match.group(2)})
    return found


def loaded_libraries():
    try:
        with open("/proc/self/maps") as handle:
            return parse_maps(handle.read())
    except OSError:  # not Linux: nothing to say
        return []


_ENV_PREFIXES = ("CUDA_", "NVIDIA_", "CUPY_", "PYTORCH_")
_ENV_NAMES = ("LD_LIBRARY_PATH", "LD_PRELOAD", "XLA_FLAGS", "TORCH_CUDA_ARCH_LIST")
# JAX_* and TF_* only where they are about platforms, CUDA or compilation (TF_ is Terraform's too)
_ENV_WORDS = {"JAX_": ("PLATFORM", "COMPIL", "CUDA", "GPU", "PJRT", "CACHE"),
              "TF_": ("CUDA", "CUDNN", "GPU", "XLA", "TENSORRT", "NEED_")}


def cuda_env(environ=None):
    """The variables that change how CUDA loads or JIT-compiles kernels (no NCCL_*)."""
    environ = os.environ if environ is None else environ
    chosen = {}
    for name in sorted(environ):
        prefix = name.split("_", 1)[0] + "_"
        if (name.startswith(_ENV_PREFIXES) or name in _ENV_NAMES
                or any(word in name[len(prefix):] for word in _ENV_WORDS.get(prefix, ()))):
            chosen[name] = environ[name][:4000]
    return chosen


def system_facts():
    env = cuda_env()
    facts = {
        "python": platform.python_version(),
        "executable": sys.executable,
        "platform": platform.platform(),
        "hostname": socket.gethostname(),
        "cuda_env": env,
    }
    try:
        with open("/proc/driver/nvidia/version") as handle:
            facts["proc_driver_version"] = handle.readline().strip()
    except OSError:
        facts["proc_driver_version"] = None
    try:  # the CUDA version the installed driver supports; needs no cuInit
        libcuda = ctypes.CDLL("libcuda.so.1")
        version = ctypes.c_int(0)
        libcuda.cuDriverGetVersion(ctypes.byref(version))
        facts["libcuda"] = True
        facts["driver_cuda_version"] = _cuda_version(version.value)
    except OSError as exc:
        facts["libcuda"] = False
        facts["libcuda_error"] = str(exc)
    return facts


# ---------------------------------------------------------------------------
# The compute ladder
# ---------------------------------------------------------------------------

_HOOKS = {"checkpoint": None}


def _checkpoint():
    if _HOOKS["checkpoint"]:
        _HOOKS["checkpoint"]()


def _compare(rung, error):
    """Expected vs found for a numeric rung; raises StageFailed when the numbers are wrong."""
    rung.update(expected=EXPECTED, found="%.2g" % error, rel_error=error)
    if not error <= TOLERANCE:
        raise StageFailed("result differs from the float64 reference: relative error %.3g > %.0e" % (error, TOLERANCE))


def run_rung(facts, name, body):
    """Run one rung: body(rung) fills the rung's record; what it learnt stays when it fails."""
    rung = {"name": name, "ok": False}
    facts.setdefault("rungs", []).append(rung)
    began = time.perf_counter()
    try:
        body(rung)
        rung["ok"] = True
    except RungSkipped as exc:
        rung.update(ok=None, skipped=True, reason=str(exc))
    except StageFailed as exc:
        rung["reason"] = str(exc)
    except Exception as exc:  # noqa: B902 - the evidence is the point
        rung["error"] = _error(exc)
    rung["duration_s"] = round(time.perf_counter() - began, 4)
    _checkpoint()
    return rung


def skip_rung(facts, name, reason):
    rung = {"name": name, "ok": None, "skipped": True, "reason": reason, "duration_s": 0.0}
    facts.setdefault("rungs", []).append(rung)
    return rung


def finish_ladder(facts, failed=None):
    """Summarise the rungs into the stage's facts; raise RungFailed for the failing rung."""
    measured = [r["rel_error"] for r in facts.get("rungs", []) if "rel_error" in r]
    if measured:
        facts["rel_error"] = max(measured)
        facts["tolerance"] = TOLERANCE
    if failed is not None:
        facts["failed_rung"] = failed["name"]
        if "rel_error" not in failed:  # it failed for another reason than wrong numbers
            facts.pop("rel_error", None)
        raise RungFailed(failed)


def ladder(facts, rungs):
    """rungs: [(name, body)] in order; stops at the first that fails."""
    failed = None
    for name, body in rungs:
        if failed is not None:
            skip_rung(facts, name, "not run: the %s rung failed" % failed["name"])
            continue
        rung = run_rung(facts, name, body)
        if rung["ok"] is False:
            failed = rung
    finish_ladder(facts, failed)


# ---------------------------------------------------------------------------
# Framework adapters: import_(facts) -> handle; device(handle, facts); compute(handle, facts).
# Each fills the facts dict it is given, so what it learnt survives its failure.
# ---------------------------------------------------------------------------

def _numpy_error(np, out, ref):
    out = np.asarray(out, dtype="float64").ravel()
    ref = np.asarray(ref, dtype="float64").ravel()
    if not np.isfinite(out).all():
        return float("inf")
    return float(np.linalg.norm(out - ref) / np.linalg.norm(ref))


def _numpy_inputs(np):
    a = np.random.standard_normal((MATRIX_N, MATRIX_N)).astype("float32")
    b = np.random.standard_normal((MATRIX_N, MATRIX_N)).astype("float32")
    return a, b, a.astype("float64"), b.astype("float64")


class Torch:
    def import_(self, facts):
        import torch

        facts.update(version=torch.__version__, cuda_runtime=torch.version.cuda)
        facts["arch_list"] = torch.cuda.get_arch_list() if torch.version.cuda else []
        try:
            facts["cudnn"] = torch.backends.cudnn.version()
        except Exception as exc:  # cudnn missing is a fact, not a failure of import
            facts["cudnn_error"] = str(exc)
        return torch

    def device(self, torch, facts):
        facts["cuda_build"] = torch.version.cuda is not None
        facts["available"] = torch.cuda.is_available()
        if not facts["available"]:
            if not facts["cuda_build"]:
                raise StageFailed("this torch is a CPU-only build (torch.version.cuda is None)")
            torch.cuda.init()  # raises with the driver's own message
            raise StageFailed("torch.cuda.is_available() is False")
        facts["device_count"] = torch.cuda.device_count()
        facts["devices"] = []
        for index in range(facts["device_count"]):
            props = torch.cuda.get_device_properties(index)
            facts["devices"].append({
                "name": props.name,
                "cc": "%d.%d" % (props.major, props.minor),
                "memory_mib": props.total_memory // (1024 * 1024),
            })
        if not facts["device_count"]:
            raise StageFailed("torch sees no CUDA device")

    def compute(self, torch, facts):
        a = torch.randn(MATRIX_N, MATRIX_N, dtype=torch.float32)
        b = torch.randn(MATRIX_N, MATRIX_N, dtype=torch.float32)
        a64, b64 = a.double(), b.double()
        gpu = {}
        facts["op"] = "sin(a)*b+a, then matmul, %dx%d float32" % (MATRIX_N, MATRIX_N)

        def error(out, ref):
            out = out.cpu().double()
            if not bool(torch.isfinite(out).all()):
                return float("inf")
            return float(torch.linalg.norm(out - ref) / torch.linalg.norm(ref))

        def elementwise(rung):  # a kernel of torch's own
            gpu["a"], gpu["b"] = a.cuda(), b.cuda()
            facts["device"] = torch.cuda.get_device_name(0)
            _compare(rung, error(torch.sin(gpu["a"]) * gpu["b"] + gpu["a"], torch.sin(a64) * b64 + a64))

        def blas(rung):  # cuBLAS
            _compare(rung, error(gpu["a"] @ gpu["b"], a64 @ b64))

        ladder(facts, [("elementwise", elementwise), ("blas", blas)])

    def bench(self, torch, facts):
        bench = Bench(facts, self.bench_config)
        with Telemetry(bench.nvml, facts):
            bench_torch(torch, bench, self.import_seconds)
            share_figures("torch", bench, bench.config.get("share") or [])
            if bench.config.get("scale"):
                scale_figures(torch, bench, bench.config["scale"])

    def workload(self, torch, measurement, dtype, size):
        return torch_workload(torch, measurement, dtype, size)


class TensorFlow:
    def import_(self, facts):
        import tensorflow as tf

        facts["version"] = tf.__version__
        try:
            info = tf.sysconfig.get_build_info()
            facts["cuda_build"] = bool(info.get("is_cuda_build"))
            facts["cuda_runtime"] = info.get("cuda_version")
            facts["cudnn"] = info.get("cudnn_version")
            facts["arch_list"] = info.get("cuda_compute_capabilities")
        except Exception as exc:
            facts["build_info_error"] = str(exc)
        return tf

    def device(self, tf, facts):
        gpus = tf.config.list_physical_devices("GPU")
        facts.update(device_count=len(gpus), devices=[])
        for gpu in gpus:
            details = tf.config.experimental.get_device_details(gpu)
            cc = details.get("compute_capability")
            facts["devices"].append({"name": details.get("device_name"), "cc": "%d.%d" % cc if cc else None})
        if not gpus:
            raise StageFailed("tensorflow lists no GPU device")

    def compute(self, tf, facts):
        import numpy as np

        a, b, a64, b64 = _numpy_inputs(np)
        facts["op"] = "sin(a)*b+a, then matmul, float32"

        def on_gpu(rung, function):
            with tf.device("/GPU:0"):
                out = function(tf.constant(a), tf.constant(b))
            rung["placed_on"] = facts["placed_on"] = out.device
            if "GPU" not in out.device.upper():
                raise StageFailed("the op ran on %s, not on the GPU" % out.device)
            return out.numpy()

        def elementwise(rung):
            _compare(rung, _numpy_error(np, on_gpu(rung, lambda x, y: tf.sin(x) * y + x), np.sin(a64) * b64 + a64))

        def blas(rung):
            _compare(rung, _numpy_error(np, on_gpu(rung, tf.linalg.matmul), a64 @ b64))

        ladder(facts, [("elementwise", elementwise), ("blas", blas)])

    def bench(self, tf, facts):
        bench = Bench(facts, self.bench_config)
        why = Unsupported("not measured for TensorFlow in this version: no TensorFlow GPU build was at hand to verify it on")
        for measurement in ("matmul", "copy", "transfer", "launch", "train"):
            if bench.wants(measurement):
                bench.measure(measurement, "", "", _raise(why))



class Jax:
    def import_(self, facts):
        import jax

        facts["version"] = jax.__version__
        try:
            import jaxlib

            facts["jaxlib"] = getattr(jaxlib, "__version__", None) or jaxlib.version.__version__
        except Exception:
            pass
        return jax

    def device(self, jax, facts):
        facts["default_backend"] = jax.default_backend()
        try:
            gpus = jax.devices("gpu")
        except RuntimeError as exc:
            facts["device_count"] = 0
            raise StageFailed("jax has no GPU backend: %s" % exc)
        facts["device_count"] = len(gpus)
        facts["devices"] = [
            {"name": d.device_kind, "cc": getattr(d, "compute_capability", None)} for d in gpus
        ]
        if not gpus:
            raise StageFailed("jax lists no GPU device")

    def compute(self, jax, facts):
        import jax.numpy as jnp
        import numpy as np

        a, b, a64, b64 = _numpy_inputs(np)
        gpu = {}
        facts["op"] = "sin(a)*b+a, dot(HIGHEST), jax.jit(tanh(a)*b-a/2), float32"

        def fetch(out):
            out.block_until_ready()
            facts["device"] = str(list(out.devices())[0])
            return np.asarray(out)

        def elementwise(rung):
            device = jax.devices("gpu")[0]
            gpu["a"], gpu["b"] = jax.device_put(a, device), jax.device_put(b, device)
            _compare(rung, _numpy_error(np, fetch(jnp.sin(gpu["a"]) * gpu["b"] + gpu["a"]), np.sin(a64) * b64 + a64))

        def blas(rung):
            out = jnp.dot(gpu["a"], gpu["b"], precision=jax.lax.Precision.HIGHEST)
            _compare(rung, _numpy_error(np, fetch(out), a64 @ b64))

        def jit(rung):
            function = jax.jit(lambda x, y: jnp.tanh(x) * y - x * 0.5)
            _compare(rung, _numpy_error(np, fetch(function(gpu["a"], gpu["b"])), np.tanh(a64) * b64 - a64 * 0.5))

        ladder(facts, [("elementwise", elementwise), ("blas", blas), ("jit", jit)])

    def bench(self, jax, facts):
        bench = Bench(facts, self.bench_config)
        with Telemetry(bench.nvml, facts):
            bench_jax(jax, bench, self.import_seconds)
            share_figures("jax", bench, bench.config.get("share") or [])
            if bench.config.get("scale"):
                jax_scale_figures(jax, bench, bench.config["scale"])

    def workload(self, jax, measurement, dtype, size):
        return jax_workload(jax, measurement, dtype, size)


AXPY_SOURCE = b"""
extern "C" __global__ void axpy(float a, const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""
AXPY_A, AXPY_N = 2.5, 1 << 16


def _axpy_inputs():
    rng = random.Random(20261122)
    return [rng.uniform(-1.0, 1.0) for _ in range(AXPY_N)], [rng.uniform(-1.0, 1.0) for _ in range(AXPY_N)]


def _relative_error(out, ref):
    """Relative Frobenius error of two sequences of numbers, in pure Python."""
    diff = norm = 0.0
    for found, expected in zip(out, ref):
        if found != found or found in (float("inf"), float("-inf")):
            return float("inf")
        diff += (found - expected) ** 2
        norm += expected * expected
    return (diff / norm) ** 0.5 if norm else float("inf")


class CuPy:
    def import_(self, facts):
        import cupy

        facts["version"] = cupy.__version__
        runtime = cupy.cuda.runtime
        facts["cuda_runtime"] = _cuda_version(runtime.runtimeGetVersion())
        try:
            facts["driver_cuda_version"] = _cuda_version(runtime.driverGetVersion())
        except Exception as exc:
            facts["driver_error"] = str(exc)
        return cupy

    def device(self, cupy, facts):
        runtime = cupy.cuda.runtime
        count = runtime.getDeviceCount()
        facts.update(device_count=count, devices=[])
        for index in range(count):
            props = runtime.getDeviceProperties(index)
            name = props["name"]
            facts["devices"].append({
                "name": name.decode() if isinstance(name, bytes) else name,
                "cc": "%d.%d" % (props["major"], props["minor"]),
                "memory_mib": props["totalGlobalMem"] // (1024 * 1024),
            })
        if not count:
            raise StageFailed("cupy sees no CUDA device")

    def compute(self, cupy, facts):
        import numpy as np

        a, b, a64, b64 = _numpy_inputs(np)
        gpu = {}
        facts["op"] = "sin(a)*b+a, matmul (cuBLAS), RawKernel axpy (NVRTC), float32"

        def elementwise(rung):  # CuPy's own elementwise kernels (compiled by CuPy with NVRTC)
            gpu["a"], gpu["b"] = cupy.asarray(a), cupy.asarray(b)
            _compare(rung, _numpy_error(np, cupy.asnumpy(cupy.sin(gpu["a"]) * gpu["b"] + gpu["a"]), np.sin(a64) * b64 + a64))

        def blas(rung):
            _compare(rung, _numpy_error(np, cupy.asnumpy(gpu["a"] @ gpu["b"]), a64 @ b64))

        def jit(rung):  # user CUDA C++ compiled at run time: the path of RawKernel/ElementwiseKernel code
            try:
                major, minor = cupy.cuda.nvrtc.getVersion()
                rung["nvrtc_version"] = facts["nvrtc_version"] = "%d.%d" % (major, minor)
            except Exception as exc:
                rung["nvrtc_version_error"] = str(exc)
            kernel = cupy.RawKernel(AXPY_SOURCE.decode(), "axpy")
            xs, ys = _axpy_inputs()
            x, y = cupy.asarray(np.array(xs, dtype="float32")), cupy.asarray(np.array(ys, dtype="float32"))
            ref = AXPY_A * x.get().astype("float64") + y.get().astype("float64")
            kernel(((AXPY_N + 255) // 256,), (256,), (np.float32(AXPY_A), x, y, np.int32(AXPY_N)))
            _compare(rung, _numpy_error(np, cupy.asnumpy(y), ref))

        ladder(facts, [("elementwise", elementwise), ("blas", blas), ("jit", jit)])

    def bench(self, cupy, facts):
        bench = Bench(facts, self.bench_config)
        with Telemetry(bench.nvml, facts):
            bench_cupy(cupy, bench)
            share_figures("cupy", bench, bench.config.get("share") or [])

    def workload(self, cupy, measurement, dtype, size):
        return cupy_workload(cupy, measurement, dtype, size)


# ---------------------------------------------------------------------------
# libcudart, libnvrtc and libcuda through ctypes
# ---------------------------------------------------------------------------

class CudaError(Exception):
    pass


class DriverError(CudaError):
    """A CUresult other than CUDA_SUCCESS, with the driver's own name for it."""

    def __init__(self, call, code, name, text):
        CudaError.__init__(self, "%s: %s (%d): %s" % (call, name, code, text))
        self.call, self.code, self.name, self.text = call, code, name, text


class NvrtcError(CudaError):
    pass


CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222
NVRTC_NOT_FOUND = ("no libnvrtc in this environment (install nvidia-cuda-nvrtc for CUDA 13, "
                   "nvidia-cuda-nvrtc-cu12 or -cu11 for CUDA 12 or 11, beside the runtime)")
NVRTC_PATTERNS = ("nvidia/cu*/lib/libnvrtc.so*", "nvidia/cuda_nvrtc/lib/libnvrtc.so*")


def find_nvrtc(near=None):
    """libnvrtc of this environment: beside `near` (the libcudart in use), in the CUDA wheels on
    sys.path, then where the dynamic loader finds it. None when there is none."""
    places = [os.path.join(os.path.dirname(near), "libnvrtc.so*")] if near and os.path.isabs(near) else []
    places += [os.path.join(base, pattern) for base in sys.path if base for pattern in NVRTC_PATTERNS]
    for place in places:
        found = sorted(glob.glob(place))
        if found:
            return found[-1]
    import ctypes.util

    return ctypes.util.find_library("nvrtc")


def _bind(lib, name, restype, argtypes):
    function = getattr(lib, name)
    function.restype, function.argtypes = restype, argtypes
    return function


def load_nvrtc(path):
    """libnvrtc with the signatures of nvrtc.h; lib.has_cubin is False before NVRTC 11.1.

    The libnvrtc-builtins beside it is loaded first: NVRTC dlopens it by name when it compiles,
    and the 13.0 wheel's libnvrtc carries no RPATH to find it there (13.5's has $ORIGIN)."""
    builtins = sorted(glob.glob(os.path.join(os.path.dirname(path), "libnvrtc-builtins.so*"))) if os.path.isabs(path) else []
    for library in builtins[-1:]:
        ctypes.CDLL(library, mode=getattr(ctypes, "RTLD_GLOBAL", 0))
    lib = ctypes.CDLL(path)
    lib.builtins = builtins[-1] if builtins else None
    p, i, size_p = ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_size_t)
    _bind(lib, "nvrtcVersion", i, [ctypes.POINTER(i), ctypes.POINTER(i)])
    _bind(lib, "nvrtcGetErrorString", ctypes.c_char_p, [i])
    _bind(lib, "nvrtcCreateProgram", i, [ctypes.POINTER(p), ctypes.c_char_p, ctypes.c_char_p, i, p, p])
    _bind(lib, "nvrtcCompileProgram", i, [p, i, ctypes.POINTER(ctypes.c_char_p)])
    _bind(lib, "nvrtcDestroyProgram", i, [ctypes.POINTER(p)])
    _bind(lib, "nvrtcGetProgramLogSize", i, [p, size_p])
    _bind(lib, "nvrtcGetProgramLog", i, [p, ctypes.c_char_p])
    _bind(lib, "nvrtcGetPTXSize", i, [p, size_p])
    _bind(lib, "nvrtcGetPTX", i, [p, ctypes.c_char_p])
    try:
        _bind(lib, "nvrtcGetCUBINSize", i, [p, size_p])
        _bind(lib, "nvrtcGetCUBIN", i, [p, ctypes.c_char_p])
        lib.has_cubin = True
    except AttributeError:
        lib.has_cubin = False
    lib.archs = None  # the SM numbers it can compile for (nvrtcGetSupportedArchs, NVRTC 11.2+)
    try:
        count = ctypes.c_int(0)
        if not _bind(lib, "nvrtcGetNumSupportedArchs", i, [ctypes.POINTER(i)])(ctypes.byref(count)) and count.value > 0:
            archs = (ctypes.c_int * count.value)()
            if not _bind(lib, "nvrtcGetSupportedArchs", i, [ctypes.POINTER(i)])(archs):
                lib.archs = sorted(archs)
    except AttributeError:
        pass
    return lib


def nvrtc_version(lib):
    major, minor = ctypes.c_int(0), ctypes.c_int(0)
    lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    return "%d.%d" % (major.value, minor.value)


def _nvrtc_check(lib, call, code, log=""):
    if code:
        name = (lib.nvrtcGetErrorString(code) or b"?").decode(errors="replace")
        raise NvrtcError("%s: %s (%d)%s" % (call, name, code, (": " + log.strip()) if log.strip() else ""))


def nvrtc_compile(lib, arch, kind, source=AXPY_SOURCE):
    """Compile `source` for --gpu-architecture=`arch`; kind 'ptx' or 'cubin'. -> (image, log).
    A PTX image keeps its terminating NUL, as cuModuleLoadData wants it."""
    program = ctypes.c_void_p()
    _nvrtc_check(lib, "nvrtcCreateProgram", lib.nvrtcCreateProgram(ctypes.byref(program), source, b"axpy.cu", 0, None, None))
    try:
        option = ("--gpu-architecture=%s" % arch).encode()
        code = lib.nvrtcCompileProgram(program, 1, (ctypes.c_char_p * 1)(option))
        size = ctypes.c_size_t(0)
        lib.nvrtcGetProgramLogSize(program, ctypes.byref(size))
        buffer = ctypes.create_string_buffer(max(size.value, 1))
        lib.nvrtcGetProgramLog(program, buffer)
        log = buffer.value.decode(errors="replace")
        _nvrtc_check(lib, "nvrtcCompileProgram(%s)" % option.decode(), code, log)
        get_size, get = (lib.nvrtcGetPTXSize, lib.nvrtcGetPTX) if kind == "ptx" else (lib.nvrtcGetCUBINSize, lib.nvrtcGetCUBIN)
        _nvrtc_check(lib, get_size.__name__, get_size(program, ctypes.byref(size)))
        buffer = ctypes.create_string_buffer(max(size.value, 1))
        _nvrtc_check(lib, get.__name__, get(program, buffer))
        return buffer.raw[:size.value], log
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(program))


def ptx_isa(ptx):
    """The PTX ISA version a PTX text declares ('.version 9.5' -> '9.5'), else None."""
    text = ptx.decode(errors="replace") if isinstance(ptx, bytes) else ptx
    match = re.search(r"^\s*\.version\s+(\d+\.\d+)", text, re.M)
    return match.group(1) if match else None


def load_driver():
    """libcuda.so.1 with the signatures of cuda.h. None of these calls is #defined to a _v2 name
    there (cuModuleLoadData, cuModuleGetFunction, cuLaunchKernel, cuCtxGetCurrent... keep theirs)."""
    lib = ctypes.CDLL("libcuda.so.1")
    p, i, u = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint
    _bind(lib, "cuInit", i, [u])
    _bind(lib, "cuDriverGetVersion", i, [ctypes.POINTER(i)])
    _bind(lib, "cuGetErrorName", i, [i, ctypes.POINTER(ctypes.c_char_p)])
    _bind(lib, "cuGetErrorString", i, [i, ctypes.POINTER(ctypes.c_char_p)])
    _bind(lib, "cuDeviceGet", i, [ctypes.POINTER(i), i])
    _bind(lib, "cuCtxGetCurrent", i, [ctypes.POINTER(p)])
    _bind(lib, "cuCtxSetCurrent", i, [p])
    _bind(lib, "cuDevicePrimaryCtxRetain", i, [ctypes.POINTER(p), i])
    _bind(lib, "cuModuleLoadData", i, [ctypes.POINTER(p), p])
    _bind(lib, "cuModuleGetFunction", i, [ctypes.POINTER(p), p, ctypes.c_char_p])
    _bind(lib, "cuLaunchKernel", i, [p, u, u, u, u, u, u, u, p, ctypes.POINTER(p), ctypes.POINTER(p)])
    _bind(lib, "cuModuleUnload", i, [p])
    _bind(lib, "cuCtxSynchronize", i, [])
    return lib


class CudaRuntime:
    """libcudart through ctypes: the cheapest stack there is, so it sweeps CUDA 11/12/13 fast.
    With the same CUDA's libnvrtc beside it, it also JIT-compiles a kernel to SASS and to PTX."""

    ATTR_CC_MAJOR, ATTR_CC_MINOR = 75, 76
    H2D, D2H = 1, 2

    def _find(self):
        # A conda environment keeps libcudart in its own lib/ (the cuda-cudart package): its prefix
        # is where the Python that runs the probe sits, marked by conda-meta/.
        prefix = os.path.dirname(os.path.dirname(os.path.abspath(sys.executable)))
        if os.path.isdir(os.path.join(prefix, "conda-meta")):
            found = sorted(glob.glob(os.path.join(prefix, "lib", "libcudart.so*")))
            if found:
                return found[-1]
        patterns = ["nvidia/cu*/lib/libcudart.so*", "nvidia/cuda_runtime/lib/libcudart.so*"]
        for base in sys.path:
            for pattern in patterns:
                found = sorted(glob.glob(os.path.join(base, pattern)))
                if found:
                    return found[-1]
        import ctypes.util

        return ctypes.util.find_library("cudart")

    def _call(self, name, *args):
        code = getattr(self.lib, name)(*args)
        if code:
            self.lib.cudaGetErrorName.restype = ctypes.c_char_p
            self.lib.cudaGetErrorString.restype = ctypes.c_char_p
            raise CudaError("%s: %s (%d): %s" % (
                name, self.lib.cudaGetErrorName(code).decode(), code, self.lib.cudaGetErrorString(code).decode()))

    def _cu(self, name, *args):
        code = getattr(self.cu, name)(*args)
        if code:
            text, label = ctypes.c_char_p(), ctypes.c_char_p()
            self.cu.cuGetErrorName(code, ctypes.byref(label))
            self.cu.cuGetErrorString(code, ctypes.byref(text))
            raise DriverError(name, code, label.value.decode() if label.value else "CUresult %d" % code,
                              (text.value or b"").decode(errors="replace"))

    def import_(self, facts):
        path = self._find()
        if not path:
            raise ImportError("no libcudart found (is an nvidia-cuda-runtime wheel installed?)")
        self.lib = ctypes.CDLL(path)
        facts["library"] = path
        version = ctypes.c_int(0)
        try:  # CUDA 11's runtime answers this only with a driver present: not an import failure
            self._call("cudaRuntimeGetVersion", ctypes.byref(version))
            facts["cuda_runtime"] = facts["version"] = _cuda_version(version.value)  # the stack's version is its runtime's
        except CudaError as exc:
            facts["cuda_runtime_error"] = str(exc)
        self.nvrtc_path = facts["nvrtc_library"] = find_nvrtc(path)
        self.nvrtc = None
        if self.nvrtc_path:  # a broken libnvrtc is a fact for the JIT rungs, not an import failure
            try:
                self.nvrtc = load_nvrtc(self.nvrtc_path)
                facts["nvrtc_version"] = nvrtc_version(self.nvrtc)
                facts["nvrtc_builtins"] = self.nvrtc.builtins
            except (OSError, AttributeError) as exc:
                facts["nvrtc_error"] = str(exc)
        return self.lib

    def device(self, lib, facts):
        driver = ctypes.c_int(0)
        self._call("cudaDriverGetVersion", ctypes.byref(driver))
        facts.update(driver_cuda_version=_cuda_version(driver.value), devices=[])
        count = ctypes.c_int(0)
        self._call("cudaGetDeviceCount", ctypes.byref(count))
        facts["device_count"] = count.value
        get_props = getattr(lib, "cudaGetDeviceProperties_v2", None) or lib.cudaGetDeviceProperties
        for index in range(count.value):
            props = ctypes.create_string_buffer(16384)  # cudaDeviceProp starts with char name[256]
            get_props(props, index)
            major, minor = ctypes.c_int(0), ctypes.c_int(0)
            self._call("cudaDeviceGetAttribute", ctypes.byref(major), self.ATTR_CC_MAJOR, index)
            self._call("cudaDeviceGetAttribute", ctypes.byref(minor), self.ATTR_CC_MINOR, index)
            name = props.raw[:256].split(b"\0", 1)[0].decode(errors="replace")
            facts["devices"].append({"name": name, "cc": "%d.%d" % (major.value, minor.value)})
        if not count.value:
            raise StageFailed("cudaGetDeviceCount found no device")

    def _memcpy(self, rung):
        size = 1 << 20
        data = os.urandom(size)
        back = ctypes.create_string_buffer(size)
        pointer = ctypes.c_void_p()
        self._call("cudaMalloc", ctypes.byref(pointer), ctypes.c_size_t(size))
        try:
            self._call("cudaMemcpy", pointer, data, ctypes.c_size_t(size), self.H2D)
            self._call("cudaMemcpy", back, pointer, ctypes.c_size_t(size), self.D2H)
            self._call("cudaDeviceSynchronize")
        finally:
            self.lib.cudaFree(pointer)
        differ = 0 if back.raw == data else sum(1 for x, y in zip(back.raw, data) if x != y)
        rung.update(expected="%d random bytes back unchanged" % size,
                    found="unchanged" if not differ else "%d bytes differ" % differ, bytes_equal=not differ)
        if differ:
            raise StageFailed("the bytes copied back differ from those sent")

    def _jit_setup(self, facts):
        """Once for both JIT rungs: the device's compute capability and the driver API in the
        runtime's primary context. A failure here is the failure of each rung that needs it."""
        if getattr(self, "_setup", None) is not None:
            if isinstance(self._setup, Exception):
                raise self._setup
            return self._setup
        try:
            if self.nvrtc is None:
                raise CudaError("libnvrtc at %s could not be loaded: %s" % (self.nvrtc_path, facts.get("nvrtc_error")))
            ordinal, major, minor = ctypes.c_int(0), ctypes.c_int(0), ctypes.c_int(0)
            self._call("cudaGetDevice", ctypes.byref(ordinal))
            self._call("cudaDeviceGetAttribute", ctypes.byref(major), self.ATTR_CC_MAJOR, ordinal.value)
            self._call("cudaDeviceGetAttribute", ctypes.byref(minor), self.ATTR_CC_MINOR, ordinal.value)
            cc = "%d%d" % (major.value, minor.value)
            facts.update(jit_cc="%d.%d" % (major.value, minor.value), nvrtc_version=nvrtc_version(self.nvrtc))
            self._call("cudaFree", None)  # the runtime makes its primary context current on this thread
            self.cu = load_driver()
            self._cu("cuInit", 0)
            version = ctypes.c_int(0)
            self._cu("cuDriverGetVersion", ctypes.byref(version))
            facts["driver_cuda_version"] = _cuda_version(version.value)
            context = ctypes.c_void_p()
            self._cu("cuCtxGetCurrent", ctypes.byref(context))
            if context.value:
                facts["jit_context"] = "the runtime's primary context (current after cudaFree(0))"
            else:
                device = ctypes.c_int(0)
                self._cu("cuDeviceGet", ctypes.byref(device), ordinal.value)
                self._cu("cuDevicePrimaryCtxRetain", ctypes.byref(context), device)
                self._cu("cuCtxSetCurrent", context)
                facts["jit_context"] = "the device's primary context (cuDevicePrimaryCtxRetain)"
            self._setup = cc
        except Exception as exc:
            self._setup = exc
            raise
        return cc

    def _jit_rung(self, facts, kind):
        """Compile axpy with NVRTC to `kind` ('sass' or 'ptx'), load it with the driver, run it."""
        def body(rung):
            summary = facts.setdefault("jit", {}).setdefault(kind, {"compiled": False, "loaded": False, "ran": False})
            try:
                target = self._jit_target(facts, kind)
            except RungSkipped as exc:
                summary["skipped"] = str(exc)
                raise
            rung["nvrtc_version"] = facts["nvrtc_version"]
            rung["target"] = summary["target"] = target
            image, log = nvrtc_compile(self.nvrtc, target, "cubin" if kind == "sass" else "ptx")
            rung.update(image_bytes=len(image), loaded=False, ran=False)
            summary["compiled"] = True
            if log.strip():
                rung["nvrtc_log"] = log[-2000:]
            if kind == "ptx":
                rung["ptx_isa"] = summary["ptx_isa"] = facts["ptx_isa"] = ptx_isa(image)
            try:
                self._launch(image, rung, summary)
            except DriverError as exc:
                rung["cuda_error"] = {"call": exc.call, "name": exc.name, "code": exc.code, "text": exc.text}
                summary.update(error_name=exc.name, error_code=exc.code)
                raise
        return body

    def _jit_target(self, facts, kind):
        """sm_XY / compute_XY of the device; for PTX the newest older arch where this NVRTC
        does not know the device's own (the driver JIT-compiles PTX forward)."""
        if kind == "sass" and self.nvrtc is not None and not self.nvrtc.has_cubin:
            raise RungSkipped("NVRTC %s has no nvrtcGetCUBIN (it came with NVRTC 11.1)" % facts.get("nvrtc_version"))
        cc = self._jit_setup(facts)
        archs = self.nvrtc.archs
        facts["nvrtc_archs"] = archs
        if archs is None or int(cc) in archs:
            return ("sm_" if kind == "sass" else "compute_") + cc
        if kind == "sass":
            raise RungSkipped("NVRTC %s cannot compile SASS for sm_%s (it knows sm_%s): no machine code for this GPU "
                              "from this toolkit" % (facts["nvrtc_version"], cc, ", sm_".join(map(str, archs))))
        older = [arch for arch in archs if arch < int(cc)]
        if not older:
            raise StageFailed("NVRTC %s cannot compile for this GPU (sm_%s): its oldest target is sm_%d"
                              % (facts["nvrtc_version"], cc, archs[0]))
        facts["jit_ptx_fallback"] = "compute_%d" % older[-1]
        return "compute_%d" % older[-1]

    def _launch(self, image, rung, summary):
        buffer = ctypes.create_string_buffer(image)  # a copy with a NUL after it, as PTX needs
        module, function = ctypes.c_void_p(), ctypes.c_void_p()
        self._cu("cuModuleLoadData", ctypes.byref(module), ctypes.cast(buffer, ctypes.c_void_p))
        xs, ys = _axpy_inputs()
        x_host, y_host = (ctypes.c_float * AXPY_N)(*xs), (ctypes.c_float * AXPY_N)(*ys)
        reference = [AXPY_A * x + y for x, y in zip(x_host, y_host)]  # float32 inputs, float64 sums
        size = ctypes.c_size_t(ctypes.sizeof(x_host))
        x_dev, y_dev = ctypes.c_void_p(), ctypes.c_void_p()
        try:
            # with lazy loading (CUDA_MODULE_LOADING=LAZY, the default from CUDA 12.2) the kernel
            # is loaded here, not by cuModuleLoadData: "loaded" means both calls succeeded
            self._cu("cuModuleGetFunction", ctypes.byref(function), module, b"axpy")
            rung["loaded"] = summary["loaded"] = True
            self._call("cudaMalloc", ctypes.byref(x_dev), size)
            self._call("cudaMalloc", ctypes.byref(y_dev), size)
            self._call("cudaMemcpy", x_dev, x_host, size, self.H2D)
            self._call("cudaMemcpy", y_dev, y_host, size, self.H2D)
            args = [ctypes.c_float(AXPY_A), ctypes.c_void_p(x_dev.value), ctypes.c_void_p(y_dev.value), ctypes.c_int(AXPY_N)]
            params = (ctypes.c_void_p * len(args))(*[ctypes.addressof(arg) for arg in args])
            self._cu("cuLaunchKernel", function, (AXPY_N + 255) // 256, 1, 1, 256, 1, 1, 0, None, params, None)
            self._cu("cuCtxSynchronize")
            out = (ctypes.c_float * AXPY_N)()
            self._call("cudaMemcpy", out, y_dev, size, self.D2H)
            rung["ran"] = summary["ran"] = True
            _compare(rung, _relative_error(list(out), reference))
        finally:
            for pointer in (x_dev, y_dev):
                if pointer.value:
                    self.lib.cudaFree(pointer)
            self.cu.cuModuleUnload(module)

    def compute(self, lib, facts):
        facts["op"] = "memcpy round trip of 1048576 random bytes; axpy compiled by NVRTC to SASS and to PTX"
        memcpy = run_rung(facts, "memcpy", self._memcpy)
        facts["bytes_equal"] = memcpy.get("bytes_equal")
        if memcpy["ok"] is False:
            for name in ("jit_sass", "jit_ptx"):
                skip_rung(facts, name, NVRTC_NOT_FOUND if not self.nvrtc_path else "not run: the memcpy rung failed")
            finish_ladder(facts, memcpy)
        if not self.nvrtc_path:
            for name in ("jit_sass", "jit_ptx"):
                skip_rung(facts, name, NVRTC_NOT_FOUND)
            return finish_ladder(facts)
        sass = run_rung(facts, "jit_sass", self._jit_rung(facts, "sass"))
        ptx = run_rung(facts, "jit_ptx", self._jit_rung(facts, "ptx"))
        failed, warning = jit_outcome(facts, sass, ptx)
        if warning:
            warnings.warn(warning)
        ran = [name for name, rung in (("SASS", sass), ("PTX", ptx)) if rung.get("ran")]
        facts["op"] = "memcpy round trip of 1048576 random bytes; axpy compiled by NVRTC %s, run from %s" % (
            facts.get("nvrtc_version") or "?", " and ".join(ran) or "neither SASS nor PTX")
        finish_ladder(facts, failed)

    def bench(self, lib, facts):
        bench = Bench(facts, self.bench_config)
        with Telemetry(bench.nvml, facts):
            bench_cuda_runtime(self, bench)


def jit_outcome(facts, sass, ptx):
    """(the rung the stage fails with or None, a warning or None) from the jit_sass and jit_ptx
    rungs (see the module's docstring for the verdicts)."""
    if ptx["ok"] is False:
        unsupported = (ptx.get("cuda_error") or {}).get("code") == CUDA_ERROR_UNSUPPORTED_PTX_VERSION
        if not (unsupported and sass["ok"] is True):
            return ptx, None
        ptx["tolerated"] = True
        return None, (
            "CUDA_ERROR_UNSUPPORTED_PTX_VERSION (222): PTX from NVRTC %s (PTX ISA %s) cannot be JIT-compiled by this "
            "driver (it supports CUDA %s), while the SASS for %s from the same NVRTC runs: code that carries or "
            "JIT-compiles only PTX of this toolkit fails here" % (
                facts.get("nvrtc_version"), facts.get("ptx_isa"), facts.get("driver_cuda_version"), sass.get("target")))
    if sass["ok"] is False:
        return sass, None
    if sass["ok"] is None and ptx["ok"]:
        return None, "no SASS from NVRTC %s for this GPU (%s); its PTX for %s ran by the driver's JIT" % (
            facts.get("nvrtc_version"), sass.get("reason"), ptx.get("target"))
    return None, None


# ---------------------------------------------------------------------------
# The bench rung: how fast a working stack runs (run only when asked, after compute passed).
# Every figure goes to record["facts"]["figures"] as
#   {"measurement": "matmul", "dtype": "bf16", "value": 781.2, "unit": "TFLOP/s", "better": "higher",
#    "spread": 3.1, "repetitions": 10, "samples": [...], "size": "8192x8192x8192", "note": "...",
#    "clocks": {"before": {...}, "after": {...}}}      (NVML snapshots, see Nvml.snapshot)
# or, where the framework or GPU cannot do it, {"measurement", "dtype", "unsupported": "why"},
# or, where it broke, {"measurement", "dtype", "error": {...}}. A figure that broke does not
# fail the stage: the verdict is about compatibility, the bench only adds figures.
# ---------------------------------------------------------------------------

BENCH_DEFAULTS = {"measurements": ["matmul", "copy", "transfer", "launch", "train"],
                  "dtypes": ["fp64", "fp32", "tf32", "fp16", "bf16", "fp8"], "size": 8192, "repetitions": 10}
WARMUP_S = 0.3  # long enough for the clocks to rise from idle before the timed repetitions
COPY_BYTES = 1 << 30
TRANSFER_BYTES = 1 << 28
LAUNCHES = 200
CNN_BATCH, CNN_STEPS = 64, 50  # the cloud-Slurm seed's per-worker batch; steps per timed repetition
CNN_NOTE = "Conv2D(32, 3x3) -> Dense 128 -> Dense 10, SGD lr 0.2, batch 64 of 28x28 synthetic images (the cloud-Slurm seed's model)"
THROTTLE_REASONS = ((0x1, "gpu_idle"), (0x2, "applications_clocks"), (0x4, "sw_power_cap"), (0x8, "hw_slowdown"),
                    (0x10, "sync_boost"), (0x20, "sw_thermal"), (0x40, "hw_thermal"), (0x80, "hw_power_brake"),
                    (0x100, "display_clocks"))


class Unsupported(Exception):
    """This framework or GPU cannot make this figure: recorded with the reason, not as an error."""


class Nvml:
    """The GPU's clocks, power, temperature and throttle reasons, through libnvidia-ml.so.1 (NVML's C API)."""

    def __init__(self):
        self.lib, self.handle, self.error = None, None, None
        try:
            lib = ctypes.CDLL("libnvidia-ml.so.1")
            self._check(lib.nvmlInit_v2(), "nvmlInit_v2")
            handle = ctypes.c_void_p()
            visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
            if visible.startswith(("GPU-", "MIG-")):  # the local executor pins a probe to one GPU by UUID
                self._check(lib.nvmlDeviceGetHandleByUUID(visible.encode(), ctypes.byref(handle)), "nvmlDeviceGetHandleByUUID")
            else:
                index = int(visible) if visible.isdigit() else 0
                self._check(lib.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(handle)), "nvmlDeviceGetHandleByIndex_v2")
            self.lib, self.handle = lib, handle
        except (OSError, AttributeError, RuntimeError) as exc:
            self.error = str(exc)

    @staticmethod
    def _check(code, call):
        if code:
            raise RuntimeError("%s returned NVML error %d" % (call, code))

    def _uint(self, call, *args):
        value = ctypes.c_uint(0)
        code = getattr(self.lib, call)(self.handle, *(args + (ctypes.byref(value),)))
        return value.value if code == 0 else None

    def snapshot(self):
        if self.lib is None:
            return {"error": self.error}
        reasons = ctypes.c_ulonglong(0)
        query = getattr(self.lib, "nvmlDeviceGetCurrentClocksEventReasons", None) or self.lib.nvmlDeviceGetCurrentClocksThrottleReasons
        throttle = None
        if query(self.handle, ctypes.byref(reasons)) == 0:
            throttle = [name for bit, name in THROTTLE_REASONS if reasons.value & bit]
        power, limit = self._uint("nvmlDeviceGetPowerUsage"), self._uint("nvmlDeviceGetEnforcedPowerLimit")
        return {"sm_mhz": self._uint("nvmlDeviceGetClockInfo", 1), "mem_mhz": self._uint("nvmlDeviceGetClockInfo", 2),
                "max_sm_mhz": self._uint("nvmlDeviceGetMaxClockInfo", 1), "temp_c": self._uint("nvmlDeviceGetTemperature", 0),
                "power_w": power / 1000.0 if power is not None else None,
                "power_limit_w": limit / 1000.0 if limit is not None else None, "throttle": throttle}


class NvmlUtilization(ctypes.Structure):
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


class NvmlMemory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


TELEMETRY_PERIOD_S = 0.1
TELEMETRY_MAX = 12000  # 20 minutes at 10 Hz: the record stays bounded however long the bench runs
TELEMETRY_COLUMNS = ["t_s", "util_pct", "memory_used_mib", "power_w", "sm_mhz", "temp_c"]


class Telemetry:
    """NVML samples every TELEMETRY_PERIOD_S in a daemon thread while the bench runs:
    facts["telemetry"] = {"columns": TELEMETRY_COLUMNS, "samples": [[...], ...]} (t_s from its start)."""

    def __init__(self, nvml, facts):
        import threading

        self.nvml, self.samples, self.stop = nvml, [], threading.Event()
        facts["telemetry"] = {"columns": TELEMETRY_COLUMNS, "period_s": TELEMETRY_PERIOD_S, "samples": self.samples}
        self.thread = threading.Thread(target=self._run, name="gpucompat-telemetry", daemon=True)

    def _run(self):
        began = time.perf_counter()
        lib, handle = self.nvml.lib, self.nvml.handle
        util, memory, value = NvmlUtilization(), NvmlMemory(), ctypes.c_uint(0)
        while not self.stop.wait(TELEMETRY_PERIOD_S) and len(self.samples) < TELEMETRY_MAX:
            row = [round(time.perf_counter() - began, 3)]
            row.append(util.gpu if lib.nvmlDeviceGetUtilizationRates(handle, ctypes.byref(util)) == 0 else None)
            row.append(memory.used >> 20 if lib.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(memory)) == 0 else None)
            row.append(value.value / 1000.0 if lib.nvmlDeviceGetPowerUsage(handle, ctypes.byref(value)) == 0 else None)
            row.append(value.value if lib.nvmlDeviceGetClockInfo(handle, 1, ctypes.byref(value)) == 0 else None)
            row.append(value.value if lib.nvmlDeviceGetTemperature(handle, 0, ctypes.byref(value)) == 0 else None)
            self.samples.append(row)

    def __enter__(self):
        # GPUCOMPAT_TELEMETRY=0 turns the sampling off: benchmarks/bench_rung.py measures what it costs
        if self.nvml.lib is not None and os.environ.get("GPUCOMPAT_TELEMETRY") != "0":
            self.thread.start()
        return self

    def __exit__(self, *_exc):
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join(timeout=2)


def _quartiles(samples):
    ordered = sorted(samples)
    def at(q):
        position = q * (len(ordered) - 1)
        low = int(position)
        high = min(low + 1, len(ordered) - 1)
        return ordered[low] + (ordered[high] - ordered[low]) * (position - low)
    return at(0.25), at(0.5), at(0.75)


class Bench:
    """Runs measurements and records their figures; one per (measurement, dtype)."""

    def __init__(self, facts, config):
        self.config = dict(BENCH_DEFAULTS, **(config or {}))
        self.facts = facts
        self.nvml = Nvml()
        facts.update(config=self.config, figures=[])
        if self.nvml.error:
            facts["nvml_error"] = self.nvml.error

    def wants(self, measurement):
        return measurement in self.config["measurements"]

    def matmuls(self, body_for):
        """A matrix-product figure per data type the configuration asks for; body_for(dtype) makes each."""
        if self.wants("matmul"):
            for name in self.config["dtypes"]:
                self.measure("matmul", name, "TFLOP/s", body_for(name))

    def memory_and_launch(self, copy, transfer, launch):
        """The device copy, both pinned transfers and the launch latency, each where the configuration asks for it."""
        if self.wants("copy"):
            self.measure("copy", "", "GB/s", copy)
        if self.wants("transfer"):
            self.measure("h2d", "", "GB/s", transfer("h2d"))
            self.measure("d2h", "", "GB/s", transfer("d2h"))
        if self.wants("launch"):
            self.measure("launch", "", "us", launch, better="lower")

    def measure(self, measurement, dtype, unit, body, better="higher"):
        """body() -> (samples in `unit`, {"size": ..., "note": ...}); raises Unsupported where it cannot."""
        figure = {"measurement": measurement, "dtype": dtype}
        self.facts["figures"].append(figure)
        before = self.nvml.snapshot()
        began = time.perf_counter()
        try:
            samples, extra = body()
            low, median, high = _quartiles(samples)
            figure.update(value=median, unit=unit, better=better, spread=high - low if len(samples) > 1 else None,
                          repetitions=len(samples), samples=[round(s, 6) for s in samples], **extra)
        except Unsupported as exc:
            figure["unsupported"] = str(exc)
        except Exception as exc:  # the evidence is the point; the stage itself goes on
            figure["error"] = _error(exc)
        figure["duration_s"] = round(time.perf_counter() - began, 3)
        figure["clocks"] = {"before": before, "after": self.nvml.snapshot()}
        LOG.info("bench %s %s: %s in %.3f s", measurement, dtype or "-", "%.4g %s" % (figure["value"], unit) if "value" in figure
                 else figure.get("unsupported") or (figure.get("error") or {}).get("type"), figure["duration_s"])
        _checkpoint()
        return figure


REPETITION_S = 0.05


def _batch(one_s):
    """How many runs of one_s seconds make one repetition of about REPETITION_S (1 to 50)."""
    return max(1, min(50, int(REPETITION_S / max(one_s, 1e-6))))


def _timed(run, sync, reps, warmup_s=WARMUP_S):
    """Seconds per repetition of run(), timed by the wall clock around a synchronising call."""
    began = time.perf_counter()
    run()
    sync()
    while time.perf_counter() - began < warmup_s:
        run()
        sync()
    samples = []
    for _ in range(reps):
        start = time.perf_counter()
        run()
        sync()
        samples.append(time.perf_counter() - start)
    return samples


def bench_torch(torch, bench, import_seconds):
    reps, n = bench.config["repetitions"], bench.config["size"]
    cuda = torch.device("cuda")

    def events(run, count=reps):
        """Seconds per run(), CUDA events around each repetition (the device's own clock); a repetition
        is a batch of back-to-back runs lasting about REPETITION_S, as a steady workload is."""
        one = _timed(run, torch.cuda.synchronize, 1)[0]
        batch = _batch(one)
        samples = []
        for _ in range(count):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(batch):
                run()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) / 1000.0 / batch)
        return samples

    dtypes = {"fp64": torch.float64, "fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}

    def matmul(name):
        def body():
            size = n // 2 if name == "fp64" else n  # fp64 runs at 1/2 to 1/64 of fp32: a smaller product keeps it short
            tf32 = torch.backends.cuda.matmul.allow_tf32
            torch.backends.cuda.matmul.allow_tf32 = name == "tf32"
            try:
                if name == "fp8":
                    major, minor = torch.cuda.get_device_capability()
                    if (major, minor) < (8, 9) or not hasattr(torch, "_scaled_mm") or not hasattr(torch, "float8_e4m3fn"):
                        raise Unsupported("fp8 matrix products need compute capability 8.9+ and torch._scaled_mm")
                    a = torch.randn(size, size, device=cuda).to(torch.float8_e4m3fn)
                    b = torch.randn(size, size, device=cuda).to(torch.float8_e4m3fn).t()  # column-major, as cuBLASLt wants
                    scale = torch.tensor(1.0, device=cuda)
                    run = lambda: torch._scaled_mm(a, b, scale_a=scale, scale_b=scale, out_dtype=torch.bfloat16)  # noqa: E731
                    note = "torch._scaled_mm, e4m3 inputs, bf16 output"
                else:
                    a, b = torch.randn(size, size, device=cuda, dtype=dtypes[name]), torch.randn(size, size, device=cuda, dtype=dtypes[name])
                    out = torch.empty(size, size, device=cuda, dtype=dtypes[name])
                    run = lambda: torch.matmul(a, b, out=out)  # noqa: E731
                    note = "torch.matmul, allow_tf32=%s" % (name == "tf32")
                seconds = events(run)
            finally:
                torch.backends.cuda.matmul.allow_tf32 = tf32
                torch.cuda.empty_cache()
            return [2.0 * size ** 3 / s / 1e12 for s in seconds], {"size": "%dx%dx%d" % (size, size, size), "note": note}
        return body

    bench.matmuls(matmul)

    def copy():
        src = torch.empty(COPY_BYTES // 4, dtype=torch.float32, device=cuda)
        dst = torch.empty_like(src)
        seconds = events(lambda: dst.copy_(src))
        return [2.0 * COPY_BYTES / s / 1e9 for s in seconds], {"size": "%d MiB" % (COPY_BYTES >> 20), "note": "dst.copy_(src): bytes read + written"}

    def transfer(direction):
        def body():
            host = torch.empty(TRANSFER_BYTES, dtype=torch.uint8, pin_memory=True)
            device = torch.empty(TRANSFER_BYTES, dtype=torch.uint8, device=cuda)
            run = (lambda: device.copy_(host, non_blocking=True)) if direction == "h2d" else (lambda: host.copy_(device, non_blocking=True))
            return [TRANSFER_BYTES / s / 1e9 for s in events(run)], {"size": "%d MiB" % (TRANSFER_BYTES >> 20), "note": "pinned host memory"}
        return body

    def launch():
        x = torch.zeros(1, device=cuda)
        seconds = _timed(lambda: x.add_(1.0), torch.cuda.synchronize, LAUNCHES)
        return [s * 1e6 for s in seconds], {"note": "x.add_(1) on one element, then torch.cuda.synchronize(): launch and round trip"}

    bench.memory_and_launch(copy, transfer, launch)
    if bench.wants("train"):
        first = {}

        def train():
            began = time.perf_counter()
            nn = torch.nn
            model = nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Flatten(), nn.Linear(32 * 26 * 26, 128), nn.ReLU(),
                                  nn.Linear(128, 10)).to(cuda)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.2)
            loss_fn = nn.CrossEntropyLoss()
            x = torch.rand(CNN_BATCH, 1, 28, 28, device=cuda)
            y = torch.randint(0, 10, (CNN_BATCH,), device=cuda)

            def step():
                optimizer.zero_grad(set_to_none=True)
                loss_fn(model(x), y).backward()
                optimizer.step()

            step()
            torch.cuda.synchronize()
            first["seconds"] = import_seconds + time.perf_counter() - began
            first["step"] = step

            def steps():
                for _ in range(CNN_STEPS):
                    step()
            return [CNN_BATCH * CNN_STEPS / s for s in events(steps, max(3, reps // 2))], {"note": CNN_NOTE}

        bench.measure("train", "fp32", "images/s", train)
        window = bench.config.get("profile")
        if window and "step" in first:
            try:
                bench.facts["profile"] = torch_profile_window(torch, first["step"], int(window["start"]), int(window["steps"]))
            except Exception as exc:  # a profiler that cannot run is a fact, not a failure
                bench.facts["profile"] = {"error": _error(exc)}
            _checkpoint()
        bench.measure("first_step", "", "s", lambda: _first_step(first, "import torch, build the model, one training step"), better="lower")


PROFILE_TRACE_MAX = 100 << 20  # a trace larger than this (compressed) is not kept


def _window_steps(step, sync, start, count, enter, leave):
    """Step times of a run with a profiling window of `count` steps from step `start`, and of the
    same run without it just before (the control). What the window costs the steps outside it is
    the median of the steps after it (past the first 10, while the profiler's buffers are flushed)
    against the control's same steps, which removes what differs between steps of one run; drift
    between the two runs (clocks, heat) is not removed, so one reading is noisy."""
    total = start + count + max(200, count)

    def run(window):
        times = []
        for index in range(total):
            if window and index == start:
                enter()
            began = time.perf_counter()
            step()
            sync()
            times.append(time.perf_counter() - began)
            if window and index == start + count - 1:
                leave()
        return times

    control, timed = run(False), run(True)
    median = lambda samples: _quartiles(samples)[1] if samples else None  # noqa: E731
    after, control_after = timed[start + count + 10:], control[start + count + 10:]
    return {"start": start, "steps": count, "step_s_before": median(timed[max(0, min(5, start - 1)):start]),
            "step_s_inside": median(timed[start:start + count]), "step_s_just_after": median(timed[start + count:start + count + 10]),
            "step_s_after": median(after), "step_s_control": median(control_after),
            "overhead_outside": median(after) / median(control_after) - 1}


def _keep_trace(path):
    """The gzipped trace stays in the job directory unless it is larger than PROFILE_TRACE_MAX."""
    size = os.path.getsize(path)
    if size > PROFILE_TRACE_MAX:
        os.unlink(path)
        return None, size
    return path, size


def _top(durations):
    """The 10 largest of {name: [device µs, calls]}, each with its share of the whole."""
    total = sum(us for us, _ in durations.values()) or 1
    top = [{"kernel": name[:300], "device_us": round(us, 1), "calls": calls, "share": us / total}
           for name, (us, calls) in sorted(durations.items(), key=lambda item: item[1][0], reverse=True)[:10]]
    return top, round(total, 1)


def torch_profile_window(torch, step, start, count):
    """torch.profiler around `count` training steps from step `start`, never the whole run: the top
    kernels with their share of device time, the trace (gzip) in the job directory, and what the
    window cost the steps outside it."""
    import gzip
    import shutil

    from torch.profiler import ProfilerActivity, profile

    # Kineto leaves CUPTI attached after the profiler exits unless TEARDOWN_CUPTI=1, and every later
    # kernel launch pays for it (pytorch/pytorch#144455). torch keeps it attached because CUDA graphs
    # crashed when CUPTI was initialised again; this window has no CUDA graphs, so it is torn down
    # here unless the user chose otherwise.
    os.environ.setdefault("TEARDOWN_CUPTI", "1")
    window = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
    record = _window_steps(step, torch.cuda.synchronize, start, count, window.__enter__, lambda: window.__exit__(None, None, None))
    record["cupti_teardown"] = os.environ["TEARDOWN_CUPTI"]

    def device_us(event):
        return getattr(event, "self_device_time_total", None) or getattr(event, "self_cuda_time_total", 0) or 0

    record["top_kernels"], record["device_us_total"] = _top(
        {event.key: (device_us(event), event.count) for event in window.key_averages() if device_us(event) > 0})
    trace = os.path.abspath("profile-trace.json")
    window.export_chrome_trace(trace)
    with open(trace, "rb") as source, gzip.open(trace + ".gz", "wb") as target:
        shutil.copyfileobj(source, target)
    os.unlink(trace)
    record["trace"], record["trace_bytes"] = _keep_trace(trace + ".gz")
    return record


def jax_profile_window(jax, step, sync, start, count):
    """jax.profiler around `count` training steps from step `start`: its Perfetto trace (gzipped
    Chrome-trace JSON, kept in the job directory) and the top device kernels read from it."""
    import shutil
    import tempfile

    logs = tempfile.mkdtemp(prefix="gpucompat-jax-profile-")
    try:
        record = _window_steps(step, sync, start, count, lambda: jax.profiler.start_trace(logs, create_perfetto_trace=True),
                               jax.profiler.stop_trace)
        found = [os.path.join(d, f) for d, _, files in os.walk(logs) for f in files if f == "perfetto_trace.json.gz"]
        if not found:
            raise RuntimeError("jax.profiler wrote no perfetto_trace.json.gz")
        record["top_kernels"], record["device_us_total"] = _top(perfetto_device_time(found[0]))
        trace = os.path.abspath("profile-trace.json.gz")
        shutil.move(found[0], trace)
        record["trace"], record["trace_bytes"] = _keep_trace(trace)
    finally:
        shutil.rmtree(logs, ignore_errors=True)
    return record


def perfetto_device_time(path):
    """{kernel: [device µs, calls]} from a Chrome-trace JSON (gzipped) as jax.profiler writes it:
    complete events ("ph": "X") in the processes named /device:GPU:N, which hold the streams."""
    import gzip

    with gzip.open(path, "rt") as handle:
        events = json.load(handle)
    events = events.get("traceEvents", []) if isinstance(events, dict) else events
    devices = {e.get("pid") for e in events if e.get("ph") == "M" and e.get("name") == "process_name"
               and str((e.get("args") or {}).get("name", "")).startswith("/device:GPU")}
    durations = {}
    for event in events:
        if event.get("ph") == "X" and event.get("pid") in devices and event.get("dur"):
            entry = durations.setdefault(event.get("name", "?"), [0.0, 0])
            entry[0] += float(event["dur"])
            entry[1] += 1
    return durations


def _first_step(first, what):
    if "seconds" not in first:
        raise Unsupported("the training loop did not run")
    return [first["seconds"]], {"note": what}


def bench_jax(jax, bench, import_seconds):
    import jax.numpy as jnp
    import numpy as np

    jax.config.update("jax_enable_x64", True)  # for fp64; every array below names its dtype
    reps, n = bench.config["repetitions"], bench.config["size"]
    device = jax.devices("gpu")[0]
    block = lambda out: out.block_until_ready()  # noqa: E731
    types = {"fp64": jnp.float64, "fp32": jnp.float32, "tf32": jnp.float32, "fp16": jnp.float16, "bf16": jnp.bfloat16}

    def batched(call):
        """Seconds per call(): the wall clock around batches of back-to-back calls and one block_until_ready."""
        out = {}
        batch = _batch(_timed(lambda: out.update(r=call()), lambda: block(out["r"]), 1)[0])

        def run():
            for _ in range(batch):
                out["r"] = call()
        return [s / batch for s in _timed(run, lambda: block(out["r"]), reps, warmup_s=0)]

    def matmul(name):
        def body():
            size = n // 2 if name == "fp64" else n
            keys = jax.random.split(jax.random.PRNGKey(0))
            if name == "fp8":
                if not hasattr(jnp, "float8_e4m3fn"):
                    raise Unsupported("this jax has no float8_e4m3fn")
                a, b = (jax.random.normal(k, (size, size), dtype=jnp.float32).astype(jnp.float8_e4m3fn) for k in keys)
                f = jax.jit(lambda x, y: jax.lax.dot(x, y, preferred_element_type=jnp.bfloat16))
                note = "jax.lax.dot, e4m3 inputs, bf16 result"
            else:
                a, b = (jax.random.normal(k, (size, size), dtype=types[name]) for k in keys)
                precision = jax.lax.Precision.DEFAULT if name == "tf32" else jax.lax.Precision.HIGHEST
                f = jax.jit(lambda x, y: jnp.matmul(x, y, precision=precision))
                note = "jnp.matmul under jax.jit, precision %s%s" % (
                    precision, " (XLA's TF32 on Ampere and newer)" if name == "tf32" else "")
            a, b = jax.device_put(a, device), jax.device_put(b, device)
            seconds = batched(lambda: f(a, b))
            return [2.0 * size ** 3 / s / 1e12 for s in seconds], {"size": "%dx%dx%d" % (size, size, size), "note": note}
        return body

    bench.matmuls(matmul)

    def copy():
        x = jax.device_put(jnp.zeros(COPY_BYTES // 4, dtype=jnp.float32), device)
        f = jax.jit(lambda v: v + 1.0)
        seconds = batched(lambda: f(x))
        return [2.0 * COPY_BYTES / s / 1e9 for s in seconds], {"size": "%d MiB" % (COPY_BYTES >> 20), "note": "jax.jit(x + 1): bytes read + written"}

    def transfer(direction):
        def body():
            host = np.ones(TRANSFER_BYTES, dtype=np.uint8)
            if direction == "h2d":
                out = {}
                seconds = _timed(lambda: out.update(r=jax.device_put(host, device)), lambda: block(out["r"]), reps)
            else:  # a new array each time: a jax.Array keeps its host copy once fetched
                seconds = []
                for index in range(reps + 2):
                    fresh = block(jax.device_put(host, device))
                    start = time.perf_counter()
                    np.asarray(fresh)
                    if index >= 2:
                        seconds.append(time.perf_counter() - start)
            return [TRANSFER_BYTES / s / 1e9 for s in seconds], {"size": "%d MiB" % (TRANSFER_BYTES >> 20),
                                                              "note": "jax.device_put / jax.device_get (JAX stages host memory itself; not pinned)"}
        return body

    def launch():
        f = jax.jit(lambda v: v + 1.0)
        x = jax.device_put(jnp.zeros((), dtype=jnp.float32), device)
        out = {}
        seconds = _timed(lambda: out.update(r=f(x)), lambda: block(out["r"]), LAUNCHES)
        return [s * 1e6 for s in seconds], {"note": "a jitted x + 1 on a scalar, then block_until_ready(): dispatch and round trip"}

    bench.memory_and_launch(copy, transfer, launch)
    if bench.wants("train"):
        first = {}

        def train():
            began = time.perf_counter()
            keys = jax.random.split(jax.random.PRNGKey(1), 4)
            scale = lambda fan_in: (2.0 / fan_in) ** 0.5  # noqa: E731
            params = {
                "conv": jax.random.normal(keys[0], (32, 1, 3, 3), dtype=jnp.float32) * scale(9),
                "dense": jax.random.normal(keys[1], (32 * 26 * 26, 128), dtype=jnp.float32) * scale(32 * 26 * 26),
                "out": jax.random.normal(keys[2], (128, 10), dtype=jnp.float32) * scale(128),
            }

            def loss(p, x, y):
                h = jax.lax.conv_general_dilated(x, p["conv"], (1, 1), "VALID", dimension_numbers=("NCHW", "OIHW", "NCHW"))
                h = jax.nn.relu(h).reshape(x.shape[0], -1)
                logits = jax.nn.relu(h @ p["dense"]) @ p["out"]
                return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))

            @jax.jit
            def step(p, x, y):
                grads = jax.grad(loss)(p, x, y)
                return jax.tree_util.tree_map(lambda w, g: w - 0.2 * g, p, grads)

            x = jax.device_put(jax.random.uniform(keys[3], (CNN_BATCH, 1, 28, 28), dtype=jnp.float32), device)
            y = jax.device_put(jnp.arange(CNN_BATCH, dtype=jnp.int32) % 10, device)
            state = {"p": jax.device_put(params, device)}
            state["p"] = step(state["p"], x, y)
            jax.block_until_ready(state["p"])
            first["seconds"] = import_seconds + time.perf_counter() - began
            first["step"] = lambda: state.update(p=step(state["p"], x, y))
            first["sync"] = lambda: jax.block_until_ready(state["p"])

            def steps():
                for _ in range(CNN_STEPS):
                    state["p"] = step(state["p"], x, y)
            seconds = _timed(steps, lambda: jax.block_until_ready(state["p"]), max(3, reps // 2))
            return [CNN_BATCH * CNN_STEPS / s for s in seconds], {"note": CNN_NOTE + ", in plain JAX (lax.conv, jax.grad)"}

        bench.measure("train", "fp32", "images/s", train)
        window = bench.config.get("profile")
        if window and "step" in first:
            try:
                bench.facts["profile"] = jax_profile_window(jax, first["step"], first["sync"], int(window["start"]), int(window["steps"]))
            except Exception as exc:  # a profiler that cannot run is a fact, not a failure
                bench.facts["profile"] = {"error": _error(exc)}
            _checkpoint()
        bench.measure("first_step", "", "s", lambda: _first_step(first, "import jax, build the model, JIT-compile and run one step"), better="lower")


def jax_scale_figures(jax, bench, counts):
    """Data-parallel training of the seed's CNN on 1, 2, 4 ... GPUs of this node the way JAX does it:
    one process, each step's batch split over a mesh of N devices and the parameters replicated, so
    that XLA adds the gradient all-reduce (NCCL). Learnable synthetic data (each image is noise plus
    0.2 x its class's template); figures as scale_figures' (scaling_cnn)."""
    import jax.numpy as jnp
    import numpy as np

    try:
        from jax.sharding import Mesh, NamedSharding, PartitionSpec
    except ImportError:  # before jax 0.4.1: the scaling figures say so, the rest of the bench stands
        Mesh = None

    devices, sizes, lr = jax.devices("gpu"), SCALE_RUNS["cnn"], 0.05
    templates = jax.random.normal(jax.random.PRNGKey(7), (10, 1, 28, 28), dtype=jnp.float32)

    def loss(p, x, y):
        h = jax.lax.conv_general_dilated(x, p["conv"], (1, 1), "VALID", dimension_numbers=("NCHW", "OIHW", "NCHW"))
        logits = jax.nn.relu(jax.nn.relu(h).reshape(x.shape[0], -1) @ p["dense"]) @ p["out"]
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1)), logits

    def images(key, count):
        y = jax.random.randint(key, (count,), 0, 10)
        return jax.random.normal(jax.random.fold_in(key, 1), (count, 1, 28, 28), dtype=jnp.float32) + 0.2 * templates[y], y

    alone = None
    for n in sorted(set(counts)):
        def body():
            if Mesh is None:
                raise Unsupported("JAX's data-parallel scaling needs jax.sharding (jax 0.4.1 or newer)")
            if n > len(devices):
                raise Unsupported("%d GPUs asked, %d visible" % (n, len(devices)))
            mesh = Mesh(np.array(devices[:n]), ("data",))
            split, replicated = NamedSharding(mesh, PartitionSpec("data")), NamedSharding(mesh, PartitionSpec())
            keys = jax.random.split(jax.random.PRNGKey(1), 3)
            # the scale of torch's default init (uniform within 1/sqrt(fan_in)): larger weights diverge at this lr
            init = lambda key, shape, fan_in: jax.random.normal(key, shape, dtype=jnp.float32) * (1.0 / (3 * fan_in)) ** 0.5  # noqa: E731
            params = jax.device_put({"conv": init(keys[0], (32, 1, 3, 3), 9), "dense": init(keys[1], (32 * 26 * 26, 128), 32 * 26 * 26),
                                     "out": init(keys[2], (128, 10), 128)}, replicated)

            @jax.jit
            def step(p, x, y):
                (value, _), grads = jax.value_and_grad(loss, has_aux=True)(p, x, y)
                return jax.tree_util.tree_map(lambda w, g: w - lr * g, p, grads), value

            global_batch = sizes["batch"] * n
            steps = sizes["images"] // global_batch
            pool = [jax.device_put(images(jax.random.PRNGKey(100 + i), global_batch), split) for i in range(16)]
            params, _ = step(params, *pool[0])  # compiles
            jax.block_until_ready(params)
            epoch_seconds, losses = [], []
            for _ in range(sizes["epochs"]):
                began, values = time.perf_counter(), []
                for index in range(steps):
                    params, value = step(params, *pool[index % len(pool)])
                    values.append(value)
                jax.block_until_ready(params)
                epoch_seconds.append(time.perf_counter() - began)
                losses.append(float(jnp.mean(jnp.stack(values))))
            x, y = images(jax.random.PRNGKey(99), 4096)
            accuracy = float(jnp.mean(jnp.argmax(loss(jax.device_get(params), x, y)[1], axis=1) == y))
            timed = epoch_seconds[1:] or epoch_seconds
            rate = steps * global_batch * len(timed) / sum(timed)
            extra = {"epoch_seconds": epoch_seconds, "final_loss": losses[-1], "accuracy": accuracy, "processes": n,
                     "note": "one process, jax.jit over a mesh of %d GPU(s): batch split, parameters replicated (XLA all-reduce), "
                             "cnn model, %d x %d images, batch %d per GPU, 16 learnable synthetic batches in turn"
                             % (n, sizes["epochs"], steps * global_batch, sizes["batch"])}
            if alone:
                extra["speedup"] = rate / alone
                extra["efficiency"] = extra["speedup"] / n
            return [rate], extra
        figure = bench.measure("scaling_cnn", "fp32", "images/s", body)
        figure["processes"] = n
        if n == 1 and "value" in figure:
            alone = figure["value"]


def bench_cupy(cupy, bench):
    import numpy as np

    reps, n = bench.config["repetitions"], bench.config["size"]

    def events(run, count=reps):  # as bench_torch's: CUDA events around batches of back-to-back runs
        batch = _batch(_timed(run, cupy.cuda.Device().synchronize, 1)[0])
        samples = []
        for _ in range(count):
            start, end = cupy.cuda.Event(), cupy.cuda.Event()
            start.record()
            for _ in range(batch):
                run()
            end.record()
            end.synchronize()
            samples.append(cupy.cuda.get_elapsed_time(start, end) / 1000.0 / batch)
        return samples

    unsupported = {"tf32": "CuPy turns TF32 on only through CUPY_TF32=1, read at import", "bf16": "CuPy has no bfloat16 dtype",
                   "fp8": "CuPy has no fp8 dtype"}

    def matmul(name):
        def body():
            if name in unsupported:
                raise Unsupported(unsupported[name])
            size = n // 2 if name == "fp64" else n
            dtype = {"fp64": "float64", "fp32": "float32", "fp16": "float16"}[name]
            a = cupy.random.standard_normal((size, size), dtype="float64" if dtype == "float64" else "float32").astype(dtype)
            b = a.T.copy()
            out = cupy.empty((size, size), dtype=dtype)
            seconds = events(lambda: cupy.matmul(a, b, out=out))
            return [2.0 * size ** 3 / s / 1e12 for s in seconds], {"size": "%dx%dx%d" % (size, size, size), "note": "cupy.matmul (cuBLAS)"}
        return body

    bench.matmuls(matmul)

    def copy():
        src = cupy.empty(COPY_BYTES // 4, dtype="float32")
        dst = cupy.empty_like(src)
        seconds = events(lambda: cupy.copyto(dst, src))
        return [2.0 * COPY_BYTES / s / 1e9 for s in seconds], {"size": "%d MiB" % (COPY_BYTES >> 20), "note": "cupy.copyto: bytes read + written"}

    def transfer(direction):
        def body():
            pinned = cupy.cuda.alloc_pinned_memory(TRANSFER_BYTES)
            host = np.frombuffer(pinned, dtype=np.uint8, count=TRANSFER_BYTES)
            device = cupy.empty(TRANSFER_BYTES, dtype="uint8")
            run = (lambda: device.set(host)) if direction == "h2d" else (lambda: device.get(out=host))
            return [TRANSFER_BYTES / s / 1e9 for s in events(run)], {"size": "%d MiB" % (TRANSFER_BYTES >> 20), "note": "pinned host memory"}
        return body

    def launch():
        x = cupy.zeros(1, dtype="float32")
        seconds = _timed(lambda: x.__iadd__(1.0), cupy.cuda.Device().synchronize, LAUNCHES)
        return [s * 1e6 for s in seconds], {"note": "x += 1 on one element, then synchronize: launch and round trip"}

    bench.memory_and_launch(copy, transfer, launch)
    if bench.wants("train"):
        bench.measure("train", "fp32", "images/s", _raise(Unsupported("CuPy has no automatic differentiation: the training loop is torch's and JAX's")))


def _raise(exc):
    def body():
        raise exc
    return body


def bench_cuda_runtime(runtime, bench):
    """memcpy bandwidths through libcudart (pinned host memory from cudaMallocHost, cudaEvent timing)
    and launch latency of the NVRTC axpy kernel through the driver API; no BLAS, no training."""
    reps = bench.config["repetitions"]
    call, lib = runtime._call, runtime.lib
    lib.cudaEventElapsedTime.argtypes = [ctypes.POINTER(ctypes.c_float), ctypes.c_void_p, ctypes.c_void_p]

    def events(run):
        start, end = ctypes.c_void_p(), ctypes.c_void_p()
        call("cudaEventCreate", ctypes.byref(start))
        call("cudaEventCreate", ctypes.byref(end))
        try:
            run()
            call("cudaDeviceSynchronize")
            samples = []
            for _ in range(reps):
                call("cudaEventRecord", start, None)
                run()
                call("cudaEventRecord", end, None)
                call("cudaEventSynchronize", end)
                elapsed = ctypes.c_float(0.0)
                call("cudaEventElapsedTime", ctypes.byref(elapsed), start, end)
                samples.append(elapsed.value / 1000.0)
            return samples
        finally:
            lib.cudaEventDestroy(start)
            lib.cudaEventDestroy(end)

    def with_buffers(nbytes, pinned, body):
        first, second = ctypes.c_void_p(), ctypes.c_void_p()
        call("cudaMallocHost" if pinned else "cudaMalloc", ctypes.byref(first), ctypes.c_size_t(nbytes))
        try:
            call("cudaMalloc", ctypes.byref(second), ctypes.c_size_t(nbytes))
            try:
                return body(first, second)
            finally:
                lib.cudaFree(second)
        finally:
            (lib.cudaFreeHost if pinned else lib.cudaFree)(first)

    def copy():
        size = ctypes.c_size_t(COPY_BYTES)
        seconds = with_buffers(COPY_BYTES, False, lambda a, b: events(lambda: call("cudaMemcpy", b, a, size, 3)))
        return [2.0 * COPY_BYTES / s / 1e9 for s in seconds], {"size": "%d MiB" % (COPY_BYTES >> 20), "note": "cudaMemcpy device to device: bytes read + written"}

    def transfer(direction):
        def body():
            size = ctypes.c_size_t(TRANSFER_BYTES)
            kind = runtime.H2D if direction == "h2d" else runtime.D2H
            seconds = with_buffers(TRANSFER_BYTES, True, lambda host, dev: events(
                lambda: call("cudaMemcpy", dev, host, size, kind) if kind == runtime.H2D else call("cudaMemcpy", host, dev, size, kind)))
            return [TRANSFER_BYTES / s / 1e9 for s in seconds], {"size": "%d MiB" % (TRANSFER_BYTES >> 20), "note": "cudaMemcpy, pinned host memory (cudaMallocHost)"}
        return body

    def launch():
        if runtime.nvrtc is None:
            raise Unsupported("no libnvrtc in this environment to compile a kernel with")
        facts = {}
        try:
            target = runtime._jit_target(facts, "sass")
            kind = "cubin"
        except RungSkipped:
            target, kind = runtime._jit_target(facts, "ptx"), "ptx"
        image, _log = nvrtc_compile(runtime.nvrtc, target, kind)
        buffer = ctypes.create_string_buffer(image)
        module, function = ctypes.c_void_p(), ctypes.c_void_p()
        runtime._cu("cuModuleLoadData", ctypes.byref(module), ctypes.cast(buffer, ctypes.c_void_p))
        pointer = ctypes.c_void_p()
        try:
            runtime._cu("cuModuleGetFunction", ctypes.byref(function), module, b"axpy")
            call("cudaMalloc", ctypes.byref(pointer), ctypes.c_size_t(4))
            args = [ctypes.c_float(0.0), ctypes.c_void_p(pointer.value), ctypes.c_void_p(pointer.value), ctypes.c_int(1)]
            params = (ctypes.c_void_p * len(args))(*[ctypes.addressof(arg) for arg in args])
            seconds = _timed(lambda: runtime._cu("cuLaunchKernel", function, 1, 1, 1, 32, 1, 1, 0, None, params, None),
                             lambda: runtime._cu("cuCtxSynchronize"), LAUNCHES)
        finally:
            if pointer.value:
                lib.cudaFree(pointer)
            runtime.cu.cuModuleUnload(module)
        return [s * 1e6 for s in seconds], {"note": "cuLaunchKernel of NVRTC's axpy (%s) on one element, then cuCtxSynchronize" % target}

    bench.matmuls(lambda name: _raise(Unsupported("a cuda-runtime stack has no BLAS")))
    bench.memory_and_launch(copy, transfer, launch)


# ---------------------------------------------------------------------------
# Sharing one GPU (time-slicing): the same workload in N processes at once. Each process is this
# probe started again with --share-child; it imports the framework, builds its workload, warms
# up, says it is ready, waits for the word to go, then runs the workload back to back for
# SHARE_WINDOW_S seconds and reports how much work it did. N = 1 is the alone figure, timed the
# same way, so a loss is (alone - sum of the N) / alone. Figures: {"measurement": "matmul",
# "dtype": "bf16", "processes": N, "value": the sum, "per_process": [...], "loss": ..., ...}.
# ---------------------------------------------------------------------------

SHARE_WINDOW_S = 5.0
SHARE_WORKLOADS = (("matmul", "bf16"), ("matmul", "fp32"), ("train", "fp32"))


def torch_workload(torch, measurement, dtype, size):
    """(run, sync, work per run, unit) for one process's share of the GPU."""
    cuda = torch.device("cuda")
    if measurement == "matmul":
        torch.backends.cuda.matmul.allow_tf32 = False
        kind = {"bf16": torch.bfloat16, "fp32": torch.float32}[dtype]
        a, b = torch.randn(size, size, device=cuda, dtype=kind), torch.randn(size, size, device=cuda, dtype=kind)
        out = torch.empty(size, size, device=cuda, dtype=kind)
        return (lambda: torch.matmul(a, b, out=out)), torch.cuda.synchronize, 2.0 * size ** 3 / 1e12, "TFLOP/s"
    nn = torch.nn
    model = nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Flatten(), nn.Linear(32 * 26 * 26, 128), nn.ReLU(), nn.Linear(128, 10)).to(cuda)
    optimizer, loss_fn = torch.optim.SGD(model.parameters(), lr=0.2), nn.CrossEntropyLoss()
    x, y = torch.rand(CNN_BATCH, 1, 28, 28, device=cuda), torch.randint(0, 10, (CNN_BATCH,), device=cuda)

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        optimizer.step()
    return step, torch.cuda.synchronize, float(CNN_BATCH), "images/s"


def jax_workload(jax, measurement, dtype, size):
    import jax.numpy as jnp

    device = jax.devices("gpu")[0]
    if measurement != "matmul":
        raise Unsupported("JAX shares matrix products here; its training step is timed alone")
    kind = {"bf16": jnp.bfloat16, "fp32": jnp.float32}[dtype]
    keys = jax.random.split(jax.random.PRNGKey(0))
    a, b = (jax.device_put(jax.random.normal(k, (size, size), dtype=kind), device) for k in keys)
    f = jax.jit(lambda x, y: jnp.matmul(x, y, precision=jax.lax.Precision.HIGHEST))
    last = {}

    def run():
        last["r"] = f(a, b)
    return run, lambda: last["r"].block_until_ready(), 2.0 * size ** 3 / 1e12, "TFLOP/s"


def cupy_workload(cupy, measurement, dtype, size):
    if measurement != "matmul" or dtype != "fp32":
        raise Unsupported("CuPy shares fp32 matrix products here")
    a = cupy.random.standard_normal((size, size), dtype="float32")
    b, out = a.T.copy(), cupy.empty((size, size), dtype="float32")
    return (lambda: cupy.matmul(a, b, out=out)), cupy.cuda.Device().synchronize, 2.0 * size ** 3 / 1e12, "TFLOP/s"


def share_child(framework, spec, result_path):
    """One of N processes sharing the GPU (--share-child): ready, wait, run, report."""
    adapter = ADAPTERS[framework]()
    report = {"pid": os.getpid(), "started_at": time.time()}
    try:
        handle = adapter.import_({})
        adapter.device(handle, {})
        run, sync, work, unit = adapter.workload(handle, spec["measurement"], spec["dtype"], spec["size"])
        began = time.perf_counter()
        while time.perf_counter() - began < 1.0:  # warm-up: kernels chosen, clocks up
            run()
            sync()
        with open(os.path.join(spec["barrier"], "ready-%d" % os.getpid()), "w"):
            pass
        go = os.path.join(spec["barrier"], "go")
        deadline = time.time() + 300
        while not os.path.exists(go) and time.time() < deadline:
            time.sleep(0.005)
        runs, began = 0, time.perf_counter()
        while time.perf_counter() - began < SHARE_WINDOW_S:
            for _ in range(4):
                run()
            sync()
            runs += 4
        elapsed = time.perf_counter() - began
        report.update(value=work * runs / elapsed, unit=unit, runs=runs, seconds=elapsed)
    except Unsupported as exc:
        report["unsupported"] = str(exc)
    except Exception as exc:
        report["error"] = _error(exc)
    write(result_path, report)
    return 0 if "value" in report else 1


def share_figures(framework, bench, counts):
    """Run every shared workload alone and in N processes at once; one figure per (workload, N)."""
    import shutil
    import subprocess
    import tempfile

    mps_pipe = os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps")
    bench.facts["mps"] = {"pipe_directory": mps_pipe, "control_daemon": os.path.exists(os.path.join(mps_pipe, "control"))}
    counts = sorted(set([1] + [n for n in counts if 1 <= n <= 16]))
    for measurement, dtype in SHARE_WORKLOADS:
        if not (bench.wants(measurement) and (measurement != "matmul" or dtype in bench.config["dtypes"])):
            continue
        alone = None
        for n in counts:
            work = tempfile.mkdtemp(prefix="gpucompat-share-")

            def body():
                spec = {"measurement": measurement, "dtype": dtype, "size": bench.config["size"], "barrier": work}
                LOG.info("sharing one GPU: %d processes of %s %s", n, measurement, dtype)
                children = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--framework", framework,
                                              "--result", os.path.join(work, "child-%d.json" % i), "--share-child", json.dumps(spec)],
                                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for i in range(n)]
                deadline = time.time() + 600
                while time.time() < deadline and sum(name.startswith("ready-") for name in os.listdir(work)) < n:
                    if any(child.poll() is not None for child in children):
                        break
                    time.sleep(0.05)
                with open(os.path.join(work, "go"), "w"):
                    pass
                errors = [child.communicate(timeout=600)[1].decode(errors="replace")[-2000:] for child in children]
                reports = []
                for i in range(n):
                    try:
                        with open(os.path.join(work, "child-%d.json" % i)) as handle:
                            reports.append(json.load(handle))
                    except (OSError, ValueError):
                        reports.append({"error": {"type": "NoReport", "message": errors[i] or "the process left no report"}})
                unsupported = next((r["unsupported"] for r in reports if "unsupported" in r), None)
                if unsupported:
                    raise Unsupported(unsupported)
                broken = next((r for r in reports if "value" not in r), None)
                if broken:
                    raise RuntimeError("a sharing process failed: %s" % (broken.get("error") or {}).get("message", "")[:500])
                values = [r["value"] for r in reports]
                total = sum(values)
                extra = {"processes": n, "per_process": [round(v, 3) for v in values], "unit_note": reports[0]["unit"],
                         "note": "%d processes at once on one GPU (time-slicing), each for %.0f s; value is their sum" % (n, SHARE_WINDOW_S)}
                if alone:
                    extra["loss"] = (alone - total) / alone
                return [total], extra
            figure = bench.measure("shared_" + measurement, dtype, "TFLOP/s" if measurement == "matmul" else "images/s", body)
            shutil.rmtree(work, ignore_errors=True)
            if "value" not in figure:
                break
            figure["processes"] = n
            if n == 1:
                alone = figure["value"]


# ---------------------------------------------------------------------------
# Scaling over GPUs: data-parallel training through the framework's own launcher (torchrun, one
# process per GPU, NCCL), the seed's CNN and a larger model whose compute outweighs its gradient
# all-reduce, on 1, 2, 4 ... GPUs of this node and, inside a Slurm job of several nodes ([bench]
# nodes = [1, 2]), on N nodes through srun. The worker is ddp_worker.py beside this file.
# Figures: {"measurement": "scaling_cnn", "dtype": "fp32", "processes": N GPUs, "value": images/s,
# "epoch_seconds", "final_loss", "accuracy", "speedup", "efficiency"}, plus "nodes" across nodes.
# ---------------------------------------------------------------------------

SCALE_RUNS = {"cnn": {"epochs": 4, "images": 60000, "batch": 64}, "large": {"epochs": 3, "images": 20480, "batch": 64}}
NOT_IN_SLURM = "not measured: needs a Slurm allocation"


def scale_figures(torch, bench, counts):
    import subprocess
    import tempfile

    worker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ddp_worker.py")
    available = torch.cuda.device_count()
    # Across nodes: max(scale) GPUs on each (what the Slurm executor asked for), fewer where fewer are visible.
    per_node = max(1, min(max(counts), available))
    for model, sizes in SCALE_RUNS.items():
        alone = None
        args = ["--model", model, "--epochs", str(sizes["epochs"]), "--images-per-epoch", str(sizes["images"]),
                "--batch", str(sizes["batch"])]

        def point(run, n, note):
            extra = {key: run.get(key) for key in ("epoch_seconds", "epoch_loss", "final_loss", "accuracy", "parameters", "backend",
                                                   "nccl_version")}
            extra.update(processes=n, note="%s, DistributedDataParallel, %s model, %d x %d images, batch %d per GPU"
                         % (note, model, sizes["epochs"], sizes["images"], sizes["batch"]))
            if alone:
                extra["speedup"] = run["images_per_second"] / alone
                extra["efficiency"] = extra["speedup"] / n
            return [run["images_per_second"]], extra

        for n in sorted(set(counts)):
            def body():
                if n > available:
                    raise Unsupported("%d GPUs asked, %d visible" % (n, available))
                if not os.path.exists(worker):
                    raise Unsupported("ddp_worker.py is not beside the probe")
                handle, out = tempfile.mkstemp(prefix="gpucompat-scale-", suffix=".json")
                os.close(handle)
                command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(n), worker,
                           *args, "--result", out]
                LOG.info("scaling: %s", " ".join(command))
                proc = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=600)
                if proc.returncode:
                    raise RuntimeError("torchrun exited %d: %s" % (proc.returncode, proc.stderr.decode(errors="replace")[-1500:]))
                with open(out) as result:
                    run = json.load(result)
                os.unlink(out)
                return point(run, n, "torchrun --nproc_per_node %d" % n)
            figure = bench.measure("scaling_" + model, "fp32", "images/s", body)
            figure["processes"] = n
            if n == 1 and "value" in figure:
                alone = figure["value"]
        for nodes in sorted(n for n in set(bench.config.get("nodes") or []) if n > 1):
            def across():
                if not os.path.exists(worker):
                    raise Unsupported("ddp_worker.py is not beside the probe")
                run = srun_worker(worker, nodes, per_node, args)
                samples, extra = point(run, nodes * per_node, "srun --nodes %d --ntasks-per-node %d" % (nodes, per_node))
                extra["hosts"] = sorted(set(d.get("node") or d.get("host") for d in run.get("devices") or []))
                return samples, extra
            figure = bench.measure("scaling_" + model, "fp32", "images/s", across)
            figure.update(processes=nodes * per_node, nodes=nodes)


def slurm_hosts():
    """This job's nodes in Slurm's order; the batch script runs on the first (sbatch(1))."""
    import subprocess

    nodelist = os.environ.get("SLURM_JOB_NODELIST") or os.environ.get("SLURM_NODELIST") or ""
    proc = subprocess.run(["scontrol", "show", "hostnames", nodelist], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    if proc.returncode or not nodelist:
        raise RuntimeError("scontrol show hostnames %r: %s" % (nodelist, proc.stderr.decode(errors="replace").strip()[-500:]))
    return proc.stdout.decode().split()


def master_address(host):
    """How the other nodes reach `host`: its name where it resolves, else Slurm's NodeAddr for it (node
    names need not be host names: a test cluster runs several slurmd under made-up names on one machine)."""
    import subprocess

    try:
        socket.getaddrinfo(host, None)
        return host
    except socket.gaierror:
        proc = subprocess.run(["scontrol", "show", "node", "-o", host], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=60)
        fields = dict(token.split("=", 1) for token in proc.stdout.decode(errors="replace").split() if "=" in token)
        return fields.get("NodeAddr") or host


def srun_command(worker, nodes, per_node, hosts, worker_args):
    """srun starting ddp_worker.py on the first `nodes` hosts of this job, one task per GPU. --ntasks is
    given because srun reads the job's SLURM_NTASKS as its default -n; --nodelist keeps rank 0 on hosts[0];
    --export=ALL because a job submitted with --export=NONE would start the tasks without MASTER_ADDR/PORT."""
    return ["srun", "--export=ALL", "--nodes", str(nodes), "--ntasks", str(nodes * per_node), "--ntasks-per-node", str(per_node),
            "--nodelist", ",".join(hosts[:nodes]), "--kill-on-bad-exit=1", sys.executable, worker] + list(worker_args)


def srun_worker(worker, nodes, per_node, worker_args, timeout=600):
    """Run ddp_worker.py across `nodes` nodes of this Slurm job -> its result. Ranks come from SLURM_PROCID
    (ddp_worker maps them), the rendezvous from MASTER_ADDR/MASTER_PORT set here."""
    import shutil
    import subprocess
    import tempfile

    if not os.environ.get("SLURM_JOB_ID") or not shutil.which("srun"):
        raise Unsupported(NOT_IN_SLURM)
    hosts = slurm_hosts()
    if len(hosts) < nodes:
        raise Unsupported("%d nodes asked, this Slurm job has %d (%s)" % (nodes, len(hosts), ",".join(hosts)))
    # ddp_worker takes RANK/WORLD_SIZE as torchrun's when set: only SLURM_PROCID/SLURM_NTASKS may speak
    env = dict((k, v) for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"))
    with socket.socket() as s:  # this is hosts[0], where rank 0 listens: a port free here
        s.bind(("", 0))
        env["MASTER_PORT"] = str(s.getsockname()[1])
    env["MASTER_ADDR"] = master_address(hosts[0])
    # rank 0 writes the result on hosts[0]: into the job directory, which every node shares
    handle, out = tempfile.mkstemp(prefix="gpucompat-scale-", suffix=".json", dir=os.getcwd())
    os.close(handle)
    try:
        command = srun_command(worker, nodes, per_node, hosts, list(worker_args) + ["--result", out])
        LOG.info("scaling: MASTER_ADDR=%s MASTER_PORT=%s %s", env["MASTER_ADDR"], env["MASTER_PORT"], " ".join(command))
        proc = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, timeout=timeout)
        if proc.returncode:
            raise RuntimeError("srun exited %d: %s" % (proc.returncode, proc.stderr.decode(errors="replace")[-1500:]))
        with open(out) as result:
            return json.load(result)
    finally:
        os.unlink(out)


ADAPTERS = {"torch": Torch, "tensorflow": TensorFlow, "jax": Jax, "cupy": CuPy, "cuda-runtime": CudaRuntime}


LOG_MAX = 2000  # records kept in result["log"]; the job's own log stays bounded however long it runs
LOG = logging.getLogger("gpucompat.probe")


class RecordLog(logging.Handler):
    """Log records from inside the job, with pid, thread and time, into result["log"]: they travel
    to the database with the result, so every node's records sit in one place."""

    def __init__(self, records):
        logging.Handler.__init__(self, logging.INFO)
        self.records = records

    def emit(self, record):
        if len(self.records) < LOG_MAX:
            self.records.append({"t": round(record.created, 3), "pid": record.process, "thread": record.threadName,
                                 "host": socket.gethostname(), "level": record.levelname, "message": self.format(record)[:500]})


def write(path, result):
    tmp = path + ".tmp"
    with open(tmp, "w") as handle:
        json.dump(result, handle, indent=1, default=str)
    os.replace(tmp, path)


def run(framework, result_path, stages=STAGES, stage_timeouts=None, bench_config=None):
    """stage_timeouts: {stage: seconds}. A batch job has no parent watching it, so the probe
    arms SIGALRM itself; its default action ends the process even inside a hung C call, and
    result.json already names the stage that was running. bench_config: the bench stage's
    measurements, dtypes, size and repetitions (BENCH_DEFAULTS fills what it leaves out)."""
    stage_timeouts = stage_timeouts or {}
    adapter = ADAPTERS[framework]()
    adapter.bench_config, adapter.import_seconds = bench_config, 0.0
    result = {
        "probe_version": PROBE_VERSION,
        "framework": framework,
        "started_at": time.time(),
        "current_stage": "system",
        "stage_started_at": time.time(),
        "stages": {},
        "loaded_libraries": [],
        "finished": False,
        "log": [],
    }
    handler = RecordLog(result["log"])
    LOG.addHandler(handler)
    LOG.setLevel(logging.INFO)

    def save():  # every write also says what is mapped now, so a crash leaves the last view
        result["loaded_libraries"] = loaded_libraries()
        write(result_path, result)

    _HOOKS["checkpoint"] = save
    try:
        save()
        result["system"] = system_facts()
        handle = None
        for stage in stages:
            result["current_stage"] = stage
            result["stage_started_at"] = time.time()
            record = {"ok": False, "running": True, "facts": {}}
            result["stages"][stage] = record
            save()
            began = time.perf_counter()
            if stage in stage_timeouts and hasattr(signal, "SIGALRM"):
                signal.signal(signal.SIGALRM, signal.SIG_DFL)
                signal.alarm(max(1, int(stage_timeouts[stage])))
            LOG.info("stage %s started", stage)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    if stage == "import":
                        handle = adapter.import_(record["facts"])
                    else:
                        getattr(adapter, stage)(handle, record["facts"])
                    record["ok"] = True
                except RungFailed as exc:
                    record.update(exc.outcome)
                except StageFailed as exc:
                    record["reason"] = str(exc)
                except BaseException as exc:  # noqa: B902 - the evidence is the point
                    record["error"] = _error(exc)
                    if isinstance(exc, KeyboardInterrupt):
                        raise
            if hasattr(signal, "SIGALRM"):
                signal.alarm(0)
            del record["running"]
            record["duration_s"] = round(time.perf_counter() - began, 4)
            LOG.info("stage %s %s after %.3f s", stage, "passed" if record["ok"] else "failed", record["duration_s"])
            if stage == "import":  # the bench's time to the first training step starts at the import
                adapter.import_seconds = record["duration_s"]
            if caught:
                record["warnings"] = [str(w.message)[:2000] for w in caught][:20]
            save()
            if not record["ok"]:
                break
        result["current_stage"] = "done"
        result["finished"] = True
        result["finished_at"] = time.time()
        save()
    finally:
        _HOOKS["checkpoint"] = None
        LOG.removeHandler(handler)
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description="gpucompat probe")
    parser.add_argument("--framework", required=True, choices=sorted(ADAPTERS))
    parser.add_argument("--result", required=True, help="path of the JSON result, rewritten after every stage")
    parser.add_argument("--stages", default=",".join(STAGES))
    parser.add_argument("--stage-timeouts", default="", help="e.g. import=300,device=120,compute=300 (seconds)")
    parser.add_argument("--bench", default=None, help="run the bench stage after compute; JSON: "
                        "{\"measurements\": [...], \"dtypes\": [...], \"size\": 8192, \"repetitions\": 10, \"share\": [1, 2, 4]}")
    parser.add_argument("--share-child", default=None, help=argparse.SUPPRESS)  # one of N processes sharing the GPU
    args = parser.parse_args(argv)
    if args.share_child:
        return share_child(args.framework, json.loads(args.share_child), args.result)
    stages = tuple(s for s in args.stages.split(",") if s)
    timeouts = dict((k, float(v)) for k, v in (item.split("=", 1) for item in args.stage_timeouts.split(",") if item))
    bench_config = json.loads(args.bench) if args.bench else None
    if bench_config is not None and "bench" not in stages:
        stages += ("bench",)
    result = run(args.framework, args.result, stages, timeouts, bench_config)
    last = list(result["stages"].values())[-1] if result["stages"] else {}
    return 0 if last.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main())
