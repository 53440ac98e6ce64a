"""The bench of a CuPy stack (matrix products, copies, transfers, launch latency; no training) and
the workload CuPy shares a GPU with.
"""

from .bench import COPY_BYTES, LAUNCHES, TRANSFER_BYTES, Unsupported, _batch, _raise, _timed


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


def cupy_workload(cupy, measurement, dtype, size):
    if measurement != "matmul" or dtype != "fp32":
        raise Unsupported("CuPy shares fp32 matrix products here")
    a = cupy.random.standard_normal((size, size), dtype="float32")
    b, out = a.T.copy(), cupy.empty((size, size), dtype="float32")
    return (lambda: cupy.matmul(a, b, out=out)), cupy.cuda.Device().synchronize, 2.0 * size ** 3 / 1e12, "TFLOP/s"
