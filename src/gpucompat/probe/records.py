"""The result and what goes into it besides the stages: the facts of the system (what is loaded, the
environment that changes loading), an exception as evidence, the checkpoint that rewrites result.json
after every rung and figure, the job's own log records, and the atomic write.
"""

import ctypes
import json
import logging
import os
import platform
import re
import socket
import sys
import traceback

PROBE_VERSION = 2
STAGES = ("import", "device", "compute")


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
    r"^(libcuda|libcudart|libnvrtc(?:-builtins)?(?:\.alt)?|libcublasLt|libcublas|libcudnn(?:_[A-Za-z0-9_]+)?|libcufft|libcusolver|libcusparse|libnccl"
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
        "prefix": sys.prefix,
    }
    try:  # the values gpucompat itself set for this job (its GPU pin), with the job's own before that
        pinned = json.loads(os.environ.get("GPUCOMPAT_PINNED") or "{}")
        if isinstance(pinned, dict) and pinned:
            facts["pinned"] = pinned
    except ValueError:
        pass
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


_HOOKS = {"checkpoint": None}


def _checkpoint():
    if _HOOKS["checkpoint"]:
        _HOOKS["checkpoint"]()


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


def probe_file():
    """The file that runs this probe: probe.pyz, the zip this package is in. The sharing children are
    started from it again, and `python probe.pyz ddp-worker ARGS` runs the DDP worker from it."""
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
