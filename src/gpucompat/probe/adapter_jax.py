"""The JAX adapter: import_(facts) -> handle; device(handle, facts); compute(handle, facts); and
bench(handle, facts) after compute passed, when asked. Each fills the facts dict it is given, so
what it learnt survives its failure.
"""

from .bench_jax import bench_jax, jax_workload
from .ladder import StageFailed, _compare, _numpy_error, _numpy_inputs, ladder
from .libraries import conv_inputs, fft_inputs, solve_inputs, uses
from .scaling import jax_scale_figures
from .sharing import bench_rung


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

        a, b, a64, b64 = _numpy_inputs(np)
        gpu = {}
        facts["op"] = "sin(a)*b+a, dot, conv, fft, solve, jax.jit(tanh(a)*b-a/2), float32"

        def fetch(out):
            out.block_until_ready()
            facts["device"] = str(list(out.devices())[0])
            return np.asarray(out)

        def elementwise(rung):
            device = jax.devices("gpu")[0]
            gpu["a"], gpu["b"] = jax.device_put(a, device), jax.device_put(b, device)
            _compare(rung, _numpy_error(np, fetch(jnp.sin(gpu["a"]) * gpu["b"] + gpu["a"]), np.sin(a64) * b64 + a64))

        def blas(rung):
            # JAX's default precision, as user code runs it (TF32 on Ampere and newer: relative error ~3e-4 here).
            # HIGHEST compiles a true-float32 product for over 2 s on an H100 (benchmarks/first_call_costs.py).
            out = jnp.dot(gpu["a"], gpu["b"])
            _compare(rung, _numpy_error(np, fetch(out), a64 @ b64))

        def jit(rung):
            function = jax.jit(lambda x, y: jnp.tanh(x) * y - x * 0.5)
            _compare(rung, _numpy_error(np, fetch(function(gpu["a"], gpu["b"])), np.tanh(a64) * b64 - a64 * 0.5))

        def cudnn(rung):  # XLA hands convolutions to cuDNN
            x, w, ref = conv_inputs(np)
            out = jax.lax.conv_general_dilated(jnp.asarray(x), jnp.asarray(w), (1, 1), "VALID",
                                               precision=jax.lax.Precision.HIGHEST)
            _compare(rung, _numpy_error(np, fetch(out), ref))

        def cufft(rung):
            signal, ref = fft_inputs(np)
            out = fetch(jnp.fft.fft(jnp.asarray(signal)))
            _compare(rung, _numpy_error(np, np.stack([out.real, out.imag]), np.stack([ref.real, ref.imag])))

        def cusolver(rung):
            a, b, ref = solve_inputs(np)
            _compare(rung, _numpy_error(np, fetch(jnp.linalg.solve(jnp.asarray(a), jnp.asarray(b))), ref))

        ladder(facts, [("elementwise", elementwise), ("blas", uses("cublas", blas)), ("cudnn", uses("cudnn", cudnn)),
                       ("cufft", uses("cufft", cufft)), ("cusolver", uses("cusolver", cusolver)), ("jit", jit)])

    def bench(self, jax, facts):
        bench_rung("jax", facts, self.bench_config, lambda bench: bench_jax(jax, bench, self.import_seconds),
                   lambda bench, counts: jax_scale_figures(jax, bench, counts))

    def workload(self, jax, measurement, dtype, size):
        return jax_workload(jax, measurement, dtype, size)
