"""The HTCondor executor up to the boundary, from HTCondor's own formats (no pool runs here).

- the submit descriptions and the DAG are written with htcondor2 and read back with
  htcondor2.Submit; the GPU match and periodic_remove expressions are evaluated with classad2
  against ads in the formats condor_gpu_discovery and the schedd use;
- job event logs are written in HTCondor's user-log text format (condor_event.cpp's formatBody
  for events 000, 001, 005, 009, 012) and read back through collect with htcondor2.JobEventLog;
- DAGMan's $RETURN reaches collect the way it does on a pool: through the POST script;
- a submit with no schedd is refused by the real bindings; a schedd that answers is played by
  a stand-in for htcondor2.Schedd only, with htcondor2.Submit.from_dag building the real
  DAGMan submit description.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import run_cli, stand_in_framework, write

htcondor2 = pytest.importorskip("htcondor2", reason="the HTCondor bindings are part of the test extra (pip install 'gpucompat[htcondor]')")
classad2 = pytest.importorskip("classad2")

from gpucompat import analysis, envs  # noqa: E402
from gpucompat.executors.base import JobDir, JobSettings  # noqa: E402
from gpucompat.executors.htcondor import DAG_FILE, HTCondorExecutor, dag_return, minimum_runtime  # noqa: E402
from gpucompat.model import Cell, ResolvedStack, Stack, Target, Timeouts  # noqa: E402

A100 = Target("NVIDIA A100-SXM4-80GB", "8.0", declared=True)
TORCH = Stack("torch", "2.7.0", "cu128", "3.9", "uv", ("torch==2.7.0",), "https://download.pytorch.org/whl/cu128")
TORCH_PINS = ResolvedStack(TORCH, True, ("nvidia-cuda-runtime-cu12==12.8.57", "torch==2.7.0+cu128"), "12.8")
RUNTIME = Stack("cuda-runtime", "12.4", "default", "3.11", "uv", ("nvidia-cuda-runtime-cu12==12.4.*",))
RUNTIME_PINS = ResolvedStack(RUNTIME, True, ("nvidia-cuda-runtime-cu12==12.4.127",), "12.4.127")
CURRENT = Stack("torch", "installed", "default", "current", "current")


def executor(wheelhouse=None, offline=False, **requests) -> HTCondorExecutor:
    return HTCondorExecutor(JobSettings(Timeouts(pending=6 * 3600), wheelhouse, offline), **requests)


def submit_file(workdir: Path, cell_id: int):
    return htcondor2.Submit((workdir / f"cell{cell_id}.sub").read_text())


# -- what each node asks for ----------------------------------------------------------------------

def test_submit_descriptions_and_dag_read_back_with_the_bindings(tmp_path):
    cells = [Cell(1, TORCH, A100, TORCH_PINS), Cell(2, CURRENT, A100, ResolvedStack(CURRENT, True))]
    executor(request_memory=16384, request_cpus=4, request_disk=30 * 1024).prepare(cells, tmp_path)
    torch_job, current_job = submit_file(tmp_path, 1), submit_file(tmp_path, 2)
    # the plan's [htcondor] requests, in MiB with HTCondor's unit (a bare request_disk would be KiB)
    assert (torch_job["request_cpus"], torch_job["request_memory"], torch_job["request_disk"]) == ("4", "16384MB", "30720MB")
    assert torch_job["request_gpus"] == "1" and torch_job["require_gpus"] == "Capability == 8.0"
    assert torch_job["gpus_minimum_runtime"] == "12.0"  # a 12.8 runtime needs a CUDA 12 driver, not a 12.8 one
    assert "gpus_minimum_runtime" not in current_job.keys()  # nothing resolved, so nothing known to require
    # a relative executable is relative to condor_submit's directory (DAGMan's), never initialdir
    assert torch_job["executable"] == str(tmp_path / "cell-1" / "run.sh") and Path(torch_job["executable"]).is_file()
    assert torch_job["log"] == str(tmp_path / "cell-1" / "job.log") and torch_job["initialdir"] == str(tmp_path / "cell-1")
    # the sweep's one probe.pyz, transferred into each job's scratch directory (where run.sh runs it as probe.pyz)
    assert torch_job["transfer_input_files"] == f"{tmp_path / 'probe.pyz'}, install.sh, requirements.txt"
    assert current_job["transfer_input_files"] == str(tmp_path / "probe.pyz") and (tmp_path / "probe.pyz").is_file()
    assert not (tmp_path / "cell-1" / "probe.pyz").exists()
    dag = [line.split() for line in (tmp_path / DAG_FILE).read_text().splitlines() if line and not line.startswith("#")]
    assert dag == [["JOB", "cell1:0", "cell1.sub"], ["SCRIPT", "POST", "cell1:0", str(tmp_path / "cell-1" / "post.sh"), "$RETURN"],
                   ["JOB", "cell2:0", "cell2.sub"], ["SCRIPT", "POST", "cell2:0", str(tmp_path / "cell-2" / "post.sh"), "$RETURN"]]


def test_max_running_is_dagmans_max_jobs_submitted_in_the_dags_own_config(tmp_path):
    executor(max_running=3).prepare([Cell(1, RUNTIME, A100, RUNTIME_PINS), Cell(2, TORCH, A100, TORCH_PINS)], tmp_path)
    lines = (tmp_path / DAG_FILE).read_text().splitlines()
    assert "CONFIG dagman.config" in lines and not any(line.startswith(("CATEGORY", "MAXJOBS")) for line in lines)
    assert (tmp_path / "dagman.config").read_text().split() == ["DAGMAN_MAX_JOBS_SUBMITTED", "=", "3"]
    # DAGMan reads its CONFIG file as HTCondor configuration: the knob as the bindings' own parser reads it back
    config = subprocess.run([sys.executable, "-c", "import htcondor2; print(htcondor2.param['DAGMAN_MAX_JOBS_SUBMITTED'])"],
                            env={**os.environ, "CONDOR_CONFIG": str(tmp_path / "dagman.config")}, capture_output=True, text=True)
    assert config.stdout.strip() == "3", config.stderr
    executor().prepare([Cell(1, RUNTIME, A100, RUNTIME_PINS)], tmp_path / "uncapped")
    assert "CONFIG" not in (tmp_path / "uncapped" / DAG_FILE).read_text()  # no cap unless the plan asks


def test_requests_default_where_the_plan_sets_none(tmp_path):
    executor().prepare([Cell(1, RUNTIME, A100, RUNTIME_PINS)], tmp_path)
    job = submit_file(tmp_path, 1)
    assert (job["request_cpus"], job["request_memory"], job["request_disk"]) == ("1", "8192MB", "20480MB")


def gpu_matches(submit, gpu_ad: str) -> bool:
    """The RequireGPUs condor_submit builds from this description, evaluated against one GPU of a
    slot. The clauses and the version encoding are submit_utils.cpp's (SetRequestGpus,
    SetResourceRequirements): gpus_minimum_runtime X.Y -> GPUsMinRuntime X*1000+Y*10, and
    `MaxSupportedVersion >= GPUsMinRuntime` is added unless require_gpus names it already."""
    ad = classad2.ClassAd(gpu_ad)
    clauses = [f"({submit['require_gpus']})"] if "require_gpus" in submit.keys() else []
    if "gpus_minimum_runtime" in submit.keys():
        major, _, minor = submit["gpus_minimum_runtime"].partition(".")
        ad["GPUsMinRuntime"] = int(major) * 1000 + int(minor or 0) * 10
        clauses.append("MaxSupportedVersion >= GPUsMinRuntime")
    return bool(classad2.ExprTree(" && ".join(clauses)).eval(ad))


def test_a_12_4_stack_matches_a_12_2_driver_under_minor_version_compatibility(tmp_path):
    executor().prepare([Cell(1, RUNTIME, A100, RUNTIME_PINS)], tmp_path)
    job = submit_file(tmp_path, 1)
    assert job["gpus_minimum_runtime"] == "12.0"
    # condor_gpu_discovery's nested GPU ads: MaxSupportedVersion is cuDriverGetVersion
    driver_12_2 = '[ Id = "GPU-aa"; Capability = 8.0; DeviceName = "NVIDIA A100-SXM4-40GB"; DriverVersion = 12.2; MaxSupportedVersion = 12020 ]'
    driver_11_8 = '[ Id = "GPU-bb"; Capability = 8.0; DeviceName = "NVIDIA A100-SXM4-40GB"; DriverVersion = 11.8; MaxSupportedVersion = 11080 ]'
    assert gpu_matches(job, driver_12_2)  # runs under minor-version compatibility: the probe says how
    assert not gpu_matches(job, driver_11_8)  # an older major can never run a CUDA 12 runtime
    stricter = htcondor2.Submit({**dict(job.items()), "gpus_minimum_runtime": "12.4"})
    assert not gpu_matches(stricter, driver_12_2)  # what requiring the runtime itself would have excluded
    assert [minimum_runtime(v) for v in ("12.4", "11.8", "13.2", "10.2", None)] == ["12.0", "11.0", "13.0", "10.2", None]


def test_periodic_remove_ends_idle_and_held_jobs_but_not_a_persons_hold(tmp_path):
    executor().prepare([Cell(1, RUNTIME, A100, RUNTIME_PINS)], tmp_path)
    expression = classad2.ExprTree(submit_file(tmp_path, 1)["periodic_remove"])
    now = int(time.time())

    def removed(**attributes) -> bool:
        return bool(expression.eval(classad2.ClassAd({"QDate": now - 60, "EnteredCurrentStatus": now - 60, **attributes})))

    assert removed(JobStatus=1, QDate=now - 7 * 3600)  # idle past the 6 h pending timeout
    assert not removed(JobStatus=1, QDate=now - 5 * 3600)
    assert not removed(JobStatus=2, QDate=now - 7 * 3600)  # running: allowed_execute_duration is its limit
    assert removed(JobStatus=5, HoldReasonCode=13, EnteredCurrentStatus=now - 600)  # held (input transfer) past the grace
    assert not removed(JobStatus=5, HoldReasonCode=13, EnteredCurrentStatus=now - 60)  # within the grace: condor_q -hold shows it
    assert not removed(JobStatus=5, HoldReasonCode=1, EnteredCurrentStatus=now - 86400)  # a person's condor_hold is theirs


# -- the environment a job builds -----------------------------------------------------------------

def test_install_script_is_the_shared_renderer_with_python_index_wheelhouse_and_offline(tmp_path):
    cells = [Cell(1, TORCH, A100, TORCH_PINS)]
    executor(offline=True).prepare(cells, tmp_path / "offline")
    offline = (tmp_path / "offline" / "cell-1" / "install.sh").read_text()
    assert "--python 3.9" in offline  # the stack's Python, not the node's default
    assert "--index https://download.pytorch.org/whl/cu128" in offline and "--offline" in offline
    assert offline == envs.provider("uv").install_script(TORCH_PINS, "env", "requirements.txt", None, True, uv="uv", same_machine=False)
    assert (tmp_path / "offline" / "cell-1" / "requirements.txt").read_text() == "nvidia-cuda-runtime-cu12==12.8.57\ntorch==2.7.0+cu128\n"
    wheelhouse = tmp_path / "wheels"
    executor(wheelhouse=str(wheelhouse)).prepare(cells, tmp_path / "wh")
    cell = tmp_path / "wh" / "cell-1"
    assert f"--no-index --find-links {wheelhouse}" in (cell / "install.sh").read_text() and "--python 3.9" in (cell / "install.sh").read_text()
    # a node that cannot read the wheelhouse at the same path says so, and the cell is untested, not broken
    node = subprocess.run(["bash", "run.sh"], cwd=cell, capture_output=True, text=True, timeout=60)
    assert node.returncode == 0 and (cell / "install.failed").read_text().strip() == "missing-wheelhouse"
    (cell / "post.json").write_text('{"return": 0}')
    outcome = analysis.classify(TORCH_PINS, executor().collect(JobDir(cells[0], cell, cell / "env", "")))
    assert (outcome.code, outcome.cause) == ("UNTESTED", "wheelhouse") and str(wheelhouse) in outcome.summary


def test_a_node_without_uv_is_untested_not_a_failed_install(tmp_path):
    cells = [Cell(1, RUNTIME, A100, RUNTIME_PINS)]
    executor().prepare(cells, tmp_path)
    cell = tmp_path / "cell-1"
    # HTCondor gives a job none of the node's environment: bash falls back on its default PATH
    node = subprocess.run(["/bin/bash", "run.sh"], cwd=cell, capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "HOSTNAME": "gpu7.example.org"})
    assert node.returncode == 0 and (cell / "install.failed").read_text().strip() == "missing-uv"
    (cell / "post.json").write_text('{"return": 0}')
    outcome = analysis.classify(RUNTIME_PINS, executor().collect(JobDir(cells[0], cell, cell / "env", "")))
    assert outcome.code == "UNTESTED" and "uv is not on the PATH of execute node gpu7.example.org" in outcome.summary


def test_a_conda_stack_needs_no_uv_on_the_node(tmp_path):
    stack = Stack("cuda-runtime", "12.6", "cuda-version=12.6", "3.11", "conda", ("cuda-cudart=12.6", "cuda-version=12.6", "python=3.11"),
                  channels=("conda-forge",))
    pins = ResolvedStack(stack, True, ("https://conda.anaconda.org/conda-forge/noarch/cuda-version-12.6-h7480c83_3.conda#0",), "12.6")
    executor().prepare([Cell(1, stack, A100, pins)], tmp_path)
    cell = tmp_path / "cell-1"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write(bin_dir / "micromamba", "#!/bin/sh\necho \"micromamba $*\" >&2; exit 5\n").chmod(0o755)  # a node with micromamba, without uv
    node = subprocess.run(["/bin/bash", "run.sh"], cwd=cell, capture_output=True, text=True, timeout=60,
                          env={"PATH": f"{bin_dir}:/usr/bin:/bin", "HOSTNAME": "gpu7.example.org"})
    assert node.returncode == 0 and (cell / "install.failed").read_text().strip() == "5"
    log = (cell / "install.log").read_text()
    assert log.startswith("micromamba create --yes --prefix env --file requirements.txt") and "uv" not in log


# -- what comes back ------------------------------------------------------------------------------

JOB = "4242.000.000"
SUBMITTED = (f"000 ({JOB}) 2026-11-21 06:00:00 Job submitted from host: <10.0.0.1:9618?addrs=10.0.0.1-9618&alias=ap.example.org&noUDP&sock=schedd_1906_8b3c>\n"
             "    DAG Node: cell1:0\n...\n")
EXECUTING = f"001 ({JOB}) 2026-11-21 06:02:10 Job executing on host: <10.0.0.7:9618?addrs=10.0.0.7-9618&alias=gpu7.example.org&noUDP&sock=startd_1623_1a2f>\n...\n"
RELEASED = f"013 ({JOB}) 2026-11-21 06:03:00 Job was released.\n\tvia condor_release (by user alice)\n...\n"
USAGE = ("\t\tUsr 0 00:00:01, Sys 0 00:00:00  -  Run Remote Usage\n\t\tUsr 0 00:00:00, Sys 0 00:00:00  -  Run Local Usage\n"
         "\t\tUsr 0 00:00:01, Sys 0 00:00:00  -  Total Remote Usage\n\t\tUsr 0 00:00:00, Sys 0 00:00:00  -  Total Local Usage\n"
         "\t23  -  Run Bytes Sent By Job\n\t113  -  Run Bytes Received By Job\n\t23  -  Total Bytes Sent By Job\n\t113  -  Total Bytes Received By Job\n"
         "\tPartitionable Resources :    Usage  Request Allocated\n\t   Cpus                 :                 1         1\n"
         "\t   Disk (KB)            :       36  20971520  20971520\n\t   Gpus (Average)       :                 1         1\n"
         "\t   Memory (MB)          :        1      8192      8192\n...\n")


def held(reason: str, code: int, subcode: int = 0) -> str:
    return f"012 ({JOB}) 2026-11-21 06:02:11 Job was held.\n\t{reason}\n\tCode {code} Subcode {subcode}\n...\n"


def aborted(reason: str) -> str:
    return f"009 ({JOB}) 2026-11-21 06:07:30 Job was aborted.\n\t{reason}\n...\n"


def terminated(return_value: int | None = None, signal: int | None = None) -> str:
    how = f"\t(1) Normal termination (return value {return_value})\n" if signal is None else f"\t(0) Abnormal termination (signal {signal})\n\t(0) No core file\n"
    return f"005 ({JOB}) 2026-11-21 06:02:40 Job terminated.\n{how}{USAGE}"


PERIODIC_REMOVE = "The job attribute PeriodicRemove expression '((JobStatus == 1) && (time() - QDate) > 21600) || ((JobStatus == 5) && HoldReasonCode =!= 1 && HoldReasonCode =!= 16 && (time() - EnteredCurrentStatus) > 300)' evaluated to TRUE"
UNFINISHED = {"probe_version": 2, "framework": "cuda-runtime", "current_stage": "device", "finished": False,
              "stages": {"import": {"ok": True, "facts": {"cuda_runtime": "12.4"}}, "device": {"ok": False, "running": True, "facts": {}}}}


def collected(tmp_path: Path, log: str | None, dag_returned: int, result: dict | None = None):
    """A cell as DAGMan leaves it: its event log, what HTCondor transferred back, and the POST
    script's record of $RETURN, written by the cell's own post.sh. Collected and classified."""
    cell = Cell(1, RUNTIME, A100, RUNTIME_PINS)
    (job,) = executor().prepare([cell], tmp_path)
    if log is not None:
        (job.path / "job.log").write_text(log)
    if result is not None:
        (job.path / "result.json").write_text(json.dumps(result))
    subprocess.run([str(job.path / "post.sh"), str(dag_returned)], check=True)
    done = executor()
    done.attach([cell], tmp_path)
    assert done.poll() == {1: "done"}
    observation = done.collect(job)
    return observation, analysis.classify(RUNTIME_PINS, observation)


def test_event_log_format_reads_back_with_jobeventlog(tmp_path):
    """The texts below are HTCondor's own event format: JobEventLog must see every field."""
    path = tmp_path / "job.log"
    path.write_text(SUBMITTED + EXECUTING + held("Transfer input files failure", 13, 2) + RELEASED + terminated(signal=14) + aborted(PERIODIC_REMOVE))
    log = htcondor2.JobEventLog(str(path))
    events = list(log.events(stop_after=0))
    log.close()
    kinds = htcondor2.JobEventType
    assert [e.type for e in events] == [kinds.SUBMIT, kinds.EXECUTE, kinds.JOB_HELD, kinds.JOB_RELEASED, kinds.JOB_TERMINATED, kinds.JOB_ABORTED]
    assert (events[2]["HoldReason"], events[2]["HoldReasonCode"], events[2]["HoldReasonSubCode"]) == ("Transfer input files failure", 13, 2)
    assert (events[4]["TerminatedNormally"], events[4]["TerminatedBySignal"]) == (False, 14)
    assert events[5]["Reason"] == PERIODIC_REMOVE and all(e.cluster == 4242 for e in events)


