"""A container cell's overhead: the probe run by the exact run.sh gpucompat writes for a Podman
container stack, against the same probe run directly in the same image's files (chroot), side by side.

    sudo python benchmarks/container_overhead.py [IMAGE] [--repeat N]

IMAGE defaults to the test image tests/test_container.py builds (Debian bookworm minbase + python3 +
libcudart11.0, imported with `podman import`). Root is needed (rootful podman, chroot, mounting /proc).
On a machine with no GPU and no NVIDIA CDI spec, a stand-in spec for nvidia.com/gpu (no device, one
environment variable) is written to /var/run/cdi for the run and removed after, as the tests do.
Set CONTAINERS_CONF where podman needs it (this workplace: runc and lower ulimits, see docs/containers.md).
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

from gpucompat.envs import container
from gpucompat.executors.base import PROBE_FILE, probe_arguments, probe_command, probe_pyz
from gpucompat.model import Cell, ResolvedStack, Stack, Target, Timeouts

STAND_IN = Path("/var/run/cdi/gpucompat-benchmark-stand-in.yaml")
ARGS = ["--framework", "cuda-runtime", "--result", "result.json"]


def timed(command: list[str], cwd: Path) -> float:
    began = time.perf_counter()
    proc = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    took = time.perf_counter() - began
    if not (cwd / "result.json").exists():
        sys.exit(f"{command[:3]} wrote no result.json (exit {proc.returncode}): {proc.stderr[-500:]}")
    (cwd / "result.json").unlink()
    return took


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("image", nargs="?", default="localhost/gpucompat-test-probe:bookworm-1")
    parser.add_argument("--repeat", type=int, default=7)
    options = parser.parse_args()
    podman = shutil.which("podman") or sys.exit("podman is not installed")
    stack = Stack("cuda-runtime", "installed", "installed", "image", "container", image=options.image, runtime="podman")
    cell = Cell(1, stack, Target("no GPU visible"), ResolvedStack(stack, ok=True))
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        job = tmp_path / "job"
        job.mkdir()
        shutil.copyfile(probe_pyz(), job / PROBE_FILE)
        run_sh = job / "run.sh"  # what the local executor writes, line for line
        run_sh.write_text('#!/bin/sh\ncd "$(dirname "$0")" || exit 70\n' + probe_command(
            cell, "python3", str(tmp_path / "env"), probe_arguments("cuda-runtime", Timeouts(), None, stage_timeouts=False), podman))
        # the same image's files, unpacked once, for the direct run (no runtime at all)
        root = tmp_path / "root"
        root.mkdir()
        created = subprocess.run([podman, "create", options.image, "true"], capture_output=True, text=True, check=True).stdout.strip()
        try:
            export = subprocess.Popen([podman, "export", created], stdout=subprocess.PIPE)
            subprocess.run(["tar", "-x", "-C", str(root)], stdin=export.stdout, check=True)
            export.wait()
        finally:
            subprocess.run([podman, "rm", created], capture_output=True)
        (root / "job").mkdir()
        shutil.copyfile(probe_pyz(), root / "job" / PROBE_FILE)
        subprocess.run(["mount", "-t", "proc", "proc", str(root / "proc")], check=True)
        wrote_stand_in = False
        if not any(p.exists() and "nvidia.com/gpu" in p.read_text() for d in ("/etc/cdi", "/var/run/cdi") for p in Path(d).glob("*.y*ml")):
            STAND_IN.parent.mkdir(parents=True, exist_ok=True)
            STAND_IN.write_text('cdiVersion: "0.5.0"\nkind: nvidia.com/gpu\ndevices:\n- name: all\n  containerEdits:\n'
                                '    env:\n    - NVIDIA_GPUCOMPAT_CDI_STAND_IN=1\n')
            wrote_stand_in = True
        try:
            direct_command = ["chroot", str(root), "sh", "-c", "cd /job && exec python3 probe.pyz " + " ".join(ARGS)]
            direct, contained = [], []
            timed(direct_command, root / "job"), timed(["/bin/sh", str(run_sh)], job)  # warm both (page cache, storage)
            for _ in range(options.repeat):  # interleaved, so drift hits both alike
                direct.append(timed(direct_command, root / "job"))
                contained.append(timed(["/bin/sh", str(run_sh)], job))
        finally:
            subprocess.run(["umount", str(root / "proc")])
            if wrote_stand_in:
                STAND_IN.unlink()
    report = {
        "image": options.image, "runtime": subprocess.run([podman, "--version"], capture_output=True, text=True).stdout.strip(),
        "repeat": options.repeat, "direct_median_s": round(statistics.median(direct), 3),
        "container_median_s": round(statistics.median(contained), 3),
        "overhead_median_s": round(statistics.median(contained) - statistics.median(direct), 3),
        "overhead_max_s": round(max(c - d for c, d in zip(contained, direct)), 3),
        "direct_s": [round(x, 3) for x in direct], "container_s": [round(x, 3) for x in contained],
        "command": " ".join(container.run_words(podman, options.image, "env")),
        "cpus": os.cpu_count(),
    }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
