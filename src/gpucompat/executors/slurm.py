"""`slurm`: one job array per GPU class, through sbatch/squeue/sacct/scontrol/scancel.

The precheck is `sbatch --test-only` with the class's GRES type and features, so a cell
no node can ever run is NO_MATCH in seconds, with Slurm's own message (the ancestor
waited 24 hours). A queued cell is judged by squeue's reason, as ReFrame's backend does:
a reason that needs an administrator (the partition down, the nodes it asked for down or
drained, a QOS or association limit, bad constraints) cancels it as NO_MATCH with that
reason and the node states; waiting for `Resources` or `Priority` goes on up to the plan's
pending timeout and then ends as UNTESTED ("still queued"), never NO_MATCH. One squeue call
per poll covers the whole sweep; a finished array costs one sacct call (where accounting
answers) or one scontrol call. A command that fails keeps the last known state and is
retried; one that keeps failing for the pending timeout makes the cells UNTESTED, never
done. Every task's id is written into its cell's directory, so `--resume` adopts jobs
still queued or finished instead of submitting a cell twice. Inside the job, run.sh builds
the environment (once per environment, under flock; the lock held shared while the probe uses it,
so `gpucompat envs prune` leaves it alone) and runs the probe with its own stage
timeouts (SIGALRM), since no parent process watches a batch job; `--time` bounds the cell.
The submit host and the nodes are assumed to share the work and cache directories.
"""

from __future__ import annotations

import json
import math
import subprocess
import time
from dataclasses import replace
from pathlib import Path

from .. import envs
from ..envs.uv import uv_bin
from ..errors import UserError
from ..model import BenchSpec, Cell, Observation, Target
from ..paths import cache_dir
from ..quoting import sbatch_directive, shell_comment, shell_word, slurm_name
from .base import (DONE, READY_MARKER, RUNNING, SHARED_PROBE, WAITING, JobDir, JobSettings, new_job_dir, probe_arguments, probe_command,
                   sweep_probe, tail)

# Job states in which a task is still Slurm's (squeue(1) JOB STATE CODES); any other state, or
# none, means it ended. Requeued and held tasks come back to PENDING.
ACTIVE = {"PENDING": WAITING, "REQUEUED": WAITING, "REQUEUE_HOLD": WAITING, "REQUEUE_FED": WAITING, "RESV_DEL_HOLD": WAITING,
          "SPECIAL_EXIT": WAITING, "CONFIGURING": RUNNING, "RUNNING": RUNNING, "COMPLETING": RUNNING, "SUSPENDED": RUNNING,
          "STOPPED": RUNNING, "RESIZING": RUNNING, "SIGNALING": RUNNING, "STAGE_OUT": RUNNING}
# Pending reasons that wait for an administrator, not for the queue (ReFrame's _cancel_reasons,
# reframe/core/schedulers/slurm.py, plus association limits and bad constraints; squeue(1) JOB
# REASON CODES). ReqNodeNotAvail counts only when the nodes it names are down or drained.
BLOCKED = ("BadConstraints", "FrontEndDown", "Licenses", "NodeDown", "PartitionDown", "PartitionInactive",
           "PartitionNodeLimit", "QOSJobLimit", "QOSResourceLimit", "QOSUsageThreshold", "InvalidQOS", "InvalidAccount")
BLOCKED_PREFIXES = ("AssocGrp", "AssocMax")
# Pending reasons of the sweep's own making: its max_running cap, and GPU arrays waiting for the build array (afterok)
OWN_WAITS = ("JobArrayTaskLimit", "Dependency")
BUILD_DIR = "build"  # [slurm] build_first: the work directory's folder of environment builds, one per environment
TASK_FILE = "slurm.task"  # the array task that runs a cell, as "jobid_index"
# squeue's answer when every job asked for has left the queue and Slurm forgot it: not a failure
FORGOTTEN = "Invalid job id specified"


