"""Time of `gpucompat inspect` on the wheels of issue 41 item 5: about 15 MB each, inside every size and ratio bound,
of 18 million minimal fat-binary entries (all in one container, or one per container), beside real wheels read in the
same run. Each command is a cold process, run --runs times, median wall seconds and the exit status.

    python benchmarks/inspect_flood.py [--runs 3] [--before SRC] [--wheel PATH ...]

--before SRC: the same commands with the gpucompat of an older tree's src/ (`git archive HEAD~1 src | tar -x -C /tmp/old`),
run by run in the same process, so both see the same machine. --wheel: real wheels (torch, nvidia-cublas) read beside.
The wheels are built with tests/test_inspect_bounds.py's helpers (entry_flood, zip64_wheel).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "src")]

from test_inspect_bounds import entry_flood, zip64_wheel  # noqa: E402


def timed(src: Path, target: Path) -> tuple[float, int, str]:
    """Wall seconds of one cold `gpucompat inspect TARGET` with this src/, its exit status and its last line."""
    env = {**os.environ, "PYTHONPATH": str(src), "NO_COLOR": "1"}
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "gpucompat", "inspect", str(target)], capture_output=True, text=True, env=env, check=False)
    wall = time.monotonic() - start
    return wall, proc.returncode, (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-1][:160]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--before", type=Path, help="an older tree's src/")
    parser.add_argument("--wheel", type=Path, action="append", default=[], help="a real wheel to read beside")
    args = parser.parse_args()
    trees = [("now", ROOT / "src")] + ([("before", args.before)] if args.before else [])
    with tempfile.TemporaryDirectory() as work:
        targets = []
        for label, per_container in (("one container of 18.4M entries", 0), ("18.4M containers of one entry", 1)):
            segments, entries = entry_flood(1150, per_container)
            wheel = zip64_wheel(Path(work) / f"flood{per_container}-1.0-py3-none-any.whl", {"flood/libflood.so": segments})
            targets.append((f"{label} ({wheel.stat().st_size / 1e6:.1f} MB wheel, {entries:,} entries)", wheel))
        targets += [(wheel.name, wheel) for wheel in args.wheel]
        print(f"{'input':70} {'tree':7} {'median s':>9} {'exit':>4}  last line")
        for label, target in targets:
            walls: dict[str, list[float]] = {name: [] for name, _src in trees}
            said: dict[str, tuple[int, str]] = {}
            for _ in range(args.runs):
                for name, src in trees:
                    wall, code, last = timed(src, target)
                    walls[name].append(wall)
                    said[name] = code, last
            for name, _src in trees:
                code, last = said[name]
                print(f"{label[:70]:70} {name:7} {statistics.median(walls[name]):9.2f} {code:4}  {last}")


if __name__ == "__main__":
    main()
