"""Conda solve on the submit side (target: <= 5 s per stack against a warm local channel).

The channel is the tests' local channel of real packages (python, cuda-version, cuda-cudart with
NVIDIA's libcudart; tests/conda_channel.py) with a synthetic filler added to its linux-64
repodata, so that the solver has a channel of some size to search: FILL_NAMES packages x
FILL_VERSIONS versions, each depending on three later names with version ranges. Every stack
asks for the CUDA runtime, its CUDA pin, Python and one filler root, which pulls a tree of
dependencies. Each stack is solved by gpucompat's own path (resolve_all -> py-rattler), into an
explicit lock; the channel is on local disk ("warm": nothing to download).

    python benchmarks/conda_solve.py
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from conda_channel import build_channel

from gpucompat import space
from gpucompat.model import StackSpec
from gpucompat.resolve import resolve_all

PLATFORM = "x86_64-manylinux_2_28"
FILL_NAMES, FILL_VERSIONS = 2000, 25


def add_filler(channel: Path) -> int:
    """Synthetic records in linux-64/repodata.json (the solver reads repodata only; nothing installs them)."""
    rng = random.Random(0)
    path = channel / "linux-64" / "repodata.json"
    repodata = json.loads(path.read_text())
    for n in range(FILL_NAMES):
        for v in range(FILL_VERSIONS):
            later = rng.sample(range(n + 1, FILL_NAMES), k=min(3, FILL_NAMES - n - 1))
            depends = [f"fill-{d:03d} >={rng.randint(0, 5)}.0,<{rng.randint(10, 15)}.0" for d in later]
            name = f"fill-{n:03d}-{v}.0-h0.tar.bz2"
            repodata["packages"][name] = {
                "name": f"fill-{n:03d}", "version": f"{v}.0", "build": "h0", "build_number": 0, "depends": depends,
                "subdir": "linux-64", "md5": hashlib.md5(name.encode()).hexdigest(),
                "sha256": hashlib.sha256(name.encode()).hexdigest(), "size": 1000, "timestamp": 1700000000000}
    path.write_text(json.dumps(repodata))
    return len(repodata["packages"]) + len(repodata.get("packages.conda", {}))


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        channel = build_channel(Path(tmp) / "channel")
        records = add_filler(channel)
        python = f"{sys.version_info[0]}.{sys.version_info[1]}"
        stacks = []
        for variants in (("default",), ("cuda-version=12.6",)):
            stacks += space.expand(StackSpec("cuda-runtime", "latest:2", variants, (python,), "conda", (channel.as_uri(),)))
        # one filler root per stack: each solve walks a different tree of the filler
        stacks = [replace(s, requirements=(*s.requirements, f"fill-{i:03d}")) for i, s in enumerate(stacks)]
        print(f"channel: {records} records in linux-64 (+ noarch); stacks: {len(stacks)}")
        print(f"{'pass':<28} {'wall_s':>7} {'per_stack_s':>11} {'slowest_s':>9}")
        for name in ("first", "again"):
            times = []
            began = time.perf_counter()
            for stack in stacks:  # one at a time: the figure is per stack
                start = time.perf_counter()
                resolve_all([stack], PLATFORM, workers=1)
                times.append(time.perf_counter() - start)
            wall = time.perf_counter() - began
            print(f"{name:<28} {wall:7.2f} {wall / len(stacks):11.3f} {max(times):9.3f}")
        ok = sum(r.ok for r in resolve_all(stacks, PLATFORM))
        pins = max(len(r.pins) for r in resolve_all(stacks, PLATFORM))
        print(f"solved: {ok} of {len(stacks)} (12.4 with cuda-version=12.6 has no answer); largest lock: {pins} packages")
        print(f"target 5 s per stack -> {'met' if max(times) <= 5 else 'MISSED'}")


if __name__ == "__main__":
    main()
