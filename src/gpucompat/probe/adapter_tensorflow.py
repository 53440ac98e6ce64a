"""The TensorFlow adapter: import_(facts) -> handle; device(handle, facts); compute(handle, facts); and
bench(handle, facts) after compute passed, when asked. Each fills the facts dict it is given, so
what it learnt survives its failure.
"""

from .bench import Bench, Unsupported, _raise
from .ladder import StageFailed, _compare, _numpy_error, _numpy_inputs, ladder


class TensorFlow:
    def import_(self, facts):
        import tensorflow as tf

        facts["version"] = tf.__version__
        try:
            info = tf.sysconfig.get_build_info()
            facts["cuda_build"] = bool(info.get("is_cuda_build"))
            facts["cuda_runtime"] = info.get("cuda_version")
            facts["cudnn"] = info.get("cudnn_version")
            facts["arch_list"] = info.get("cuda_compute_capabilities")
        except Exception as exc:
            facts["build_info_error"] = str(exc)
        return tf

    def device(self, tf, facts):
        gpus = tf.config.list_physical_devices("GPU")
        facts.update(device_count=len(gpus), devices=[])
        for gpu in gpus:
            details = tf.config.experimental.get_device_details(gpu)
            cc = details.get("compute_capability")
            facts["devices"].append({"name": details.get("device_name"), "cc": "%d.%d" % cc if cc else None})
        if not gpus:
            raise StageFailed("tensorflow lists no GPU device")

    def compute(self, tf, facts):
        import numpy as np

        a, b, a64, b64 = _numpy_inputs(np)
        facts["op"] = "sin(a)*b+a, then matmul, float32"

        def on_gpu(rung, function):
            with tf.device("/GPU:0"):
                out = function(tf.constant(a), tf.constant(b))
            rung["placed_on"] = facts["placed_on"] = out.device
            if "GPU" not in out.device.upper():
                raise StageFailed("the op ran on %s, not on the GPU" % out.device)
            return out.numpy()

        def elementwise(rung):
            _compare(rung, _numpy_error(np, on_gpu(rung, lambda x, y: tf.sin(x) * y + x), np.sin(a64) * b64 + a64))

        def blas(rung):
            _compare(rung, _numpy_error(np, on_gpu(rung, tf.linalg.matmul), a64 @ b64))

        ladder(facts, [("elementwise", elementwise), ("blas", blas)])

    def bench(self, tf, facts):
        bench = Bench(facts, self.bench_config)
        why = Unsupported("not measured for TensorFlow in this version: no TensorFlow GPU build was at hand to verify it on")
        for measurement in ("matmul", "copy", "transfer", "launch", "train"):
            if bench.wants(measurement):
                bench.measure(measurement, "", "", _raise(why))
