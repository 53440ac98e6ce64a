"""The executor interface (after ReFrame's scheduler registry and submitit's executors)."""

from __future__ import annotations

import json
import math
import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Protocol

from ..model import BenchSpec, Cell, Observation, Timeouts
from ..probe_build import PROBE_FILE, probe_pyz
from ..quoting import shell_word

# Job states an executor reports from poll().
WAITING, INSTALLING, RUNNING, DONE = "waiting", "installing", "running", "done"
# The file an install script writes into an environment once it is complete (local and Slurm reuse such ones).
READY_MARKER = ".gpucompat-ready"
# How a cell's script names the sweep's one probe.pyz: it runs in its cell directory, under the work directory.
SHARED_PROBE = f"../{PROBE_FILE}"


@dataclass
class JobDir:
    cell: Cell
    path: Path
    env_dir: Path
    interpreter: str

    @property
    def id(self) -> int:
        return self.cell.id


@dataclass(frozen=True)
class JobSettings:
    """What every executor is built with, from the plan and the command line."""

    timeouts: Timeouts
    wheelhouse: str | None = None  # install from this directory only (seen at the same path where jobs run)
    offline: bool = False
    max_parallel_installs: int | None = None  # environments built at once where gpucompat builds them itself (None: from the node)
    bench: BenchSpec | None = None  # the bench rung after compute, or None
    max_parallel_probes: int | None = None  # the local executor's probes at once (None: from the node, concurrency.limits)


class Executor(Protocol):
    """Everything the sweep calls. An executor is built as cls(settings: JobSettings, **plan_options)."""

    name: str
    # True: the scheduler runs the jobs on its own after submit (a DAG); the sweep is stored
    # "submitted" and `--resume` collects what came back through attach().
    detached: bool
    submitted: str | None  # what was submitted, in words (a cluster id, a command), for the user

    def precheck(self, cells: list[Cell]) -> dict[int, str | None]:
        """Cell id -> why no node can run it (None: some node can)."""

    def prepare(self, cells: list[Cell], workdir: Path) -> list[JobDir]:
        """Render every file a job needs into its own directory."""

    def submit(self, jobs: list[JobDir]) -> None:
        """Hand exactly these jobs to the scheduler (never others found on disk)."""

    def attach(self, cells: list[Cell], workdir: Path) -> list[JobDir]:
        """Detached executors: the jobs of cells submitted earlier, to poll and collect."""

    def poll(self) -> dict[int, str]:
        """Cell id -> WAITING, INSTALLING, RUNNING or DONE."""

    def collect(self, job: JobDir) -> Observation:
        """What came back from a DONE job."""

    def cancel(self, jobs: list[JobDir]) -> None: ...


def sweep_probe(workdir: Path) -> Path:
    """The sweep's one probe.pyz (with the DDP worker the bench's scaling runs start, `ddp-worker`), in its work
    directory, where every cell's script points (SHARED_PROBE): written once per sweep, never once per cell. One
    left by another gpucompat is replaced by a rename, so a job still running from it keeps reading the old file."""
    workdir.mkdir(parents=True, exist_ok=True)
    path, data = workdir / PROBE_FILE, probe_pyz().read_bytes()
    try:
        if path.read_bytes() == data:
            return path
    except OSError:
        pass
    partial = workdir / f".{PROBE_FILE}.{os.getpid()}"
    partial.write_bytes(data)
    os.replace(partial, path)
    return path


def new_job_dir(cell: Cell, workdir: Path, **facts) -> Path:
    """A clean directory for one cell (a resumed cell starts over) with its job.json; the probe is the sweep's (sweep_probe)."""
    path = workdir / f"cell-{cell.id}"
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    record = {"cell": cell.id, "stack": asdict(cell.stack), "target": asdict(cell.target), "pins": list(cell.resolved.pins), **facts}
    (path / "job.json").write_text(json.dumps(record, indent=1))
    from .. import envs

    for name, text in envs.job_files(cell.resolved).items():  # conda: environment.yml and its explicit lock
        (path / name).write_text(text)
    return path


def stage_timeout_arg(timeouts: Timeouts, bench: BenchSpec | None = None) -> str:
    """The probe's --stage-timeouts value, for jobs no parent process watches."""
    stages = ("import", "device", "compute") + (("bench",) if bench else ())
    return ",".join(f"{stage}={math.ceil(timeouts.for_stage(stage))}" for stage in stages)


def probe_arguments(framework: str, timeouts: Timeouts, bench: BenchSpec | None, stage_timeouts: bool = True) -> str:
    """What follows `probe.pyz` in a job script, every value quoted: the framework, the result file,
    the stage timeouts (for jobs no parent process watches) and the bench rung's configuration."""
    words = ["--framework", shell_word(framework), "--result", "result.json"]
    if stage_timeouts:
        words += ["--stage-timeouts", stage_timeout_arg(timeouts, bench)]
    if bench is not None:
        words += ["--bench", shell_word(json.dumps(bench.probe_config(), separators=(",", ":")))]
    return " ".join(words)


def probe_command(cell: Cell, interpreter: str, env_dir: str, probe_args: str, runtime: str | None = None,
                  redirect: str = "", probe: str = PROBE_FILE) -> str:
    """The line(s) of a job script that start the probe, the same for every executor: `exec <interpreter>
    probe.pyz ARGS`, or for a container stack the runtime running the image's python3 (envs.container).
    `probe`: where the script finds probe.pyz, relative to the cell directory (SHARED_PROBE where the
    cells share the work directory's one; probe.pyz where the scheduler puts a copy beside the job)."""
    if cell.stack.env == "container":
        from ..envs import container

        return container.probe_command(cell.resolved, env_dir, probe_args, runtime, redirect, probe)
    return f"exec {shell_word(interpreter)} {shell_word(probe)} {probe_args}" + (f" {redirect}" if redirect else "") + "\n"


def tail(path: Path, limit: int = 6000) -> str:
    """The end of a log file ('' if there is none)."""
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - limit))
            return handle.read().decode(errors="replace")
    except OSError:
        return ""


def pin_gpu(env: dict, device: str) -> None:
    """Pin a probe to DEVICE with CUDA_VISIBLE_DEVICES, and tell the probe the pin is gpucompat's (with the
    job's own value before it), so that no verdict ever quotes the pin as the user's setting."""
    env["GPUCOMPAT_PINNED"] = json.dumps({"CUDA_VISIBLE_DEVICES": env.get("CUDA_VISIBLE_DEVICES")})
    env["CUDA_VISIBLE_DEVICES"] = device
