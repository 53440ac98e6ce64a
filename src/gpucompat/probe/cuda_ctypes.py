"""libnvrtc and libcuda (the driver API) through ctypes, with the small axpy kernel the JIT rungs
compile and run; libcudart's own calls are the cuda-runtime adapter's (adapter_cuda_runtime).
"""

import ctypes
import glob
import os
import random
import re
import sys

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