def test_a_job_held_by_the_pool_is_untested_with_the_hold_reason(tmp_path):
    reason = ("Transfer input files failure at execution point slot1_1@gpu7.example.org using protocol file. "
              "Details: reading from file /home/alice/runs/sweep-1/cell-1/probe.pyz: (errno 2) No such file or directory")
    observation, outcome = collected(tmp_path, SUBMITTED + EXECUTING + held(reason, 13, 2) + aborted(PERIODIC_REMOVE), -1002)
    assert observation.untested == ("scheduler", f"held: {reason} (HoldReasonCode 13, subcode 2)")
    assert (outcome.code, outcome.stage, outcome.cause) == ("UNTESTED", "schedule", "scheduler")
    assert "Transfer input files failure" in outcome.summary


def test_a_job_held_past_its_allowed_time_is_a_timeout(tmp_path):
    log = SUBMITTED + EXECUTING + held("The job exceeded allowed execute duration of 50:00", 47) + aborted(PERIODIC_REMOVE)
    observation, outcome = collected(tmp_path, log, -1002)
    assert (outcome.code, outcome.stage) == ("TIMEOUT", "import")  # its files stayed in the spool: the stage is not known
    assert "allowed execute duration" in outcome.evidence["stderr_tail"] and "not known" in outcome.evidence["stderr_tail"]


