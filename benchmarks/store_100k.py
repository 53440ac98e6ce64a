"""`results`, `report` and `diff` over a store of 100,000 results (target: <= 5 s each).

Generates two sweeps of 50,000 cells each (50 frameworks versions x 20 CUDA series x
50 GPU classes), every result carrying a real probe result.json copied from the H200
evidence, then times each command as a user runs it (a fresh process), beside
`gpucompat results --list` on the same store as the baseline of start-up and opening it.

    python benchmarks/store_100k.py [--cells 50000]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import sqlalchemy as sa

from gpucompat.store import Store, cells, results, stacks, sweeps, targets

REPO = Path(__file__).resolve().parent.parent


def real_probe() -> dict:
    with sqlite3.connect(REPO / "docs" / "evidence" / "gpu-node-h200" / "gpu-node.db") as conn:
        return json.loads(conn.execute("SELECT probe FROM results WHERE probe IS NOT NULL LIMIT 1").fetchone()[0])


def generate(url: str, per_sweep: int) -> None:
    store = Store(url)
    probe = real_probe()
    gpus = 50
    versions = per_sweep // gpus // 20
    with store.engine.begin() as conn:
        for sweep_number in (1, 2):
            sweep_id = conn.execute(sweeps.insert().values(name=f"bench {sweep_number}", kind="sweep", status="done", created_at=time.time(),
                                                          plan_text="", options={})).inserted_primary_key[0]
            target_ids = []
            for g in range(gpus):
                data = {"name": f"GPU class {g}", "cc": f"{7 + g % 6}.0", "driver": "580.65.06", "cuda_driver": "13.0",
                        "memory_mib": 81920, "count": 8, "devices": [], "declared": True}
                target_ids.append(conn.execute(targets.insert().values(sweep_id=sweep_id, key=f"g{g}", name=data["name"], cc=data["cc"],
                                                                     driver=data["driver"], data=data)).inserted_primary_key[0])
            for v in range(versions):
                for series in range(20):
                    cuda = f"{11 + series // 10}.{series % 10}"
                    data = {"framework": "torch", "version": f"2.{v}.0", "variant": f"cu{cuda.replace('.', '')}", "python": "3.12",
                            "env": "uv", "requirements": [f"torch==2.{v}.0"], "index_url": None}
                    stack_id = conn.execute(stacks.insert().values(sweep_id=sweep_id, key=str(data), framework="torch", version=data["version"],
                                                                   variant=data["variant"], python="3.12", env="uv", data=data, resolved_ok=True,
                                                                   pins=[f"torch==2.{v}.0"], cuda_runtime=cuda)).inserted_primary_key[0]
                    cell_rows = [{"sweep_id": sweep_id, "stack_id": stack_id, "target_id": t} for t in target_ids]
                    conn.execute(cells.insert(), cell_rows)
            cell_ids = [row[0] for row in conn.execute(sa.select(cells.c.id).where(cells.c.sweep_id == sweep_id))]
            rows = [{"cell_id": c, "code": "PASS" if (c + sweep_number) % 7 else "ARCH_UNSUPPORTED", "stage": "compute",
                     "summary": "ran matmul on the GPU", "warnings": [], "evidence": {}, "probe": probe, "duration_s": 2.5,
                     "finished_at": time.time(), "observed": True} for c in cell_ids]
            for start in range(0, len(rows), 5000):
                conn.execute(results.insert(), rows[start:start + 5000])


def timed(args: list[str], env: dict) -> float:
    began = time.perf_counter()
    subprocess.run([sys.executable, "-m", "gpucompat", *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=True)
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cells", type=int, default=50000, help="cells per sweep (two sweeps)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="gpucompat-100k-"))
    url = f"sqlite:///{work / 'store.db'}"
    began = time.perf_counter()
    generate(url, args.cells)
    print(f"generated {2 * args.cells} results in {time.perf_counter() - began:.1f} s ({(work / 'store.db').stat().st_size / 2**20:.0f} MiB)")
    env = {**__import__("os").environ, "GPUCOMPAT_DB": url}
    for name, command in [("results --list (baseline)", ["results", "--list"]),
                          ("results --sweep 2 (tables)", ["results", "--sweep", "2"]),
                          ("results --sweep 2 --format json", ["results", "--sweep", "2", "--format", "json"]),
                          ("report --sweep 2", ["report", "--sweep", "2", "-o", str(work / "report.html")]),
                          ("diff 1 2", ["diff", "1", "2", "--json"])]:
        try:
            seconds = timed(command, env)
        except subprocess.CalledProcessError as exc:
            seconds = float("nan") if exc.returncode != 1 else None  # diff exits 1 when something newly broke
        if seconds is None:
            began = time.perf_counter()
            subprocess.run([sys.executable, "-m", "gpucompat", *command], stdout=subprocess.DEVNULL, env=env)
            seconds = time.perf_counter() - began
        print(f"{name:<36} {seconds:6.2f} s {'(target 5 s: met)' if seconds <= 5 else '(target 5 s: MISSED)'}")


if __name__ == "__main__":
    main()
