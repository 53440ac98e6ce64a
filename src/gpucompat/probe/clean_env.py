"""Was it the stack, or the job's environment? Decided by running the failure again, not by a list of variables.

The probe runs its stages in a forked child (supervise); the parent does nothing while the child passes.
When the child fails at import, device or compute (an exception, or a crash), the parent runs the same
stages once more with a clean environment: only what the stack needs and the executor set (PATH, HOME,
the scheduler's GPU binding, gpucompat's own variables, the environment's own prefix), nothing else the
job inherited. Where the clean run does not fail the same way (same stage, same rung, same kind of error),
the inherited variables are split in halves and added back, a few runs more, until the one (or the few)
whose presence brings the failure back is named. What was found goes into result.json under "clean_run";
analysis.py classifies the clean run's own facts and compares codes before it blames the stack.

A framework that itself comes from an inherited path (a module system's PYTHONPATH entry) keeps that
entry in the clean run: it is the stack under test. In a container docker or podman started, nothing of
the user's shell reaches the job (envs/container.py passes two variables), so there is nothing to compare; under Apptainer the image's own
variables (its /.singularity.d/env scripts) count as the environment's own.
"""

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time

from .records import probe_file, write

# Kept in the clean run: what any process needs, and what the executor and scheduler set for this job.
BASIC = ("PATH", "HOME", "USER", "LOGNAME", "TMPDIR")
GPU_BINDING = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "GPU_DEVICE_ORDINAL")
SCHEDULER_PREFIXES = ("GPUCOMPAT_", "SLURM_", "_CONDOR_", "APPTAINER_", "SINGULARITY_")
ENVIRONMENT_OWN = ("VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV")
# The module each framework's import starts from (cuda-runtime loads libraries by path: no module).
MODULES = {"torch": "torch", "jax": "jax", "tensorflow": "tensorflow", "cupy": "cupy"}
RECHECKED_STAGES = ("import", "device", "compute")
MAX_RUNS = 10  # the clean run, one run per halving (log2 of ~200 inherited variables) and the confirmation
APPTAINER_ENV = "/.singularity.d/env"


def failure_mode(result, signal_number=None):
    """How a probe run failed, as (stage, rung, kind of error), or None where it passed (or failed only in bench).
    Two runs fail "the same way" when these are equal; the codes are compared again by analysis.py."""
    stages = result.get("stages") or {}
    for stage in RECHECKED_STAGES:
        record = stages.get(stage)
        if record is None:
            break
        if record.get("ok"):
            continue
        facts = record.get("facts") or {}
        if record.get("running") or signal_number:
            kind = "signal %s" % signal_number if signal_number else "killed"
        elif record.get("error"):
            kind = (record.get("error") or {}).get("type") or "error"
        else:
            kind = "refused"  # StageFailed or a rung's reason: the adapter said no
        running = [r.get("name") for r in facts.get("rungs") or [] if "duration_s" not in r]  # a crash inside a rung
        return stage, facts.get("failed_rung") or (running[-1] if running else None), kind
    if signal_number and result.get("current_stage") in RECHECKED_STAGES:
        return result["current_stage"], None, "signal %s" % signal_number
    return None


def in_oci_container(environ):
    """Started by docker or podman for a container stack (envs/container.py says so): the image's environment alone."""
    return environ.get("GPUCOMPAT_IMAGE_ENV") == "1"


