"""The Slurm executor under a real site's conditions, on the live one-node cluster of test_slurm.py,
with faults injected: squeue and sacct that fail, a GPU class kept busy, a partition taken down
mid-sweep, a requeued cell, and gpucompat killed mid-sweep then resumed."""

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest
from test_slurm import cluster  # noqa: F401 - the live cluster fixture

from conftest import run_cli, write

pytestmark = pytest.mark.integration

WRAPPER = """#!/bin/sh
# {name} as a flaky site has it: logs every call, fails the first {fails} (-1: every) call, then is the real one
echo "{name} $*" >> {log}
count=$(grep -c '^{name} ' {log})
if [ {fails} -lt 0 ] || [ "$count" -le {fails} ]; then
  echo "slurm_load_jobs error: Socket timed out on send/recv operation" >&2
  exit 1
fi
exec {real} "$@"
"""


def wrappers(directory, log, **fails):
    """A directory to put first on PATH: squeue, sacct, sbatch... that log their calls; fails[name] makes
    the first N calls of that command fail (-1: all of them)."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in ("squeue", "sacct", "sbatch", "scontrol", "scancel", "sinfo"):
        real = shutil.which(name)
        if real is None:
            continue
        path = directory / name
        path.write_text(WRAPPER.format(name=name, fails=fails.get(name, 0), log=log, real=real))
        path.chmod(0o755)
    return {"PATH": f"{directory}:{os.environ['PATH']}"}


def calls(log, name):
    try:
        return [line for line in log.read_text().splitlines() if line.startswith(name + " ")]
    except OSError:
        return []


def fake_torch(isolated, body):
    fakes = isolated / "fakes" / "torch"
    fakes.mkdir(parents=True)
    (fakes / "__init__.py").write_text(body)
    return str(fakes.parent)


# a torch whose import is counted (one line per run of the probe), takes a while, then fails
COUNTED_TORCH = "import os, time\nopen(os.environ['RUNS_FILE'], 'a').write('run\\n')\ntime.sleep({seconds})\nraise ImportError('fake torch')\n"

A100_ONLY = """
name = "{name}"
executor = "slurm"
[timeouts]
pending = "{pending}"
import = "5m"
cell = "5m"
install = "5m"
[[targets]]
name = "NVIDIA A100"
gres = "a100"
[[stacks]]
framework = "torch"
env = "current"
"""


def blocker(env, seconds):
    """A job holding the cluster's only A100 for a while: the queue is busy."""
    out = subprocess.run(["sbatch", "--parsable", "--gres=gpu:a100:1", "--time=5", "--output=/dev/null", "--wrap", f"sleep {seconds}"],
                         env=env, capture_output=True, text=True, check=True).stdout.strip()
    for _ in range(60):
        if "RUNNING" in subprocess.run(["squeue", "--noheader", "--jobs", out, "--format", "%T"], env=env, capture_output=True, text=True).stdout:
            return out
        time.sleep(0.5)
    raise AssertionError("the blocking job never started")


def test_squeue_and_sacct_that_fail_are_retried_not_taken_as_done(cluster, isolated):  # noqa: F811
    log = isolated / "calls.log"
    env = {**cluster, **wrappers(isolated / "bin", log, squeue=3, sacct=2)}
    plan = write(isolated / "plan.toml", 'name = "flaky"\nexecutor = "slurm"\ntargets = "discover"\n'
                 '[[stacks]]\nframework = "cuda-runtime"\nenv = "current"\n')
    run_cli("sweep", str(plan), env=env, check=0, timeout=300)
    data = json.loads(run_cli("results", "--json", check=0).stdout)
    assert data["counts"]["pending"] == 0 and data["counts"]["untested"] == 2 and not data["invalid"] + data["valid"]
    # every cell ran its probe on the node: the fake GPUs have no driver, which is the node's cause, never the scheduler's
    assert {c["cause"] for c in data["untested"]} == {"no-gpu"}, data["untested"]
    assert len(calls(log, "squeue")) > 3  # it failed three times, and was asked again


