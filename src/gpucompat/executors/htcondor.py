"""`htcondor`: a DAG with one node per cell, written with the official bindings (htcondor2).

Each node's submit description asks for one GPU (`request_gpus`, `require_gpus` on the
class's capability and name, `gpus_minimum_runtime` for the stack's CUDA runtime), moves
the job's files with HTCondor's file transfer, and removes a job idle past the plan's
pending timeout (`periodic_remove`). A POST script records each node's return code. The
DAG runs unattended (the seed's point: nothing stays running on the access point);
`gpucompat sweep --resume ID` collects the cells whose results have come back. Resolution
stays on the submit side, before the DAG is written, so no PRE script is needed.

Submits through the bindings when a schedd answers; otherwise it prints the exact
condor_submit_dag command. No live pool was run in this project's tests (see the docs).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from ..errors import UserError
from ..model import Cell, Observation, Target, Timeouts
from .base import DONE, WAITING, JobDir, JobSettings, new_job_dir, stage_timeout_arg, tail
from .quoting import classad_string, condor_path, shell_comment, shell_word

DAG_FILE = "sweep.dag"


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


def job_script(cell: Cell, stage_timeouts: str, install_timeout: float) -> str:
    """run.sh for the execute node: everything relative to the job's scratch directory."""
    lines = ["#!/bin/bash", shell_comment(f"gpucompat cell {cell.id}: {cell.stack.key} on {cell.target.key}"),
             "touch result.json stdout.log stderr.log install.log install.failed  # every output file exists, or the job is held"]
    python = "python3"
    if cell.stack.env == "uv":
        lines += ["unset PYTHONPATH",
                  f"timeout {math.ceil(install_timeout)} bash install.sh > install.log 2>&1",
                  'status=$?; if [ "$status" -ne 0 ]; then echo "$status" > install.failed; exit 0; fi']
        python = "./env/bin/python"
    lines.append(f"exec {python} probe.py --framework {shell_word(cell.stack.framework)} --result result.json "
                 f"--stage-timeouts {stage_timeouts} > stdout.log 2> stderr.log")
    return "\n".join(lines) + "\n"


def node_outcome(job_log: str) -> str | None:
    """Why a node never ran, from its HTCondor job log: removed while idle -> NO_MATCH text."""
    if "Job was aborted" in job_log and "Job executing on host" not in job_log:
        reason = next((line.strip() for line in job_log.splitlines() if "PeriodicRemove" in line or "removed" in line.lower()), "")
        return f"removed while idle, no slot matched in time ({reason or 'job aborted'})"
    return None


