#!/usr/bin/env bash
# `check --env current` against the framework's own start (issue 23, item 2): the exact command run on
# the GPU machine (the workplace's device tool, repository root, no internet). .whl/ holds gpucompat's
# wheel and the dependencies the image lacks. Results land in $OUT. Nothing changes the card's settings.
set -uo pipefail
export PYTHONUNBUFFERED=1 COLUMNS=160
PY=$(command -v python3)
"$PY" -m pip install --no-index --find-links .whl gpucompat > /tmp/pip-install.txt 2>&1 || { cat /tmp/pip-install.txt; exit 1; }
"$PY" -m pip install --no-index --find-links .whl --force-reinstall --no-deps gpucompat >> /tmp/pip-install.txt 2>&1
export PATH="$(dirname "$PY"):$PATH"
nvidia-smi --query-gpu=name,driver_version,clocks.current.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv > "$OUT/gpu.txt" 2>&1
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv >> "$OUT/gpu.txt" 2>&1
"$PY" -c "import torch, jax, cupy; print('torch', torch.__version__, 'jax', jax.__version__, 'cupy', cupy.__version__)" >> "$OUT/gpu.txt" 2>&1
"$PY" -c "import time; t = time.perf_counter(); from gpucompat.discover.local import discover; print('local discovery (NVML), cold:', discover(), round(time.perf_counter() - t, 3), 's')" >> "$OUT/gpu.txt" 2>&1
{ echo "== /proc/driver/nvidia/gpus (the entry point's cheap way to name the GPU):"; ls /proc/driver/nvidia/gpus 2>&1; cat /proc/driver/nvidia/gpus/*/information 2>&1 | head -5; } >> "$OUT/gpu.txt"
"$PY" benchmarks/check_latency.py --runs "${RUNS:-5}" --frameworks "${FRAMEWORKS:-torch,jax,cupy}" --json "$OUT/check-latency.json" 2>&1 | tee "$OUT/check-latency.txt"
# Where a JAX probe's time goes: each first call in a bare interpreter (compiles included), written apart from the probe.
"$PY" - > "$OUT/jax-first-calls.txt" 2>&1 <<'PY'
import time
t = time.perf_counter()
def lap(name):
    global t
    now = time.perf_counter(); print(f"{name:<34} {now - t:7.3f} s", flush=True); t = now
import jax, jax.numpy as jnp, numpy as np; lap("import jax")
d = jax.devices("gpu")[0]; lap("jax.devices('gpu')")
a = jax.device_put(np.random.rand(256, 256).astype("float32"), d); b = jax.device_put(np.random.rand(256, 256).astype("float32"), d); lap("device_put x2")
x = jnp.sin(a); x.block_until_ready(); lap("sin (first eager op)")
y = x * b; y.block_until_ready(); lap("mul")
z = y + a; z.block_until_ready(); lap("add")
f = jax.jit(lambda p, q: jnp.sin(p) * q + p); f(a, b).block_until_ready(); lap("jit(sin*b+a) fused")
jnp.dot(a, b).block_until_ready(); lap("dot default precision")
jnp.dot(a, b, precision=jax.lax.Precision.HIGHEST).block_until_ready(); lap("dot HIGHEST")
(a @ a).sum().block_until_ready(); lap("a@a then sum")
jax.jit(lambda p, q: jnp.tanh(p) * q - p * 0.5)(a, b).block_until_ready(); lap("jit(tanh)")
PY
cat "$OUT/jax-first-calls.txt"
