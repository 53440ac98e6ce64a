"""Whether CUDA can start in this process at all, found without any framework: cuInit and
cuDeviceGetCount through ctypes, in the probe's own process and environment, and, where CUDA does
not start, the facts that decide why (the libcuda the loader took against the kernel module, the
process's limits, its device nodes, a container's compatibility library). The classification
(gpucompat/cuda_start.py) reads them before it lets a framework's failure speak of the stack.

result["cuda_start"] = {"init": 0, "init_name": "CUDA_SUCCESS", "count": 1, "seconds": 0.21,
                        "libcuda": [{"path", "version"}], "kernel_module": "580.159.04",
                        and, where it failed: "limits", "nodes", "compat", "nvml_driver", "env_libraries"}

`python probe.pyz cuda-start` prints the same facts as JSON (doctor asks it in a process like a job's).
"""

import ctypes
import glob
import json
import os
import re
import sys
import threading
import time

_VERSION = re.compile(r"\.so\.([0-9]+\.[0-9]+(?:\.[0-9]+)?)$")
_MODULE = re.compile(r"Kernel Module(?: for [a-z0-9_]+)?\s+([0-9]+\.[0-9]+(?:\.[0-9]+)?)")
LIMITS = ("RLIMIT_AS", "RLIMIT_DATA", "RLIMIT_NOFILE", "RLIMIT_NPROC", "RLIMIT_MEMLOCK", "RLIMIT_STACK")
# The CUDA libraries a framework's environment carries itself (pip's nvidia-* wheels, conda's lib/).
_ENV_LIBRARIES = "nvidia/*/lib/lib*.so*"  # nvidia-cuda-runtime-cu12's nvidia/cuda_runtime/lib, CUDA 13's nvidia/cu13/lib


def _mapped_libcuda():
    """The libcuda this process actually loaded: [{"path", "version"}] from /proc/self/maps."""
    found = []
    try:
        with open("/proc/self/maps") as handle:
            for line in handle:
                fields = line.split(None, 5)
                if len(fields) == 6 and "/libcuda.so" in fields[5]:
                    path = fields[5].strip()
                    if path.endswith(" (deleted)"):
                        path = path[:-len(" (deleted)")]
                    if os.path.basename(path).startswith("libcuda.so") and all(f["path"] != path for f in found):
                        match = _VERSION.search(os.path.realpath(path))
                        found.append({"path": path, "version": match.group(1) if match else None, "via": _via(path)})
    except OSError:
        pass
    return found


def _via(path):
    """How the loader came to PATH: the LD_PRELOAD entry or the LD_LIBRARY_PATH entry whose libcuda.so.1 is it
    (maps name the file itself, a module system's directory names it through a link), or None."""
    real = os.path.realpath(path)
    for variable, entries in (("LD_PRELOAD", re.split(r"[:\s]+", os.environ.get("LD_PRELOAD", ""))),
                              ("LD_LIBRARY_PATH", os.environ.get("LD_LIBRARY_PATH", "").split(":"))):
        for entry in entries:
            candidate = entry if variable == "LD_PRELOAD" else os.path.join(entry, "libcuda.so.1")
            if entry and os.path.exists(candidate) and os.path.realpath(candidate) == real:
                return {"variable": variable, "entry": entry}
    return None


def kernel_module():
    """The loaded NVIDIA kernel module's version (/proc/driver/nvidia/version), or None."""
    try:
        with open("/proc/driver/nvidia/version") as handle:
            match = _MODULE.search(handle.readline())
    except OSError:
        return None
    return match.group(1) if match else None


def limits():
    """The process's resource limits that CUDA's start depends on: {"as": [soft, hard], ...}, None = unlimited."""
    try:
        import resource
    except ImportError:
        return {}
    found = {}
    for name in LIMITS:
        which = getattr(resource, name, None)
        if which is None:
            continue
        soft, hard = resource.getrlimit(which)
        found[name[len("RLIMIT_"):].lower()] = [None if v == resource.RLIM_INFINITY else v for v in (soft, hard)]
    return found


