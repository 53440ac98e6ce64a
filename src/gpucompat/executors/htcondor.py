"""`htcondor`: a DAG with one node per cell, written with the official bindings (htcondor2).

Each node's submit description asks for one GPU (`request_gpus`, `require_gpus` on the
class's capability and name, `gpus_minimum_runtime` for what the stack's CUDA runtime needs
of the driver), the plan's `request_cpus`/`request_memory`/`request_disk`, moves the job's
files with HTCondor's file transfer, and ends a job that stays idle past the plan's pending
timeout or stays held past a short grace (`periodic_remove`). A POST script records DAGMan's
`$RETURN` for each node. The DAG runs unattended (the seed's point: nothing stays running on
the access point); `gpucompat sweep --resume ID` collects the cells whose POST script has run,
reading each job's event log with htcondor2.JobEventLog. Resolution stays on the submit side,
before the DAG is written, so no PRE script is needed.

Submits through the bindings; a submit that fails is one sentence (with the exact
condor_submit_dag command) and leaves the sweep unsubmitted. No live pool was run in this
project's tests (see docs/executors.md).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

from .. import envs
from ..errors import UserError
from ..knowledge.tables import compat_floor, minor_series, version
from ..model import PROBE_STAGES, Cell, Observation, Target
from ..quoting import classad_string, condor_path, shell_comment, shell_word
from .base import DONE, WAITING, JobDir, JobSettings, new_job_dir, probe_arguments, probe_command, sweep_probe, tail

DAG_FILE = "sweep.dag"
SUBMIT_FAILED = "submit-failed.txt"  # written when the bindings could not submit; see prepare()
HOLD_GRACE_S = 300  # a held job is removed after this long, so it cannot stall the DAG
# Hold codes periodic_remove leaves alone: 1, a person's condor_hold (theirs to release or
# remove); 16, input still spooling (not a failure).
KEPT_HOLDS = (1, 16)
DEFAULT_REQUESTS = {"request_cpus": 1, "request_memory": 8192, "request_disk": 20480}  # cores, MiB, MiB
# What run.sh writes into install.failed when the node lacks what the job needs before any
# install starts -> the UNTESTED cause (a key of model.UNTESTED_CAUSES; none names a missing
# tool on a node, so "scheduler", the pool's side, stands for it).
NODE_LACKS = {"missing-uv": "scheduler", "missing-wheelhouse": "wheelhouse"}


def _bindings():
    try:
        import htcondor2
        import htcondor2.dags
    except ImportError:
        raise UserError("the HTCondor executor needs the official bindings: pip install 'gpucompat[htcondor]'.") from None
    return htcondor2


def gpu_requirement(target: Target) -> str | None:
    """The require_gpus expression for a class (ClassAd syntax, values quoted). The device name
    is required only for discovered classes, whose names are the pool's own; a declared name
    ("NVIDIA A100") may be a family, so there the capability alone selects."""
    parts = []
    if target.cc:
        parts.append(f"Capability == {float(target.cc):.1f}")
    if not target.declared and target.name:
        parts.append(f"DeviceName == {classad_string(target.name)}")
    return " && ".join(parts) or None


def minimum_runtime(cuda_runtime: str | None) -> str | None:
    """gpus_minimum_runtime for a stack's CUDA runtime: what the driver must support, no more.

    condor_submit turns `gpus_minimum_runtime = X.Y` into GPUsMinRuntime = X*1000 + Y*10 and adds
    `MaxSupportedVersion >= GPUsMinRuntime` to require_gpus (submit_utils.cpp SetRequestGpus /
    SetResourceRequirements); condor_gpu_discovery advertises each GPU's MaxSupportedVersion as
    the driver's cuDriverGetVersion (12020 for a CUDA 12.2 driver). Requiring the runtime's own
    12.4 would therefore exclude a 12.2 driver that runs it under CUDA minor-version
    compatibility. From CUDA 11 on, a runtime runs on any driver of its major at or above the
    branch floor (NVIDIA's minor-version compatibility; the floors are knowledge/data/
    cuda_drivers.csv's compat_driver_min), so X.0 is all a match may require; the driver's own
    version is the probe's to judge. CUDA 10 and older have no such compatibility: X.Y."""
    parsed = version(minor_series(cuda_runtime)) if cuda_runtime else None
    if parsed is None:
        return None
    major = parsed.release[0]
    minor = parsed.release[1] if len(parsed.release) > 1 else 0
    return f"{major}.0" if major >= 11 or compat_floor(major) else f"{major}.{minor}"


def job_script(cell: Cell, probe_args: str, install_timeout: float, builds: bool, wheelhouse: str | None) -> str:
    """run.sh for the execute node: everything relative to the job's scratch directory.

    HTCondor gives a job none of the node's environment (getenv is off), so `uv` is looked up on
    bash's default PATH or the PATH the pool sets for jobs (STARTER_JOB_ENVIRONMENT). A node that
    lacks uv, or cannot read the wheelhouse, is said so in install.failed: the stack was not
    tested there, which is not the stack's failure."""
    lines = ["#!/bin/bash", shell_comment(f"gpucompat cell {cell.id}: {cell.stack.key} on {cell.target.key}"),
             "touch result.json stdout.log stderr.log install.log install.failed  # every output file exists, or the job is held"]
    python = "python3"
    if builds:
        if cell.stack.env != "container":  # a container's pull step leaves the image as it is: no environment here
            lines.append("unset PYTHONPATH  # a built environment is tested as built")
            python = "./env/bin/python"
        if cell.stack.env == "uv":  # conda's install.sh finds its own installer, a container's its runtime: only uv needs uv here
            lines += [
                "if ! command -v uv > /dev/null 2>&1; then",
                "  printf 'uv is not on the PATH of execute node %s (PATH=%s)\\n' \"${HOSTNAME:-?}\" \"$PATH\" > install.log",
                "  echo missing-uv > install.failed; exit 0",
                "fi",
            ]
            if wheelhouse:
                lines += [
                    f"if [ ! -r {shell_word(wheelhouse)} ]; then",
                    f"  printf 'the wheelhouse %s is not readable on execute node %s: it must be on a filesystem the nodes share, "
                    f"at the same path\\n' {shell_word(wheelhouse)} \"${{HOSTNAME:-?}}\" > install.log",
                    "  echo missing-wheelhouse > install.failed; exit 0",
                    "fi",
                ]
            lines.append("uv --version > install.log 2>&1  # which uv built the environment, for the evidence")
        lines += [f"timeout {math.ceil(install_timeout)} bash install.sh {'>>' if cell.stack.env == 'uv' else '>'} install.log 2>&1",
                  'status=$?; if [ "$status" -ne 0 ]; then echo "$status" > install.failed; exit 0; fi']
    return "\n".join(lines) + "\n" + probe_command(cell, python, "env", probe_args, redirect="> stdout.log 2> stderr.log")


def request_values(requests: dict) -> dict[str, str]:
    """request_cpus/memory/disk for a submit description, the plan's where set. Memory and disk
    are whole MiB and written with HTCondor's unit `MB` (MiB): a bare request_disk is KiB."""
    merged = {key: requests.get(key) or default for key, default in DEFAULT_REQUESTS.items()}
    return {"request_cpus": str(merged["request_cpus"]), "request_memory": f"{merged['request_memory']}MB",
            "request_disk": f"{merged['request_disk']}MB"}


def removal_expression(pending_s: float) -> str:
    """periodic_remove: idle past the pending timeout (QDate is when the job was queued), or held
    longer than HOLD_GRACE_S (EnteredCurrentStatus is when it was held) for any reason but a
    person's condor_hold or input still spooling. Held jobs are removed, not released
    (periodic_release): a rerun on the same pool would mix two runs' evidence, and a cell that
    could not be tested is retried on purpose by `gpucompat sweep --resume`."""
    kept = " && ".join(f"HoldReasonCode =!= {code}" for code in KEPT_HOLDS)
    return (f"((JobStatus == 1) && (time() - QDate) > {math.ceil(pending_s)}) || "
            f"((JobStatus == 5) && {kept} && (time() - EnteredCurrentStatus) > {HOLD_GRACE_S})")


# -- what came back ---------------------------------------------------------------------------

def dag_return(value: object) -> tuple[int | None, int | None, str | None]:
    """DAGMan's $RETURN -> (exit code, signal, DAGMan's own failure). From condor_dagman/dag.h and
    the DAGMan manual: 0..255 is the job's exit code; -1..-64 means killed by that signal (a job
    ended by SIGALRM reports -14); -1000 and below are DAGMan's own: -1001 the node's submit failed,
    -1002 the job was removed, -1003 DAGMan could not read the job's log, -1004 skipped."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None, None, None
    if value >= 0:
        return value, None, None
    if value >= -64:
        return None, -value, None
    meaning = {-1001: "DAGMan could not submit the node's job", -1002: "the job was removed from the queue",
               -1003: "DAGMan could not read the job's event log", -1004: "DAGMan skipped the node"}
    return None, None, f"{meaning.get(value, 'DAGMan failed the node')} (DAGMan $RETURN {value})"


@dataclass
class JobHistory:
    """A node job's own account, from its event log."""

    executed: bool = False  # an Execute event: the job started on some node
    held: tuple[str, int, int] | None = None  # the hold in force (HoldReason, HoldReasonCode, HoldReasonSubCode)
    aborted: str | None = None  # the JobAborted event's Reason ('' when it gave none)
    terminated: tuple[int | None, int | None] | None = None  # (return value, signal) of JobTerminated


def job_history(path: Path) -> JobHistory:
    """Read a job event log (HTCondor's user log) with htcondor2.JobEventLog."""
    history = JobHistory()
    if not path.exists():
        return history
    htcondor2 = _bindings()
    kinds = htcondor2.JobEventType
    try:
        log = htcondor2.JobEventLog(str(path))
    except Exception:  # noqa: BLE001 - an unreadable log is no account; the caller falls back on $RETURN
        return history
    try:
        for event in log.events(stop_after=0):
            if event.type == kinds.EXECUTE:
                history.executed = True
            elif event.type == kinds.JOB_HELD:
                history.held = (str(event.get("HoldReason") or "no reason given"), int(event.get("HoldReasonCode") or 0),
                                int(event.get("HoldReasonSubCode") or 0))
            elif event.type == kinds.JOB_RELEASED:
                history.held = None
            elif event.type == kinds.JOB_ABORTED:
                history.aborted = str(event.get("Reason") or "")
            elif event.type == kinds.JOB_TERMINATED:
                history.held = None
                if event.get("TerminatedNormally"):
                    history.terminated = (int(event.get("ReturnValue")), None)
                else:
                    history.terminated = (None, int(event.get("TerminatedBySignal")))
    except Exception:  # noqa: BLE001 - a truncated log: what was read so far stands
        pass
    finally:
        log.close()
    return history


def held_observation(reason: str, code: int, subcode: int, facts: dict) -> Observation:
    """A job that ended held. HTCondor's hold reason codes ("Hold Reason Codes" in the manual,
    docs/codes-other-values/hold-table.rst) say whose doing the hold was:
      46 JobDurationExceeded, 47 JobExecuteExceeded: the job itself ran past its allowed time
         (allowed_job_duration / allowed_execute_duration) -> TIMEOUT. A held job's output goes
         to the schedd's spool, not back to the cell (when_to_transfer_output ON_EXIT_OR_EVICT),
         so the stage comes from a result only when one came back; otherwise the probe's first
         stage, as analysis does for a probe that never named one;
      1 UserRequest: a person's condor_hold -> UNTESTED (interrupted);
      34 JobOutOfResources: the job outgrew what was requested, subcode 104 disk -> UNTESTED
         (disk), 102 memory -> UNTESTED (the request, not the stack, was too small);
      everything else -- 6 the starter could not start the job, 12/13 output/input transfer,
      14 initial directory, 21 the startd's WANT_HOLD, 22 the event log, 26/27 the system
      periodic hold, 32/33 transfer size limits, 35 container image, 45 the singularity test,
      ... -- is the pool's, not the stack's -> UNTESTED (scheduler) with the hold reason."""
    what = f"held: {reason} (HoldReasonCode {code}, subcode {subcode})"
    if code in (46, 47):
        current = facts.get("current_stage")
        stage = current if current in PROBE_STAGES else "import"
        note = "" if current in PROBE_STAGES else "; a held job's files stay in the schedd's spool, so the stage that was running is not known"
        return Observation(facts=facts, timed_out_stage=stage, stderr=f"[htcondor] {what}{note}")
    if code == 1:
        return Observation(facts={}, untested=("interrupted", what))
    if code == 34 and subcode == 104:
        return Observation(facts={}, untested=("disk", f"{what}; raise request_disk in the plan's [htcondor] table"))
    if code == 34 and subcode == 102:
        return Observation(facts={}, untested=("scheduler", f"{what}; raise request_memory in the plan's [htcondor] table"))
    return Observation(facts={}, untested=("scheduler", what))


def unfinished_observation(history: JobHistory, facts: dict, dagman: str | None) -> Observation | None:
    """A job with no JobTerminated event: held, removed, or lost to DAGMan; None if none of these."""
    if history.held:
        return held_observation(*history.held, facts)
    if history.aborted is not None:
        by_policy = "PeriodicRemove" in history.aborted  # the Reason text HTCondor's UserPolicy writes
        if by_policy and not history.executed:
            return Observation(facts={}, no_match=f"removed while idle: no slot matched within the pending timeout ({history.aborted})")
        when = "after it had started" if history.executed else "before it started"
        return Observation(facts={}, untested=("scheduler" if by_policy else "interrupted", f"removed {when}: {history.aborted or 'no reason given'}"))
    if dagman:
        return Observation(facts={}, untested=("scheduler", dagman))
    return None


def _json(path: Path) -> dict:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


class HTCondorExecutor:
    name = "htcondor"
    detached = True  # DAGMan runs on; results are collected by --resume

    def __init__(self, settings: JobSettings, request_memory: int | None = None, request_cpus: int | None = None,
                 request_disk: int | None = None, max_running: int | None = None):
        self.timeouts = settings.timeouts
        self.wheelhouse = settings.wheelhouse
        self.offline = settings.offline
        self.bench = settings.bench
        self.requests = {"request_memory": request_memory, "request_cpus": request_cpus, "request_disk": request_disk}  # MiB, cores, MiB
        self.max_running = max_running  # [htcondor] max_running: DAGMan submits at most this many node jobs at once
        self.submitted: str | None = None  # what was submitted, in words
        self._jobs: list[JobDir] = []
        self._by_hand: Path | None = None  # the directory of a DAG the user submitted by hand

    def precheck(self, cells: list[Cell]) -> dict[int, str | None]:
        """Count the slots whose GPUs match each class; with no collector to ask, defer to the pool."""
        try:
            htcondor2 = _bindings()
            collector = htcondor2.Collector()
        except Exception:  # noqa: BLE001 - no bindings, no configuration, no pool: nothing to check here
            return {cell.id: None for cell in cells}
        verdicts, answers = {}, {}
        for cell in cells:
            if cell.target not in answers:
                from ..discover.htcondor import CONSTRAINT, classes_from_ads

                try:
                    ads = collector.query(htcondor2.AdType.Startd, constraint=CONSTRAINT)
                except Exception:  # noqa: BLE001 - the pool did not answer: let the scheduler decide
                    answers[cell.target] = None
                    continue
                found = [t for t in classes_from_ads(ads) if not cell.target.cc or t.cc == cell.target.cc]
                answers[cell.target] = None if found else f"no slot in the pool has a GPU with {gpu_requirement(cell.target)}"
            verdicts[cell.id] = answers[cell.target]
        return verdicts

    def prepare(self, cells: list[Cell], workdir: Path) -> list[JobDir]:
        htcondor2 = _bindings()
        condor_path(workdir)  # every path below lies under it
        workdir.mkdir(parents=True, exist_ok=True)
        if _submitted_by_hand(workdir):  # after a failed submit the user ran condor_submit_dag on these files
            self._by_hand = workdir
            return self.attach(cells, workdir)
        (workdir / SUBMIT_FAILED).unlink(missing_ok=True)
        requests = request_values(self.requests)
        # [htcondor] max_running as DAGMan's DAGMAN_MAX_JOBS_SUBMITTED (what condor_submit_dag -maxjobs sets), in the
        # DAG's own CONFIG file, so a DAG submitted by hand keeps it. Not a MAXJOBS category: htcondor2.dags writes
        # max_jobs_by_category as "CATEGORY name N", a line DAGMan reads as putting a node "name" in category N.
        dag = htcondor2.dags.DAG(dagman_config={"DAGMAN_MAX_JOBS_SUBMITTED": self.max_running} if self.max_running else None)
        jobs = []
        # one probe.pyz for the sweep: HTCondor transfers it from there into each job's scratch directory
        probe = condor_path(sweep_probe(workdir)) if cells else ""
        for cell in cells:
            path = new_job_dir(cell, workdir)
            provider = envs.provider(cell.stack.env)
            # the one install renderer: on the execute node, uv from its PATH, the environment in the job's scratch directory
            script = provider.install_script(cell.resolved, "env", "requirements.txt", self.wheelhouse, self.offline,
                                             uv="uv", same_machine=False)
            if script:
                (path / "install.sh").write_text(script)
                (path / "requirements.txt").write_text(provider.requirements_text(cell.resolved))
            probe_args = probe_arguments(cell.stack.framework, self.timeouts, self.bench)
            (path / "run.sh").write_text(job_script(cell, probe_args, self.timeouts.install, bool(script), self.wheelhouse))
            inputs = [probe] + (["install.sh", "requirements.txt"] if script else [])
            description = {
                "universe": "vanilla",
                "executable": condor_path(path / "run.sh"),  # a relative executable is relative to condor_submit's directory, not initialdir
                "initialdir": condor_path(path),
                "log": condor_path(path / "job.log"),
                "output": "condor.out",
                "error": "condor.err",
                "request_gpus": "1",
                **requests,
                "should_transfer_files": "YES",
                "when_to_transfer_output": "ON_EXIT_OR_EVICT",
                "transfer_input_files": ", ".join(inputs),
                "transfer_output_files": "result.json, stdout.log, stderr.log, install.log, install.failed",
                "periodic_remove": removal_expression(self.timeouts.pending),
                "max_retries": "0",
                "allowed_execute_duration": str(math.ceil(self.timeouts.cell + self.timeouts.install)),
                "My.GpucompatCell": str(cell.id),
            }
            requirement = gpu_requirement(cell.target)
            if requirement:
                description["require_gpus"] = requirement
            if cell.target.cc:
                description["gpus_minimum_capability"] = cell.target.cc
            runtime = minimum_runtime(cell.resolved.cuda_runtime)
            if runtime:
                description["gpus_minimum_runtime"] = runtime
            dag.layer(name=f"cell{cell.id}", submit_description=htcondor2.Submit(description),
                      post=htcondor2.dags.Script(executable=condor_path(path / "post.sh"), arguments=["$RETURN"]))
            (path / "post.sh").write_text(f"#!/bin/sh\necho \"{{\\\"return\\\": $1}}\" > {shell_word(path / 'post.json')}\nexit 0\n")
            (path / "post.sh").chmod(0o755)
            (path / "run.sh").chmod(0o755)
            jobs.append(JobDir(cell, path, path / "env", "./env/bin/python" if script else "python3"))
        htcondor2.dags.write_dag(dag, workdir, dag_file_name=DAG_FILE)
        self._jobs = jobs
        return jobs

    def submit(self, jobs: list[JobDir]) -> None:
        if not jobs:
            return
        workdir = jobs[0].path.parent
        if self._by_hand:
            (workdir / SUBMIT_FAILED).unlink(missing_ok=True)  # adopted once: a later --resume writes a new DAG
            self.submitted = f"the DAG submitted by hand in {workdir}"
            return
        htcondor2 = _bindings()
        by_hand = f"cd {shell_word(workdir)} && condor_submit_dag {DAG_FILE}"
        try:
            schedd = htcondor2.Schedd()  # the access point's own schedd; where there is none this fails at once
            # UseDagDir: DAGMan runs in the DAG's directory, where the node submit files are, wherever gpucompat runs
            result = schedd.submit(htcondor2.Submit.from_dag(str(workdir / DAG_FILE), {"force": 1, "UseDagDir": True}))
        except Exception as exc:  # noqa: BLE001 - whatever the bindings raise, nothing was submitted
            why = " ".join(str(exc).split())[:300] or type(exc).__name__
            (workdir / f"{DAG_FILE}.condor.sub").unlink(missing_ok=True)  # from_dag's file: condor_submit_dag by hand would refuse to overwrite it
            (workdir / SUBMIT_FAILED).write_text(f"{why}\n{by_hand}\n")
            match = re.fullmatch(r"sweep-([0-9]+)", workdir.name)
            resume = f"gpucompat sweep --resume {match.group(1) if match else 'ID'}"
            raise UserError(f"HTCondor did not take the DAG ({why}), so nothing was submitted and the sweep is not marked "
                            f"submitted: run `{resume}` where a schedd answers (an access point), or submit the same files "
                            f"by hand with `{by_hand}` and then `{resume}` collects them.") from None
        self.submitted = f"DAGMan job {result.cluster()} ({workdir / DAG_FILE})"

    def attach(self, cells: list[Cell], workdir: Path) -> list[JobDir]:
        """The job directories of a DAG already submitted, to collect what came back."""
        self._jobs = [JobDir(cell, workdir / f"cell-{cell.id}", workdir / f"cell-{cell.id}" / "env", "") for cell in cells]
        return self._jobs

    def poll(self) -> dict[int, str]:
        return {job.id: DONE if (job.path / "post.json").exists() else WAITING for job in self._jobs}

    def collect(self, job: JobDir) -> Observation:
        facts = _json(job.path / "result.json")
        returncode, signal, dagman = dag_return(_json(job.path / "post.json").get("return"))
        history = job_history(job.path / "job.log")
        if history.terminated is None:
            ended = unfinished_observation(history, facts, dagman)
            if ended:
                return ended
        else:  # the event log is the job's own account; $RETURN says the same, when DAGMan read it
            returncode, signal = history.terminated
        failed = (job.path / "install.failed").read_text().strip() if (job.path / "install.failed").exists() else ""
        if failed in NODE_LACKS:
            what = tail(job.path / "install.log", 1000).strip() or failed
            return Observation(facts={}, untested=(NODE_LACKS[failed], what))
        if signal is None and returncode is not None and returncode > 128:
            signal = returncode - 128  # a shell between HTCondor and the probe (a pool's job wrapper) reports 128+N
        return Observation(facts=facts, returncode=returncode, signal=signal, install_failed=bool(failed),
                           install_log=tail(job.path / "install.log"), stderr=tail(job.path / "stderr.log"),
                           timed_out_stage="install" if failed == "124" else None)

    def cancel(self, jobs: list[JobDir]) -> None:
        pass  # a detached DAG is the pool's to run; condor_rm the DAGMan job to stop it


def _submitted_by_hand(workdir: Path) -> bool:
    """True when a submit failed here and condor_submit_dag has since written its own
    sweep.dag.condor.sub for these files: the user submitted them by hand, so they are not
    rewritten (that would delete the cells DAGMan is running) but collected."""
    marker, made = workdir / SUBMIT_FAILED, workdir / f"{DAG_FILE}.condor.sub"
    return marker.exists() and made.exists() and made.stat().st_mtime >= marker.stat().st_mtime
