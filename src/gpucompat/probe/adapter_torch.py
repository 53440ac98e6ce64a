"""The torch adapter: import_(facts) -> handle; device(handle, facts); compute(handle, facts); and
bench(handle, facts) after compute passed, when asked. Each fills the facts dict it is given, so
what it learnt survives its failure.
"""

from .bench_torch import bench_torch, torch_workload
from .ladder import MATRIX_N, RungSkipped, StageFailed, _compare, ladder
from .libraries import uses
from .scaling import scale_figures
from .sharing import bench_rung


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
        facts["op"] = "sin(a)*b+a, then matmul, %dx%d float32; then a convolution, an FFT, a solve, a sparse product, an all-reduce" % (MATRIX_N, MATRIX_N)

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

        ladder(facts, [("elementwise", elementwise), ("blas", uses("cublas", blas))] + library_rungs(torch, error))

    def bench(self, torch, facts):
        bench_rung("torch", facts, self.bench_config, lambda bench: bench_torch(torch, bench, self.import_seconds),
                   lambda bench, counts: scale_figures(torch, bench, counts))

    def workload(self, torch, measurement, dtype, size):
        return torch_workload(torch, measurement, dtype, size)


def library_rungs(torch, error):
    """cuDNN, cuFFT, cuSOLVER, cuSPARSE and NCCL, each through torch's own call, against float64 on the CPU."""
    def cudnn(rung):
        if not torch.backends.cudnn.is_available():
            raise RungSkipped("this torch has no cuDNN")
        x, w = torch.randn(2, 4, 12, 12), torch.randn(8, 4, 3, 3)
        with torch.backends.cudnn.flags(enabled=True):
            out = torch.nn.functional.conv2d(x.cuda(), w.cuda())
        _compare(rung, error(out, torch.nn.functional.conv2d(x.double(), w.double())))

    def cufft(rung):
        signal = torch.randn(1024, dtype=torch.complex64)
        out = torch.view_as_real(torch.fft.fft(signal.cuda()))
        _compare(rung, error(out, torch.view_as_real(torch.fft.fft(signal.to(torch.complex128)))))

    def cusolver(rung):
        a = torch.randn(64, 64) + 64 * torch.eye(64)
        b = torch.randn(64, 4)
        _compare(rung, error(torch.linalg.solve(a.cuda(), b.cuda()), torch.linalg.solve(a.double(), b.double())))

    def cusparse(rung):
        dense = torch.randn(128, 128)
        sparse = (dense * (torch.rand(128, 128) < 0.05)).to_sparse()
        other = torch.randn(128, 8)
        _compare(rung, error(torch.sparse.mm(sparse.cuda(), other.cuda()), sparse.to_dense().double() @ other.double()))

    def nccl(rung):  # a communicator of one rank: NCCL's kernels and its CUDA calls, no network
        # torch.cuda.nccl, not a process group: the same library and kernels in 0.4 s instead of 0.9 s on an
        # H100 (benchmarks/first_call_costs.py); the bench's scaling runs go through DDP's process group.
        import torch.cuda.nccl as nccl

        value = torch.randn(1024)
        reduced = value.cuda()
        if not nccl.is_available([reduced]):
            raise RungSkipped("this torch has no NCCL")
        nccl.all_reduce([reduced])
        version = nccl.version()  # a tuple, or one number on older torch
        rung["nccl_version"] = ".".join(str(v) for v in version) if isinstance(version, tuple) else str(version)
        _compare(rung, error(reduced, value.double()))

    return [(name, uses(name, body)) for name, body in
            (("cudnn", cudnn), ("cufft", cufft), ("cusolver", cusolver), ("cusparse", cusparse), ("nccl", nccl))]
