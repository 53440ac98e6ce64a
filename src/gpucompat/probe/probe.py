#!/usr/bin/env python3
"""gpucompat probe: run inside the environment under test; report facts, decide nothing.

One file, standard library only, CPython 3.8+: it is copied into every job and run
by whatever interpreter the stack under test provides. Stages run in order
(import -> device -> compute), each in its own try block, and the JSON result is
rewritten before and after every stage, so a crash or a kill still leaves evidence
of how far it got. The parent process enforces timeouts and reads the verdict.

    python probe.py --framework torch --result result.json
"""

import argparse
import ctypes
import glob
import json
import os
import platform
import signal
import socket
import sys
import time
import traceback
import warnings

PROBE_VERSION = 1
STAGES = ("import", "device", "compute")
MATRIX_N = 256
TOLERANCE = 1e-3  # relative Frobenius error allowed against the float64 reference


class StageFailed(Exception):
    """A stage ran but found what stops the ladder (no device, wrong numbers)."""


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


def system_facts():
    facts = {
        "python": platform.python_version(),
        "executable": sys.executable,
        "platform": platform.platform(),
        "hostname": socket.gethostname(),
        "env": {k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "LD_LIBRARY_PATH") if k in os.environ},
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


def _check(facts, error):
    facts["rel_error"] = error
    facts["tolerance"] = TOLERANCE
    if not error <= TOLERANCE:
        raise StageFailed("result differs from the float64 reference: relative error %.3g > %.0e" % (error, TOLERANCE))


# ---------------------------------------------------------------------------
# Framework adapters: import_(facts) -> handle; device(handle, facts); compute(handle, facts).
# Each fills the facts dict it is given, so what it learnt survives its failure.
# ---------------------------------------------------------------------------

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
        ga, gb = a.cuda(), b.cuda()
        # a cuBLAS product and an elementwise kernel of torch's own: both must be in the build
        out = torch.cat([(ga @ gb).flatten(), (torch.sin(ga) * gb + ga).flatten()]).cpu().double()
        torch.cuda.synchronize()
        a64, b64 = a.double(), b.double()
        ref = torch.cat([(a64 @ b64).flatten(), (torch.sin(a64) * b64 + a64).flatten()])
        if not bool(torch.isfinite(out).all()):
            error = float("inf")
        else:
            error = float(torch.linalg.norm(out - ref) / torch.linalg.norm(ref))
        facts.update(op="matmul %dx%d + sin*b+a, float32" % (MATRIX_N, MATRIX_N), device=torch.cuda.get_device_name(0))
        _check(facts, error)


def _numpy_reference(np, a, b):
    a64, b64 = a.astype("float64"), b.astype("float64")
    return np.concatenate([(a64 @ b64).ravel(), (np.sin(a64) * b64 + a64).ravel()])


def _numpy_error(np, out, ref):
    out = np.asarray(out, dtype="float64")
    if not np.isfinite(out).all():
        return float("inf")
    return float(np.linalg.norm(out - ref) / np.linalg.norm(ref))


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

        a = np.random.standard_normal((MATRIX_N, MATRIX_N)).astype("float32")
        b = np.random.standard_normal((MATRIX_N, MATRIX_N)).astype("float32")
        with tf.device("/GPU:0"):
            ta, tb = tf.constant(a), tf.constant(b)
            out = tf.concat([tf.reshape(tf.linalg.matmul(ta, tb), [-1]), tf.reshape(tf.sin(ta) * tb + ta, [-1])], 0)
            placed = out.device
        facts.update(op="matmul + sin*b+a, float32", placed_on=placed)
        if "GPU" not in placed.upper():
            raise StageFailed("the op ran on %s, not on the GPU" % placed)
        _check(facts, _numpy_error(np, out.numpy(), _numpy_reference(np, a, b)))


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

        a = np.random.standard_normal((MATRIX_N, MATRIX_N)).astype("float32")
        b = np.random.standard_normal((MATRIX_N, MATRIX_N)).astype("float32")
        gpu = jax.devices("gpu")[0]
        ja, jb = jax.device_put(a, gpu), jax.device_put(b, gpu)
        product = jnp.dot(ja, jb, precision=jax.lax.Precision.HIGHEST)
        out = jnp.concatenate([product.ravel(), (jnp.sin(ja) * jb + ja).ravel()])
        out.block_until_ready()
        facts.update(op="dot(HIGHEST) + sin*b+a, float32", device=str(list(out.devices())[0]))
        _check(facts, _numpy_error(np, np.asarray(out), _numpy_reference(np, a, b)))


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

        a = np.random.standard_normal((MATRIX_N, MATRIX_N)).astype("float32")
        b = np.random.standard_normal((MATRIX_N, MATRIX_N)).astype("float32")
        ca, cb = cupy.asarray(a), cupy.asarray(b)
        out = cupy.concatenate([(ca @ cb).ravel(), (cupy.sin(ca) * cb + ca).ravel()])
        facts["op"] = "matmul + sin*b+a (NVRTC-compiled), float32"
        _check(facts, _numpy_error(np, cupy.asnumpy(out), _numpy_reference(np, a, b)))


