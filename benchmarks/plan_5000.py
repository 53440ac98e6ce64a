"""Planning a site-sized sweep: a 5,100-cell Slurm dry run (51 stacks x 100 declared GPU classes),
with the stacks' resolution warm in uv's cache, its wall time and gpucompat's peak memory.

Issue 23 measured 19 s and 80 MB for 5,000 cells (40 stacks x 125 classes) on main before it and asked to keep
it there; every CUDA runtime minor series x 3 Pythons gives 51 stacks here, so 100 classes. Nothing is
submitted or stored (a dry run); the scripts and the one shared probe.pyz land in a fresh --out.

    python benchmarks/plan_5000.py [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CLASSES = 100


def plan_text() -> str:
    targets = "".join(f'[[targets]]\nname = "GPU class {i:03d}"\ngres = "g{i:03d}"\ncc = "8.0"\n' for i in range(CLASSES))
    stacks = '[[stacks]]\nframework = "cuda-runtime"\nversions = "latest:20"\npython = ["3.10", "3.11", "3.12"]\n'
    return f'name = "five-thousand"\nexecutor = "slurm"\nmax_cells = 10000\n{targets}{stacks}'


def dry_run(plan: Path, out: Path, env: dict) -> tuple[float, float, subprocess.CompletedProcess]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    began = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "gpucompat", "sweep", str(plan), "--dry-run", "--out", str(out)],
                          env=env, capture_output=True, text=True)
    wall = time.perf_counter() - began
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # the largest child so far (KiB)
    return wall, max(peak, before) / 1024, proc


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="gpucompat-plan-5000-"))
    plan = work / "plan.toml"
    plan.write_text(plan_text())
    env = {**os.environ, "GPUCOMPAT_DB": f"sqlite:///{work / 'db.sqlite'}", "COLUMNS": "120"}
    warm_wall, _, warm = dry_run(plan, work / "warm", env)  # fills uv's cache and the version lists
    wall, peak, proc = dry_run(plan, work / "out", env)
    cells = sum(1 for _ in (work / "out").glob("cell-*"))
    row = {"cells": cells, "warm_up_s": round(warm_wall, 1), "wall_s": round(wall, 1), "peak_rss_mib": round(peak),
           "exit": proc.returncode, "last_line": next((l for l in (proc.stdout + proc.stderr).splitlines() if l.startswith("dry run")), "")}
    print(f"{cells} cells: dry run {wall:.1f} s with resolution warm (first, cold: {warm_wall:.1f} s), "
          f"gpucompat's peak RSS {peak:.0f} MiB; exit {proc.returncode}\n{row['last_line']}")
    if proc.returncode:
        print(proc.stderr[-2000:])
    if args.json:
        Path(args.json).write_text(json.dumps(row, indent=1))


if __name__ == "__main__":
    main()
