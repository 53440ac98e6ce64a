"""The torch adapter: import_(facts) -> handle; device(handle, facts); compute(handle, facts); and
bench(handle, facts) after compute passed, when asked. Each fills the facts dict it is given, so
what it learnt survives its failure.
"""

from .bench import Bench
from .bench_torch import bench_torch, torch_workload
from .ladder import MATRIX_N, StageFailed, _compare, ladder
from .nvml import Telemetry
from .scaling import scale_figures
from .sharing import share_figures


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
