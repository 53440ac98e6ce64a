"""A sweep of ~100 and of ~1,000 cells through a live Slurm cluster (the tests' one-node cluster with
FAKE_GPUS fake GPUs of each of two types), measuring gpucompat's own cost and how it grows:

- gpucompat's own CPU time per cell (the sweep process's user+system time, all its threads; the
  jobs run under slurmd and the scheduler's commands in their own processes, both reported apart);
- the store's writes per cell (committed transactions and INSERT/UPDATE/DELETE statements, counted
  with SQLAlchemy's engine events inside the sweep process);
- gpucompat's peak memory (the sweep process's maximum resident set);
- scheduler state calls (squeue/sacct) per 1-second poll, through logging wrappers on PATH.

Targets (issue 23): under 0.05 s of gpucompat's own time per cell, flat memory from 100 to 1,000
cells, one state call per poll. Stacks: every CUDA runtime minor series on PyPI x Python 3.11 and
3.12 (34 environments, built once by a warm-up sweep); cells = stacks x declared GPU classes.

    python benchmarks/slurm_scale.py [--sizes 3,30] [--json OUT]   # as root, with Debian's slurmctld/slurmd/munge
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
from slurm_polling import logging_wrappers, port  # noqa: E402

STACKS = '[[stacks]]\nframework = "cuda-runtime"\nversions = "latest:40"\npython = ["3.11", "3.12"]\n'


def targets(per_type: int) -> str:
    return "".join(f'[[targets]]\nname = "NVIDIA {gpu} ({n})"\ngres = "{gpu.lower()}"\n' for gpu in ("A100", "H100")
                   for n in range(1, per_type + 1))


def inner(plan: str) -> None:
    """One sweep in this process, counted; prints one JSON line."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    counts = Counter()
    event.listen(Engine, "commit", lambda conn: counts.update(["commits"]))
    event.listen(Engine, "before_cursor_execute",
                 lambda conn, cursor, statement, *rest: counts.update([statement.split(None, 1)[0].upper()]))
    sys.path.insert(0, str(REPO / "src"))
    from gpucompat import sweep as pipeline
    from gpucompat.cli import main as gpucompat_main

    run, peak_run = pipeline.run, []

    def measured_run(*args, **kwargs):  # the peak while the cells run, before the closing table is built
        try:
            return run(*args, **kwargs)
        finally:
            peak_run.append(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)

    pipeline.run = measured_run
    cpu, wall = time.process_time(), time.perf_counter()
    sys.argv = ["gpucompat", "sweep", plan]
    try:
        gpucompat_main()
        code = 0
    except SystemExit as exc:
        code = exc.code or 0
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    print("JSON " + json.dumps({"exit": code, "cpu_s": time.process_time() - cpu, "wall_s": time.perf_counter() - wall,
                                "peak_rss_mib": own.ru_maxrss / 1024,
                                "peak_rss_run_mib": peak_run[0] if peak_run else None, "children_cpu_s": children.ru_utime + children.ru_stime,
                                "commits": counts["commits"], "statements": {k: v for k, v in counts.items() if k != "commits"}}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="3,30", help="declared GPU classes per type for each measured sweep")
    parser.add_argument("--fake-gpus", default="8")
    parser.add_argument("--json")
    parser.add_argument("--inner", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        inner(args.inner)
        return
    work = Path(tempfile.mkdtemp(prefix="gpucompat-slurm-scale-"))
    env = {**os.environ, "SLURMCTLD_PORT": port(), "SLURMD_PORT": port(), "FAKE_GPUS": args.fake_gpus, "CPUS": "32",
           "COLUMNS": "120"}
    conf = subprocess.run([str(REPO / "tests" / "slurm" / "start-cluster.sh"), str(work / "cluster")], env=env,
                          capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
    env.update(SLURM_CONF=conf, GPUCOMPAT_DB=f"sqlite:///{work / 'db.sqlite'}", XDG_DATA_HOME=str(work / "data"))
    env.pop("FAKE_GPUS"), env.pop("CPUS")
    if shutil.which("pyenv"):  # let uv find a Python 3.12 behind pyenv's shims
        versions = subprocess.run(["pyenv", "versions", "--bare"], capture_output=True, text=True).stdout.split()
        env["PYENV_VERSION"] = ":".join(v for v in versions if v.startswith(("3.11.", "3.12.")))
    rows = []
    try:
        warmup = work / "warmup.toml"
        warmup.write_text(f'name = "warm-up"\nexecutor = "slurm"\n{targets(1)}[timeouts]\npending = "60m"\n{STACKS}')
        began = time.perf_counter()
        first = subprocess.run([sys.executable, "-m", "gpucompat", "sweep", str(warmup)], env=env, capture_output=True, text=True)
        print(f"warm-up sweep (builds the environments): exit {first.returncode} in {time.perf_counter() - began:.0f} s", flush=True)
        for size in (int(s) for s in args.sizes.split(",")):
            plan = work / f"plan-{size}.toml"
            plan.write_text(f'name = "scale-{size}"\nexecutor = "slurm"\n{targets(size)}[timeouts]\npending = "60m"\n{STACKS}')
            log = work / f"commands-{size}.log"
            run_env = {**env, "PATH": f"{logging_wrappers(work / f'bin-{size}', log)}:{env['PATH']}"}
            proc = subprocess.run([sys.executable, __file__, "--inner", str(plan)], env=run_env, capture_output=True, text=True)
            line = next((l for l in proc.stdout.splitlines() if l.startswith("JSON ")), None)
            if line is None:
                print(f"size {size}: no result\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}", flush=True)
                continue
            row = json.loads(line[5:])
            stamps = [line.split() for line in log.read_text().splitlines()] if log.exists() else []
            polls = sorted(float(stamp) for stamp, name in stamps if name in ("squeue", "sacct"))
            row["scheduler_calls"] = dict(Counter(name for _, name in stamps))
            row["busiest_second_state_calls"] = max((sum(1 for t in polls if s <= t < s + 1.0) for s in polls), default=0)
            summary = next((l for l in proc.stdout.splitlines() if l.startswith("sweep ")), "")
            row["closing_line"] = summary
            row["cells"] = 34 * 2 * size
            row["cpu_per_cell_s"] = row["cpu_s"] / row["cells"]
            row["commits_per_cell"] = row["commits"] / row["cells"]
            rows.append(row)
            print(f"{row['cells']:>5} cells: wall {row['wall_s']:7.1f} s, gpucompat's own CPU {row['cpu_s']:6.1f} s "
                  f"({row['cpu_per_cell_s']:.4f} s/cell; target < 0.05), peak RSS {row['peak_rss_mib']:.0f} MiB "
                  f"({row['peak_rss_run_mib'] or 0:.0f} MiB while the cells ran, before the closing table), "
                  f"{row['commits_per_cell']:.2f} commits/cell, statements {row['statements']}, scheduler {row['scheduler_calls']}, "
                  f"busiest second {row['busiest_second_state_calls']} state calls; exit {row['exit']}", flush=True)
    finally:
        subprocess.run([str(REPO / "tests" / "slurm" / "stop-cluster.sh"), str(work / "cluster")])
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
