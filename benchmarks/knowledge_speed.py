"""Speed of the offline commands: `explain` (target: median <= 300 ms for a cold process)
and `inspect` of a large library (target: <= 5 s for libtorch_cuda.so), each beside a
baseline measured in the same run.

    python benchmarks/knowledge_speed.py [--runs 10] [--library PATH] [--overlay DIR] [--json OUT]

--overlay DIR (what `gpucompat knowledge update` wrote, e.g. docs/evidence/knowledge-update/overlay): explain of a
release only the overlay describes, with and without it, the two runs alternating so both see the same machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


# A cold process as an installed gpucompat starts it: pip writes bytecode at install, so the children
# may use and write __pycache__ even where the shell sets PYTHONDONTWRITEBYTECODE (this machine does).
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def timed(command: list[str], runs: int) -> list[float]:
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, env=CHILD_ENV)  # writes the bytecode
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, env=CHILD_ENV)
        times.append(time.perf_counter() - began)
    return times


def alternating(command: list[str], overlays: list[str], runs: int) -> list[list[float]]:
    """The same command under each GPUCOMPAT_KNOWLEDGE in turn, `runs` rounds: one list of times per overlay."""
    times: list[list[float]] = [[] for _ in overlays]
    for round_ in range(runs + 1):
        for slot, folder in enumerate(overlays):
            began = time.perf_counter()
            subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, env={**CHILD_ENV, "GPUCOMPAT_KNOWLEDGE": folder})
            if round_:  # the first round writes the bytecode
                times[slot].append(time.perf_counter() - began)
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--library")
    parser.add_argument("--cuobjdump", default=shutil.which("cuobjdump"))
    parser.add_argument("--overlay")
    parser.add_argument("--json")
    args = parser.parse_args()
    rows = []
    variants = {
        "python -c pass (interpreter start)": [sys.executable, "-c", "pass"],
        "gpucompat explain torch==2.4.1 --cc 8.0 --json": [sys.executable, "-m", "gpucompat", "explain", "torch==2.4.1", "--cc", "8.0", "--driver", "535.104.05", "--json"],
        "gpucompat explain (human output)": [sys.executable, "-m", "gpucompat", "explain", "torch==2.4.1", "--gpu", "NVIDIA GeForce RTX 5090", "--driver", "570.86.10"],
        # the long tail: a name only pci.ids knows, and a Python window from PyPI's file lists (the two largest tables)
        "gpucompat explain (pci.ids name, --python)": [sys.executable, "-m", "gpucompat", "explain", "tensorflow[and-cuda]==2.15.0", "--gpu",
                                                       "NVIDIA GeForce RTX 3070 Laptop GPU", "--driver", "550.54.14", "--python", "3.11", "--json"],
    }
    if args.library:
        size = Path(args.library).stat().st_size
        variants[f"gpucompat inspect {Path(args.library).name} ({size / 2**30:.2f} GiB)"] = [sys.executable, "-m", "gpucompat", "inspect", args.library, "--json"]
        if args.cuobjdump:
            variants[f"cuobjdump --list-elf {Path(args.library).name}"] = [args.cuobjdump, "--list-elf", args.library]
    if args.overlay:
        empty = str(Path(tempfile.mkdtemp()) / "no-overlay")  # nothing learned: the packaged tables alone
        for spec in ("torch==2.15.0", "torch==2.4.1"):  # a release only the overlay describes; one the packaged tables do
            explain = [sys.executable, "-m", "gpucompat", "explain", spec, "--gpu", "H100", "--driver", "580.95.05", "--json"]
            sides = {f"gpucompat explain {spec} --gpu H100 --json, packaged tables only": empty,
                     f"gpucompat explain {spec} --gpu H100 --json, with the overlay": str(Path(args.overlay).resolve())}
            for values, name in zip(alternating(explain, list(sides.values()), args.runs), sides):
                rows.append({"variant": name, "median_s": round(statistics.median(values), 3), "min_s": round(min(values), 3), "runs": len(values)})
    for name, command in variants.items():
        values = timed(command, args.runs if "inspect" not in name and "cuobjdump" not in name else min(args.runs, 3))
        rows.append({"variant": name, "median_s": round(statistics.median(values), 3), "min_s": round(min(values), 3), "runs": len(values)})
    width = max(len(r["variant"]) for r in rows)
    for r in rows:
        print(f"{r['variant']:<{width}}  median {r['median_s']:7.3f} s  min {r['min_s']:7.3f} s  ({r['runs']} runs)")
    if args.json:
        Path(args.json).write_text(json.dumps({"python": sys.version, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