class HTCondorExecutor:
    name = "htcondor"
    detached = True  # DAGMan runs on; results are collected by --resume

    def __init__(self, settings: JobSettings, request_memory: int | None = None, request_cpus: int | None = None,
                 request_disk: int | None = None):
        self.timeouts = settings.timeouts
        self.wheelhouse = settings.wheelhouse
        self.offline = settings.offline
        self.requests = {"request_memory": request_memory, "request_cpus": request_cpus, "request_disk": request_disk}  # MiB, cores
        self.submitted: str | None = None  # cluster id, or the command to run by hand

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
        stage_timeouts = stage_timeout_arg(self.timeouts)
        dag = htcondor2.dags.DAG()
        jobs = []
        for cell in cells:
            path = new_job_dir(cell, workdir)
            commands = cell.stack.env == "uv"  # a built environment is made on the execute node
            if commands:
                # on the execute node: uv from its PATH, the environment in the job's scratch directory
                (path / "install.sh").write_text("set -e\nuv venv --quiet env\nuv pip install --python env/bin/python --no-deps -r requirements.txt\n")
                (path / "requirements.txt").write_text("\n".join(cell.resolved.pins) + "\n")
            (path / "run.sh").write_text(job_script(cell, stage_timeouts, self.timeouts.install))
            inputs = ["probe.py"] + (["install.sh", "requirements.txt"] if commands else [])
            description = {
                "universe": "vanilla",
                "executable": "run.sh",
                "initialdir": condor_path(path),
                "log": "job.log",
                "output": "condor.out",
                "error": "condor.err",
                "request_gpus": "1",
                "request_cpus": "1",
                "request_memory": "8GB",
                "request_disk": "20GB",
                "should_transfer_files": "YES",
                "when_to_transfer_output": "ON_EXIT_OR_EVICT",
                "transfer_input_files": ", ".join(inputs),
                "transfer_output_files": "result.json, stdout.log, stderr.log, install.log, install.failed",
                "periodic_remove": f"(JobStatus == 1) && (time() - QDate) > {math.ceil(self.timeouts.pending)}",
                "max_retries": "0",
                "allowed_execute_duration": str(math.ceil(self.timeouts.cell + self.timeouts.install)),
                "My.GpucompatCell": str(cell.id),
            }
            requirement = gpu_requirement(cell.target)
            if requirement:
                description["require_gpus"] = requirement
            if cell.target.cc:
                description["gpus_minimum_capability"] = cell.target.cc
            if cell.resolved.cuda_runtime:
                description["gpus_minimum_runtime"] = cell.resolved.cuda_runtime
            dag.layer(name=f"cell{cell.id}", submit_description=htcondor2.Submit(description),
                      post=htcondor2.dags.Script(executable=condor_path(path / "post.sh"), arguments=["$RETURN"]))
            (path / "post.sh").write_text(f"#!/bin/sh\necho \"{{\\\"return\\\": $1}}\" > {shell_word(path / 'post.json')}\nexit 0\n")
            (path / "post.sh").chmod(0o755)
            (path / "run.sh").chmod(0o755)
            jobs.append(JobDir(cell, path, path / "env", "./env/bin/python" if commands else "python3"))
        htcondor2.dags.write_dag(dag, workdir, dag_file_name=DAG_FILE)
        self._jobs = jobs
        return jobs

    def submit(self, jobs: list[JobDir]) -> None:
        if not jobs:
            return
        htcondor2 = _bindings()
        dag_file = jobs[0].path.parent / DAG_FILE
        try:
            schedd = htcondor2.Schedd()
            result = schedd.submit(htcondor2.Submit.from_dag(str(dag_file), {"force": 1}))
            self.submitted = str(result.cluster())
        except Exception:  # noqa: BLE001 - no schedd here: the user submits by hand
            self.submitted = f"cd {shell_word(dag_file.parent)} && condor_submit_dag {DAG_FILE}"

    def attach(self, cells: list[Cell], workdir: Path) -> list[JobDir]:
        """The job directories of a DAG already submitted, to collect what came back."""
        self._jobs = [JobDir(cell, workdir / f"cell-{cell.id}", workdir / f"cell-{cell.id}" / "env", "") for cell in cells]
        return self._jobs

    def poll(self) -> dict[int, str]:
        return {job.id: DONE if (job.path / "post.json").exists() else WAITING for job in getattr(self, "_jobs", [])}

    def collect(self, job: JobDir) -> Observation:
        try:
            facts = json.loads((job.path / "result.json").read_text())
        except (OSError, ValueError):
            facts = {}
        removed = node_outcome(tail(job.path / "job.log", 20000))
        if removed and not facts:
            return Observation(facts={}, no_match=removed)
        code = json.loads((job.path / "post.json").read_text()).get("return")
        failed = (job.path / "install.failed").read_text().strip() if (job.path / "install.failed").exists() else ""
        return Observation(facts=facts, returncode=code, signal=code - 128 if isinstance(code, int) and code > 128 else None,
                           install_failed=bool(failed), install_log=tail(job.path / "install.log"), stderr=tail(job.path / "stderr.log"),
                           timed_out_stage="install" if failed == "124" else None)

    def cancel(self, jobs: list[JobDir]) -> None:
        pass  # a detached DAG is the pool's to run; condor_rm the DAGMan job to stop it

