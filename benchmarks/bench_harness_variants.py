"""Where a bench figure loses against a hand loop: the probe's torch matrix-product harness beside a
plain loop and beside variants of itself, one factor changed at a time, in one process on one GPU.

    python benchmarks/bench_harness_variants.py [--dtypes bf16,fp16,tf32] [--rounds 2] [--json OUT]

Variants (each a median TFLOP/s over its samples, 8192^3, random data):
  hand         a plain loop: 20 warm-up products, then 50 products each timed by its own CUDA events
  probe        the probe's Bench.measure + bench_torch's matmul body, as a sweep runs it
  no-out       the probe's harness with torch.matmul(a, b) instead of torch.matmul(a, b, out=out)
  per-op       the probe's harness with one product per event pair (no batching between events)
  long-warmup  the probe's harness after 2 s of products instead of 0.3 s
Rounds repeat the whole list, so drift (clocks, heat) shows as a difference between rounds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))


def hand(torch, dtype, n=8192, warmup=20, samples=50):
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    for _ in range(warmup):
        torch.matmul(a, b)
    torch.cuda.synchronize()
    times = []
    for _ in range(samples):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.matmul(a, b)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1000.0)
    return statistics.median(2.0 * n ** 3 / t / 1e12 for t in times)


def probe_figure(torch, name, patch=None):
    """The probe's own figure for one dtype, through its Bench and bench_torch, optionally patched."""
    from gpucompat.probe import bench as bench_module
    from gpucompat.probe import bench_torch as bench_torch_module

    facts = {}
    bench = bench_module.Bench(facts, {"measurements": ["matmul"], "dtypes": [name]})
    saved = {}
    for module, attr, value in patch or []:
        saved[(module, attr)] = getattr(module, attr)
        setattr(module, attr, value)
    try:
        bench_torch_module.bench_torch(torch, bench, 0.0)
    finally:
        for (module, attr), value in saved.items():
            setattr(module, attr, value)
    figure = next(f for f in facts["figures"] if f["measurement"] == "matmul")
    return figure["value"], (figure.get("clocks") or {}).get("after", {})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dtypes", default="bf16,fp16,tf32")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json")
    args = parser.parse_args()
    import torch

    from gpucompat.probe import bench as bench_module
    from gpucompat.probe import bench_torch as bench_torch_module

    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32, "fp32": torch.float32}

    results = []
    for round_ in range(args.rounds):
        for name in args.dtypes.split(","):
            torch.backends.cuda.matmul.allow_tf32 = name == "tf32"
            row = {"round": round_ + 1, "dtype": name, "hand": hand(torch, dtypes[name])}
            row["probe"], clocks = probe_figure(torch, name)
            row["probe_clocks_after"] = clocks
            original_matmul = torch.matmul
            torch.matmul = lambda a, b, out=None: original_matmul(a, b)  # noqa: E731
            try:
                row["no-out"], _ = probe_figure(torch, name)
            finally:
                torch.matmul = original_matmul
            row["per-op"], _ = probe_figure(torch, name, [(bench_module, "REPETITION_S", 0.0)])
            timed = bench_torch_module._timed
            row["long-warmup"], _ = probe_figure(torch, name, [(bench_torch_module, "_timed",
                                                               lambda run, sync, reps, warmup_s=2.0: timed(run, sync, reps, warmup_s))])
            row["hand-again"] = hand(torch, dtypes[name])
            torch.backends.cuda.matmul.allow_tf32 = False
            results.append(row)
            shares = {k: row[k] / row["hand"] for k in ("probe", "no-out", "per-op", "long-warmup", "hand-again")}
            print(f"round {round_ + 1} {name}: hand {row['hand']:.1f} TFLOP/s; " + ", ".join(f"{k} {100 * v:.1f} %" for k, v in shares.items()),
                  flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=str))


if __name__ == "__main__":
    main()