def test_holds_for_resources_say_which_request_to_raise(tmp_path):
    disk = "Error from slot1_1@gpu7.example.org: Job has exceeded allocated disk (20 GB). Consider increasing the value of request_disk."
    _, outcome = collected(tmp_path / "disk", SUBMITTED + EXECUTING + held(disk, 34, 104) + aborted(PERIODIC_REMOVE), -1002)
    assert (outcome.code, outcome.cause) == ("UNTESTED", "disk") and "request_disk" in outcome.summary
    memory = ("Error from slot1_1@gpu7.example.org: Job has gone over cgroup memory limit of 8192 megabytes. Last measured usage: "
              "8313 megabytes.  Consider resubmitting with a higher request_memory.")
    _, outcome = collected(tmp_path / "memory", SUBMITTED + EXECUTING + held(memory, 34, 102) + aborted(PERIODIC_REMOVE), -1002)
    assert (outcome.code, outcome.cause) == ("UNTESTED", "scheduler") and "raise request_memory" in outcome.summary


def test_a_persons_hold_and_removal_is_interrupted(tmp_path):
    log = SUBMITTED + held("via condor_hold (by user alice)", 1) + aborted("via condor_rm (by user alice)")
    _, outcome = collected(tmp_path, log, -1002)
    assert (outcome.code, outcome.cause) == ("UNTESTED", "interrupted")


