"""The bench of a JAX stack: matrix products per dtype, copies, transfers, launch latency, the seed's
CNN in plain JAX (with its profiling window), and the workload JAX shares a GPU with.
"""

import time

from .bench import CNN_BATCH, CNN_NOTE, CNN_STEPS, COPY_BYTES, LAUNCHES, TRANSFER_BYTES, Unsupported, _batch, _first_step, _timed
from .profiling import jax_profile_window
from .records import _checkpoint, _error


def bench_jax(jax, bench, import_seconds):
    import jax.numpy as jnp
    import numpy as np

    jax.config.update("jax_enable_x64", True)  # for fp64; every array below names its dtype
    reps, n = bench.config["repetitions"], bench.config["size"]
    device = jax.devices("gpu")[0]
    block = lambda out: out.block_until_ready()  # noqa: E731
    types = {"fp64": jnp.float64, "fp32": jnp.float32, "tf32": jnp.float32, "fp16": jnp.float16, "bf16": jnp.bfloat16}

    def batched(call):
        """Seconds per call(): the wall clock around batches of back-to-back calls and one block_until_ready."""
        out = {}
        batch = _batch(_timed(lambda: out.update(r=call()), lambda: block(out["r"]), 1)[0])

        def run():
            for _ in range(batch):
                out["r"] = call()
        return [s / batch for s in _timed(run, lambda: block(out["r"]), reps, warmup_s=0)]

    def matmul(name):
        def body():
            size = n // 2 if name == "fp64" else n
            keys = jax.random.split(jax.random.PRNGKey(0))
            if name == "fp8":
                if not hasattr(jnp, "float8_e4m3fn"):
                    raise Unsupported("this jax has no float8_e4m3fn")
                a, b = (jax.random.normal(k, (size, size), dtype=jnp.float32).astype(jnp.float8_e4m3fn) for k in keys)
                f = jax.jit(lambda x, y: jax.lax.dot(x, y, preferred_element_type=jnp.bfloat16))
                note = "jax.lax.dot, e4m3 inputs, bf16 result"
            else:
                a, b = (jax.random.normal(k, (size, size), dtype=types[name]) for k in keys)
                precision = jax.lax.Precision.DEFAULT if name == "tf32" else jax.lax.Precision.HIGHEST
                f = jax.jit(lambda x, y: jnp.matmul(x, y, precision=precision))
                note = "jnp.matmul under jax.jit, precision %s%s" % (
                    precision, " (XLA's TF32 on Ampere and newer)" if name == "tf32" else "")
            a, b = jax.device_put(a, device), jax.device_put(b, device)
            seconds = batched(lambda: f(a, b))
            return [2.0 * size ** 3 / s / 1e12 for s in seconds], {"size": "%dx%dx%d" % (size, size, size), "note": note}
        return body

    bench.matmuls(matmul)

    def copy():
        x = jax.device_put(jnp.zeros(COPY_BYTES // 4, dtype=jnp.float32), device)
        f = jax.jit(lambda v: v + 1.0)
        seconds = batched(lambda: f(x))
        return [2.0 * COPY_BYTES / s / 1e9 for s in seconds], {"size": "%d MiB" % (COPY_BYTES >> 20), "note": "jax.jit(x + 1): bytes read + written"}

    def transfer(direction):
        def body():
            host = np.ones(TRANSFER_BYTES, dtype=np.uint8)
            if direction == "h2d":
                out = {}
                seconds = _timed(lambda: out.update(r=jax.device_put(host, device)), lambda: block(out["r"]), reps)
            else:  # a new array each time: a jax.Array keeps its host copy once fetched
                seconds = []
                for index in range(reps + 2):
                    fresh = block(jax.device_put(host, device))
                    start = time.perf_counter()
                    np.asarray(fresh)
                    if index >= 2:
                        seconds.append(time.perf_counter() - start)
            return [TRANSFER_BYTES / s / 1e9 for s in seconds], {"size": "%d MiB" % (TRANSFER_BYTES >> 20),
                                                              "note": "jax.device_put / jax.device_get (JAX stages host memory itself; not pinned)"}
        return body

    def launch():
        f = jax.jit(lambda v: v + 1.0)
        x = jax.device_put(jnp.zeros((), dtype=jnp.float32), device)
        out = {}
        seconds = _timed(lambda: out.update(r=f(x)), lambda: block(out["r"]), LAUNCHES)
        return [s * 1e6 for s in seconds], {"note": "a jitted x + 1 on a scalar, then block_until_ready(): dispatch and round trip"}

    bench.memory_and_launch(copy, transfer, launch)
    if bench.wants("train"):
        first = {}

        def train():
            began = time.perf_counter()
            keys = jax.random.split(jax.random.PRNGKey(1), 4)
            scale = lambda fan_in: (2.0 / fan_in) ** 0.5  # noqa: E731
            params = {
                "conv": jax.random.normal(keys[0], (32, 1, 3, 3), dtype=jnp.float32) * scale(9),
                "dense": jax.random.normal(keys[1], (32 * 26 * 26, 128), dtype=jnp.float32) * scale(32 * 26 * 26),
                "out": jax.random.normal(keys[2], (128, 10), dtype=jnp.float32) * scale(128),
            }

            def loss(p, x, y):
                h = jax.lax.conv_general_dilated(x, p["conv"], (1, 1), "VALID", dimension_numbers=("NCHW", "OIHW", "NCHW"))
                h = jax.nn.relu(h).reshape(x.shape[0], -1)
                logits = jax.nn.relu(h @ p["dense"]) @ p["out"]
                return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))

            @jax.jit
            def step(p, x, y):
                grads = jax.grad(loss)(p, x, y)
                return jax.tree_util.tree_map(lambda w, g: w - 0.2 * g, p, grads)

            x = jax.device_put(jax.random.uniform(keys[3], (CNN_BATCH, 1, 28, 28), dtype=jnp.float32), device)
            y = jax.device_put(jnp.arange(CNN_BATCH, dtype=jnp.int32) % 10, device)
            state = {"p": jax.device_put(params, device)}
            state["p"] = step(state["p"], x, y)
            jax.block_until_ready(state["p"])
            first["seconds"] = import_seconds + time.perf_counter() - began
            first["step"] = lambda: state.update(p=step(state["p"], x, y))
            first["sync"] = lambda: jax.block_until_ready(state["p"])

            def steps():
                for _ in range(CNN_STEPS):
                    state["p"] = step(state["p"], x, y)
            seconds = _timed(steps, lambda: jax.block_until_ready(state["p"]), max(3, reps // 2))
            return [CNN_BATCH * CNN_STEPS / s for s in seconds], {"note": CNN_NOTE + ", in plain JAX (lax.conv, jax.grad)"}

        bench.measure("train", "fp32", "images/s", train)
        window = bench.config.get("profile")
        if window and "step" in first:
            try:
                bench.facts["profile"] = jax_profile_window(jax, first["step"], first["sync"], int(window["start"]), int(window["steps"]))
            except Exception as exc:  # a profiler that cannot run is a fact, not a failure
                bench.facts["profile"] = {"error": _error(exc)}
            _checkpoint()
        bench.measure("first_step", "", "s", lambda: _first_step(first, "import jax, build the model, JIT-compile and run one step"), better="lower")


def jax_workload(jax, measurement, dtype, size):
    import jax.numpy as jnp

    device = jax.devices("gpu")[0]
    if measurement != "matmul":
        raise Unsupported("JAX shares matrix products here; its training step is timed alone")
    kind = {"bf16": jnp.bfloat16, "fp32": jnp.float32}[dtype]
    keys = jax.random.split(jax.random.PRNGKey(0))
    a, b = (jax.device_put(jax.random.normal(k, (size, size), dtype=kind), device) for k in keys)
    f = jax.jit(lambda x, y: jnp.matmul(x, y, precision=jax.lax.Precision.HIGHEST))
    last = {}

    def run():
        last["r"] = f(a, b)
    return run, lambda: last["r"].block_until_ready(), 2.0 * size ** 3 / 1e12, "TFLOP/s"
