"""What a probe rung's first call costs, each in a fresh interpreter so nothing is shared between variants:
JAX's float32 product at each precision (the blas rung used HIGHEST) and NCCL on one GPU through a process
group or through torch.cuda.nccl (the nccl rung used a process group). Written apart from the probe.

    python benchmarks/first_call_costs.py [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

JAX = """
import time, jax, jax.numpy as jnp, numpy as np
d = jax.devices("gpu")[0]
a = jax.device_put(np.random.standard_normal((256, 256)).astype("float32"), d)
(a + a).block_until_ready()
t = time.perf_counter()
out = jnp.dot(a, a, precision={precision})
out.block_until_ready()
ref = np.asarray(a, dtype="float64") @ np.asarray(a, dtype="float64")
err = np.linalg.norm(np.asarray(out, dtype="float64") - ref) / np.linalg.norm(ref)
print("%.3f %.2e" % (time.perf_counter() - t, err))
"""
TORCH = """
import time, torch
x = torch.randn(1024, device="cuda"); torch.cuda.synchronize()
t = time.perf_counter()
{body}
torch.cuda.synchronize()
print("%.3f 0" % (time.perf_counter() - t))
"""
PROCESS_GROUP = """import datetime, os, tempfile, torch.distributed as dist
h, p = tempfile.mkstemp(); os.close(h)
dist.init_process_group("nccl", store=dist.FileStore(p, 1), rank=0, world_size=1, timeout=datetime.timedelta(seconds=60))
dist.all_reduce(x); torch.cuda.synchronize(); dist.destroy_process_group()"""
RAW = "import torch.cuda.nccl as nccl; nccl.all_reduce([x])"
VARIANTS = {
    "jax dot HIGHEST": JAX.format(precision="jax.lax.Precision.HIGHEST"),
    "jax dot HIGH": JAX.format(precision="jax.lax.Precision.HIGH"),
    "jax dot default": JAX.format(precision="None"),
    "jax dot 'F32_F32_F32'": JAX.format(precision="'F32_F32_F32'"),
    "jax dot 'TF32_TF32_F32'": JAX.format(precision="'TF32_TF32_F32'"),
    "torch nccl process group": TORCH.format(body=PROCESS_GROUP),
    "torch torch.cuda.nccl.all_reduce": TORCH.format(body=RAW),
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    for name, code in VARIANTS.items():
        seconds, errors = [], set()
        for _ in range(args.runs):
            proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
            if proc.returncode:
                errors.add(proc.stderr.strip().splitlines()[-1][:200] if proc.stderr.strip() else f"exit {proc.returncode}")
                continue
            value, error = proc.stdout.split()[-2:]
            seconds.append(float(value))
            errors.add(f"relative error {error}")
        median = f"{statistics.median(seconds):.3f} s" if seconds else "failed"
        print(f"{name:<36} first call {median}  (runs {[round(s, 3) for s in seconds]})  {sorted(errors)}", flush=True)


if __name__ == "__main__":
    main()