class CudaError(Exception):
    pass


class CudaRuntime:
    """libcudart through ctypes: the cheapest stack there is, so it sweeps CUDA 11/12/13 fast."""

    ATTR_CC_MAJOR, ATTR_CC_MINOR = 75, 76
    H2D, D2H = 1, 2

    def _find(self):
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

    def import_(self, facts):
        path = self._find()
        if not path:
            raise ImportError("no libcudart found (is an nvidia-cuda-runtime wheel installed?)")
        self.lib = ctypes.CDLL(path)
        facts["library"] = path
        version = ctypes.c_int(0)
        try:  # CUDA 11's runtime answers this only with a driver present: not an import failure
            self._call("cudaRuntimeGetVersion", ctypes.byref(version))
            facts["cuda_runtime"] = _cuda_version(version.value)
        except CudaError as exc:
            facts["cuda_runtime_error"] = str(exc)
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

    def compute(self, lib, facts):
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
            lib.cudaFree(pointer)
        same = back.raw == data
        facts.update(op="memcpy round trip of %d random bytes" % size, bytes_equal=same)
        if not same:
            raise StageFailed("the bytes copied back differ from those sent")


ADAPTERS = {"torch": Torch, "tensorflow": TensorFlow, "jax": Jax, "cupy": CuPy, "cuda-runtime": CudaRuntime}


def write(path, result):
    tmp = path + ".tmp"
    with open(tmp, "w") as handle:
        json.dump(result, handle, indent=1, default=str)
    os.replace(tmp, path)


def run(framework, result_path, stages=STAGES, stage_timeouts=None):
    """stage_timeouts: {stage: seconds}. A batch job has no parent watching it, so the probe
    arms SIGALRM itself; its default action ends the process even inside a hung C call, and
    result.json already names the stage that was running."""
    stage_timeouts = stage_timeouts or {}
    adapter = ADAPTERS[framework]()
    result = {
        "probe_version": PROBE_VERSION,
        "framework": framework,
        "started_at": time.time(),
        "current_stage": "system",
        "stage_started_at": time.time(),
        "stages": {},
        "finished": False,
    }
    write(result_path, result)
    result["system"] = system_facts()
    handle = None
    for stage in stages:
        result["current_stage"] = stage
        result["stage_started_at"] = time.time()
        write(result_path, result)
        record = {"ok": False, "facts": {}}
        began = time.perf_counter()
        if stage in stage_timeouts and hasattr(signal, "SIGALRM"):
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
            signal.alarm(max(1, int(stage_timeouts[stage])))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                if stage == "import":
                    handle = adapter.import_(record["facts"])
                else:
                    getattr(adapter, stage)(handle, record["facts"])
                record["ok"] = True
            except StageFailed as exc:
                record["reason"] = str(exc)
            except BaseException as exc:  # noqa: B902 - the evidence is the point
                record["error"] = _error(exc)
                if isinstance(exc, KeyboardInterrupt):
                    raise
        if hasattr(signal, "SIGALRM"):
            signal.alarm(0)
        record["duration_s"] = round(time.perf_counter() - began, 4)
        if caught:
            record["warnings"] = [str(w.message)[:2000] for w in caught][:20]
        result["stages"][stage] = record
        write(result_path, result)
        if not record["ok"]:
            break
    result["current_stage"] = "done"
    result["finished"] = True
    result["finished_at"] = time.time()
    write(result_path, result)
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description="gpucompat probe")
    parser.add_argument("--framework", required=True, choices=sorted(ADAPTERS))
    parser.add_argument("--result", required=True, help="path of the JSON result, rewritten after every stage")
    parser.add_argument("--stages", default=",".join(STAGES))
    parser.add_argument("--stage-timeouts", default="", help="e.g. import=300,device=120,compute=300 (seconds)")
    args = parser.parse_args(argv)
    stages = tuple(s for s in args.stages.split(",") if s)
    timeouts = dict((k, float(v)) for k, v in (item.split("=", 1) for item in args.stage_timeouts.split(",") if item))
    result = run(args.framework, args.result, stages, timeouts)
    last = list(result["stages"].values())[-1] if result["stages"] else {}
    return 0 if last.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main())
