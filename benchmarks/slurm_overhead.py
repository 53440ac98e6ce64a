"""A 50-cell sweep through a live Slurm cluster (the tests' one-node cluster, two fake GPU
types): orchestration overhead per cell beyond the jobs' own run time (target <= 1 s),
and how fast an impossible cell becomes NO_MATCH (target <= 5 s).

Every CUDA runtime minor series on PyPI (17 today) x Python 3.11 and 3.12 x 2 GPU classes
= 68 cells, environments built by a first sweep. Side by side in one run: the same job arrays that gpucompat wrote, submitted
by hand with sbatch and waited for with squeue. Overhead per cell = (gpucompat sweep wall -
bare sbatch wall) / 50: what gpucompat adds (resolution, precheck, files, polling,
collection, the store), not Slurm's own dispatch time, which both include.

    python benchmarks/slurm_overhead.py      # as root, with Debian's slurmctld/slurmd/munge installed
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
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def gpucompat(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpucompat", *args], env=env, capture_output=True, text=True)


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="gpucompat-slurm-bench-"))
    env = {**os.environ, "SLURMCTLD_PORT": port(), "SLURMD_PORT": port()}
    conf = subprocess.run([str(REPO / "tests" / "slurm" / "start-cluster.sh"), str(work / "cluster")], env=env,
                          capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
    env.update(SLURM_CONF=conf, GPUCOMPAT_DB=f"sqlite:///{work / 'db.sqlite'}", XDG_DATA_HOME=str(work / "data"))
    if shutil.which("pyenv"):  # let uv find a Python 3.12 behind pyenv's shims
        versions = subprocess.run(["pyenv", "versions", "--bare"], capture_output=True, text=True).stdout.split()
        env["PYENV_VERSION"] = ":".join(v for v in versions if v.startswith(("3.11.", "3.12.")))
    try:
        plan = work / "plan.toml"
        plan.write_text('name = "fifty"\nexecutor = "slurm"\ntargets = "discover"\n[timeouts]\npending = "10m"\n'
                        '[[stacks]]\nframework = "cuda-runtime"\nversions = "latest:40"\npython = ["3.11", "3.12"]\n')
        first = gpucompat("sweep", str(plan), env=env)  # builds the 25 environments
        assert first.returncode == 0, first.stderr[-2000:]
        began = time.perf_counter()
        second = gpucompat("sweep", str(plan), env=env)
        wall = time.perf_counter() - began
        assert second.returncode == 0, second.stderr[-2000:]
        rows = json.loads(gpucompat("results", "--json", "--cells", env=env).stdout)
        cells = rows["valid"] + rows["invalid"]
        job_seconds = sum(r["duration_s"] or 0 for r in cells)
        # the same arrays, by hand: sbatch, then squeue until the queue is empty
        arrays = sorted((work / "db-runs" / "sweep-2").glob("array-*.sh"))  # job directories live beside the database
        began = time.perf_counter()
        ids = [subprocess.run(["sbatch", "--parsable", a.name], cwd=a.parent, env=env, capture_output=True, text=True, check=True).stdout.strip()
               for a in arrays]
        while subprocess.run(["squeue", "--noheader", "--jobs", ",".join(ids)], env=env, capture_output=True, text=True).stdout.strip():
            time.sleep(0.2)
        bare = time.perf_counter() - began
        overhead = (wall - bare) / len(cells)
        impossible = work / "impossible.toml"
        impossible.write_text('name = "impossible"\nexecutor = "slurm"\n[[targets]]\nname = "NVIDIA V100"\ngres = "v100"\n'
                              '[[stacks]]\nframework = "cuda-runtime"\nversions = ["12.4"]\n')
        began = time.perf_counter()
        gpucompat("sweep", str(impossible), env=env)
        no_match_s = time.perf_counter() - began
        precheck = []
        for _ in range(5):
            began = time.perf_counter()
            subprocess.run(["sbatch", "--test-only", "--gres=gpu:v100:1", "--time=5", "--wrap", "true"], env=env, capture_output=True)
            precheck.append(time.perf_counter() - began)
        print(f"cells: {len(cells)} ({sum(r['code'] == 'NO_DEVICE' for r in cells)} NO_DEVICE: no real GPU behind the fake devices)")
        print(f"gpucompat sweep wall (environments cached): {wall:.1f} s; the same arrays by hand (sbatch + squeue): {bare:.1f} s; "
              f"jobs' RunTime summed: {job_seconds:.0f} s over 2 GPU slots")
        print(f"orchestration overhead per cell: {overhead:.2f} s (target 1 s -> {'met' if overhead <= 1 else 'MISSED'})")
        print(f"impossible cell, whole `gpucompat sweep` to NO_MATCH: {no_match_s:.1f} s; the sbatch --test-only precheck itself: "
              f"median {sorted(precheck)[2] * 1000:.0f} ms (target 5 s -> {'met' if no_match_s <= 5 else 'MISSED'})")
    finally:
        subprocess.run([str(REPO / "tests" / "slurm" / "stop-cluster.sh"), str(work / "cluster")])


if __name__ == "__main__":
    main()
