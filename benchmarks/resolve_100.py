"""Resolving 100 distinct stacks on the submit side (target: <= 30 s wall with a warm cache).

Stacks: torch (12 newest minor series) and the CUDA runtime (13 newest minor series),
each for Python 3.10-3.13: 100 distinct `uv pip compile` runs. The first pass warms
uv's cache; then the same 100 are resolved in parallel (gpucompat's default, 8 at
once) and one at a time, side by side in one run.

    python benchmarks/resolve_100.py
"""

from __future__ import annotations

import time

from gpucompat import space
from gpucompat.model import StackSpec
from gpucompat.resolve import resolve_all

PLATFORM = "x86_64-manylinux_2_28"


def stacks():
    pythons = ("3.10", "3.11", "3.12", "3.13")
    chosen = space.expand(StackSpec("torch", "latest:12", ("default",), pythons, "uv"))
    chosen += space.expand(StackSpec("cuda-runtime", "latest:13", ("default",), pythons, "uv"))
    return chosen[:100]


def timed(points, workers):
    began = time.perf_counter()
    resolved = resolve_all(points, PLATFORM, workers=workers)
    return time.perf_counter() - began, resolved


def main() -> None:
    points = stacks()
    assert len({s.key for s in points}) == 100, len(points)
    warm_s, resolved = timed(points, 8)
    parallel_s, _ = timed(points, 8)
    sequential_s, _ = timed(points, 1)
    ok = sum(r.ok for r in resolved)
    print(f"stacks: {len(points)} ({ok} resolvable, {len(points) - ok} impossible, e.g. old torch on new Python)")
    print(f"{'pass':<34} {'wall_s':>7} {'per_stack_s':>11}")
    for name, seconds in (("first (warms uv's cache)", warm_s), ("warm, 8 at once (default)", parallel_s), ("warm, one at a time", sequential_s)):
        print(f"{name:<34} {seconds:7.2f} {seconds / len(points):11.3f}")
    print(f"parallel speed-up on a warm cache: {sequential_s / parallel_s:.2f}x; target 30 s -> {'met' if parallel_s <= 30 else 'MISSED'}")


if __name__ == "__main__":
    main()