def test_a_squeue_that_never_answers_makes_the_cells_untested(cluster, isolated):  # noqa: F811
    log = isolated / "calls.log"
    env = {**cluster, **wrappers(isolated / "bin", log, squeue=-1), "RUNS_FILE": str(isolated / "runs.txt"),
           "PYTHONPATH": fake_torch(isolated, COUNTED_TORCH.format(seconds=60))}
    plan = write(isolated / "plan.toml", A100_ONLY.format(name="silent", pending="8s"))
    proc = run_cli("sweep", str(plan), env=env, timeout=300)
    assert proc.returncode == 4, proc.stderr
    cell = json.loads(run_cli("results", "--json", check=0).stdout)["untested"][0]
    assert cell["cause"] == "scheduler" and "squeue failed" in cell["reason"] and "Socket timed out" in cell["reason"]
    assert calls(log, "scancel"), "the jobs it could no longer follow are cancelled"


def test_a_busy_gpu_class_waits_then_runs_and_is_never_no_match(cluster, isolated):  # noqa: F811
    env = {**cluster, "RUNS_FILE": str(isolated / "runs.txt"), "PYTHONPATH": fake_torch(isolated, COUNTED_TORCH.format(seconds=0))}
    job = blocker(env, 15)
    try:
        began = time.monotonic()
        run_cli("sweep", str(write(isolated / "wait.toml", A100_ONLY.format(name="wait", pending="3m"))), env=env, check=0, timeout=300)
        cell = json.loads(run_cli("results", "--json", check=0).stdout)["invalid"][0]
        assert cell["code"] == "IMPORT_FAILED" and time.monotonic() - began > 8  # it waited for the A100, then ran
    finally:
        subprocess.run(["scancel", job], env=env)
    job = blocker(env, 60)
    try:
        proc = run_cli("sweep", str(write(isolated / "short.toml", A100_ONLY.format(name="short", pending="5s"))), env=env, timeout=300)
        assert proc.returncode == 4, proc.stderr
        cell = json.loads(run_cli("results", "--json", check=0).stdout)["untested"][0]
        assert cell["cause"] == "scheduler" and "still queued after" in cell["reason"] and "Resources" in cell["reason"]
    finally:
        subprocess.run(["scancel", job], env=env)
    assert (isolated / "runs.txt").read_text().count("run") == 1  # the first sweep's cell ran; the one that waited too long never did


def test_a_partition_taken_down_mid_sweep_is_not_scheduled_with_the_reason(cluster, isolated):  # noqa: F811
    env = {**cluster, "RUNS_FILE": str(isolated / "runs.txt"), "PYTHONPATH": fake_torch(isolated, COUNTED_TORCH.format(seconds=0))}
    job = blocker(env, 60)

    def take_down_once_pending():
        for _ in range(120):
            queue = subprocess.run(["squeue", "--noheader", "--states=PENDING", "--format=%j"], env=env, capture_output=True, text=True).stdout
            if "gpucompat-" in queue:
                subprocess.run(["scontrol", "update", "partitionname=gpu", "state=down"], env=env, check=True)
                return
            time.sleep(0.5)

    thread = threading.Thread(target=take_down_once_pending)
    try:
        thread.start()
        run_cli("sweep", str(write(isolated / "down.toml", A100_ONLY.format(name="down", pending="5m"))), env=env, check=4, timeout=300)
        thread.join()
        cell = json.loads(run_cli("results", "--json", check=0).stdout)["untested"][0]
        assert cell["cause"] == "not-scheduled" and "PartitionDown" in cell["reason"] and "nodes:" in cell["reason"]
    finally:
        thread.join()
        subprocess.run(["scontrol", "update", "partitionname=gpu", "state=up"], env=env)
        subprocess.run(["scancel", job], env=env)