def test_a_job_removed_while_idle_is_not_scheduled_with_the_reason(tmp_path):
    _, outcome = collected(tmp_path, SUBMITTED + aborted(PERIODIC_REMOVE), -1002)
    assert (outcome.code, outcome.cause, outcome.stage) == ("UNTESTED", "not-scheduled", "schedule") and "PeriodicRemove" in outcome.summary


EVICTED = (f"004 ({JOB}) 2026-11-21 06:03:00 Job was evicted.\n\t(0) Job was not checkpointed.\n"
           "\t\tUsr 0 00:00:00, Sys 0 00:00:00  -  Run Remote Usage\n\t\tUsr 0 00:00:00, Sys 0 00:00:00  -  Run Local Usage\n"
           "\t0  -  Run Bytes Sent By Job\n\t0  -  Run Bytes Received By Job\n...\n")


def test_a_job_that_started_and_was_then_removed_is_untested_not_no_match(tmp_path):
    _, evicted = collected(tmp_path / "evicted", SUBMITTED + EXECUTING + EVICTED + aborted(PERIODIC_REMOVE), -1002)
    assert (evicted.code, evicted.cause) == ("UNTESTED", "scheduler") and "removed after it had started" in evicted.summary
    # a hold that a person released is over: the removal that followed is what ended the job
    _, released = collected(tmp_path / "released", SUBMITTED + EXECUTING + held("Transfer input files failure", 13, 2) + RELEASED
                            + aborted(PERIODIC_REMOVE), -1002)
    assert (released.code, released.cause) == ("UNTESTED", "scheduler") and "removed after it had started" in released.summary
    assert "held:" not in released.summary


