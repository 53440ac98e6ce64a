"""`slurm`: one job array per GPU class, through sbatch/squeue/scontrol/scancel.

The precheck is `sbatch --test-only` with the class's GRES type and features, so a cell
no node can ever run is NO_MATCH in seconds, with Slurm's own message (the ancestor
waited 24 hours). A job pending past the plan's pending timeout is cancelled and is
NO_MATCH with the reason squeue gave. Inside the job, run.sh builds the environment
(once per environment, under flock) and runs the probe with its own stage timeouts
(SIGALRM), since no parent process watches a batch job; `--time` bounds the whole cell.
The submit host and the nodes are assumed to share the work and cache directories.
"""

from __future__ import annotations

import json
import math
import subprocess
import time
from pathlib import Path

from .. import envs
from ..model import Cell, Observation, Target
from ..resolve import uv_bin
from ..space import cache_dir
from .base import DONE, RUNNING, WAITING, JobDir, JobSettings, new_job_dir, run_command, stage_timeout_arg, tail
from .local import READY_MARKER
from .quoting import sbatch_directive, shell_comment, shell_word, slurm_name

ACTIVE = {"PENDING": WAITING, "CONFIGURING": RUNNING, "RUNNING": RUNNING, "COMPLETING": RUNNING, "SUSPENDED": RUNNING}


def request_args(target: Target) -> list[str]:
    """sbatch options that ask for one GPU of this class."""
    args = [f"--gres=gpu:{target.gres}:1" if target.gres else "--gres=gpu:1"]
    if target.features:
        args.append("--constraint=" + "&".join(target.features))
    return args


def job_fields(text: str) -> dict[str, str]:
    """`scontrol show job -o` -> {'JobState': 'TIMEOUT', 'ExitCode': '0:9', ...}."""
    fields = {}
    for token in text.split():
        if "=" in token:
            key, value = token.split("=", 1)
            fields.setdefault(key, value)
    return fields


def exit_status(exit_code: str) -> tuple[int | None, int | None]:
    """Slurm's 'rc:signal' (or a shell's 128+N) -> (returncode, signal)."""
    try:
        rc, sig = (int(part) for part in exit_code.split(":"))
    except ValueError:
        return None, None
    if sig:
        return -sig, sig
    if rc > 128:
        return rc, rc - 128
    return rc, None