def device_nodes():
    """Each /dev/nvidia* node CUDA opens: exists, and whether this process can open it read-write (that also
    meets a device cgroup, which permissions alone do not show). Opened only after a failed start: on a GPU
    without persistence mode the last close tears the driver's state down, and cuInit would pay for it again."""
    nodes = {}
    for path in ["/dev/nvidiactl", "/dev/nvidia-uvm"] + sorted(glob.glob("/dev/nvidia[0-9]*")):
        node = {"exists": os.path.exists(path)}
        if node["exists"]:
            try:
                os.close(os.open(path, os.O_RDWR))
                node["open"] = True
            except OSError as exc:
                node["open"], node["error"] = False, "%s: %s" % (type(exc).__name__, exc.strerror or exc)
        nodes[path] = node
    return nodes


def compat_libraries():
    """A container's CUDA forward-compatibility libcuda (the cuda-compat package): [{"path", "version"}]."""
    found = []
    for path in sorted(glob.glob("/usr/local/cuda*/compat/libcuda.so.*")):
        match = _VERSION.search(os.path.realpath(path))
        found.append({"path": path, "version": match.group(1) if match else None})
    return found[:8]


def nvml_driver():
    """The driver version NVML reports, or None."""
    try:
        lib = ctypes.CDLL("libnvidia-ml.so.1")
        if lib.nvmlInit_v2():
            return None
        buffer = ctypes.create_string_buffer(96)
        ok = lib.nvmlSystemGetDriverVersion(buffer, ctypes.c_uint(96)) == 0
        return buffer.value.decode(errors="replace") if ok else None
    except (OSError, AttributeError):
        return None


def env_libraries():
    """The CUDA libraries this environment carries itself (sys.path's nvidia-* wheels, the prefix's lib/),
    by file name: what a library-path entry would shadow."""
    found = {}
    places = [os.path.join(base, _ENV_LIBRARIES) for base in sys.path if base]
    places.append(os.path.join(sys.prefix, "lib", "lib*.so*"))
    for place in places:
        for path in glob.glob(place):
            name = os.path.basename(path)
            if name.startswith(("libcu", "libnv", "libnccl")):
                found.setdefault(name, path)
    return found


def _error_name(lib, code):
    name = ctypes.c_char_p()
    try:
        if lib.cuGetErrorName(code, ctypes.byref(name)) == 0 and name.value:
            return name.value.decode(errors="replace")
    except AttributeError:
        pass
    return "CUresult %d" % code


def start(diagnose=True):
    """cuInit(0), then cuDeviceGetCount, in this process; with the facts that say why where it fails."""
    began = time.perf_counter()
    facts = {"kernel_module": kernel_module()}
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        facts.update(init=None, init_name="libcuda.so.1 not loadable", error=str(exc)[:500])
    else:
        lib.cuInit.argtypes, lib.cuInit.restype = [ctypes.c_uint], ctypes.c_int
        code = lib.cuInit(0)
        facts.update(init=code, init_name=_error_name(lib, code))
        if code == 0:
            count = ctypes.c_int(0)
            counted = lib.cuDeviceGetCount(ctypes.byref(count))
            facts["count"] = count.value if counted == 0 else None
            if counted:
                facts["count_error"] = _error_name(lib, counted)
    facts["libcuda"] = _mapped_libcuda()
    facts["seconds"] = round(time.perf_counter() - began, 4)
    if diagnose and not facts.get("count"):
        facts.update(limits=limits(), nodes=device_nodes(), compat=compat_libraries(), nvml_driver=nvml_driver(),
                     env_libraries=env_libraries(), prefix=sys.prefix)
    return facts


class Starter:
    """start() in a thread beside the framework's import (cuInit is process-wide: the framework's own call
    then returns at once), joined before the device stage."""

    def __init__(self, result):
        self.result = result  # result["cuda_start"] is replaced whole, never grown: it may be written at any moment
        self.thread = threading.Thread(target=self._run, name="gpucompat-cuda-start", daemon=True)

    def _run(self):
        try:
            self.result["cuda_start"] = start()
        except Exception as exc:  # noqa: BLE001 - a fact, never the probe's end
            self.result["cuda_start"] = {"error": "%s: %s" % (type(exc).__name__, exc)}

    def begin(self):
        self.thread.start()
        return self

    def join(self, timeout):
        self.thread.join(timeout)
        if self.thread.is_alive():
            self.result["cuda_start"] = {"hung": "cuInit gave no answer within %d s" % timeout}
        return self


def main():
    json.dump(start(), sys.stdout)
    sys.stdout.write("\n")
    return 0
