"""Issue 35, the run-time compiler: what JAX does on a GPU its ptxas does not know, beside a plain run.

Runs one jitted computation in a fresh process three ways: as installed (the ptxas of the nvidia-cuda-nvcc wheel
JAX brings), with XLA pointed at CUDA 11.7's ptxas (nvidia-cuda-nvcc-cu11 11.7.99 from PyPI, which has no sm_90,
so it does not know an H100) through XLA_FLAGS=--xla_gpu_cuda_data_dir, and with that ptxas first on PATH.
Prints one JSON object per way: exit code, the result, and the lines of stderr that name ptxas or an error."""

import json
import os
import subprocess
import sys

OLD = sys.argv[1]  # the unpacked 11.7.99 wheel's nvidia/cuda_nvcc (bin/ptxas, nvvm/libdevice)
PROGRAM = ("import jax, jax.numpy as jnp; x = jnp.arange(1 << 20, dtype=jnp.float32); "
           "y = jax.jit(lambda v: jnp.sin(v) * 2 + 1)(x).block_until_ready(); "
           "print('RESULT', jax.__version__, jax.devices()[0].device_kind, float(y[1]))")
WAYS = {
    "as installed": {},
    "XLA_FLAGS at CUDA 11.7": {"XLA_FLAGS": f"--xla_gpu_cuda_data_dir={OLD}"},
    "ptxas 11.7 first on PATH": {"PATH": f"{OLD}/bin:{os.environ['PATH']}"},
}
for way, extra in WAYS.items():
    env = {**os.environ, **extra, "TF_CPP_MIN_LOG_LEVEL": "0"}
    proc = subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, timeout=300)
    said = [line for line in proc.stderr.splitlines() if "ptxas" in line.lower() or "error" in line.lower()][:12]
    print(json.dumps({"way": way, "env": extra, "rc": proc.returncode, "stdout": proc.stdout.strip()[-300:],
                      "stderr_ptxas_or_error": [line[:400] for line in said], "stderr_tail": proc.stderr.strip()[-600:]}), flush=True)