def test_a_requeued_cell_gets_one_result(cluster, isolated):  # noqa: F811
    runs = isolated / "runs.txt"
    env = {**cluster, "RUNS_FILE": str(runs), "PYTHONPATH": fake_torch(isolated, COUNTED_TORCH.format(seconds=6))}

    def requeue_once_running():
        for _ in range(120):
            if runs.exists():
                task = subprocess.run(["squeue", "--noheader", "--states=RUNNING", "--format=%i %j"], env=env,
                                      capture_output=True, text=True).stdout.split()
                if len(task) == 2 and task[1].startswith("gpucompat-"):
                    subprocess.run(["scontrol", "requeue", task[0]], env=env, check=True)
                    return
            time.sleep(0.2)

    thread = threading.Thread(target=requeue_once_running)
    thread.start()
    run_cli("sweep", str(write(isolated / "requeue.toml", A100_ONLY.format(name="requeue", pending="5m"))), env=env, check=0, timeout=300)
    thread.join()
    assert runs.read_text().count("run") == 2, "the probe ran twice: before and after the requeue"
    data = json.loads(run_cli("results", "--json", check=0).stdout)
    assert data["counts"]["invalid"] == 1 and data["invalid"][0]["code"] == "IMPORT_FAILED"


def test_gpucompat_killed_mid_sweep_resumes_without_submitting_a_cell_twice(cluster, isolated):  # noqa: F811
    log, runs = isolated / "calls.log", isolated / "runs.txt"
    env = {**os.environ, **cluster, **wrappers(isolated / "bin", log), "RUNS_FILE": str(runs),
           "PYTHONPATH": fake_torch(isolated, COUNTED_TORCH.format(seconds=8))}
    plan = write(isolated / "killed.toml", A100_ONLY.format(name="killed", pending="5m"))
    gpucompat = subprocess.Popen([sys.executable, "-m", "gpucompat", "sweep", str(plan)], env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(120):
        if runs.exists():
            break
        time.sleep(0.2)
    gpucompat.send_signal(signal.SIGKILL)
    gpucompat.wait()
    run_cli("sweep", "--resume", "1", env=env, check=0, timeout=300)
    submitted = [line for line in calls(log, "sbatch") if "--test-only" not in line]
    assert len(submitted) == 1, submitted
    assert runs.read_text().count("run") == 1
    data = json.loads(run_cli("results", "--json", check=0).stdout)
    assert data["counts"]["invalid"] == 1 and data["invalid"][0]["code"] == "IMPORT_FAILED"


SACCT_ANSWER = """4242_0|COMPLETED|0:0|00:00:07|None
4242_0.batch|COMPLETED|0:0|00:00:07|
4242_1|TIMEOUT|0:15|00:05:00|TimeLimit
4242_2|CANCELLED by 0|0:0|00:00:00|None
4242_[3-5,8%2]|PENDING|0:0|00:00:00|Resources
"""


def test_sacct_records_are_read_as_parsable2_prints_them(tmp_path, monkeypatch):
    """Where accounting answers (no slurmdbd here: a recorded answer, printed by a stand-in sacct)."""
    from gpucompat.executors.base import JobSettings
    from gpucompat.executors.slurm import SlurmExecutor, exit_status
    from gpucompat.model import Timeouts

    (tmp_path / "sacct").write_text(f"#!/bin/sh\ncat <<'EOF'\n{SACCT_ANSWER}EOF\n")
    (tmp_path / "sacct").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    executor = SlurmExecutor(JobSettings(Timeouts()))
    records = executor._accounting(["4242"])
    # the job steps (.batch) are not tasks; tasks not started yet come as one line, expanded
    assert set(records) == {"4242_0", "4242_1", "4242_2", "4242_3", "4242_4", "4242_5", "4242_8"}
    assert records["4242_1"]["JobState"] == "TIMEOUT" and exit_status(records["4242_1"]["ExitCode"]) == (-15, 15)
    assert records["4242_2"]["JobState"] == "CANCELLED" and records["4242_0"]["RunTime"] == "00:00:07"
    executor._sacct = True  # accounting answers: sacct alone is the poll's one call, and keeps the final records
    states, missing_ended = executor._state_now(["4242"])
    assert states["4242_4"] == ("PENDING", "Resources") and missing_ended is False  # a task sacct has not recorded yet is not over
    assert executor._final["4242_1"]["JobState"] == "TIMEOUT"
