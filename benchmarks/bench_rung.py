"""The bench rung's figures against plain loops written apart from the probe, side by side in one job.

For each framework (torch, JAX, CuPy), each data type of the matrix products (fp64 at 4096^3, the rest
at 8192^3, as the probe measures them) and the device copy (1 GiB), this alternates the probe's own
figure (its Bench and bench_<framework> code, in process, exactly as a job runs them) with a plain
loop that shares no code with the probe: A B B A A B ... for --pairs pairs. Each side's value is the
median of its runs; the ratio is probe / plain. Alternating matters: on an H100 at 700 W the matrix
products run power-capped, and the same loop reads 620 to 760 TFLOP/s depending on how hot the card is
(benchmarks/bench_harness_variants.py). Clocks, power, temperature and throttle reasons are kept for
every probe figure, so a throttled GPU is told apart from a slow harness.

    python benchmarks/bench_rung.py [--frameworks torch,jax,cupy] [--pairs 3] [--json OUT]

Target: every ratio >= 0.97 (docs/performance.md). Each framework runs in its own process (JAX with
XLA_PYTHON_CLIENT_PREALLOCATE=false, so that the plain loops and the probe share one allocator).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

SRC = str(Path(__file__).resolve().parent.parent / "src")
DTYPES = ["fp64", "fp32", "tf32", "fp16", "bf16"]
N, COPY_BYTES, WARMUP, SAMPLES = 8192, 1 << 30, 25, 30


# --- the plain loops: what a GPU engineer writes first, no code of the probe's -------------------

def plain_torch(kind):
    import torch

    def timed(run):
        for _ in range(WARMUP):
            run()
        torch.cuda.synchronize()
        times = []
        for _ in range(SAMPLES):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            run()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        return statistics.median(times)

    if kind == "copy":
        src = torch.empty(COPY_BYTES // 4, device="cuda")
        dst = torch.empty_like(src)
        return 2 * COPY_BYTES / timed(lambda: dst.copy_(src)) / 1e9
    n = N // 2 if kind == "fp64" else N
    dtype = {"fp64": torch.float64, "fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[kind]
    torch.backends.cuda.matmul.allow_tf32 = kind == "tf32"
    a, b = torch.randn(n, n, device="cuda", dtype=dtype), torch.randn(n, n, device="cuda", dtype=dtype)
    try:
        return 2 * n ** 3 / timed(lambda: a @ b) / 1e12
    finally:
        torch.backends.cuda.matmul.allow_tf32 = False
        del a, b
        torch.cuda.empty_cache()


def plain_jax(kind):
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)

    def timed(f, *args):
        for _ in range(WARMUP):
            f(*args).block_until_ready()
        times = []
        for _ in range(SAMPLES):
            start = time.perf_counter()
            f(*args).block_until_ready()
            times.append(time.perf_counter() - start)
        return statistics.median(times)

    if kind == "copy":
        x = jnp.zeros(COPY_BYTES // 4, dtype=jnp.float32)
        return 2 * COPY_BYTES / timed(jax.jit(lambda v: v + 1.0), x) / 1e9
    n = N // 2 if kind == "fp64" else N
    dtype = {"fp64": jnp.float64, "fp32": jnp.float32, "tf32": jnp.float32, "fp16": jnp.float16, "bf16": jnp.bfloat16}[kind]
    precision = jax.lax.Precision.DEFAULT if kind == "tf32" else jax.lax.Precision.HIGHEST
    k1, k2 = jax.random.split(jax.random.PRNGKey(1))
    a, b = jax.random.normal(k1, (n, n), dtype=dtype), jax.random.normal(k2, (n, n), dtype=dtype)
    return 2 * n ** 3 / timed(jax.jit(lambda x, y: jnp.matmul(x, y, precision=precision)), a, b) / 1e12


def plain_cupy(kind):
    import cupy

    def timed(run):
        for _ in range(WARMUP):
            run()
        cupy.cuda.Device().synchronize()
        times = []
        for _ in range(SAMPLES):
            start, end = cupy.cuda.Event(), cupy.cuda.Event()
            start.record()
            run()
            end.record()
            end.synchronize()
            times.append(cupy.cuda.get_elapsed_time(start, end) / 1e3)
        return statistics.median(times)

    if kind == "copy":
        src = cupy.empty(COPY_BYTES // 4, dtype="float32")
        dst = cupy.empty_like(src)
        return 2 * COPY_BYTES / timed(lambda: cupy.copyto(dst, src)) / 1e9
    if kind in ("tf32", "bf16"):
        return None  # CuPy has no bfloat16, and TF32 only through CUPY_TF32 at import: the probe says so too
    n = N // 2 if kind == "fp64" else N
    dtype = {"fp64": "float64", "fp32": "float32", "fp16": "float16"}[kind]
    a = cupy.random.standard_normal((n, n)).astype(dtype)
    b = cupy.random.standard_normal((n, n)).astype(dtype)
    return 2 * n ** 3 / timed(lambda: a @ b) / 1e12


# --- the probe's own figure, in process -----------------------------------------------------------

def probe_figure(framework, kind):
    sys.path.insert(0, SRC)
    from gpucompat.probe.bench import Bench

    facts = {}
    bench = Bench(facts, {"measurements": ["copy" if kind == "copy" else "matmul"], "dtypes": [] if kind == "copy" else [kind]})
    if framework == "torch":
        import torch

        from gpucompat.probe.bench_torch import bench_torch
        bench_torch(torch, bench, 0.0)
    elif framework == "jax":
        import jax

        from gpucompat.probe.bench_jax import bench_jax
        bench_jax(jax, bench, 0.0)
    else:
        import cupy

        from gpucompat.probe.bench_cupy import bench_cupy
        bench_cupy(cupy, bench)
    figure = next(f for f in facts["figures"] if f["measurement"] == ("copy" if kind == "copy" else "matmul"))
    return figure


def one_framework(framework, pairs):
    plain = {"torch": plain_torch, "jax": plain_jax, "cupy": plain_cupy}[framework]
    rows = []
    for kind in DTYPES + ["copy"]:
        probe_values, plain_values, clocks = [], [], []
        for pair in range(pairs):
            order = ("probe", "plain") if pair % 2 == 0 else ("plain", "probe")
            for side in order:
                if side == "probe":
                    figure = probe_figure(framework, kind)
                    if "value" not in figure:
                        break
                    probe_values.append(figure["value"])
                    clocks.append(figure.get("clocks", {}).get("after", {}))
                else:
                    value = plain(kind)
                    if value is None:
                        break
                    plain_values.append(value)
        row = {"framework": framework, "figure": "copy" if kind == "copy" else f"matmul {kind}",
               "unit": "GB/s" if kind == "copy" else "TFLOP/s", "probe": probe_values, "plain": plain_values, "clocks": clocks}
        if probe_values and plain_values:
            row["ratio"] = statistics.median(probe_values) / statistics.median(plain_values)
        rows.append(row)
        shown = f"{100 * row['ratio']:.1f} %" if "ratio" in row else "not comparable (the probe or the loop does not make it)"
        after = clocks[-1] if clocks else {}
        print(f"{framework:<5} {row['figure']:<12} probe {statistics.median(probe_values) if probe_values else float('nan'):8.1f}  "
              f"plain {statistics.median(plain_values) if plain_values else float('nan'):8.1f} {row['unit']:<7} -> {shown}"
              f"   (SM {after.get('sm_mhz')} MHz, {after.get('power_w')} W, {after.get('temp_c')} C, {after.get('throttle')})", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--frameworks", default="torch,jax,cupy")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--json")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # run one framework in this process
    args = parser.parse_args()
    if args.one:
        print("JSON " + json.dumps(one_framework(args.one, args.pairs)))
        return
    rows = []
    for framework in args.frameworks.split(","):
        env = {**os.environ, "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
        proc = subprocess.run([sys.executable, __file__, "--one", framework, "--pairs", str(args.pairs)],
                              capture_output=True, text=True, env=env)
        for line in proc.stdout.splitlines():
            if line.startswith("JSON "):
                rows += json.loads(line[5:])
            else:
                print(line, flush=True)
        if proc.returncode:
            print(f"{framework}: exit {proc.returncode}\n{proc.stderr[-2000:]}", flush=True)
    ratios = [r["ratio"] for r in rows if "ratio" in r]
    if ratios:
        print(f"worst ratio {100 * min(ratios):.1f} % over {len(ratios)} figures (target >= 97 %)")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