class SlurmExecutor:
    name = "slurm"

    detached = False
    submitted = None

    def __init__(self, settings: JobSettings, partition: str | None = None, account: str | None = None, qos: str | None = None,
                 reservation: str | None = None, mem: int | None = None, cpus_per_task: int | None = None,
                 extra_sbatch: tuple[str, ...] = (), env_root: Path | None = None, poll_s: float = 1.0):
        self.timeouts = settings.timeouts
        self.wheelhouse = settings.wheelhouse
        self.offline = settings.offline
        # the plan's [slurm] table: what this site needs on every job (values checked by plan.py)
        self.site_args = [f"--{flag}={value}" for flag, value in (
            ("partition", partition), ("account", account), ("qos", qos), ("reservation", reservation),
            ("mem", f"{mem}M" if mem else None), ("cpus-per-task", cpus_per_task)) if value] + list(extra_sbatch)
        self.env_root = env_root or cache_dir() / "envs"
        self.poll_s = poll_s
        self._task_of: dict[int, str] = {}  # cell id -> "jobid_index"
        self._array_ids: list[str] = []
        self._submitted_at = 0.0
        self._no_match: dict[int, str] = {}
        self._done: set[int] = set()
        self._last_poll = 0.0
        self._states: dict[int, str] = {}

    # -- helpers ---------------------------------------------------------------------------

    def _common_args(self) -> list[str]:
        return [f"--time={self.time_limit_minutes()}", *self.site_args]

    def time_limit_minutes(self) -> int:
        return max(1, math.ceil((self.timeouts.install + self.timeouts.cell) / 60))

    @staticmethod
    def _run(command: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess:
        return run_command(command, 60, "a Slurm submit host", cwd=cwd)

    # -- Executor protocol ---------------------------------------------------------------

    def precheck(self, cells: list[Cell]) -> dict[int, str | None]:
        verdicts: dict[int, str | None] = {}
        answers: dict[Target, str | None] = {}
        for cell in cells:
            if cell.target not in answers:
                command = ["sbatch", "--test-only", *request_args(cell.target), *self._common_args(), "--wrap", "true"]
                proc = self._run(command)
                answers[cell.target] = None if proc.returncode == 0 else (
                    f"sbatch --test-only {' '.join(request_args(cell.target))}: {(proc.stderr or proc.stdout).strip()[-400:]}")
            verdicts[cell.id] = answers[cell.target]
        return verdicts

    def prepare(self, cells: list[Cell], workdir: Path) -> list[JobDir]:
        workdir.mkdir(parents=True, exist_ok=True)
        jobs, groups = [], {}
        stage_timeouts = stage_timeout_arg(self.timeouts)
        for cell in cells:
            provider = envs.provider(cell.stack.env)
            env_dir = self.env_root / cell.resolved.env_key
            interpreter = provider.interpreter(cell.resolved, env_dir)
            path = new_job_dir(cell, workdir, interpreter=interpreter)
            # the submit host and the nodes share the cache directory: uv and the environments are found there
            script = provider.install_script(cell.resolved, str(env_dir), "requirements.txt", self.wheelhouse, self.offline,
                                             uv=uv_bin(), same_machine=False)
            lines = ["#!/bin/bash", shell_comment(f"gpucompat cell {cell.id}: {cell.stack.key} on {cell.target.key}"),
                     f"cd {shell_word(path)} || exit 70"]
            if cell.stack.env != "current":
                lines.append("unset PYTHONPATH  # a built environment is tested as built")
            if script:
                (path / "install.sh").write_text(script)
                (path / "requirements.txt").write_text(provider.requirements_text(cell.resolved))
                ready, lock = shell_word(env_dir / READY_MARKER), shell_word(str(env_dir) + ".lock")
                lines += [
                    f"mkdir -p {shell_word(env_dir.parent)}",
                    f"if [ ! -e {ready} ]; then",
                    f"  ( flock 9; [ -e {ready} ] || {{ timeout {math.ceil(self.timeouts.install)} sh install.sh && date > {ready}; }} ) "
                    f"9> {lock} > install.log 2>&1",
                    "  status=$?",
                    '  if [ "$status" -ne 0 ]; then echo "$status" > install.failed; exit 0; fi',
                    "fi",
                ]
            lines.append(f"exec {shell_word(interpreter)} probe.py --framework {shell_word(cell.stack.framework)} "
                         f"--result result.json --stage-timeouts {stage_timeouts} > stdout.log 2> stderr.log")
            (path / "run.sh").write_text("\n".join(lines) + "\n")
            job = JobDir(cell, path, env_dir, interpreter)
            jobs.append(job)
            groups.setdefault(cell.target, []).append(job)
        for number, (target, members) in enumerate(groups.items()):
            script = workdir / f"array-{number}.sh"
            # --output is relative to the directory sbatch runs in (the work directory): no path in a directive
            directives = [*request_args(target), *self._common_args(), f"--job-name={slurm_name(f'gpucompat-{workdir.name}')}-{number}",
                          f"--array=0-{len(members) - 1}", "--output=slurm-%A_%a.out"]
            cells_list = " ".join(shell_word(job.path / "run.sh") for job in members)
            script.write_text("#!/bin/bash\n" + "".join(f"#SBATCH {sbatch_directive(d)}\n" for d in directives)
                              + shell_comment(target.key) + f"\ncells=({cells_list})\nexec bash \"${{cells[$SLURM_ARRAY_TASK_ID]}}\"\n")
            (workdir / f"array-{number}.cells").write_text("\n".join(str(job.id) for job in members) + "\n")
        return jobs

    def submit(self, jobs: list[JobDir]) -> None:
        if not jobs:
            return
        workdir = jobs[0].path.parent
        by_id = {job.id: job for job in jobs}
        for script in sorted(workdir.glob("array-*.sh")):
            members = [int(line) for line in script.with_suffix(".cells").read_text().split()]
            proc = self._run(["sbatch", "--parsable", script.name], cwd=workdir)
            if proc.returncode != 0:
                for cell_id in members:
                    self._no_match[cell_id] = f"sbatch refused the job: {proc.stderr.strip()[-400:]}"
                continue
            array_id = proc.stdout.strip().split(";")[0]
            self._array_ids.append(array_id)
            for index, cell_id in enumerate(members):
                if cell_id in by_id:
                    self._task_of[cell_id] = f"{array_id}_{index}"
        self._submitted_at = time.monotonic()

    def poll(self) -> dict[int, str]:
        if time.monotonic() - self._last_poll < self.poll_s:
            return dict(self._states)
        self._last_poll = time.monotonic()
        queued: dict[str, tuple[str, str]] = {}
        if self._array_ids:
            proc = self._run(["squeue", "--noheader", "--array", "--jobs", ",".join(self._array_ids), "--format", "%i|%T|%r"])
            for line in proc.stdout.splitlines():
                parts = line.strip().split("|")
                if len(parts) == 3:
                    queued[parts[0]] = (parts[1], parts[2])
        pending_too_long = time.monotonic() - self._submitted_at > self.timeouts.pending
        for cell_id in self._no_match:
            self._states[cell_id] = DONE
        for cell_id, task in self._task_of.items():
            state, reason = queued.get(task, ("", ""))
            if state == "PENDING" and pending_too_long and cell_id not in self._no_match:
                self._run(["scancel", task])
                self._no_match[cell_id] = f"pending for more than {self.timeouts.pending:.0f} s (squeue reason: {reason})"
            self._states[cell_id] = DONE if cell_id in self._no_match or state not in ACTIVE else ACTIVE[state]
        return dict(self._states)

    def collect(self, job: JobDir) -> Observation:
        if job.id in self._no_match:
            return Observation(facts={}, no_match=self._no_match[job.id])
        task = self._task_of.get(job.id, "")
        fields = job_fields(self._run(["scontrol", "show", "job", "-o", task]).stdout) if task else {}
        state = fields.get("JobState", "")
        returncode, sig = exit_status(fields.get("ExitCode", ""))
        try:
            facts = json.loads((job.path / "result.json").read_text())
        except (OSError, ValueError):
            facts = {}
        install_failed = (job.path / "install.failed").exists()
        timed_out = None
        if state == "TIMEOUT":
            timed_out = facts.get("current_stage", "import") if facts else ("install" if not (job.env_dir / READY_MARKER).exists() else "import")
            timed_out = "import" if timed_out == "system" else timed_out
        elif install_failed and (job.path / "install.failed").read_text().strip() == "124":
            timed_out = "install"
        stderr = tail(job.path / "stderr.log") + (f"\n[slurm] JobState={state} ExitCode={fields.get('ExitCode')}" if state else "")
        untested = None
        if state in ENDED_BY_SLURM and not facts.get("finished"):  # the node or the scheduler ended it, not the stack
            untested = (ENDED_BY_SLURM[state], f"Slurm ended job {task} as {state}")
        return Observation(facts=facts, returncode=returncode, signal=sig, timed_out_stage=timed_out, untested=untested,
                           install_failed=install_failed, install_log=tail(job.path / "install.log"), stderr=stderr,
                           duration_s=_seconds(fields.get("RunTime", "0")))

    def cancel(self, jobs: list[JobDir]) -> None:
        if self._array_ids:
            subprocess.run(["scancel", *self._array_ids], capture_output=True, timeout=60)



# Job states in which Slurm, not the probe, ended the job (squeue(1) JOB STATE CODES): no verdict.
ENDED_BY_SLURM = {"NODE_FAIL": "scheduler", "BOOT_FAIL": "scheduler", "PREEMPTED": "scheduler", "DEADLINE": "scheduler",
                  "REVOKED": "scheduler", "CANCELLED": "interrupted"}


def _seconds(run_time: str) -> float:
    """Slurm's [D-]HH:MM:SS -> seconds."""
    days, _, clock = run_time.rpartition("-")
    total = 0
    for part in clock.split(":"):
        total = total * 60 + int(part or 0)
    return total + int(days or 0) * 86400

