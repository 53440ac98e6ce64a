"""The bench rung's own cost and trustworthiness, on a GPU machine with torch installed:

1. harness overhead: the bf16 matrix-product figure gpucompat's probe reports against the best a
   plain hand-written timing loop reaches with the same framework, size and data type, side by
   side in one job (target: the probe's figure >= 95 % of the hand loop's);
2. the whole bench rung's wall time for one cell with the defaults (target: <= 60 s on an H100);
3. repeatability: two runs of the same cell, matrix products and bandwidth (target: within 3 %);
4. what NVML sampling (10 Hz, during the bench) costs: the products with it on and off (target: <= 1 %).

    python benchmarks/bench_rung.py [--python INTERPRETER] [--json OUT]

INTERPRETER is the Python that has torch (default: this one); the probe runs in it as in a sweep.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))  # probe_build needs nothing but the standard library
from gpucompat.probe_build import probe_pyz  # noqa: E402

PROBE = probe_pyz()  # the probe as jobs run it

HAND_LOOP = r"""
import json, sys, time
import torch
n, loops, rounds = 8192, 100, 5
a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
for _ in range(20):
    torch.matmul(a, b)
torch.cuda.synchronize()
best = 0.0
for _ in range(rounds):
    start = time.perf_counter()
    for _ in range(loops):
        torch.matmul(a, b)
    torch.cuda.synchronize()
    best = max(best, 2.0 * n ** 3 * loops / (time.perf_counter() - start) / 1e12)
print(json.dumps({"bf16_tflops": best}))
"""


def probe_run(python: str, workdir: Path, name: str, telemetry: bool = True) -> dict:
    result = workdir / f"{name}.json"
    env = {**os.environ, "GPUCOMPAT_TELEMETRY": "1" if telemetry else "0"}
    subprocess.run([python, str(PROBE), "--framework", "torch", "--result", str(result), "--bench", "{}"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    data = json.loads(result.read_text())
    bench = data["stages"]["bench"]
    figures = {(f["measurement"], f.get("dtype", "")): f for f in bench["facts"]["figures"] if "value" in f}
    rows_seconds = {"/".join(filter(None, key)): f.get("duration_s") for key, f in figures.items()}
    return {"seconds": bench["duration_s"], "figures": figures, "figure_seconds": rows_seconds}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        first = probe_run(args.python, Path(tmp), "first")
        hand = json.loads(subprocess.run([args.python, "-c", HAND_LOOP], check=True, capture_output=True, text=True).stdout)
        second = probe_run(args.python, Path(tmp), "second")
        quiet = probe_run(args.python, Path(tmp), "no-telemetry", telemetry=False)
    reported = first["figures"][("matmul", "bf16")]["value"]
    rows = {"harness_share_of_hand_loop": reported / hand["bf16_tflops"], "probe_bf16_tflops": reported,
            "hand_loop_bf16_tflops": hand["bf16_tflops"], "bench_rung_seconds": [first["seconds"], second["seconds"]],
            "figure_seconds": first["figure_seconds"]}
    repeat = {}
    for key, figure in first["figures"].items():
        other = second["figures"].get(key)
        if other and key[0] in ("matmul", "copy", "h2d", "d2h"):
            repeat["/".join(filter(None, key))] = abs(other["value"] - figure["value"]) / figure["value"]
    rows["repeat_difference"] = repeat
    # NVML sampling at 10 Hz beside the figures it accompanies: matrix products with it on (the two runs above) and off
    sampled = [run["figures"][("matmul", d)]["value"] for run in (first, second) for d in ("bf16", "fp32")]
    unsampled = [quiet["figures"][("matmul", d)]["value"] for d in ("bf16", "fp32")]
    rows["telemetry_cost"] = 1 - (sum(sampled) / 2) / sum(unsampled)
    rows["repeat_worst"] = max(repeat.values()) if repeat else None
    print(f"bf16 8192^3: probe {reported:.1f} TFLOP/s, hand loop {hand['bf16_tflops']:.1f} TFLOP/s "
          f"-> {100 * rows['harness_share_of_hand_loop']:.1f} % (target >= 95 %)")
    print(f"bench rung, defaults: {first['seconds']:.1f} s and {second['seconds']:.1f} s (target <= 60 s); the longest figures:")
    for key, figure in sorted(first["figures"].items(), key=lambda item: -item[1].get("duration_s", 0))[:4]:
        print(f"    {'/'.join(filter(None, key)):<14} {figure.get('duration_s', 0):6.1f} s")
    for key, difference in sorted(repeat.items()):
        print(f"repeat {key:<12} {100 * difference:5.2f} %")
    print(f"worst repeat difference: {100 * rows['repeat_worst']:.2f} % (target <= 3 %)")
    print(f"NVML sampling at 10 Hz costs {100 * rows['telemetry_cost']:.2f} % of the bf16+fp32 products (target <= 1 %; "
          "negative: the runs without sampling were slower)")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
