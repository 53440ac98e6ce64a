"""How long `gpucompat check FRAMEWORK --env current` takes beside the framework's own start.

Target (issues 23 and 34): a check costs at most 0.5 s more than importing the framework and running one
small product in a bare interpreter, library rungs included. The check also runs the library rungs (issue 22:
cuDNN, cuFFT, cuSOLVER, cuSPARSE, NCCL), tests the bare command does not make; an earlier check's passes of them
in the same environment, GPU and driver are read from the rung cache (executors/rungs.py: "check"), and
"check, no rung cache" runs them every time; their time is read from the probe's own record and reported apart, so that what the harness costs (CLI, store, prediction, the second interpreter,
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


def timed(command: list[str], env: dict) -> tuple[float, int, float, float]:
    """(seconds, exit code, wall-clock start, wall-clock end) of one run."""
    began, began_wall = time.perf_counter(), time.time()
    proc = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return time.perf_counter() - began, proc.returncode, began_wall, time.time()


def stored_probe(database: Path) -> dict:
    """The newest check's probe record (result.json as stored), with its sweep's creation time."""
    import sqlite3

    with sqlite3.connect(database) as db:
        row = db.execute("select s.created_at, r.probe from sweeps s join cells c on c.sweep_id = s.id "
                         "join results r on r.cell_id = c.id order by s.id desc limit 1").fetchone()
    return {**json.loads(row[1]), "sweep_created_at": row[0]} if row and row[1] else {}


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
    env = {**os.environ, "GPUCOMPAT_DB": f"sqlite:///{work / 'bench.db'}", "GPUCOMPAT_CACHE": str(work / "cache")}
    rows = []
    for framework in args.frameworks.split(","):
        result = work / f"{framework}.json"
        variants = {
            "bare": [sys.executable, "-c", BARE[framework]],
            "probe.pyz": [sys.executable, str(PROBE), "--framework", framework, "--result", str(result)],
            "probe.pyz, no GPU state": ["env", "GPUCOMPAT_GPU_STATE=0", sys.executable, str(PROBE), "--framework", framework,
                                        "--result", str(work / "no-state.json")],
            "probe.pyz, no start check": ["env", "GPUCOMPAT_CUDA_START=0", sys.executable, str(PROBE), "--framework", framework,
                                          "--result", str(work / "no-start.json")],
            "check": [sys.executable, "-m", "gpucompat", "check", framework, "--env", "current"],
            "check, no rung cache": ["env", "GPUCOMPAT_RUNG_CACHE=0", sys.executable, "-m", "gpucompat", "check", framework,
                                     "--env", "current"],
        }
        times: dict[str, list[float]] = {name: [] for name in variants}
        codes: dict[str, set[int]] = {name: set() for name in variants}
        # Around the probe's own work, from its record: the seconds from the command's start to the probe's first
        # write, and from its last write to the command's end. These do not carry the framework's import and
        # kernels, whose run-to-run spread (+-0.5 s) hides a harness's cost in the totals.
        around: dict[str, list[float]] = {name: [] for name in variants if name != "bare"}
        libraries, stages, leads, starts = [], [], [], []
        for _ in range(args.runs):
            for name, command in variants.items():  # alternate, so drift hits every variant alike
                seconds, code, began, ended = timed(command, env)
                times[name].append(seconds)
                codes[name].add(code)
                if name == "bare":
                    continue
                files = {"probe.pyz": result, "probe.pyz, no GPU state": work / "no-state.json", "probe.pyz, no start check": work / "no-start.json"}
                record = stored_probe(work / "bench.db") if name.startswith("check") else json.loads(files[name].read_text())
                if name == "probe.pyz" and isinstance(record.get("cuda_start"), dict):
                    starts.append(record["cuda_start"].get("seconds") or 0.0)
                if record.get("started_at") and record.get("finished_at"):
                    around[name].append(round((record["started_at"] - began) + (ended - record["finished_at"]), 3))
                if name == "check":  # the probe started this long before the sweep was stored (early start)
                    leads.append(round(record.get("sweep_created_at", 0) - record.get("started_at", 0), 3))
                if name == "probe.pyz":
                    stages.append(stage_seconds(result))
                    libraries.append(sum(stages[-1].get(f"compute.{rung}", 0.0) for rung in LIBRARY_RUNGS))
        median = {name: statistics.median(values) for name, values in times.items()}
        outside = {name: round(statistics.median(values), 3) for name, values in around.items() if values}
        bare, check, probe = median["bare"], median["check"], median["probe.pyz"]
        rungs = statistics.median(libraries) if libraries else 0.0
        breakdown = {key: round(statistics.median(s.get(key, 0.0) for s in stages), 3) for key in (stages[0] if stages else {})}
        cli = outside.get("check", 0.0) - outside.get("probe.pyz", 0.0)
        row = {"framework": framework, "runs": args.runs, "median_s": {k: round(v, 3) for k, v in median.items()},
               "outside_the_probe_s": outside, "library_rungs_s": round(rungs, 3), "probe_stages_s": breakdown,
               "check_over_bare_s": round(check - bare, 3),
               "check_no_rung_cache_over_bare_s": round(median["check, no rung cache"] - bare, 3), "harness_over_bare_s": round(check - bare - rungs, 3),
               "cli_and_store_s": round(cli, 3),
               "start_check_outside_s": round(outside.get("probe.pyz", 0) - outside.get("probe.pyz, no start check", 0), 3),
               "start_check_total_s": round(median["probe.pyz"] - median["probe.pyz, no start check"], 3),
               "start_check_own_s": round(statistics.median(starts), 3) if starts else None, "probe_started_before_the_sweep_s": leads,
               "exit_codes": {k: sorted(v) for k, v in codes.items()}, "times": times, "around": around}
        rows.append(row)
        cold = median["check, no rung cache"]
        print(f"{framework:<6} bare {bare:5.2f} s  probe {probe:5.2f} s  check {check:5.2f} s ({check - bare:+.2f} s over bare, the rungs an "
              f"earlier check passed here read from the cache); with no rung cache {cold:5.2f} s ({cold - bare:+.2f} s, of which library "
              f"rungs {rungs:.2f} s: the harness {cold - bare - rungs:+.2f} s) (target: check - bare <= 0.5 s)", flush=True)
        print(f"       outside the probe's own work (median s): {outside}; so the CLI and store add {cli:+.2f} s to the probe "
              f"alone, the GPU-state watch {outside.get('probe.pyz', 0) - outside.get('probe.pyz, no GPU state', 0):+.2f} s "
              f"and the probe's rungs {probe - bare - rungs - outside.get('probe.pyz', 0):+.2f} s over the bare product "
              f"(the rest, noisy); the probe started {leads} s before the sweep was stored; exit codes {row['exit_codes']}", flush=True)
        print(f"       the probe's stages and rungs (median s): {breakdown}", flush=True)
        print(f"       the start check (cuInit beside the import): probe - probe without it {row['start_check_total_s']:+.3f} s, "
              f"outside the probe's work {row['start_check_outside_s']:+.3f} s; its own thread took {row['start_check_own_s']} s", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"python": sys.version, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
