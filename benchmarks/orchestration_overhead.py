"""Orchestration overhead per cell: everything a sweep does besides building environments
and running probes (target: <= 0.5 s per cell).

One sweep of N CUDA-runtime cells whose environments are already built, beside a bare
loop that runs the same probes with the same interpreters. Overhead per cell is
(sweep wall - probe time / parallel probe slots) / N, where probe time is the sum of
the per-cell durations the executor measured; resolution (warm uv cache) counts as
overhead too.

    python benchmarks/orchestration_overhead.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gpucompat.concurrency import limits
from gpucompat.probe_build import probe_pyz
from gpucompat.store import Store

SERIES = ["11.7", "11.8", "12.0", "12.1", "12.2", "12.3", "12.4", "12.5", "12.6", "12.8", "12.9", "13.0"]
PROBE = probe_pyz()  # the probe as jobs run it
CPU_ONLY_SLOTS = limits(gpus=0).probes  # probes at once on this machine without a GPU (the executor's rule)


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="gpucompat-overhead-"))
    plan = work / "plan.toml"
    plan.write_text(f'name = "overhead"\n[[stacks]]\nframework = "cuda-runtime"\nversions = {json.dumps(SERIES)}\n')
    env = {**os.environ, "GPUCOMPAT_DB": f"sqlite:///{work / 'db.sqlite'}", "XDG_DATA_HOME": str(work)}
    command = [sys.executable, "-m", "gpucompat", "sweep", str(plan)]
    subprocess.run(command, env=env, capture_output=True, check=True)  # builds (or finds) the environments
    began = time.perf_counter()
    subprocess.run(command, env=env, capture_output=True, check=True)
    sweep_s = time.perf_counter() - began

    store = Store(env["GPUCOMPAT_DB"])
    sweep_id = store.latest_sweep_id()
    rows = store.result_rows(sweep_id)
    probe_s = sum(r["duration_s"] or 0 for r in rows)
    interpreters = [json.loads((work / "gpucompat" / "runs" / f"sweep-{sweep_id}" / f"cell-{r['cell_id']}" / "job.json").read_text())["interpreter"] for r in rows]

    began = time.perf_counter()
    for interpreter in interpreters:
        subprocess.run([interpreter, str(PROBE), "--framework", "cuda-runtime", "--result", str(work / "bare.json")], capture_output=True)
    bare_s = time.perf_counter() - began

    cells = len(rows)
    overhead = (sweep_s - probe_s / CPU_ONLY_SLOTS) / cells
    print(f"cells: {cells}, probe slots: {CPU_ONLY_SLOTS} (no GPU here)")
    print(f"{'what':<44} {'wall_s':>7} {'per_cell_s':>10}")
    print(f"{'gpucompat sweep (cached environments)':<44} {sweep_s:7.2f} {sweep_s / cells:10.3f}")
    print(f"{'bare loop of the same probes, one at a time':<44} {bare_s:7.2f} {bare_s / cells:10.3f}")
    print(f"{'probe time measured by the executor (sum)':<44} {probe_s:7.2f} {probe_s / cells:10.3f}")
    print(f"orchestration overhead per cell: {overhead:.3f} s (target 0.5 s -> {'met' if overhead <= 0.5 else 'MISSED'})")


if __name__ == "__main__":
    main()
