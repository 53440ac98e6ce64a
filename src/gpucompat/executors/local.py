"""`local`: subprocesses on this machine, the embedded default.

Environments are built in parallel up to a limit (one per distinct resolved stack,
reused across cells and sweeps); probes run at most one per visible GPU at a time,
pinned with CUDA_VISIBLE_DEVICES. Both limits come from the node (`concurrency.limits`:
cores, available memory, GPUs) unless the plan sets them. A probe holds its environment's
lock shared while it runs, so `gpucompat envs prune` never removes it from under the job.
The parent enforces per-stage and per-cell timeouts by watching the probe's result.json,
and kills the whole process group.
"""

from __future__ import annotations

import fcntl
import json
import os
import queue
import shutil
import signal
import subprocess
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import asdict
from pathlib import Path

from .. import env_cache, envs
from ..concurrency import Limits, limits
from ..envs.uv import uv_bin
from ..model import Cell, Observation
from ..paths import cache_dir
from ..quoting import shell_comment
from . import early, rungs
from .base import (DONE, INSTALLING, READY_MARKER, RUNNING, SHARED_PROBE, WAITING, JobDir, JobSettings, new_job_dir, pin_gpu, probe_arguments,
                   probe_command, sweep_probe, tail)
from .early import kill_group, watched

POLL_S = 0.05


PID_FILE = "job.pid"


def _runtime(cell: Cell) -> str | None:
    """A container stack's runtime, chosen here on the submit side (the same machine): its full path."""
    return envs.container.local_runtime(cell.resolved) if cell.stack.env == "container" else None


def kill_leftover(job_path: Path) -> bool:
    """A probe of this cell left running by an earlier gpucompat (killed before its watchdog
    could act, or on a system without one): kill its process group. The process is checked to
    be this cell's by its environment, so a reused PID is never killed."""
    try:
        pid = int((job_path / PID_FILE).read_text())
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except (OSError, ValueError):
        return False
    if f"GPUCOMPAT_JOB_DIR={job_path}".encode() not in environ:
        return False
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return False
    return True


