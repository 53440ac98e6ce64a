"""A plain loop, written apart from gpucompat (it imports nothing of it), that runs in one fresh process
per framework the same kinds of library calls as the probe's library rungs: a matrix product
(cuBLAS), a convolution (cuDNN), an FFT (cuFFT), a linear solve (cuSOLVER), a sparse product (cuSPARSE)
and, for torch, an all-reduce on a one-rank NCCL group. For each: the time of the first call (what the
probe's rung measures, handle and plan creation included), the median of 5 calls after it, and the
relative error against NumPy in float64. Used beside `gpucompat check` in run-gpu-state.sh.

    python3 library_ops_plain.py torch|jax|cupy   -> one JSON object on stdout
"""

import json
import sys
import time

import numpy as np


def rel(out, ref):
    out, ref = np.asarray(out, dtype=np.complex128).ravel(), np.asarray(ref, dtype=np.complex128).ravel()
    return float(np.linalg.norm(out - ref) / np.linalg.norm(ref))


def timed(call, sync):
    began = time.perf_counter()
    out = call()
    sync(out)
    first = time.perf_counter() - began
    steady = []
    for _ in range(5):
        began = time.perf_counter()
        sync(call())
        steady.append(time.perf_counter() - began)
    return out, first, sorted(steady)[2]


rng = np.random.default_rng(0)
a = rng.standard_normal((256, 256)).astype(np.float32)
b = rng.standard_normal((256, 256)).astype(np.float32)
x = rng.standard_normal((2, 4, 12, 12)).astype(np.float32)
w = rng.standard_normal((8, 4, 3, 3)).astype(np.float32)
signal = (rng.standard_normal(1024) + 1j * rng.standard_normal(1024)).astype(np.complex64)
m = (rng.standard_normal((64, 64)) + 64 * np.eye(64)).astype(np.float32)
rhs = rng.standard_normal((64, 4)).astype(np.float32)
dense = rng.standard_normal((128, 128)) * (rng.random((128, 128)) < 0.05)
dense = dense.astype(np.float32)
other = rng.standard_normal((128, 8)).astype(np.float32)


def conv_ref():
    out = np.zeros((2, 8, 10, 10))
    for i in range(3):
        for j in range(3):
            out += np.einsum("nchw,oc->nohw", x[:, :, i:i + 10, j:j + 10].astype(np.float64), w[:, :, i, j].astype(np.float64))
    return out


refs = {"matmul": a.astype(np.float64) @ b, "conv": conv_ref(), "fft": np.fft.fft(signal.astype(np.complex128)),
        "solve": np.linalg.solve(m.astype(np.float64), rhs.astype(np.float64)), "sparse": dense.astype(np.float64) @ other}


def run_torch():
    import torch

    dev = "cuda"
    sync = lambda out: torch.cuda.synchronize()  # noqa: E731
    ops = {"matmul": lambda: torch.from_numpy(a).to(dev) @ torch.from_numpy(b).to(dev),
           "conv": lambda: torch.nn.functional.conv2d(torch.from_numpy(x).to(dev), torch.from_numpy(w).to(dev)),
           "fft": lambda: torch.fft.fft(torch.from_numpy(signal).to(dev)),
           "solve": lambda: torch.linalg.solve(torch.from_numpy(m).to(dev), torch.from_numpy(rhs).to(dev)),
           "sparse": lambda: torch.sparse.mm(torch.from_numpy(dense).to_sparse().to(dev), torch.from_numpy(other).to(dev))}
    found = {}
    for name, call in ops.items():
        out, first, steady = timed(call, sync)
        found[name] = {"first_s": first, "median_s": steady, "rel_error": rel(out.cpu().numpy(), refs[name])}
    import os
    import tempfile

    import torch.distributed as dist

    path = tempfile.mktemp()
    began = time.perf_counter()
    dist.init_process_group("nccl", store=dist.FileStore(path, 1), rank=0, world_size=1)
    t = torch.from_numpy(a).to(dev)
    dist.all_reduce(t)
    torch.cuda.synchronize()
    found["allreduce"] = {"first_s": time.perf_counter() - began, "rel_error": rel(t.cpu().numpy(), a)}
    dist.destroy_process_group()
    if os.path.exists(path):
        os.unlink(path)
    return {"version": torch.__version__, "ops": found}


def run_jax():
    import jax
    import jax.numpy as jnp

    sync = lambda out: out.block_until_ready()  # noqa: E731
    hi = jax.lax.Precision.HIGHEST
    ops = {"matmul": lambda: jnp.dot(jnp.asarray(a), jnp.asarray(b), precision=hi),
           "conv": lambda: jax.lax.conv_general_dilated(jnp.asarray(x), jnp.asarray(w), (1, 1), "VALID", precision=hi),
           "fft": lambda: jnp.fft.fft(jnp.asarray(signal)),
           "solve": lambda: jnp.linalg.solve(jnp.asarray(m), jnp.asarray(rhs))}
    found = {}
    for name, call in ops.items():
        out, first, steady = timed(call, sync)
        found[name] = {"first_s": first, "median_s": steady, "rel_error": rel(np.asarray(out), refs[name])}
    return {"version": jax.__version__, "ops": found}


def run_cupy():
    import cupy
    import cupyx.scipy.sparse

    sync = lambda out: cupy.cuda.Device().synchronize()  # noqa: E731
    ops = {"matmul": lambda: cupy.asarray(a) @ cupy.asarray(b),
           "fft": lambda: cupy.fft.fft(cupy.asarray(signal)),
           "solve": lambda: cupy.linalg.solve(cupy.asarray(m), cupy.asarray(rhs)),
           "sparse": lambda: cupyx.scipy.sparse.csr_matrix(cupy.asarray(dense)) @ cupy.asarray(other)}
    found = {}
    for name, call in ops.items():
        out, first, steady = timed(call, sync)
        found[name] = {"first_s": first, "median_s": steady, "rel_error": rel(cupy.asnumpy(out), refs[name])}
    return {"version": cupy.__version__, "ops": found}


if __name__ == "__main__":
    print(json.dumps({"framework": sys.argv[1], **{"torch": run_torch, "jax": run_jax, "cupy": run_cupy}[sys.argv[1]]()}))
