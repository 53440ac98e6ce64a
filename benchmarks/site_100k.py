"""`gpucompat report --site DIR` over a store of 100,000 results (target: < 30 s).

The store is store_100k.py's: two sweeps of 50,000 cells each (50 framework versions x 20 CUDA series x 50 GPU
classes), every result carrying a real probe result.json from the H200 evidence; the site shows each stack's
newest result on each GPU class, so 50,000 cells on 1,000 stack pages and 50 GPU-class pages. Timed as a user runs
it (a fresh process), beside `gpucompat results --list` on the same store (start-up and opening it), then once
more in this process with its steps apart: reading the store, building the pages' data, rendering and writing.

    python benchmarks/site_100k.py [--cells 50000] [--keep]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from store_100k import generate  # noqa: E402  (the 100k store, as the store benchmark builds it)

TARGET = 30.0


def timed(args: list[str], env: dict) -> float:
    began = time.perf_counter()
    subprocess.run([sys.executable, "-m", "gpucompat", *args], stdout=subprocess.DEVNULL, env=env, check=True)
    return time.perf_counter() - began


def in_process(url: str, directory: Path) -> dict:
    """The same work in this process, each step timed."""
    from gpucompat.bench import present
    from gpucompat.report import site
    from gpucompat.store import Store

    steps = {}
    began = time.perf_counter()
    store = Store(url, readonly=True)
    rows = store.result_rows(None)
    cells = {r["cell_id"] for r in rows}
    figures = [present(r) for r in store.bench_rows(None) if r["cell"] in cells]
    steps["read the store"] = time.perf_counter() - began
    began = time.perf_counter()
    built = site.build(rows, figures, "GPU software compatibility")
    steps["build the pages' data"] = time.perf_counter() - began
    began = time.perf_counter()
    result = site.write(directory, rows, figures, "GPU software compatibility")
    steps["build, render and write (site.write)"] = time.perf_counter() - began
    steps["pages"] = result["pages"]
    steps["cells shown"] = len([r for s in built["stacks"] for r in s["rows"]])
    return steps


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cells", type=int, default=50000, help="cells per sweep (two sweeps)")
    parser.add_argument("--keep", action="store_true", help="keep the store and the site (their directory is printed)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="gpucompat-site-100k-"))
    url = f"sqlite:///{work / 'store.db'}"
    began = time.perf_counter()
    generate(url, args.cells)
    print(f"generated {2 * args.cells} results in {time.perf_counter() - began:.1f} s ({(work / 'store.db').stat().st_size / 2**20:.0f} MiB)")
    env = {**os.environ, "GPUCOMPAT_DB": url}
    baseline = timed(["results", "--list"], env)
    print(f"{'results --list (baseline)':<40} {baseline:6.2f} s")
    seconds = timed(["report", "--site", str(work / "site")], env)
    pages = len(list((work / "site").glob("*.html")))
    size = sum(p.stat().st_size for p in (work / "site").glob("*.html")) / 2**20
    print(f"{'report --site DIR':<40} {seconds:6.2f} s ({pages} pages, {size:.0f} MiB) "
          f"{'(target 30 s: met)' if seconds < TARGET else '(target 30 s: MISSED)'}")
    for step, value in in_process(url, work / "site-again").items():
        print(f"  {step:<38} {value:6.2f} s" if isinstance(value, float) else f"  {step:<38} {value}")
    if args.keep:
        print(f"kept under {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
