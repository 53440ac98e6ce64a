"""The CuPy adapter: import_(facts) -> handle; device(handle, facts); compute(handle, facts); and
bench(handle, facts) after compute passed, when asked. Each fills the facts dict it is given, so
what it learnt survives its failure.
"""

from .bench_cupy import bench_cupy, cupy_workload
from .cuda_ctypes import AXPY_A, AXPY_N, AXPY_SOURCE, _axpy_inputs
from .ladder import StageFailed, _compare, _numpy_error, _numpy_inputs, ladder
from .libraries import fft_inputs, solve_inputs, sparse_inputs, uses
from .records import _cuda_version
from .sharing import bench_rung


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
        facts["op"] = "sin(a)*b+a, matmul (cuBLAS), fft, solve, sparse product, RawKernel axpy (NVRTC), float32"

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

        def cufft(rung):
            signal, ref = fft_inputs(np)
            out = cupy.asnumpy(cupy.fft.fft(cupy.asarray(signal)))
            _compare(rung, _numpy_error(np, np.stack([out.real, out.imag]), np.stack([ref.real, ref.imag])))

        def cusolver(rung):
            a, b, ref = solve_inputs(np)
            _compare(rung, _numpy_error(np, cupy.asnumpy(cupy.linalg.solve(cupy.asarray(a), cupy.asarray(b))), ref))

        def cusparse(rung):
            import cupyx.scipy.sparse

            rows, cols, values, dense, ref = sparse_inputs(np)
            matrix = cupyx.scipy.sparse.csr_matrix((cupy.asarray(values), (cupy.asarray(rows), cupy.asarray(cols))), shape=(len(dense), len(dense)))
            _compare(rung, _numpy_error(np, cupy.asnumpy(matrix @ cupy.asarray(dense)), ref))

        ladder(facts, [("elementwise", elementwise), ("blas", uses("cublas", blas)), ("cufft", uses("cufft", cufft)),
                       ("cusolver", uses("cusolver", cusolver)), ("cusparse", uses("cusparse", cusparse)), ("jit", jit)])

    def bench(self, cupy, facts):
        bench_rung("cupy", facts, self.bench_config, lambda bench: bench_cupy(cupy, bench))

    def workload(self, cupy, measurement, dtype, size):
        return cupy_workload(cupy, measurement, dtype, size)