def request_args(target: Target, bench: BenchSpec | None = None) -> list[str]:
    """sbatch options that ask for one GPU of this class, or max(scale) where the bench trains over
    several (scale = [1, 2, 4]); across nodes (nodes = [1, 2]), max(nodes) nodes with that many GPUs
    each and one task per GPU, the shape the probe's srun step asks for inside the allocation."""
    nodes = max(bench.nodes, default=1) if bench else 1
    gpus = max(bench.scale, default=1) if bench else 1
    args = [f"--gres=gpu:{target.gres}:{gpus}" if target.gres else f"--gres=gpu:{gpus}"]
    if nodes > 1:
        args += [f"--nodes={nodes}", f"--ntasks-per-node={gpus}"]
    if target.features:
        args.append("--constraint=" + "&".join(target.features))
    return args


def cell_request(cell: Cell, bench: BenchSpec | None) -> tuple[str, ...]:
    """A cell's sbatch request: torch and JAX train over several GPUs (the probe's scale_figures,
    jax_scale_figures), only torch across nodes; the other cells keep one GPU on one node."""
    framework = cell.stack.framework
    if bench and framework == "jax":
        bench = replace(bench, nodes=())
    return tuple(request_args(cell.target, bench if framework in ("torch", "jax") else None))


# What collect() reads of a task's final record; a whole `scontrol show job` record is ~70 fields, kept
# for every cell until the sweep ends it was most of the ~12 KiB a cell held (benchmarks/slurm_scale.py).
FINAL_FIELDS = ("JobState", "ExitCode", "RunTime", "Reason")


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
                 extra_sbatch: tuple[str, ...] = (), max_running: int | None = None, build_first: bool = False,
                 env_root: Path | None = None, poll_s: float = 1.0):
        self.timeouts = settings.timeouts
        self.wheelhouse = settings.wheelhouse
        self.offline = settings.offline
        self.bench = settings.bench
        self._requests: dict[int, tuple[str, ...]] = {}  # cell -> one GPU, where the bench's request is more than the cluster has
        # the plan's [slurm] table: what this site needs on every job (values checked by plan.py)
        self.site_args = [f"--{flag}={value}" for flag, value in (
            ("partition", partition), ("account", account), ("qos", qos), ("reservation", reservation),
            ("mem", f"{mem}M" if mem else None), ("cpus-per-task", cpus_per_task)) if value] + list(extra_sbatch)
        self.env_root = env_root or cache_dir() / "envs"
        self.max_running = max_running  # [slurm] max_running: --array=0-N%max_running, array tasks of one array at once
        self.build_first = build_first  # [slurm] build_first: a CPU array builds the environments, the GPU arrays wait (afterok)
        self._build: tuple[Path, set[int]] | None = None  # the build array prepare() wrote, with the cells that wait on it
        self._build_tasks: list[Path] = []  # its tasks' folders, one per environment
        self.poll_s = poll_s
        self._task_of: dict[int, str] = {}  # cell id -> "jobid_index"
        self._arrays: list[tuple[Path, list[int]]] = []  # the array scripts prepare() wrote, with their cells
        self._submitted_at: dict[int, float] = {}
        self._ended: dict[int, Observation] = {}  # cells Slurm did not run to the end: NO_MATCH or UNTESTED
        self._final: dict[str, dict[str, str]] = {}  # task -> its last record (scontrol fields, or sacct's)
        self._states: dict[int, str] = {}
        self._last_poll = 0.0
        self._failing_since: float | None = None
        self._sacct: bool | None = None  # does accounting answer? asked once
        self._error = ""  # what the last failed squeue said

    # -- helpers ---------------------------------------------------------------------------

    def _common_args(self) -> list[str]:
        return [f"--time={self.time_limit_minutes()}", *self.site_args]

    def time_limit_minutes(self) -> int:
        return max(1, math.ceil((self.timeouts.install + self.timeouts.cell) / 60))

    @staticmethod
    def _run(command: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess:
        """A Slurm command; one that does not answer in time is a failed call (retried by the next poll)."""
        try:
            return subprocess.run(command, capture_output=True, encoding="utf-8", errors="replace", timeout=60, cwd=cwd)
        except FileNotFoundError:
            raise UserError(f"{command[0]} is not on PATH: run this on a Slurm submit host.") from None
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess(command, 124, "", f"{command[0]} did not answer within 60 s")

    # -- Executor protocol ---------------------------------------------------------------

    def precheck(self, cells: list[Cell]) -> dict[int, str | None]:
        verdicts: dict[int, str | None] = {}
        answers: dict[tuple[str, ...], str | None] = {}

        def answer(request: tuple[str, ...]) -> str | None:
            if request not in answers:
                proc = self._run(["sbatch", "--test-only", *request, *self._common_args(), "--wrap", "true"])
                answers[request] = None if proc.returncode == 0 else (
                    f"sbatch --test-only {' '.join(request)}: {(proc.stderr or proc.stdout).strip()[-400:]}")
            return answers[request]

        for cell in cells:
            request, single = cell_request(cell, self.bench), tuple(request_args(cell.target))
            verdicts[cell.id] = answer(request)
            if verdicts[cell.id] and request != single and answer(single) is None:
                # the bench's GPUs or nodes are more than the cluster has: the stack is still tested on one GPU,
                # and the probe records the scaling points it cannot run as "N GPUs asked, M visible"
                self._requests[cell.id] = single
                verdicts[cell.id] = None
        return verdicts

    def _request(self, cell: Cell) -> tuple[str, ...]:
        """What a cell asks Slurm for: its bench's shape, or one GPU where precheck found that shape too big."""
        return self._requests.get(cell.id) or cell_request(cell, self.bench)

    def adoptable(self, cells: list[Cell], workdir: Path) -> dict[int, str]:
        """Cells an earlier gpucompat submitted whose task Slurm still holds, or that left a finished
        result: cell id -> task. Resuming after a kill adopts them instead of submitting them twice."""
        recorded = {}
        for cell in cells:
            try:
                recorded[cell.id] = (workdir / f"cell-{cell.id}" / TASK_FILE).read_text().strip()
            except OSError:
                continue
        if not recorded:
            return {}
        queued = self._queue(sorted({task.split("_")[0] for task in recorded.values()}))
        if queued is None:  # cannot tell: submitting again could run a cell twice
            raise UserError("squeue does not answer, so gpucompat cannot tell which of this sweep's jobs are still queued; "
                            "retry --resume when Slurm answers.")
        adopted = {}
        for cell_id, task in recorded.items():
            result = workdir / f"cell-{cell_id}" / "result.json"
            if task in queued or _finished(result):
                adopted[cell_id] = task
        return adopted

    def prepare(self, cells: list[Cell], workdir: Path) -> list[JobDir]:
        workdir.mkdir(parents=True, exist_ok=True)
        if cells:
            sweep_probe(workdir)  # one probe.pyz for the sweep (on the filesystem the nodes share), which every run.sh points at
        jobs, groups = [], {}
        self._arrays, self._build = [], None
        builds: dict[Path, tuple[Cell, str]] = {}  # build_first: environment -> the first cell that needs it built, its install.sh
        adopted = self.adoptable(cells, workdir)
        for cell in cells:
            provider = envs.provider(cell.stack.env)
            env_dir = self.env_root / cell.resolved.env_key
            interpreter = provider.interpreter(cell.resolved, env_dir)
            if cell.id in adopted:  # keep its directory: the job that is (or was) running writes there
                self._task_of[cell.id] = adopted[cell.id]
                self._submitted_at[cell.id] = time.monotonic()
                jobs.append(JobDir(cell, workdir / f"cell-{cell.id}", env_dir, interpreter))
                continue
            path = new_job_dir(cell, workdir, interpreter=interpreter)
            # the submit host and the nodes share the cache directory: uv and the environments are found there
            script = provider.install_script(cell.resolved, str(env_dir), "requirements.txt", self.wheelhouse, self.offline,
                                             uv=uv_bin(), same_machine=False)
            lines = ["#!/bin/bash", shell_comment(f"gpucompat cell {cell.id}: {cell.stack.key} on {cell.target.key}"),
                     f"cd {shell_word(path)} || exit 70",
                     f'echo "${{SLURM_ARRAY_JOB_ID}}_${{SLURM_ARRAY_TASK_ID}}" > {TASK_FILE}  # also written by gpucompat at submit']
            if cell.stack.env != "current":
                lines.append("unset PYTHONPATH  # a built environment is tested as built")
            if script:
                (path / "install.sh").write_text(script)
                (path / "requirements.txt").write_text(provider.requirements_text(cell.resolved))
                ready, lock = shell_word(env_dir / READY_MARKER), shell_word(str(env_dir) + ".lock")
                lines.append(f"mkdir -p {shell_word(env_dir.parent)}")
                if self.build_first and cell.stack.env != "container" and not (env_dir / READY_MARKER).exists():
                    # the build array ran first (afterok): a failed build is this cell's failed install, not tried again on a GPU
                    builds.setdefault(env_dir, (cell, script))
                    built = workdir / BUILD_DIR / env_dir.name
                    lines.append(f"if [ ! -e {ready} ] && [ -e {shell_word(built / 'install.failed')} ]; then "
                                 f"cp {shell_word(built / 'install.log')} install.log; cp {shell_word(built / 'install.failed')} install.failed; exit 0; fi")
                if cell.stack.env == "container":
                    # podman and docker keep images in each node's own store: a marker in the shared env_root
                    # would make the other nodes skip the pull. install.sh is idempotent (inspect || pull).
                    lines += [
                        f"( flock 9; timeout {math.ceil(self.timeouts.install)} sh install.sh ) 9> {lock} > install.log 2>&1",
                        'status=$?; if [ "$status" -ne 0 ]; then echo "$status" > install.failed; exit 0; fi',
                    ]
                else:
                    # fd 8 holds the lock shared from the install to the probe's end (exec keeps it open), so
                    # `gpucompat envs prune` skips the environment; pruned between install and use: built again
                    lines += [
                        f"exec 8>> {lock}",
                        "for attempt in 1 2 3; do",
                        f"  if [ ! -e {ready} ]; then",
                        f"    ( flock 9; [ -e {ready} ] || {{ timeout {math.ceil(self.timeouts.install)} sh install.sh && date > {ready}; }} ) "
                        f"9> {lock} > install.log 2>&1",
                        "    status=$?",
                        '    if [ "$status" -ne 0 ]; then echo "$status" > install.failed; exit 0; fi',
                        "  fi",
                        f"  flock -s 8; [ -e {ready} ] && break; flock -u 8",
                        "done",
                    ]
            # a container stack's runtime is chosen on the node, from what its PATH has
            probe = probe_command(cell, interpreter, str(env_dir), probe_arguments(cell.stack.framework, self.timeouts, self.bench),
                                  redirect="> stdout.log 2> stderr.log", probe=SHARED_PROBE)
            (path / "run.sh").write_text("\n".join(lines) + "\n" + probe)
            job = JobDir(cell, path, env_dir, interpreter)
            jobs.append(job)
            groups.setdefault((cell.target, self._request(cell)), []).append(job)
        for number, ((target, request), members) in enumerate(groups.items()):
            script = workdir / f"array-{number}.sh"
            # --output is relative to the directory sbatch runs in (the work directory): no path in a directive
            directives = [*request, *self._common_args(), f"--job-name={slurm_name(f'gpucompat-{workdir.name}')}-{number}",
                          f"--array={self.array_range(len(members))}", "--output=slurm-%A_%a.out"]
            cells_list = " ".join(shell_word(job.path / "run.sh") for job in members)
            script.write_text("#!/bin/bash\n" + "".join(f"#SBATCH {sbatch_directive(d)}\n" for d in directives)
                              + shell_comment(target.key) + f"\ncells=({cells_list})\nexec bash \"${{cells[$SLURM_ARRAY_TASK_ID]}}\"\n")
            self._arrays.append((script, [job.id for job in members]))
        if builds:
            self._build = (self._write_builds(builds, workdir), {job.id for job in jobs if job.env_dir in builds})
        return jobs

    def array_range(self, tasks: int) -> str:
        """sbatch's --array value for `tasks` tasks: 0-23, or 0-23%N where [slurm] max_running caps how many run at once."""
        return f"0-{tasks - 1}" + (f"%{self.max_running}" if self.max_running else "")

    def _write_builds(self, builds: dict[Path, tuple[Cell, str]], workdir: Path) -> Path:
        """[slurm] build_first: build.sh, a CPU array (no GPU asked) with one task per environment to build, each in
        build/<environment>/ with its install.sh, under the same lock and ready marker the cells' run.sh use. A task
        always exits 0: a failed install is written down (install.failed, install.log) for the cells to report, so
        the GPU arrays' afterok dependency holds them only until the builds end."""
        folders = []
        for env_dir, (cell, script) in builds.items():
            folder = workdir / BUILD_DIR / env_dir.name
            folder.mkdir(parents=True, exist_ok=True)
            for stale in ("install.failed", "install.log"):  # a resumed sweep builds again what is still not built
                (folder / stale).unlink(missing_ok=True)
            (folder / "install.sh").write_text(script)
            (folder / "requirements.txt").write_text(envs.provider(cell.stack.env).requirements_text(cell.resolved))
            ready, lock = shell_word(env_dir / READY_MARKER), shell_word(str(env_dir) + ".lock")
            (folder / "build.sh").write_text("\n".join([
                "#!/bin/bash", shell_comment(f"gpucompat environment {env_dir.name}: {cell.stack.key}"),
                f"cd {shell_word(folder)} || exit 70",
                "unset PYTHONPATH  # built as the cells test it",
                f"mkdir -p {shell_word(env_dir.parent)}",
                f"( flock 9; [ -e {ready} ] || {{ timeout {math.ceil(self.timeouts.install)} sh install.sh && date > {ready}; }} ) "
                f"9> {lock} > install.log 2>&1",
                'status=$?; if [ "$status" -ne 0 ]; then echo "$status" > install.failed; fi',
                "exit 0", ""]))
            folders.append(folder)
        self._build_tasks = folders
        script = workdir / "build.sh"
        directives = [f"--time={max(1, math.ceil(self.timeouts.install / 60) + 1)}", *self.site_args,
                      f"--job-name={slurm_name(f'gpucompat-{workdir.name}')}-build", f"--array=0-{len(folders) - 1}",
                      "--output=slurm-build-%A_%a.out"]
        listed = " ".join(shell_word(folder / "build.sh") for folder in folders)
        script.write_text("#!/bin/bash\n" + "".join(f"#SBATCH {sbatch_directive(d)}\n" for d in directives)
                          + "# builds each environment once, on a CPU, before the GPU arrays start\n"
                          + f"builds=({listed})\nexec bash \"${{builds[$SLURM_ARRAY_TASK_ID]}}\"\n")
        return script

    def environments_to_build(self) -> int:
        """[slurm] build_first: the tasks of the build array prepare() wrote (0 where every environment was built)."""
        return len(self._build_tasks) if self._build else 0

    def _waits_for_build(self, members) -> bool:
        """Whether a GPU array holds a cell whose environment the build array makes ([slurm] build_first)."""
        return self._build is not None and bool(set(members) & self._build[1])

    def submit_commands(self) -> list[list[str]]:
        """The sbatch commands submit() runs, in order, for what prepare() wrote (a dry run says them):
        the build array first where there is one, then each GPU array, after it where it waits for it."""
        commands = [["sbatch", "--parsable", self._build[0].name]] if self._build else []
        for script, members in self._arrays:
            waits = self._waits_for_build(members)
            commands.append(["sbatch", "--parsable", *(["--dependency=afterok:BUILD"] if waits else []), script.name])
        return commands

    def submit(self, jobs: list[JobDir]) -> None:
        """sbatch the arrays prepare() wrote for exactly these jobs (adopted cells are already Slurm's)."""
        wanted = {job.id for job in jobs}
        by_id = {job.id: job for job in jobs}
        build_id, build_refused = None, ""
        if self._build and self._build[1] & wanted:
            proc = self._run(["sbatch", "--parsable", self._build[0].name], cwd=self._build[0].parent)
            if proc.returncode == 0:
                build_id = proc.stdout.strip().split(";")[0]
            else:
                build_refused = f"sbatch refused the job that builds the environments first: {proc.stderr.strip()[-400:]}"
        for script, members in self._arrays:
            if not set(members) <= wanted:
                continue
            waits = self._waits_for_build(members)
            if waits and build_refused:
                for cell_id in members:
                    self._ended[cell_id] = Observation(facts={}, untested=("scheduler", build_refused))
                continue
            after = [f"--dependency=afterok:{build_id}"] if waits and build_id else []
            proc = self._run(["sbatch", "--parsable", *after, script.name], cwd=script.parent)
            if proc.returncode != 0:
                for cell_id in members:
                    self._ended[cell_id] = Observation(facts={}, untested=("scheduler", f"sbatch refused the job: {proc.stderr.strip()[-400:]}"))
                continue
            array_id = proc.stdout.strip().split(";")[0]
            if self._sacct is None:  # does accounting answer? asked once, before polling: then it is the one state call
                self._sacct = self._run(["sacct", "--parsable2", "--noheader", "--jobs", array_id, "--format", "JobID"]).returncode == 0
            for index, cell_id in enumerate(members):
                task = f"{array_id}_{index}"
                self._task_of[cell_id] = task
                self._submitted_at[cell_id] = time.monotonic()
                (by_id[cell_id].path / TASK_FILE).write_text(task + "\n")

    # -- state -----------------------------------------------------------------------------

    def _queue(self, array_ids: list[str]) -> dict[str, tuple[str, str]] | None:
        """task -> (state, reason) of what is still queued, in one squeue call; None if squeue failed."""
        if not array_ids:
            return {}
        proc = self._run(["squeue", "--noheader", "--array", "--jobs", ",".join(array_ids), "--format", "%i|%T|%r"])
        if proc.returncode != 0 and FORGOTTEN not in proc.stderr:
            self._error = (proc.stderr or proc.stdout).strip()[-300:] or f"exit {proc.returncode}"
            return None
        queued = {}
        for line in proc.stdout.splitlines():
            parts = line.strip().split("|")
            if len(parts) == 3:
                queued[parts[0]] = (parts[1], parts[2])
        return queued

    def _accounting(self, array_ids: list[str]) -> dict[str, dict[str, str]] | None:
        """task -> sacct's record (JobState, ExitCode, RunTime, Reason) of every task of these arrays, in one
        call; None if sacct failed. Tasks not started yet come as one line, 1234_[5-9], and are expanded."""
        proc = self._run(["sacct", "--parsable2", "--noheader", "--jobs", ",".join(array_ids),
                          "--format", "JobID,State,ExitCode,Elapsed,Reason"])
        if proc.returncode != 0:
            return None
        records = {}
        for line in proc.stdout.splitlines():
            parts = line.split("|")
            if len(parts) != 5 or "." in parts[0]:  # the job, not its steps (1234_0.batch)
                continue
            record = {"JobState": parts[1].split()[0], "ExitCode": parts[2], "RunTime": parts[3], "Reason": parts[4]}
            for task in _tasks(parts[0]):
                records[task] = record
        return records

    def _state_now(self, array_ids: list[str]) -> tuple[dict[str, tuple[str, str]], bool] | None:
        """(task -> (state, reason), whether tasks missing from it have ended), in one call: sacct where
        accounting answers (it also keeps each task's final record), else squeue (which lists only what
        is still queued). None if the call failed."""
        if self._sacct:
            records = self._accounting(array_ids)
            if records is not None:
                self._final.update(records)
                return {task: (r["JobState"], r["Reason"]) for task, r in records.items()}, False  # missing: not recorded yet
        queued = self._queue(array_ids)
        return None if queued is None else (queued, True)

    def _forget(self, tasks: list[str]) -> None:
        """The final record of tasks that left squeue's list: one scontrol call per array. (Where accounting
        answers, sacct's records are kept as they are polled and this is not needed.)"""
        wanted = set(tasks)
        for array_id in sorted({task.split("_")[0] for task in tasks}):
            proc = self._run(["scontrol", "show", "job", "-o", array_id])  # every task of the array, one line each
            for line in proc.stdout.splitlines() if proc.returncode == 0 else []:
                fields = job_fields(line)
                task = f"{fields.get('ArrayJobId', fields.get('JobId'))}_{fields.get('ArrayTaskId', '')}"
                if task in wanted:  # the others are still running: their record is not final
                    self._final[task] = {key: fields[key] for key in FINAL_FIELDS if key in fields}
        for task in tasks:
            self._final.setdefault(task, {})  # {}: Slurm forgot it (MinJobAge); result.json says what happened

    def poll(self) -> dict[int, str]:
        if time.monotonic() - self._last_poll < self.poll_s:
            return dict(self._states)
        self._last_poll = time.monotonic()
        for cell_id in self._ended:
            self._states[cell_id] = DONE
        live = {cell_id: task for cell_id, task in self._task_of.items() if self._states.get(cell_id) != DONE}
        if not live:
            return dict(self._states)
        answer = self._state_now(sorted({task.split("_")[0] for task in live.values()}))
        if answer is None:
            self._scheduler_silent(live)
            return dict(self._states)
        self._failing_since = None
        states, missing_ended = answer
        left = []
        for cell_id, task in live.items():
            state, reason = states.get(task, ("", ""))
            if state == "PENDING":
                self._judge_pending(cell_id, task, reason)
            if cell_id in self._ended:
                self._states[cell_id] = DONE
            elif state in ACTIVE or (not state and not missing_ended):
                self._states[cell_id] = ACTIVE.get(state, self._states.get(cell_id, WAITING))
            else:
                left.append(cell_id)
        if left:
            if not self._sacct:
                self._forget([self._task_of[cell_id] for cell_id in left])
            for cell_id in left:
                self._states[cell_id] = DONE
        return dict(self._states)

    def _judge_pending(self, cell_id: int, task: str, reason: str) -> None:
        """A pending task: cancelled as NO_MATCH when only an administrator can unblock it, as UNTESTED
        when it waited for the queue longer than the plan allows; else it waits on."""
        code = reason.split(",")[0].strip().strip("()")
        blocked = code in BLOCKED or code.startswith(BLOCKED_PREFIXES)
        if code == "ReqNodeNotAvail":
            blocked = self._nodes_down(reason)
        if code in OWN_WAITS:  # held by the sweep itself (max_running, the build array): the queue's wait starts after
            self._submitted_at[cell_id] = time.monotonic()
            return
        waited = time.monotonic() - self._submitted_at.get(cell_id, time.monotonic())
        if code == "DependencyNeverSatisfied":  # the build array ended without success (its node failed, its time ran out)
            self._ended[cell_id] = Observation(facts={}, untested=(
                "scheduler", f"the job that builds its environment first did not end well (squeue reason: {reason})"))
        elif blocked:
            nodes = self._node_states()
            self._ended[cell_id] = Observation(facts={}, no_match=f"cancelled while pending: squeue reason {reason}"
                                               + (f"; nodes: {nodes}" if nodes else ""))
        elif waited > self.timeouts.pending:
            self._ended[cell_id] = Observation(facts={}, untested=(
                "scheduler", f"still queued after {waited:.0f} s (squeue reason: {reason}); the plan's pending timeout is "
                             f"{self.timeouts.pending:.0f} s"))
        else:
            return
        self._run(["scancel", task])

    def _node_states(self) -> str:
        proc = self._run(["sinfo", "--noheader", "--Node", "--format", "%N %T %E"])
        lines = sorted({" ".join(line.split()) for line in proc.stdout.splitlines()}) if proc.returncode == 0 else []
        return "; ".join(lines)[:400]

    def _nodes_down(self, reason: str) -> bool:
        """ReqNodeNotAvail blocks for good only when the nodes it names are down, drained or not responding."""
        names = reason.partition("UnavailableNodes:")[2].strip().strip(")")
        if not names:
            return False
        proc = self._run(["sinfo", "--noheader", "--Node", "--nodes", names, "--format", "%T"])
        return any(state.strip("*~#!%$@^-").upper().startswith(("DOWN", "DRAIN", "FAIL", "MAINT", "NOT_RESPONDING"))
                   for state in proc.stdout.split())

    def _scheduler_silent(self, live: dict[int, str]) -> None:
        """squeue failed: keep the last known states; past the pending timeout, the cells become UNTESTED
        (their jobs may still run: they are cancelled, where scancel answers)."""
        now = time.monotonic()
        self._failing_since = self._failing_since or now
        if now - self._failing_since <= self.timeouts.pending:
            return
        for cell_id, task in live.items():
            self._ended[cell_id] = Observation(facts={}, untested=(
                "scheduler", f"squeue failed for {now - self._failing_since:.0f} s: {self._error}"))
            self._states[cell_id] = DONE
        self._run(["scancel", *sorted({task.split("_")[0] for task in live.values()})])

    def collect(self, job: JobDir) -> Observation:
        if job.id in self._ended:
            return self._ended[job.id]
        task = self._task_of.get(job.id, "")
        fields = self._final.get(task, {})
        state = fields.get("JobState", "")
        returncode, sig = exit_status(fields.get("ExitCode", ""))
        try:
            facts = json.loads((job.path / "result.json").read_text())
        except (OSError, ValueError):
            facts = {}
        install_failed = (job.path / "install.failed").exists()
        if not fields and not facts and not install_failed:
            return Observation(facts={}, untested=("scheduler", f"Slurm no longer knows job {task} and it left no result"))
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
        arrays = sorted({self._task_of[job.id].split("_")[0] for job in jobs if job.id in self._task_of})
        if arrays:
            subprocess.run(["scancel", *arrays], capture_output=True, timeout=60)



# Job states in which Slurm, not the probe, ended the job (squeue(1) JOB STATE CODES): no verdict.
ENDED_BY_SLURM = {"NODE_FAIL": "scheduler", "BOOT_FAIL": "scheduler", "PREEMPTED": "scheduler", "DEADLINE": "scheduler",
                  "REVOKED": "scheduler", "CANCELLED": "interrupted"}


def _tasks(job_id: str) -> list[str]:
    """sacct's JobID -> the array tasks it stands for: 1234_5 -> [1234_5]; 1234_[0-2,7%4] -> 1234_0..2, 1234_7."""
    array, _, rest = job_id.partition("_")
    if not rest.startswith("["):
        return [job_id]
    tasks = []
    for part in rest.strip("[]").split("%")[0].split(","):
        low, _, high = part.partition("-")
        if low.isdigit() and (not high or high.isdigit()):
            tasks += [f"{array}_{i}" for i in range(int(low), int(high or low) + 1)]
    return tasks


def _finished(result: Path) -> bool:
    try:
        return bool(json.loads(result.read_text()).get("finished"))
    except (OSError, ValueError, AttributeError):
        return False


def _seconds(run_time: str) -> float:
    """Slurm's [D-]HH:MM:SS -> seconds."""
    days, _, clock = run_time.rpartition("-")
    total = 0
    for part in clock.split(":"):
        total = total * 60 + (int(part) if part.isdigit() else 0)
    return total + int(days or 0) * 86400

