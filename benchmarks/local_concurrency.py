"""A 100-stack local sweep with the concurrency derived from the node, against the same sweep one
cell at a time (max_parallel_installs = max_parallel_probes = 1).

The stacks are the cheapest real ones: the CUDA runtime (libcudart and NVRTC wheels) of every minor
series PyPI has from 11.7 to 13.x, under several Pythons (by default 3.8 to 3.13, the interpreters
found under ~/.pyenv/versions are put on PATH for uv), cut to --stacks. Every pass builds all its
environments into a fresh gpucompat cache with uv's own cache warm (a first, unmeasured pass fills
it), then probes every cell; a last pass runs the derived sweep again over the environments it
built, so the probes' share shows apart from the installs'. Beside each pass: the verdicts (no
TIMEOUT, no INTERNAL), the lowest MemAvailable seen (sampled every 0.2 s), pages swapped in and out
(/proc/vmstat), the peak RSS of the largest process, and the cache's size and hard links after it.

    python benchmarks/local_concurrency.py [--stacks 100] [--pythons 3.8,3.9,...]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from gpucompat.concurrency import limits, mem_available
from gpucompat.space import _cuda_series


def vmstat() -> dict[str, int]:
    found = {}
    with open("/proc/vmstat") as handle:
        for line in handle:
            name, value = line.split()
            if name in ("pswpin", "pswpout"):
                found[name] = int(value)
    return found


def plan_text(name: str, stacks: list[tuple[str, str]], parallel: int | None) -> str:
    by_python: dict[str, list[str]] = {}
    for series, python in stacks:
        by_python.setdefault(python, []).append(series)
    head = f'name = "{name}"\n' + (f"max_parallel_installs = {parallel}\nmax_parallel_probes = {parallel}\n" if parallel else "")
    return head + "".join(f'[[stacks]]\nframework = "cuda-runtime"\nversions = {json.dumps(series)}\npython = ["{python}"]\n'
                          for python, series in by_python.items())


def run_pass(work: Path, label: str, plan: str, cache: Path, env_base: dict) -> dict:
    path = work / f"{label}.toml"
    path.write_text(plan)
    env = {**env_base, "GPUCOMPAT_CACHE": str(cache), "GPUCOMPAT_DB": f"sqlite:///{work / (label + '.db')}", "COLUMNS": "200"}
    lowest = [mem_available() or 0]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.2):
            lowest[0] = min(lowest[0], mem_available() or lowest[0])

    sampler = threading.Thread(target=sample, daemon=True)
    swapped = vmstat()
    sampler.start()
    began = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "gpucompat", "sweep", str(path), "--json"], env=env, capture_output=True, text=True,
                          check=False)
    wall = time.perf_counter() - began
    done.set()
    sampler.join()
    after = vmstat()
    if proc.returncode not in (0, 4):
        raise SystemExit(f"{label}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
    data = json.loads(proc.stdout)
    rows = data["valid"] + data["invalid"] + data.get("untested", [])
    codes: dict[str, int] = {}
    for row in rows:
        codes[row["code"]] = codes.get(row["code"], 0) + 1
    with sqlite3.connect(work / f"{label}.db") as db:  # the cells' phase: from the stored sweep (resolved) to its end
        created, finished = db.execute("SELECT created_at, finished_at FROM sweeps ORDER BY id DESC LIMIT 1").fetchone()
        probes = db.execute("SELECT sum(duration_s) FROM results").fetchone()[0] or 0.0
    listed = time.perf_counter()
    cache_json = json.loads(subprocess.run([sys.executable, "-m", "gpucompat", "envs", "--json"], env=env, capture_output=True,
                                           text=True, check=True).stdout)
    envs_s = time.perf_counter() - listed
    return {"pass": label, "cells": len(rows), "wall_s": round(wall, 2), "cells_phase_s": round(finished - created, 2),
            "resolve_and_start_s": round(wall - (finished - created), 2), "probe_sum_s": round(probes, 2),
            "load_average_5m": round(os.getloadavg()[1], 2), "per_cell_s": round(wall / max(1, len(rows)), 3),
            "codes": codes, "min_mem_available_gib": round(lowest[0] / 2**30, 2),
            "swapped_pages": {k: after[k] - swapped.get(k, 0) for k in after},
            "environments": cache_json["totals"]["environments"], "cache_bytes": cache_json["totals"]["bytes"],
            "cache_shared_bytes": cache_json["totals"]["shared_bytes"], "envs_command_s": round(envs_s, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stacks", type=int, default=100)
    parser.add_argument("--pythons", default="3.8,3.9,3.10,3.11,3.12,3.13")
    parser.add_argument("--keep", action="store_true", help="Keep the work directory (its caches and databases).")
    parser.add_argument("--rounds", type=int, default=3, help="Rounds of every pass, in turn (the median is reported).")
    parser.add_argument("--also", type=int, action="append", default=[],
                        help="Also a pass with this many installs and probes at once (e.g. twice the cores).")
    args = parser.parse_args()
    pythons = args.pythons.split(",")
    series = [str(v) for v in _cuda_series(False)]
    stacks = [(s, p) for p in pythons for s in series][: args.stacks]
    found = [d for p in pythons for d in sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{p}.*/bin")))[-1:]]
    env_base = {**os.environ, "PATH": os.pathsep.join(found + [os.environ.get("PATH", "")])}
    work = Path(tempfile.mkdtemp(prefix="gpucompat-concurrency-"))
    node = limits(gpus=0)
    print(f"{len(stacks)} stacks: cuda-runtime {series[0]}..{series[-1]} x Python {', '.join(pythons)}; node: {node.why}")
    print(f"Pythons on PATH for uv: {', '.join(found) or 'none found (uv finds or downloads them)'}")
    print(f"swap configured: {Path('/proc/meminfo').read_text().split('SwapTotal:')[1].split()[0]} kB")

    warm = run_pass(work, "warm-uv-cache", plan_text("warm", stacks, None), work / "cache-warm", env_base)
    print(f"uv's cache warmed: {warm['wall_s']} s ({warm['codes']})")
    results = []
    passes = [("derived", None), ("one-at-a-time", 1)] + [(f"{n}-at-a-time", n) for n in args.also]
    rounds: list[list[dict]] = []
    for number in range(args.rounds):  # the passes in turn, each round in fresh caches, so load from others spreads over all
        got = []
        for label, parallel in passes:
            cache = work / f"cache-{label}-{number}"
            got.append(run_pass(work, f"{label}-{number}", plan_text(label, stacks, parallel), cache, env_base))
        got.append(run_pass(work, f"derived-envs-built-{number}", plan_text("derived", stacks, None), work / f"cache-derived-{number}", env_base))
        if number < args.rounds - 1:  # the last round's caches stay for the figures below
            for cache in work.glob(f"cache-*-{number}"):
                shutil.rmtree(cache, ignore_errors=True)
        rounds.append(got)
        print(f"round {number + 1}: " + ", ".join(f"{r['pass']} {r['wall_s']:.1f} s (load {r['load_average_5m']})" for r in got), flush=True)
    results = []
    for index, label in enumerate([label for label, _ in passes] + ["derived-envs-built"]):
        runs = [got[index] for got in rounds]
        walls = sorted(r["wall_s"] for r in runs)
        merged = {**runs[-1], "pass": label, "wall_s": walls[len(walls) // 2], "walls": [r["wall_s"] for r in runs],
                  "min_mem_available_gib": min(r["min_mem_available_gib"] for r in runs),
                  "swapped_pages": {k: sum(r["swapped_pages"].get(k, 0) for r in runs) for k in ("pswpin", "pswpout")},
                  "codes": {code: sum(r["codes"].get(code, 0) for r in runs) for r in runs for code in r["codes"]}}
        merged["per_cell_s"] = round(merged["wall_s"] / max(1, merged["cells"]), 3)
        for key in ("cells_phase_s", "resolve_and_start_s", "probe_sum_s"):
            values = sorted(r[key] for r in runs)
            merged[key] = values[len(values) // 2]
        results.append(merged)
    peak_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"\n{'pass':<22} {'cells':>5} {'median wall_s':>13} {'per_cell_s':>10} {'every round, s':>22} {'resolve+start':>13} "
          f"{'cells phase':>11} {'probe sum':>9} {'min MemAvailable GiB':>21} {'swap in/out':>12}  verdicts (all rounds)")
    for r in results:
        swap = f"{r['swapped_pages'].get('pswpin', 0)}/{r['swapped_pages'].get('pswpout', 0)}"
        walls = " ".join(f"{w:.1f}" for w in r["walls"])
        print(f"{r['pass']:<22} {r['cells']:>5} {r['wall_s']:>13.2f} {r['per_cell_s']:>10.3f} {walls:>22} {r['resolve_and_start_s']:>13.2f} "
              f"{r['cells_phase_s']:>11.2f} {r['probe_sum_s']:>9.2f} {r['min_mem_available_gib']:>21.2f} "
              f"{swap:>12}  {r['codes']}")
    derived, serial = results[0], results[1]
    print(f"\nderived concurrency ({node.installs} installs, {node.probes} probes at once) against one at a time, medians: "
          f"{serial['wall_s'] / derived['wall_s']:.2f}x faster ({derived['wall_s']:.1f} s against {serial['wall_s']:.1f} s)")
    print(f"largest process's peak RSS (gpucompat, uv or a probe): {peak_rss:.0f} MiB")
    print(f"cache after a pass: {derived['environments']} environments, {derived['cache_bytes'] / 1e9:.2f} GB in their files, "
          f"{derived['cache_shared_bytes'] / 1e9:.2f} GB of it hard links into uv's cache; `gpucompat envs --json` over it: "
          f"{derived['envs_command_s']:.2f} s")
    timeouts = sum(r["codes"].get("TIMEOUT", 0) + r["codes"].get("INTERNAL", 0) for r in results)
    print(f"TIMEOUT or INTERNAL cells: {timeouts}")
    (work / "results.json").write_text(json.dumps({"node": node.as_dict(), "warm": warm, "passes": results, "rounds": rounds}, indent=1))
    print(f"raw figures: {work / 'results.json'}")
    if not args.keep:
        for path in work.iterdir():
            if path.name != "results.json":
                shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink()


if __name__ == "__main__":
    main()
