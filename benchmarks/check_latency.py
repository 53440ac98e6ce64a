"""How long `gpucompat check FRAMEWORK --env current` takes beside the framework's own start.

Target (issue 23): a check costs at most 0.5 s more than importing the framework and running one small
product in a bare interpreter. The check also runs the library rungs (issue 22: cuDNN, cuFFT, cuSOLVER,
cuSPARSE, NCCL), tests the bare command does not make; their time is read from the probe's own record
and reported apart, so that what the harness costs (CLI, store, prediction, the second interpreter,
NVML and the GPU-state watch) is seen on its own. Run on a GPU node; every variant is timed in the
same run, alternating, median of --runs.

    python benchmarks/check_latency.py --runs 5 [--frameworks torch,jax,cupy] [--json OUT.json]
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
BARE = {"torch": "import torch; a = torch.randn(512, 512, device='cuda'); (a @ a).sum().item()",
        "jax": "import jax, jax.numpy as jnp; a = jnp.ones((512, 512)); float((a @ a).sum())",
        "cupy": "import cupy; a = cupy.random.standard_normal((512, 512)); float((a @ a).sum())"}
LIBRARY_RUNGS = ("cudnn", "cufft", "cusolver", "cusparse", "nccl")


def timed(command: list[str], env: dict) -> tuple[float, int]:
    began = time.perf_counter()
    proc = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return time.perf_counter() - began, proc.returncode


def probe_times(database: Path) -> tuple[float, float, float] | None:
    """The newest check's (sweep stored at, probe started at, probe finished at), wall-clock seconds."""
    import sqlite3

    with sqlite3.connect(database) as db:
        row = db.execute("select s.created_at, r.probe from sweeps s join cells c on c.sweep_id = s.id "
                         "join results r on r.cell_id = c.id order by s.id desc limit 1").fetchone()
    if not row or not row[1]:
        return None
    probe = json.loads(row[1])
    return row[0], probe.get("started_at", row[0]), probe.get("finished_at", row[0])


def library_seconds(result: Path) -> float:
    """Seconds the probe spent in the library rungs past cuBLAS's (tests the bare command never makes)."""
    data = json.loads(result.read_text())
    rungs = data.get("stages", {}).get("compute", {}).get("facts", {}).get("rungs", [])
    return sum(r.get("duration_s") or 0.0 for r in rungs if r.get("name") in LIBRARY_RUNGS)


def stage_seconds(result: Path) -> dict[str, float]:
    """Seconds of each stage and each compute rung of one probe run: where the probe's own time goes."""
    data = json.loads(result.read_text())
    seconds = {name: record.get("duration_s") or 0.0 for name, record in data.get("stages", {}).items()}
    for rung in data.get("stages", {}).get("compute", {}).get("facts", {}).get("rungs", []):
        seconds[f"compute.{rung.get('name')}"] = rung.get("duration_s") or 0.0
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--frameworks", default="torch,jax,cupy")
    parser.add_argument("--json")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="gpucompat-bench-"))
    env = {**os.environ, "GPUCOMPAT_DB": f"sqlite:///{work / 'bench.db'}"}
    rows = []
    for framework in args.frameworks.split(","):
        result = work / f"{framework}.json"
        variants = {
            "bare": [sys.executable, "-c", BARE[framework]],
            "probe.pyz": [sys.executable, str(PROBE), "--framework", framework, "--result", str(result)],
            "probe.pyz, no GPU state": ["env", "GPUCOMPAT_GPU_STATE=0", sys.executable, str(PROBE), "--framework", framework,
                                        "--result", str(work / "no-state.json")],
            "check": [sys.executable, "-m", "gpucompat", "check", framework, "--env", "current"],
            "check, probe after the store": ["env", "GPUCOMPAT_EARLY_PROBE=0", sys.executable, "-m", "gpucompat", "check", framework,
                                             "--env", "current"],
        }
        times: dict[str, list[float]] = {name: [] for name in variants}
        codes: dict[str, set[int]] = {name: set() for name in variants}
        libraries, stages = [], []
        leads = {"check": [], "check, probe after the store": []}  # the probe started before the sweep was stored by (s)
        tails = {"check": [], "check, probe after the store": []}  # the check ended after the probe's last write by (s)
        for _ in range(args.runs):
            for name, command in variants.items():  # alternate, so drift hits every variant alike
                seconds, code = timed(command, env)
                times[name].append(seconds)
                codes[name].add(code)
                if name in leads and (times_ := probe_times(work / "bench.db")):
                    leads[name].append(round(times_[0] - times_[1], 3))
                    tails[name].append(round(time.time() - times_[2], 3))
                if name == "probe.pyz" and result.exists():
                    libraries.append(library_seconds(result))
                    stages.append(stage_seconds(result))
        bare, check, probe = (statistics.median(times[k]) for k in ("bare", "check", "probe.pyz"))
        rungs = statistics.median(libraries) if libraries else 0.0
        no_state = statistics.median(times["probe.pyz, no GPU state"])
        late = statistics.median(times["check, probe after the store"])
        breakdown = {key: round(statistics.median(s.get(key, 0.0) for s in stages), 3) for key in (stages[0] if stages else {})}
        row = {"framework": framework, "bare_s": round(bare, 3), "probe_s": round(probe, 3), "check_s": round(check, 3),
               "probe_no_gpu_state_s": round(no_state, 3), "gpu_state_s": round(probe - no_state, 3),
               "library_rungs_s": round(rungs, 3), "check_probe_after_store_s": round(late, 3),
               "probe_stages_s": breakdown, "probe_started_before_the_sweep_s": leads, "check_ended_after_the_probe_s": tails, "check_over_bare_s": round(check - bare, 3),
               "harness_over_bare_s": round(check - bare - rungs, 3), "exit_codes": {k: sorted(v) for k, v in codes.items()},
               "runs": args.runs, "times": times}
        rows.append(row)
        print(f"{framework:<6} bare {bare:6.2f} s  probe {probe:6.2f} s  check {check:6.2f} s  -> check over bare {check - bare:+.2f} s, "
              f"of which library rungs {rungs:.2f} s; the harness itself {check - bare - rungs:+.2f} s (target <= 0.5 s): "
              f"the GPU-state watch {probe - no_state:+.2f} s, the CLI and store around the probe {check - probe:+.2f} s "
              f"(started after the store instead: check {late:.2f} s, {late - probe:+.2f} s)  exit codes {row['exit_codes']}", flush=True)
        print(f"       the probe's stages and rungs (median s): {breakdown}", flush=True)
        print("       the probe started before the sweep was stored by (s): "
              + "; ".join(f"{name}: {values}" for name, values in leads.items()), flush=True)
        print("       the check ended after the probe's last write by (s): "
              + "; ".join(f"{name}: {values}" for name, values in tails.items()), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"python": sys.version, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