def test_a_released_job_that_then_finished_is_judged_by_what_it_reported(tmp_path):
    log = SUBMITTED + EXECUTING + held("Transfer input files failure", 13, 2) + RELEASED + EXECUTING + terminated(signal=14)
    observation, outcome = collected(tmp_path, log, -14, UNFINISHED)
    assert (observation.signal, observation.returncode) == (14, None)
    assert (outcome.code, outcome.stage) == ("TIMEOUT", "device")


def test_dagman_negative_return_is_a_signal_so_the_probes_sigalrm_is_a_timeout(tmp_path):
    """No event log to read (DAGMan's own record only): -14 from the POST script's file is SIGALRM."""
    observation, outcome = collected(tmp_path, None, -14, UNFINISHED)
    assert (observation.returncode, observation.signal) == (None, 14)
    assert (outcome.code, outcome.stage) == ("TIMEOUT", "device") and outcome.evidence["signal"] == "SIGALRM"
    _, crashed = collected(tmp_path / "segv", None, -11, UNFINISHED)
    assert crashed.code == "CRASHED" and "SIGSEGV" in crashed.summary
    assert dag_return(3) == (3, None, None) and dag_return(-9) == (None, 9, None)
    assert dag_return(-1001)[2].startswith("DAGMan could not submit") and dag_return(None) == (None, None, None)