def _image_variables():
    """The variables an Apptainer image sets itself (its %environment), which the clean run keeps."""
    names = set()
    try:
        files = sorted(os.listdir(APPTAINER_ENV))
    except OSError:
        return names
    for name in files:
        try:
            with open(os.path.join(APPTAINER_ENV, name), errors="replace") as handle:
                names.update(re.findall(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=", handle.read(), re.M))
        except OSError:
            continue
    return names


def framework_path(framework, environ):
    """The PYTHONPATH entry the framework itself is found through (a module system's), or None."""
    module = MODULES.get(framework)
    entries = [e for e in (environ.get("PYTHONPATH") or "").split(os.pathsep) if e]
    if not module or not entries:
        return None
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    origin = os.path.realpath((spec.origin or "") if spec else "")
    for entry in entries:
        root = os.path.realpath(entry)
        if origin.startswith(root.rstrip(os.sep) + os.sep):
            return entry
    return None


def clean_environment(environ, framework):
    """(the clean environment, what it keeps of PYTHONPATH and why): nothing inherited but what the job needs."""
    own = _image_variables()
    clean = {}
    for name, value in environ.items():
        if (name in BASIC or name in GPU_BINDING or name in ENVIRONMENT_OWN or name in own
                or name.startswith(SCHEDULER_PREFIXES)):
            clean[name] = value
    entry = framework_path(framework, environ)
    if entry:
        clean["PYTHONPATH"] = entry
    return clean, entry


def _run(framework, stages, timeouts, env, path, budget):
    """One probe run of STAGES with ENV, bounded by BUDGET seconds: (its result, the signal that ended it)."""
    command = [sys.executable, probe_file(), "--framework", framework, "--result", path, "--stages", ",".join(stages),
               "--clean-run"]
    if timeouts:
        command += ["--stage-timeouts", ",".join("%s=%d" % kv for kv in sorted(timeouts.items()))]
    try:
        os.remove(path)
    except OSError:
        pass
    number = None
    try:
        proc = subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=max(1, budget),
                              start_new_session=True)
        number = -proc.returncode if proc.returncode < 0 else None
        tail = proc.stderr.decode("utf-8", "replace")[-2000:]
    except subprocess.TimeoutExpired as exc:
        number, tail = signal.SIGKILL, (exc.stderr or b"").decode("utf-8", "replace")[-2000:]
    try:
        with open(path) as handle:
            result = json.load(handle)
    except (OSError, ValueError):
        result = {"stages": {}, "current_stage": stages[0]}
    result["stderr_tail"], result["signal"] = tail, number
    return result, number


def _kept(result):
    """What analysis needs of a run to classify it: no mapped-library list, no log."""
    return {k: v for k, v in result.items() if k not in ("loaded_libraries", "log")}


def recheck(framework, result_path, original, signal_number, timeouts, environ=None):
    """After a failed run: the clean run, and where it differs, the inherited variables that make the difference.
    Writes result.json's "clean_run" as it goes, so a job killed midway still says what it had found."""
    environ = dict(os.environ if environ is None else environ)
    mode = failure_mode(original, signal_number)
    if mode is None:
        return None
    record = {"mode": list(mode), "running": True, "runs": []}
    original["clean_run"] = record
    write(result_path, original)
    if in_oci_container(environ):
        record.update(running=False, skipped="the job runs in an OCI container: its environment is the image's, nothing of the shell's")
        write(result_path, original)
        return record
    stages = list(RECHECKED_STAGES[:RECHECKED_STAGES.index(mode[0]) + 1])
    clean, entry = clean_environment(environ, framework)
    suspects = sorted(n for n in environ if clean.get(n) != environ[n])
    record.update(kept=sorted(clean), python_path=entry, inherited=len(suspects))
    budget = float(sum(timeouts.get(s, 300) for s in stages)) if timeouts else 900.0
    deadline = time.monotonic() + 2 * budget
    path = result_path + ".clean.json"

    def attempt(added):
        env = dict(clean)
        env.update((name, environ[name]) for name in added)
        began = time.monotonic()
        result, number = _run(framework, stages, timeouts, env, path, min(budget, deadline - began))
        found = failure_mode(result, number)
        record["runs"].append({"added": list(added), "mode": list(found) if found else None,
                               "seconds": round(time.monotonic() - began, 2)})
        return result, found

    clean_result, clean_mode = attempt(())
    record["facts"] = _kept(clean_result)
    record["same"] = clean_mode == mode
    write(result_path, original)
    if not record["same"]:
        record["culprits"] = _halve(suspects, attempt, mode, record, deadline, lambda: write(result_path, original))
    record["running"] = False
    write(result_path, original)
    try:
        os.remove(path)
    except OSError:
        pass
    return record


def _halve(suspects, attempt, mode, record, deadline, save):
    """The fewest inherited variables found to bring the failure back: one half is tried, and where it does not,
    the other is taken untried; the last pick is run once to confirm it. Every set returned was seen to fail
    the same way (the whole difference did, in the job itself). A pair that fails only together stays a pair."""
    confirmed, runs = list(suspects), lambda: len(record["runs"])
    while len(suspects) > 1 and runs() < MAX_RUNS - 1 and time.monotonic() < deadline:
        first, second = suspects[:len(suspects) // 2], suspects[len(suspects) // 2:]
        if attempt(first)[1] == mode:
            suspects = confirmed = first
        else:
            suspects = second
        save()
    if suspects != confirmed and runs() < MAX_RUNS and time.monotonic() < deadline and attempt(suspects)[1] == mode:
        confirmed = suspects
    record["settled"] = len(confirmed) == 1
    return confirmed


def _wait(pid):
    while True:
        try:
            return os.waitpid(pid, 0)[1]
        except InterruptedError:
            continue


def supervise(framework, result_path, stages, timeouts, run_child):
    """Run run_child() (the stages, returning an exit code) in a forked child and exit as it did; between,
    where it failed, recheck in a clean environment. Signals meant for the job reach the child too."""
    pid = os.fork()
    if pid == 0:
        code = 70
        try:
            code = run_child()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)

    def forward(number, _frame):
        try:
            os.kill(pid, number)
        except ProcessLookupError:
            pass

    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(number, forward)
    status = _wait(pid)
    number = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1
    if (code or number) and ("device" in stages or "import" in stages):  # a passing run costs a fork, nothing more
        try:
            with open(result_path) as handle:
                original = json.load(handle)
            recheck(framework, result_path, original, number, timeouts)
        except (OSError, ValueError):
            pass  # no result to compare: what the child left says all there is
        except Exception as exc:  # the recheck must never cost the verdict the child reached
            sys.stderr.write("gpucompat probe: the clean re-run failed: %r\n" % (exc,))
    if number is not None:  # end as the child ended, so the executor reads the same signal
        try:
            import resource

            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        except (ImportError, ValueError, OSError):
            pass
        for each in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
            signal.signal(each, signal.SIG_DFL)
        if number not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
    return code
