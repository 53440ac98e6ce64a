"""The cuda-runtime adapter: import_(facts) -> handle; device(handle, facts); compute(handle, facts); and
bench(handle, facts) after compute passed, when asked. Each fills the facts dict it is given, so
what it learnt survives its failure.
"""

import ctypes
import glob
import os
import sys
import warnings

from .bench import Bench
from .bench_cuda_runtime import bench_cuda_runtime
from .cuda_ctypes import AXPY_A, AXPY_N, CUDA_ERROR_UNSUPPORTED_PTX_VERSION, NVRTC_NOT_FOUND, CudaError, DriverError, _axpy_inputs
from .cuda_ctypes import _relative_error, find_nvrtc, load_driver, load_nvrtc, nvrtc_compile, nvrtc_version, ptx_isa
from .ladder import RungSkipped, StageFailed, _compare, finish_ladder, run_rung, skip_rung
from .nvml import Telemetry
from .records import _cuda_version


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
