"""A probe started before its cell exists, for `gpucompat check FRAMEWORK --env current`.

The framework's import takes seconds; gpucompat's own start (Typer, SQLAlchemy, the store, the sweep's
cells) about half a second. Started first, the probe imports the framework while gpucompat starts, and
the local executor adopts it for the job whose command and GPU are exactly the ones it was started with
(`key`); any other job starts its own, and an early probe no job adopted is killed when gpucompat exits
(by its watchdog if gpucompat is killed). What the check records is the same either way: only when the
probe started changes. GPUCOMPAT_EARLY_PROBE=0 turns it off (benchmarks/check_latency.py measures both).

Two places start one: the console entry point (`start_for_argv`), before the CLI is imported, where the
command line is plainly one framework with --env current; else the CLI itself, after parsing the plan.
Both start it on the GPU the job would get (`start_on_this_gpu`).
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ..model import BenchSpec, Timeouts
from ..probe_build import probe_pyz
from ..quoting import shell_word
from . import rungs
from .base import pin_gpu, probe_arguments

# Every job process runs in its own session (so one kill reaches all it started) behind this
# watchdog: when gpucompat itself is gone, even by SIGKILL, the watchdog kills the job's whole
# process group within a second, so no probe or install outlives the sweep that started it.
# `$$` is the job itself once `exec` has replaced the shell; the loop also ends when it exits.
WATCHDOG = ('parent=$1; shift; ( while kill -0 "$parent" 2>/dev/null && kill -0 $$ 2>/dev/null; '
            'do sleep 1; done; kill -KILL 0 ) & exec "$@"')
FRAMEWORKS = ("torch", "jax", "cupy", "tensorflow", "cuda-runtime")  # the probe's own names: aliases take the CLI's path
# `check` options that do not change what the probe runs (--bench does: it is read into the key)
PLAIN_FLAGS = {"--json", "--wide", "--offline", "--bench"}
VALUE_OPTIONS = {"--db"}
PROC_GPUS = Path("/proc/driver/nvidia/gpus")


def watched(command: list[str]) -> list[str]:
    return ["/bin/sh", "-c", WATCHDOG, "gpucompat-watchdog", str(os.getpid()), *command]


def kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


@dataclass
class EarlyProbe:
    key: tuple  # what the job would run: see key()
    path: Path  # its own directory, until the job that adopts it copies what it wrote
    proc: subprocess.Popen
    began: float  # time.monotonic() at its start


_early: list[EarlyProbe] = []


def key(framework: str, interpreter: str, timeouts: Timeouts, bench: BenchSpec | None, device: str | None) -> tuple:
    """(interpreter, the probe's arguments, CUDA_VISIBLE_DEVICES or None): equal keys run the same probe."""
    return interpreter, probe_arguments(framework, timeouts, bench, stage_timeouts=False), device


def start(framework: str, timeouts: Timeouts, bench: BenchSpec | None, device: str | None) -> None:
    """Start the probe of FRAMEWORK in this interpreter on DEVICE (None: no GPU visible), unless one runs."""
    if _early:
        return
    probe_key = key(framework, sys.executable, timeouts, bench, device)
    path = Path(tempfile.mkdtemp(prefix="gpucompat-early-"))
    (path / "run.sh").write_text(f'#!/bin/sh\ncd "$(dirname "$0")" || exit 70\n'
                                 f'exec {shell_word(probe_key[0])} {shell_word(str(probe_pyz()))} {probe_key[1]}\n')
    env = {**os.environ, "GPUCOMPAT_JOB_DIR": str(path)}
    if device is not None:
        pin_gpu(env, device)
        env.update(rungs.probe_env(sys.executable, device, framework))
    with (path / "stdout.log").open("w") as out, (path / "stderr.log").open("w") as err:
        proc = subprocess.Popen(watched(["/bin/sh", str(path / "run.sh")]), stdout=out, stderr=err, env=env, start_new_session=True)
    atexit.register(end_all)
    _early.append(EarlyProbe(probe_key, path, proc, time.monotonic()))


def take(probe_key: tuple) -> EarlyProbe | None:
    """The early probe started with exactly this key, now the caller's to watch; None if there is none."""
    for early in _early:
        if early.key == probe_key:
            _early.remove(early)
            return early
    return None


def end_all() -> None:
    """The early probes no job adopted: killed, and their directories removed."""
    while _early:
        early = _early.pop()
        kill_group(early.proc)
        early.proc.wait()
        shutil.rmtree(early.path, ignore_errors=True)


def proc_gpu_uuids() -> list[str] | None:
    """The UUIDs of this machine's GPUs from the driver's /proc files (cheap: no NVML start); None where
    they are not there to read (a container without them, no driver)."""
    try:
        folders = sorted(PROC_GPUS.iterdir())
    except OSError:
        return None
    uuids = []
    for folder in folders:
        try:
            text = (folder / "information").read_text()
        except OSError:
            return None
        uuid = next((line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("GPU UUID:")), None)
        if not uuid:
            return None
        uuids.append(uuid)
    return uuids


def start_for_argv(argv: list[str]) -> None:
    """The console entry point's early start: `check FRAMEWORK --env current` with no option that changes the
    probe. Anything else is left to the CLI. A guess that turns out wrong costs a killed probe, never a wrong result."""
    if not argv or argv[0] != "check":
        return
    names, env, bench, words = [], None, False, iter(argv[1:])
    for word in words:
        if word in ("--env", "--env=current"):
            env = "current" if word == "--env=current" else next(words, None)
        elif word in VALUE_OPTIONS:
            next(words, None)
        elif word in PLAIN_FLAGS:
            bench = bench or word == "--bench"
        elif word.startswith("-"):
            return
        else:
            names.append(word)
    if env != "current" or len(names) != 1 or names[0] not in FRAMEWORKS:
        return
    start_on_this_gpu(names[0], Timeouts(), BenchSpec() if bench else None)


def start_on_this_gpu(framework: str, timeouts: Timeouts, bench: BenchSpec | None) -> None:
    """Start the probe on the GPU its job would get: the one GPU of this machine, named by the driver's /proc
    files (cheap) or else by NVML's discovery (what the executor itself uses), or none where no GPU is
    visible. Where the choice is not that plain (several GPUs, a bench run over several, a CUDA_VISIBLE_DEVICES
    to honour) nothing starts, and the job starts its own probe."""
    if os.environ.get("GPUCOMPAT_EARLY_PROBE") == "0" or "CUDA_VISIBLE_DEVICES" in os.environ:
        return
    if bench is not None and bench.scale:
        return
    uuids = proc_gpu_uuids()
    if uuids is None:
        from ..discover.local import discover

        targets = discover()
        if len(targets) != 1 or targets[0].count > 1:
            return
        uuids = list(targets[0].devices)
    if len(uuids) <= 1:
        start(framework, timeouts, bench, uuids[0] if uuids else None)
