"""Predicting 2,000 cells of `env = "current"` beside 2,000 uv cells (issue 8, item 10).

Before, the installed-package scan ran once per current-env cell (164 ms each; a 2,000-cell
dry run took 90-124 s against 7.8 s for uv cells). It now runs once per process. All three
variants are timed in the same run: current-env cells as now, current-env cells with the
scan redone per cell (the old behaviour, on a sample, per cell), and uv cells.

    python benchmarks/current_env_predictions.py [--cells 2000] [--old-sample 50]
"""

from __future__ import annotations

import argparse
import time

from gpucompat.envs import current
from gpucompat.knowledge import fatbin
from gpucompat.model import Cell, ResolvedStack, Stack, Target
from gpucompat.sweep import prediction_for

FRAMEWORKS = ("torch", "jax", "cupy", "tensorflow", "cuda-runtime")
GPUS = [Target(f"GPU {i}", cc, "580.65.06", "13.0") for i, cc in enumerate(["7.0", "7.5", "8.0", "8.6", "8.9", "9.0", "10.0", "12.0"] * 50)]


def cells(env: str, count: int) -> list[Cell]:
    out = []
    for i in range(count):
        framework = FRAMEWORKS[i % len(FRAMEWORKS)]
        stack = Stack(framework, "installed" if env == "current" else "2.4.1" if framework == "torch" else "12.4",
                      "default", "current" if env == "current" else "3.11", env)
        out.append(Cell(i, stack, GPUS[i % len(GPUS)], ResolvedStack(stack, True, (), "12.4")))
    return out


def per_cell_ms(batch: list[Cell], before_each=None) -> float:
    began = time.perf_counter()
    for cell in batch:
        if before_each:
            before_each()
        prediction_for(cell)
    return (time.perf_counter() - began) / len(batch) * 1000


def old_behaviour() -> None:
    current._installed_versions.cache_clear()
    fatbin._installed_archs.cache_clear()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cells", type=int, default=2000)
    parser.add_argument("--old-sample", type=int, default=50)
    args = parser.parse_args()
    now = per_cell_ms(cells("current", args.cells))
    uv = per_cell_ms(cells("uv", args.cells))
    old = per_cell_ms(cells("current", args.old_sample), old_behaviour)
    print("| cells | ms per cell | 2,000 cells s | ratio to uv |\n|---|---:|---:|---:|")
    for name, ms in ((f"env current, now ({args.cells} cells)", now), (f"env current, scan per cell as before ({args.old_sample} cells)", old),
                     (f"env uv ({args.cells} cells)", uv)):
        print(f"| {name} | {ms:.2f} | {ms * 2:.1f} | {ms / uv:.2f} |")


if __name__ == "__main__":
    main()
