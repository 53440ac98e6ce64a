"""How long `gpucompat check` takes to a verdict, beside the bare commands it wraps.

Targets (issue 2): a verdict in <= 20 s for a stack whose environment is cached, and
the probe adding <= 2 s over a bare `python -c "import torch; torch.ones(1).cuda()"`.
Run on a GPU node; every variant is timed in the same run, alternating, median of N.

    python benchmarks/check_latency.py --runs 5 [--wheelhouse DIR] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))  # probe_build needs nothing but the standard library
from gpucompat.probe_build import probe_pyz  # noqa: E402

PROBE = probe_pyz()  # the probe as jobs run it


def timed(command: list[str], env: dict) -> tuple[float, int]:
    began = time.perf_counter()
    proc = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return time.perf_counter() - began, proc.returncode


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--wheelhouse")
    parser.add_argument("--json")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="gpucompat-bench-"))
    env = {**os.environ, "GPUCOMPAT_DB": f"sqlite:///{work / 'bench.db'}"}
    gpucompat = [sys.executable, "-m", "gpucompat"]
    variants = {
        "bare torch.ones(1).cuda()": [sys.executable, "-c", "import torch; torch.ones(1).cuda()"],
        "probe.pyz torch (all stages)": [sys.executable, str(PROBE), "--framework", "torch", "--result", str(work / "p.json")],
        "gpucompat check torch --env current": [*gpucompat, "check", "torch", "--env", "current"],
    }
    if args.wheelhouse:
        cached = [*gpucompat, "check", "cuda-runtime==12.4", "--wheelhouse", args.wheelhouse]
        subprocess.run(cached, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)  # builds the env once
        variants["gpucompat check cuda-runtime==12.4 (cached env)"] = cached
    times: dict[str, list[float]] = {name: [] for name in variants}
    codes: dict[str, set[int]] = {name: set() for name in variants}
    for _ in range(args.runs):
        for name, command in variants.items():  # alternate, so drift hits every variant alike
            seconds, code = timed(command, env)
            times[name].append(seconds)
            codes[name].add(code)
    bare = statistics.median(times["bare torch.ones(1).cuda()"])
    rows = []
    for name, values in times.items():
        median = statistics.median(values)
        rows.append({"variant": name, "median_s": round(median, 3), "min_s": round(min(values), 3),
                     "max_s": round(max(values), 3), "over_bare_s": round(median - bare, 3),
                     "ratio_to_bare": round(median / bare, 2), "exit_codes": sorted(codes[name]), "runs": len(values)})
    width = max(len(r["variant"]) for r in rows)
    print(f"{'variant':<{width}}  median_s  min_s   max_s   over_bare_s  ratio")
    for r in rows:
        print(f"{r['variant']:<{width}}  {r['median_s']:8.3f}  {r['min_s']:6.3f}  {r['max_s']:6.3f}  {r['over_bare_s']:11.3f}  {r['ratio_to_bare']:5.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"python": sys.version, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