class LocalExecutor:
    name = "local"
    detached = False
    submitted = None

    def __init__(self, settings: JobSettings, env_root: Path | None = None):
        self.timeouts = settings.timeouts
        self.max_parallel_installs = settings.max_parallel_installs  # None: derived from the node at submit
        self.max_parallel_probes = settings.max_parallel_probes
        self.limits: Limits | None = None
        self.wheelhouse = settings.wheelhouse
        self.offline = settings.offline
        self.bench = settings.bench
        self.env_root = env_root or cache_dir() / "envs"
        self._states: dict[int, str] = {}
        self._observations: dict[int, Observation] = {}
        self._procs: set[subprocess.Popen] = set()
        self._lock = threading.Lock()
        self._acquiring = threading.Lock()
        self._cancelled = threading.Event()
        self._pool: ThreadPoolExecutor | None = None

    # -- Executor protocol ---------------------------------------------------------------

    def precheck(self, cells: list[Cell]) -> dict[int, str | None]:
        """A declared GPU class that this machine does not have can never run here."""
        verdicts: dict[int, str | None] = {}
        for cell in cells:
            target = cell.target
            if target.declared and not target.devices:
                verdicts[cell.id] = f"no local GPU matches the declared class {target.key!r}; the local executor runs only on this machine's GPUs"
            else:
                verdicts[cell.id] = None
        return verdicts

    def prepare(self, cells: list[Cell], workdir: Path) -> list[JobDir]:
        jobs = []
        if cells:
            sweep_probe(workdir)  # one probe.pyz for the sweep, which every run.sh points at
        for cell in cells:
            env_dir = self.env_root / cell.resolved.env_key
            interpreter = envs.provider(cell.stack.env).interpreter(cell.resolved, env_dir)
            kill_leftover(workdir / f"cell-{cell.id}")  # --resume after a kill: never two probes of one cell
            path = new_job_dir(cell, workdir, env_dir=str(env_dir), interpreter=interpreter, timeouts=asdict(self.timeouts))
            # CUDA_VISIBLE_DEVICES is set by the executor when it starts the job.
            (path / "run.sh").write_text("\n".join([
                "#!/bin/sh", shell_comment(f"gpucompat cell {cell.id}: {cell.stack.key} on {cell.target.key}"),
                'cd "$(dirname "$0")" || exit 70',
                # this process watches the stages: no --stage-timeouts for the probe to arm itself, but in a
                # Podman/Docker container, which outlives its killed client, the probe arms them as well
                probe_command(cell, interpreter, str(env_dir), probe_arguments(cell.stack.framework, self.timeouts, self.bench,
                                                                               stage_timeouts=cell.stack.env == "container"),
                              _runtime(cell), probe=SHARED_PROBE)]))
            (path / "run.sh").chmod(0o755)
            jobs.append(JobDir(cell, path, env_dir, interpreter))
        return jobs

    def submit(self, jobs: list[JobDir]) -> None:
        self.limits = limits(len({d for job in jobs for d in job.cell.target.devices}), self.max_parallel_installs,
                             self.max_parallel_probes)
        self._probing = threading.BoundedSemaphore(self.limits.probes)
        slots: dict[tuple, queue.Queue] = {}
        for devices in {self._devices(job) for job in jobs}:
            slots[devices] = queue.Queue()
            for device in devices:
                slots[devices].put(device)
        installs: dict[str, Future] = {}
        install_pool = ThreadPoolExecutor(max_workers=self.limits.installs, thread_name_prefix="install")
        self._pool = ThreadPoolExecutor(max_workers=max(1, min(len(jobs), 64)), thread_name_prefix="cell")
        for job in jobs:
            key = str(job.env_dir)
            if key not in installs:
                installs[key] = install_pool.submit(self._install, job)
            with self._lock:
                self._states[job.id] = WAITING
            self._pool.submit(self._run_job, job, installs[key], slots[self._devices(job)])
        install_pool.shutdown(wait=False)

    def _gpus_per_job(self, job: JobDir) -> int:
        """1, or with the bench's scaling runs as many of the class's GPUs as the largest run asks for."""
        devices = job.cell.target.devices
        if not devices or not self.bench or not self.bench.scale:
            return 1
        return max(1, min(max(self.bench.scale), len(devices)))

    def _devices(self, job: JobDir) -> tuple[str, ...]:
        """The slots a job waits for: its class's GPUs, or as many CPU slots as the node's probe limit when none is visible."""
        return job.cell.target.devices or tuple(f"cpu{i}" for i in range(self.limits.probes))

    def poll(self) -> dict[int, str]:
        with self._lock:
            return dict(self._states)

    def collect(self, job: JobDir) -> Observation:
        with self._lock:
            return self._observations[job.id]

    def cancel(self, jobs: list[JobDir]) -> None:
        self._cancelled.set()
        with self._lock:
            procs = list(self._procs)
        for proc in procs:
            kill_group(proc)
        if self._pool:
            self._pool.shutdown(wait=False, cancel_futures=True)

    # -- work ------------------------------------------------------------------------------

    def _install(self, job: JobDir) -> tuple[bool, str, bool]:
        """Build the job's environment once: (ok, log tail, timed out)."""
        provider = envs.provider(job.cell.stack.env)
        base = job.env_dir.parent / job.env_dir.name
        script = provider.install_script(job.cell.resolved, str(job.env_dir), f"{base}.requirements.txt", self.wheelhouse,
                                         self.offline, uv=uv_bin(), same_machine=True,
                                         **({"runtime": _runtime(job.cell)} if job.cell.stack.env == "container" else {}))
        if script is None:
            return True, "", False
        if (job.env_dir / READY_MARKER).exists():  # built by an earlier sweep: no lock to wait for (jobs may hold it shared)
            return True, "", False
        job.env_dir.parent.mkdir(parents=True, exist_ok=True)
        log_path = Path(f"{base}.install.log")
        with open(f"{base}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another sweep may be building the same environment
            if (job.env_dir / READY_MARKER).exists():
                return True, "", False
            Path(f"{base}.requirements.txt").write_text(provider.requirements_text(job.cell.resolved))
            Path(f"{base}.install.sh").write_text(script)
            with log_path.open("w") as log:
                code, timed_out = self._run(["/bin/sh", "-ex", f"{base}.install.sh"], log, self.timeouts.install, {})
            if timed_out or code != 0:
                return False, tail(log_path), timed_out
            (job.env_dir / READY_MARKER).write_text(time.strftime("%Y-%m-%dT%H:%M:%S"))
        return True, tail(log_path), False

    def _run(self, command: list[str], log, timeout: float, env: dict) -> tuple[int | None, bool]:
        if self._cancelled.is_set():
            return None, False
        proc = subprocess.Popen(watched(command), stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **env}, start_new_session=True)
        with self._lock:
            self._procs.add(proc)
        try:
            proc.wait(timeout=max(timeout, 0.1))
            return proc.returncode, False
        except subprocess.TimeoutExpired:
            kill_group(proc)
            proc.wait()
            return None, True
        finally:
            with self._lock:
                self._procs.discard(proc)

    def _set(self, job: JobDir, state: str, observation: Observation | None = None) -> None:
        with self._lock:
            self._states[job.id] = state
            if observation is not None:
                self._observations[job.id] = observation

    def _built(self, job: JobDir) -> bool:
        """Its environment is complete, or there is none to build (no install ever took its lock)."""
        return not env_cache.lock_path(job.env_dir).exists() or (job.env_dir / READY_MARKER).exists()

    def _run_job(self, job: JobDir, install: Future, slots: queue.Queue) -> None:
        try:
            with ExitStack() as holding:
                self._run_holding(job, install, slots, holding)
        except Exception as exc:  # our bug, never the stack's: recorded as INTERNAL by the caller
            self._set(job, DONE, Observation(facts={}, internal=repr(exc)))

    def _run_holding(self, job: JobDir, install: Future, slots: queue.Queue, holding: ExitStack) -> None:
        """One job, its environment's lock held shared from the moment it is built to the probe's end."""
        self._set(job, INSTALLING)
        ok, log, timed_out = install.result()
        for _ in range(3):
            if not ok:
                break
            holding.enter_context(env_cache.using(job.env_dir))
            if self._built(job):
                break
            holding.close()  # removed by `gpucompat envs prune` between its install and now: built again
            ok, log, timed_out = self._install(job)
        if not ok:
            self._set(job, DONE, Observation(facts={}, install_failed=True, install_log=log,
                                             timed_out_stage="install" if timed_out else None))
            return
        want = self._gpus_per_job(job)
        with self._acquiring:  # one job gathers its GPUs at a time, so two that want several never split them
            devices = [slots.get() for _ in range(want)]
        try:
            with self._probing:  # the node's limit on probes at once (cores, memory), below one per GPU
                self._set(job, RUNNING)
                observation = self._probe(job, ",".join(devices))
        finally:
            for device in devices:
                slots.put(device)
        self._set(job, DONE, observation)

    def _probe(self, job: JobDir, device: str) -> Observation:
        env = {**os.environ, "GPUCOMPAT_JOB_DIR": str(job.path)}
        if not device.startswith("cpu"):
            pin_gpu(env, device)
        if job.cell.stack.env != "current":
            env.pop("PYTHONPATH", None)  # a built environment is tested as built, nothing shadowing it
        adopted = None
        if job.cell.stack.env == "current":
            adopted = early.take(early.key(job.cell.stack.framework, job.interpreter, self.timeouts, self.bench,
                                           None if device.startswith("cpu") else device))
        remembered = job.cell.stack.env == "current" and not device.startswith("cpu")  # what it passed here is kept
        if adopted is None:
            early.end_all()  # one started for another job would share its GPU: never two probes on one GPU
            if remembered:
                env.update(rungs.probe_env(job.interpreter, device, job.cell.stack.framework))
        folder = adopted.path if adopted else job.path  # an early probe writes into its own directory until it ends
        result_path = folder / "result.json"
        began = adopted.began if adopted else time.monotonic()
        began_wall = time.time() - (time.monotonic() - began)
        with (job.path / "stdout.log").open("w") as out, (job.path / "stderr.log").open("w") as err:
            if adopted:
                proc = adopted.proc
            else:
                proc = subprocess.Popen(watched(["/bin/sh", str(job.path / "run.sh")]), stdout=out, stderr=err,
                                        env=env, start_new_session=True)
            (job.path / PID_FILE).write_text(str(proc.pid))
            with self._lock:
                self._procs.add(proc)
            timed_out_stage, facts, seen_mtime = None, {}, 0.0
            try:
                while proc.poll() is None:
                    try:
                        proc.wait(timeout=POLL_S)  # returns at the probe's exit, not at the next tick
                    except subprocess.TimeoutExpired:
                        pass
                    try:
                        mtime = result_path.stat().st_mtime
                        if mtime != seen_mtime:
                            facts, seen_mtime = json.loads(result_path.read_text()), mtime
                    except (OSError, ValueError):
                        pass
                    stage = facts.get("current_stage", "import")
                    stage = "import" if stage == "system" else stage
                    stage_began = facts.get("stage_started_at", began_wall)
                    if time.time() - stage_began > self.timeouts.for_stage(stage) or time.monotonic() - began > self.timeouts.cell:
                        timed_out_stage = stage
                        kill_group(proc)
                        proc.wait()
                        break
                    if self._cancelled.is_set():
                        kill_group(proc)
                        proc.wait()
                        break
            finally:
                with self._lock:
                    self._procs.discard(proc)
        if adopted:
            for name in ("result.json", "stdout.log", "stderr.log"):
                if (adopted.path / name).exists():
                    shutil.copyfile(adopted.path / name, job.path / name)
            shutil.rmtree(adopted.path, ignore_errors=True)
            result_path = job.path / "result.json"
        try:
            facts = json.loads(result_path.read_text())
        except (OSError, ValueError):
            pass
        code = proc.returncode
        if remembered and timed_out_stage is None:
            rungs.remember(job.interpreter, device, job.cell.stack.framework, facts)
        return Observation(
            facts=facts, returncode=code, signal=-code if code is not None and code < 0 else None,
            timed_out_stage=timed_out_stage, stderr=tail(job.path / "stderr.log"),
            duration_s=round(time.monotonic() - began, 3),
        )
