"""The bench of a cuda-runtime stack: memcpy bandwidths through libcudart and the launch latency of
NVRTC's axpy through the driver API.
"""

import ctypes

from .bench import COPY_BYTES, LAUNCHES, TRANSFER_BYTES, Unsupported, _raise, _timed
from .cuda_ctypes import nvrtc_compile
from .ladder import RungSkipped


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
            raise Unsupported("no libnvrtc in this environment to compile a kernel with", kind="environment")
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
