"""Polling cost of a 200-cell sweep through a live Slurm cluster (the tests' one-node cluster,
two fake GPU types): scheduler commands per minute, squeue/sacct calls per poll interval (target:
at most one for the whole sweep, whatever the cell count), and gpucompat's overhead per cell
(target <= 0.1 s), measured side by side against the same job arrays submitted by hand.

34 stacks (every CUDA runtime minor series from 11.x on x Python 3.11 and 3.12, environments built
by a first sweep) x 6 declared GPU classes (three names per fake GPU type) = 204 cells. Every
Slurm command gpucompat runs goes through a wrapper first on PATH that logs it.

    python benchmarks/slurm_polling.py      # as root, with Debian's slurmctld/slurmd/munge installed
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
COMMANDS = ("squeue", "sacct", "scontrol", "sbatch", "scancel", "sinfo")
TARGETS = "".join(f'[[targets]]\nname = "NVIDIA {gpu} ({n})"\ngres = "{gpu.lower()}"\n' for gpu in ("A100", "H100") for n in (1, 2, 3))


def port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def logging_wrappers(directory: Path, log: Path) -> str:
    """Slurm's commands, each logging its call (a timestamp and its name) before it runs."""
    directory.mkdir(parents=True)
    for name in COMMANDS:
        path = directory / name
        path.write_text(f'#!/bin/sh\necho "$(date +%s.%N) {name}" >> {log}\nexec {shutil.which(name)} "$@"\n')
        path.chmod(0o755)
    return str(directory)


def gpucompat(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpucompat", *args], env=env, capture_output=True, text=True)


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="gpucompat-slurm-polling-"))
    env = {**os.environ, "SLURMCTLD_PORT": port(), "SLURMD_PORT": port()}
    conf = subprocess.run([str(REPO / "tests" / "slurm" / "start-cluster.sh"), str(work / "cluster")], env=env,
                          capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
    log = work / "commands.log"
    env.update(SLURM_CONF=conf, GPUCOMPAT_DB=f"sqlite:///{work / 'db.sqlite'}", XDG_DATA_HOME=str(work / "data"))
    if shutil.which("pyenv"):  # let uv find a Python 3.12 behind pyenv's shims
        versions = subprocess.run(["pyenv", "versions", "--bare"], capture_output=True, text=True).stdout.split()
        env["PYENV_VERSION"] = ":".join(v for v in versions if v.startswith(("3.11.", "3.12.")))
    try:
        stacks = '[[stacks]]\nframework = "cuda-runtime"\nversions = "latest:40"\npython = ["3.11", "3.12"]\n'
        warmup = work / "warmup.toml"  # the same 34 environments, built by a sweep on one class
        warmup.write_text(f'name = "warm-up"\nexecutor = "slurm"\n[[targets]]\nname = "NVIDIA A100"\ngres = "a100"\n'
                          f'[timeouts]\npending = "30m"\n{stacks}')
        first = gpucompat("sweep", str(warmup), env=env)
        assert first.returncode == 0, first.stderr[-2000:]
        plan = work / "plan.toml"
        plan.write_text(f'name = "two-hundred"\nexecutor = "slurm"\n{TARGETS}[timeouts]\npending = "30m"\n{stacks}')
        env["PATH"] = f"{logging_wrappers(work / 'bin', log)}:{env['PATH']}"
        began = time.perf_counter()
        second = gpucompat("sweep", str(plan), env=env)
        wall = time.perf_counter() - began
        assert second.returncode == 0, second.stderr[-2000:]
        rows = json.loads(gpucompat("results", "--json", env=env).stdout)
        cells = len(rows["valid"]) + len(rows["invalid"])
        lines = [line.split() for line in log.read_text().splitlines()]
        counted = Counter(name for _, name in lines)
        polls = sorted(float(stamp) for stamp, name in lines if name in ("squeue", "sacct"))
        busiest = max(sum(1 for t in polls if start <= t < start + 1.0) for start in polls) if polls else 0
        # the same arrays, by hand: sbatch each, then one squeue per second until the queue is empty
        arrays = sorted((work / "db-runs" / "sweep-2").glob("array-*.sh"))  # the measured sweep's arrays
        began = time.perf_counter()
        ids = [subprocess.run(["sbatch", "--parsable", a.name], cwd=a.parent, env=env, capture_output=True, text=True,
                              check=True).stdout.strip() for a in arrays]
        while subprocess.run(["squeue", "--noheader", "--jobs", ",".join(ids)], env=env, capture_output=True, text=True).stdout.strip():
            time.sleep(1.0)
        bare = time.perf_counter() - began
        minutes = wall / 60
        print(f"cells: {cells}; gpucompat sweep wall {wall:.1f} s; the same {len(arrays)} arrays by hand "
              f"(sbatch, then squeue each second) {bare:.1f} s")
        print("scheduler commands during the sweep: "
              + ", ".join(f"{name} {counted[name]} ({counted[name] / minutes:.1f}/min)" for name in COMMANDS))
        print(f"most squeue+sacct calls in any 1 s window (the poll interval): {busiest} (target 1 -> {'met' if busiest <= 1 else 'MISSED'})")
        overhead = (wall - bare) / cells
        print(f"gpucompat overhead per cell: {overhead:.3f} s (target 0.1 s -> {'met' if overhead <= 0.1 else 'MISSED'})")
    finally:
        subprocess.run([str(REPO / "tests" / "slurm" / "stop-cluster.sh"), str(work / "cluster")])


if __name__ == "__main__":
    main()