def test_a_normal_termination_is_the_exit_code(tmp_path):
    observation, outcome = collected(tmp_path, SUBMITTED + EXECUTING + terminated(return_value=3), 3, UNFINISHED)
    assert (observation.returncode, observation.signal) == (3, None) and outcome.code == "CRASHED" and "exited 3" in outcome.summary


# -- submitting -----------------------------------------------------------------------------------

PLAN = """
name = "pool"
executor = "htcondor"
[htcondor]
request_memory = "12G"
request_cpus = 2
request_disk = "40G"
[timeouts]
import = "2s"
pending = "6h"
[[targets]]
name = "NVIDIA A100-SXM4-80GB"
cc = "8.0"
[[targets]]
name = "NVIDIA GeForce GTX 1080"
cc = "6.1"
[[targets]]
name = "NVIDIA H100 80GB HBM3"
cc = "9.0"
[[stacks]]
framework = "torch"
env = "current"
"""


def test_a_submit_with_no_schedd_is_one_sentence_and_the_sweep_is_not_submitted(isolated, monkeypatch):
    stand_in_framework(isolated, monkeypatch, "torch")  # the submit side finds a torch, so its cells are submitted
    plan = write(isolated / "plan.toml", PLAN)
    proc = run_cli("sweep", str(plan), check=2)  # the real bindings, and no HTCondor here
    errors = [line for line in proc.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and errors[0].startswith("error: HTCondor did not take the DAG (") and "Traceback" not in proc.stderr
    workdir = next((isolated / "gpucompat-runs").glob("sweep-*"))
    assert f"`cd {workdir} && condor_submit_dag sweep.dag`" in errors[0] and "gpucompat sweep --resume 1" in errors[0]
    listed = json.loads(run_cli("results", "--list", "--json", check=0).stdout)
    assert listed[-1]["status"] != "submitted" and listed[-1]["done"] == 0
    assert not (workdir / "sweep.dag.condor.sub").exists()  # condor_submit_dag by hand would refuse to overwrite it
    again = run_cli("sweep", "--resume", "1", check=2)  # --resume tries the submit again
    assert "HTCondor did not take the DAG" in again.stderr
    assert json.loads(run_cli("results", "--list", "--json", check=0).stdout)[-1]["status"] != "submitted"


class FakeSchedd:
    """Stands in for htcondor2.Schedd only: refuses the first submit as a schedd can, takes the next."""

    taken: list = []
    refuse = True

    def submit(self, description):
        if FakeSchedd.refuse:
            FakeSchedd.refuse = False
            raise htcondor2.HTCondorException("Failed to connect to schedd ap.example.org")
        FakeSchedd.taken.append(description)

        class Result:
            def cluster(self):
                return 4321
        return Result()


def cli(*args):
    from typer.testing import CliRunner

    from gpucompat.cli import app

    return CliRunner().invoke(app, list(args))


def test_a_dag_submitted_through_the_bindings_then_collected(isolated, monkeypatch):
    fake_bin = isolated / "bin"
    fake_bin.mkdir()
    write(fake_bin / "condor_dagman", "#!/bin/sh\nexit 0\n").chmod(0o755)  # from_dag looks it up on PATH
    monkeypatch.setenv("PATH", f"{fake_bin}:{os.environ['PATH']}")
    monkeypatch.setattr(htcondor2, "Schedd", FakeSchedd)
    monkeypatch.setattr(FakeSchedd, "taken", [])
    monkeypatch.setattr(FakeSchedd, "refuse", True)
    stand_in_framework(isolated, monkeypatch, "torch")  # the submit side finds a torch, so its cells are submitted
    plan = write(isolated / "plan.toml", PLAN)
    refused = cli("sweep", str(plan))
    assert refused.exit_code == 2 and "Failed to connect to schedd ap.example.org" in refused.output
    assert json.loads(cli("results", "--list", "--json").stdout)[-1]["status"] != "submitted"
    taken = cli("sweep", "--resume", "1")  # the schedd answers now: the same cells, submitted
    assert taken.exit_code == 0, taken.output
    assert "DAGMan job 4321" in taken.output
    assert json.loads(cli("results", "--list", "--json").stdout)[-1]["status"] == "submitted"
    (dagman,) = FakeSchedd.taken
    workdir = next((isolated / "gpucompat-runs").glob("sweep-*"))
    assert dagman["universe"] == "scheduler" and f"-Dag {workdir / DAG_FILE}" in dagman["arguments"] and "-UseDagDir" in dagman["arguments"]
    cells = {json.loads((d / "job.json").read_text())["target"]["name"]: d for d in workdir.glob("cell-*")}
    sub = htcondor2.Submit((workdir / f"{cells['NVIDIA A100-SXM4-80GB'].name.replace('-', '')}.sub").read_text())
    assert (sub["request_cpus"], sub["request_memory"], sub["request_disk"]) == ("2", "12288MB", "40960MB")

    # the execute node: the A100 cell's own run.sh, its framework import hanging, ended by the probe's SIGALRM
    fakes = isolated / "fakes" / "torch"
    fakes.mkdir(parents=True)
    (fakes / "__init__.py").write_text("import time\ntime.sleep(300)\n")
    a100 = cells["NVIDIA A100-SXM4-80GB"]
    (a100 / "probe.pyz").write_bytes((workdir / "probe.pyz").read_bytes())  # transfer_input_files: the sweep's one probe
    node = subprocess.run(["bash", "run.sh"], cwd=a100, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(fakes.parent), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"})
    assert node.returncode == -14  # as HTCondor records it: "(0) Abnormal termination (signal 14)"; DAGMan's $RETURN is -14
    subprocess.run([str(a100 / "post.sh"), str(node.returncode)], check=True)
    # the GTX 1080's job was held by the pool and removed after the grace; the H100's never matched
    gtx, h100 = cells["NVIDIA GeForce GTX 1080"], cells["NVIDIA H100 80GB HBM3"]
    (gtx / "job.log").write_text(SUBMITTED + EXECUTING + held("Error from slot1_1@gpu7.example.org: Failed to execute "
                                                                "'/var/lib/condor/execute/dir_1/run.sh': (errno=13: 'Permission denied')", 6, 13)
                                 + aborted(PERIODIC_REMOVE))
    (h100 / "job.log").write_text(SUBMITTED + aborted(PERIODIC_REMOVE))
    for cell in (gtx, h100):
        subprocess.run([str(cell / "post.sh"), "-1002"], check=True)

    monkeypatch.setattr(htcondor2, "Schedd", None)  # --resume of a submitted sweep only collects
    collected = cli("sweep", "--resume", "1")
    assert collected.exit_code == 4, collected.output  # a cell could not be tested
    rows = json.loads(cli("results", "--json", "--cells").stdout)
    codes = {r["gpu"]: (r["code"], r["stage"]) for r in rows["invalid"] + rows.get("untested", []) + rows["valid"]}
    assert codes["NVIDIA A100-SXM4-80GB"] == ("TIMEOUT", "import")  # the probe's own stage timeout, not CRASHED
    assert codes["NVIDIA GeForce GTX 1080"] == ("UNTESTED", "schedule")
    assert codes["NVIDIA H100 80GB HBM3"] == ("UNTESTED", "schedule")  # removed while idle: it never started (not-scheduled)
    assert json.loads(cli("results", "--list", "--json").stdout)[-1]["status"] == "done"
