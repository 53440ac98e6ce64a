"""Classify what came back from a cell into one of the stable codes of DESIGN.md.

The probe's facts decide first (a CPU-only build, no driver, a runtime newer than
the driver); error-text signatures second; the raw message last. The evidence used
is kept with the verdict.
"""

from __future__ import annotations

import re
import signal as signals

from packaging.version import InvalidVersion, Version

from . import clean_rerun, cuda_start, gpu_state
from .knowledge import signatures
from .knowledge.rules import FAIL, arch_rule, ptx_cuda
from .knowledge.signatures import could_not_ask
from .model import PASS, PROBE_STAGES, UNTESTED, UNTESTED_CAUSES, Code, Observation, Outcome, ResolvedStack

# Signals that stop a job from outside (a shutdown, a scheduler's preemption, a person), never the stack itself.
OUTSIDE_SIGNALS = {signals.SIGTERM, signals.SIGINT, signals.SIGHUP}


def _first_line(text: str, limit: int = 300) -> str:
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()[:limit]
    return ""


def _resolver_summary(error: str) -> str:
    """uv's reason, in one sentence: its 'Because ...' line, else its first error line."""
    if error.startswith("conda cannot solve it:"):  # py-rattler's tree of reasons (envs/conda.py), on one line
        reason = " ".join(line.strip(" └─├│") for line in error.splitlines() if line.strip(" └─├│"))
        return reason[:300] + "…" if len(reason) > 300 else reason
    lines = [line.strip().removeprefix("cause:").removeprefix("╰─▶").strip() for line in error.splitlines()]
    lines = [line for line in lines if line and not line.startswith("warning:")]
    reason = next((line for line in lines if line.startswith("Because")), None) or (lines[0] if lines else "uv found no solution")
    return "uv cannot resolve it: " + (reason[:300] + "…" if len(reason) > 300 else reason)


def _version(text: str | None) -> Version | None:
    try:
        return Version(text) if text else None
    except InvalidVersion:
        return None


def _stage_text(record: dict, stderr: str) -> str:
    error = record.get("error") or {}
    parts = [record.get("reason", ""), error.get("message", ""), *record.get("warnings", []), stderr]
    return "\n".join(p for p in parts if p)


def _message(record: dict) -> str:
    error = record.get("error")
    if error:
        return f"{error.get('type')}: {_first_line(error.get('message', ''))}"
    return record.get("reason", "")


def _runtime(facts: dict) -> str | None:
    import_facts = facts.get("stages", {}).get("import", {}).get("facts", {})
    return import_facts.get("cuda_runtime")


def _driver_cuda(facts: dict) -> str | None:
    device_facts = facts.get("stages", {}).get("device", {}).get("facts", {})
    return device_facts.get("driver_cuda_version") or facts.get("system", {}).get("driver_cuda_version")


def _device_failure(facts: dict, record: dict, stderr: str) -> tuple[str, str]:
    stage_facts = record.get("facts", {})
    if gpu_state.compute_mode(facts) == "prohibited":
        return "NO_DEVICE", PROHIBITED.format(where=gpu_state.where(facts))
    if stage_facts.get("cuda_build") is False:
        return "NO_DEVICE", "this build has no CUDA support (a CPU-only build), so it cannot use a GPU"
    runtime, driver = _version(_runtime(facts)), _version(_driver_cuda(facts))
    if runtime and driver and runtime.major > driver.major:
        return "DRIVER_TOO_OLD", f"the stack's CUDA runtime {runtime} is a newer major than the driver supports (CUDA {driver})"
    found = signatures.match(_stage_text(record, stderr))
    if found and found.stage == "device":
        return found.code, f"{found.meaning} ({_message(record)})"
    if stage_facts.get("device_count") == 0 and not record.get("error"):
        visible = cuda_start.user_env(facts).get("CUDA_VISIBLE_DEVICES")  # never the local executor's own pin
        where = f" with CUDA_VISIBLE_DEVICES={visible!r}" if visible is not None else ""
        return "NO_DEVICE", f"the driver is present but the framework sees no GPU{where}"
    return "NO_DEVICE", f"the framework could not use a GPU: {_message(record)}"


def _compute_failure(facts: dict, record: dict, stderr: str) -> tuple[str, str]:
    stage_facts = record.get("facts", {})
    if gpu_state.compute_mode(facts) == "prohibited":  # some frameworks see the GPU and fail at the first allocation
        return "NO_DEVICE", PROHIBITED.format(where=gpu_state.where(facts))
    from_binary = _library_failure(facts, record)
    if from_binary:
        return from_binary
    forced = _forced_jit_failure(facts)
    if forced:
        return forced
    found = signatures.match(_stage_text(record, stderr))
    if found and found.stage == "compute":
        return found.code, f"{found.meaning} ({_message(record)})"
    if "rel_error" in stage_facts and not record.get("error"):
        return "COMPUTE_WRONG", f"the GPU gave wrong numbers: relative error {stage_facts['rel_error']:.3g} against a float64 reference (allowed {stage_facts.get('tolerance')})"
    library = _failed_rung(stage_facts).get("library") or {}
    if library.get("files"):  # the first library that failed, named with its version and file
        first = library["files"][0]
        named = f"{library.get('name')} {first.get('version') or ''}".strip()
        return "COMPUTE_ERROR", f"a small op in {named} ({first['path']}) failed: {_message(record)}"
    return "COMPUTE_ERROR", f"a small op on the GPU failed: {_message(record)}"


def _pass_warnings(facts: dict) -> list[str]:
    warnings = []
    runtime, driver = _version(_runtime(facts)), _version(_driver_cuda(facts))
    if runtime and driver and runtime.major == driver.major and runtime > driver:
        warnings.append(
            f"ran under CUDA minor-version compatibility: runtime {runtime} on a driver that supports CUDA {driver}; PTX newer than the driver cannot be JIT-compiled"
        )
    device = facts.get("stages", {}).get("device", {}).get("facts", {})
    archs = facts.get("stages", {}).get("import", {}).get("facts", {}).get("arch_list") or device.get("arch_list") or []
    for gpu in device.get("devices", [])[:1]:
        cc = (gpu.get("cc") or "").replace(".", "")
        if archs and cc and f"sm_{cc}" not in archs and not any(a.startswith(f"sm_{cc[:-1]}") for a in archs):
            ptx = [a for a in archs if a.startswith("compute_")]
            warnings.append(f"no SASS for sm_{cc} in {archs}; ran by PTX JIT from {ptx or 'PTX'}")
    for stage in PROBE_STAGES:
        for warning in facts.get("stages", {}).get(stage, {}).get("warnings", [])[:3]:
            found = signatures.match(warning)
            warnings.append(f"{found.code}: {warning}" if found else warning)
    return warnings


def untested(stage: str, cause: str, what: str, evidence: dict) -> Outcome:
    """No verdict: the test could not be carried out, for a reason that is not the stack's."""
    return Outcome(UNTESTED, stage, f"could not test: {UNTESTED_CAUSES[cause]} ({what})", {**evidence, "cause": cause}, cause=cause)


def _rung(record: dict) -> str:
    rung = record.get("facts", {}).get("failed_rung")
    return f" (rung {rung})" if rung else ""


def _crash(stage: str, how: str, text: str, evidence: dict) -> Outcome:
    """A process that died: a signature in its last words names the cause; else CRASHED."""
    found = signatures.match(text)
    if found:
        evidence["signature"] = {"pattern": found.pattern, "fix": found.fix, "source": found.source}
        return Outcome(found.code, stage, f"the process aborted ({how}) during the {stage} stage: {found.meaning}", evidence)
    return Outcome(Code.CRASHED.value, stage, f"the process {how} during the {stage} stage", evidence)


def classify(resolved: ResolvedStack, observation: Observation | None) -> Outcome:
    """The cell's verdict; a failure the probe ran again in a clean environment is the stack's only where that run
    failed the same way (clean_rerun.py)."""
    judged = _classify(resolved, observation)
    found = clean_rerun.record(observation.facts if observation else None)
    if found is None or judged.code in (PASS, UNTESTED):
        return judged
    facts = found["facts"]
    clean = _classify(resolved, Observation(facts=facts, returncode=0 if facts.get("signal") is None else None,
                                            signal=facts.get("signal"), stderr=facts.get("stderr_tail") or ""))
    return clean_rerun.judge(judged, clean, observation.facts, found)


def _classify(resolved: ResolvedStack, observation: Observation | None) -> Outcome:
    if not resolved.ok:
        evidence = {"resolver": resolved.error}
        if resolved.cause:
            return untested("resolve", resolved.cause, _resolver_summary(resolved.error or "").removeprefix("uv cannot resolve it: "), evidence)
        return Outcome(Code.ENV_UNRESOLVABLE.value, "resolve", _resolver_summary(resolved.error or ""), evidence)
    assert observation is not None, "a resolved cell is classified from an observation"
    if observation.internal:
        return Outcome(Code.INTERNAL.value, "schedule", f"gpucompat failed to run this cell: {observation.internal}", {"bug": observation.internal})
    if observation.untested:
        cause, what = observation.untested
        return untested("schedule", cause, what, {"scheduler": what})
    if observation.no_match:  # nothing ran: no verdict on the stack, and the scheduler's own words as the evidence
        return untested("schedule", "not-scheduled", observation.no_match, {"scheduler": observation.no_match})
    if observation.timed_out_stage == "install":
        return Outcome(Code.TIMEOUT.value, "install", "building the environment did not finish in time", {"install_log": observation.install_log})
    if observation.install_failed and resolved.stack.env == "container":
        return _pull_failed(resolved, observation.install_log)
    if observation.install_failed:
        log = observation.install_log
        what = _first_line(log.split("error:", 1)[-1]) or "see the log"
        cause = could_not_ask(log)
        if cause:
            return untested("install", cause, what, {"install_log": log})
        return Outcome(Code.ENV_INSTALL_FAILED.value, "install", f"building the environment failed: {what}", {"install_log": log})

    facts = observation.facts or {}
    stderr = observation.stderr
    evidence = {"stderr_tail": stderr[-3000:]} if stderr else {}
    if gpu_state.summary(facts):
        evidence["gpu"] = gpu_state.summary(facts)
    libraries = [{"rung": r["name"], "ok": r.get("ok"), "duration_s": r.get("duration_s"), **r["library"]}
                 for r in facts.get("stages", {}).get("compute", {}).get("facts", {}).get("rungs", []) if r.get("library")]
    if libraries:
        evidence["libraries"] = libraries
    if observation.signal:
        evidence["signal"] = _signal_name(observation.signal)
    stages = facts.get("stages", {})
    current = facts.get("current_stage")
    if observation.timed_out_stage == "bench" or (facts and not facts.get("finished") and current == "bench"):
        # compute passed before the bench began: the verdict stands, the figures made so far are kept
        how = ("ran past its timeout and was killed" if observation.timed_out_stage == "bench" or observation.signal == signals.SIGALRM
               else f"was killed by {_signal_name(observation.signal)}" if observation.signal else f"exited {observation.returncode}")
        return _passed(facts, evidence, [f"the bench rung {how}; the figures made before that are kept"])
    if observation.timed_out_stage:
        stage = observation.timed_out_stage
        return Outcome(Code.TIMEOUT.value, stage, f"the {stage} stage gave no answer within its timeout and was killed", evidence)
    if not facts:
        if observation.signal in OUTSIDE_SIGNALS:
            return untested("import", "interrupted", f"{_signal_name(observation.signal)} before the probe reported", evidence)
        if observation.signal:
            return _crash("import", f"was killed by {_signal_name(observation.signal)} before the probe reported", stderr, evidence)
        if resolved.stack.env == "container":
            refused = _container_refused(resolved, stderr, evidence)
            if refused:
                return refused
            if observation.returncode:  # the runtime or the image's python3 ended it before the probe wrote: not the stack's doing
                return untested("import", "runtime", "the container exited %d before the probe reported: %s"
                                % (observation.returncode, _first_line((stderr.strip().splitlines() or [""])[-1]) or "no output"),
                                {**evidence, "image": resolved.stack.image})
        if observation.returncode == 0:  # the probe writes before its first stage: something ended the interpreter first
            return Outcome(Code.CRASHED.value, "import", "the process exited 0 before the probe wrote anything: something in the "
                           "environment (a sitecustomize, a .pth file, a startup hook) ended the interpreter", evidence)
        return Outcome(Code.INTERNAL.value, "import", f"the probe did not start (exit {observation.returncode}): {_first_line(stderr[-500:])}", evidence)
    if not facts.get("finished"):
        stage = current if current in PROBE_STAGES else "import"
        record = stages.get(stage, {})
        evidence["stage_facts"] = record
        if observation.signal == signals.SIGALRM:  # the probe's own stage timeout (batch jobs)
            return Outcome(Code.TIMEOUT.value, stage, f"the {stage} stage gave no answer within its timeout and was killed", evidence)
        if observation.signal in OUTSIDE_SIGNALS:
            return untested(stage, "interrupted", f"{_signal_name(observation.signal)} during the {stage} stage", evidence)
        how = f"was killed by {_signal_name(observation.signal)}" if observation.signal else f"exited {observation.returncode} unexpectedly"
        text = _stage_text(record, stderr)
        return (_gpu_fault(facts, stage, text, evidence) or _not_the_stack(facts, stage, record, evidence)
                or (_gpu_busy(facts, stage, text, evidence) if stage != "import" else None)
                or _stopped_by_variable(facts, _crash(stage, how, text, evidence)))

    for stage in PROBE_STAGES:
        record = stages.get(stage)
        if record is None or record.get("ok"):
            continue
        evidence["stage_facts"] = record
        if stage != "import" and gpu_state.compute_mode(facts) != "prohibited" and not _library_failure(facts, record):
            judged = (_gpu_fault(facts, stage, _stage_text(record, stderr), evidence) or _not_the_stack(facts, stage, record, evidence)
                      or _gpu_busy(facts, stage, _stage_text(record, stderr), evidence))
            if judged:
                return judged
        elif stage == "import":
            judged = _not_the_stack(facts, stage, record, evidence)
            if judged:
                return judged
        if stage == "import":
            code, text = Code.IMPORT_FAILED.value, f"the framework does not import: {_message(record)}"
        elif stage == "device":
            code, text = _device_failure(facts, record, stderr)
        else:
            code, text = _compute_failure(facts, record, stderr)
            text += _rung(record)
        found = signatures.match(_stage_text(record, stderr))
        if found and found.code == code:
            evidence["signature"] = {"pattern": found.pattern, "fix": found.fix, "source": found.source}
        if code == Code.DRIVER_TOO_OLD.value and resolved.stack.env == "container":
            text += _image_requirement(facts, evidence)
        judged = Outcome(code, stage, text, evidence)
        return judged if stage == "import" else _stopped_by_variable(facts, judged)

    bench = stages.get("bench")
    broken = [] if bench is None or bench.get("ok") else [f"the bench rung failed: {_message(bench)}"]
    busy = gpu_state.busy(facts, _stage_text(bench, "")) if broken else None
    if busy:
        broken = [f"the bench rung could not finish: {busy}; the figures made before that are kept"]
    return _passed(facts, evidence, broken)


def _pull_failed(resolved: ResolvedStack, log: str) -> Outcome:
    """A container stack whose image could not be pulled: the registry said there is no such image or
    tag (the stack does not exist: ENV_UNRESOLVABLE), or the pull could not be done (UNTESTED)."""
    from .envs import container

    kind, what = container.pull_failure(log)
    evidence = {"pull_log": log, "image": resolved.stack.image}
    if kind == "unresolvable":
        return Outcome(Code.ENV_UNRESOLVABLE.value, "resolve", f"the registry has no such image or tag: {what}", evidence)
    return untested("install", kind, what, evidence)


def _container_refused(resolved: ResolvedStack, stderr: str, evidence: dict) -> Outcome | None:
    """The runtime never started the probe: no runtime or an unusable image (UNTESTED), the runtime gave the
    image no GPU (UNTESTED env-fault, naming the missing flag or hook; no-gpu where the host has no driver), or
    the host driver is older than the image asks (DRIVER_TOO_OLD, with the image's NVIDIA_REQUIRE_CUDA
    condition nvidia-container-cli named as evidence)."""
    from .envs import container

    could_not = container.start_failure(stderr)
    if could_not:
        return untested("import", could_not[0], could_not[1], {**evidence, "image": resolved.stack.image})
    found = signatures.match(stderr)
    if not found or found.stage != "device":
        return None
    evidence = {**evidence, "image": resolved.stack.image, "signature": {"pattern": found.pattern, "fix": found.fix, "source": found.source}}
    condition = container.refused_condition(stderr)
    if condition:
        evidence["nvidia_require_cuda"] = condition
    line = next((l.strip() for l in stderr.splitlines() if found.pattern.lower() in l.lower()), found.pattern)[:300]
    text = f"the container runtime did not start the probe: {found.meaning} ({line})"
    if found.code == Code.NO_DEVICE.value:  # the node's runtime gave the image no GPU: the node's doing, not the image's
        cause = "no-gpu" if "libnvidia-ml.so" in line else "env-fault"
        return untested("device", cause, text, evidence)
    return Outcome(found.code, "device", text, evidence)


def _image_requirement(facts: dict, evidence: dict) -> str:
    """A container's NVIDIA_REQUIRE_CUDA (the probe sees it in its environment) judged against the driver
    the probe found: the words to add to a DRIVER_TOO_OLD reason, and the evidence."""
    from .envs import container

    system = facts.get("system", {})
    require = (system.get("cuda_env") or {}).get("NVIDIA_REQUIRE_CUDA")
    driver_cuda = _driver_cuda(facts)
    if not require or not driver_cuda:
        return ""
    # /proc/driver/nvidia/version: "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  ..."
    driver = re.search(r"\b([0-9]{3,}\.[0-9]+(?:\.[0-9]+)?)\b", system.get("proc_driver_version") or "")
    ok, clause = container.check_require(require, cuda=driver_cuda, driver=driver.group(1) if driver else None)
    evidence["nvidia_require_cuda"] = {"value": require, "satisfied": ok, "clause": clause}
    alternatives = container.parse_require(require)
    if ok is True or not alternatives:  # satisfied, or no condition gpucompat knows how to read
        return ""
    first = ",".join(f"{k}{op}{v}" for k, op, v in alternatives[0])
    return f"; the image's NVIDIA_REQUIRE_CUDA asks for {first}" + (
        "" if ok is False else " or a forward-compatible driver branch for the GPU's brand")


def _passed(facts: dict, evidence: dict, more_warnings: list[str]) -> Outcome:
    """PASS: the stack imported, saw the GPU and computed right; the bench rung, if any, adds figures, never a failure."""
    stages = facts.get("stages", {})
    reached = [s for s in (*PROBE_STAGES, "bench") if s in stages]
    compute = stages.get("compute", {}).get("facts", {})
    devices = stages.get("device", {}).get("facts", {}).get("devices", [])
    where = devices[0].get("name") if devices else "the GPU"
    summary = f"ran {compute.get('op', 'a test op')} on {where}" + (
        f"; relative error {compute['rel_error']:.2g}" if "rel_error" in compute else ""
    )
    figures = [f for f in stages.get("bench", {}).get("facts", {}).get("figures", []) if "value" in f]
    if figures:
        summary += f"; {len(figures)} bench figures"
    note = gpu_state.note(facts)
    shared = [f"GPU state: {note}"] if note else []
    return Outcome(PASS, reached[-1] if reached else "compute", summary, evidence, tuple(_pass_warnings(facts)) + tuple(more_warnings) + tuple(shared))


def _signal_name(number: int | None) -> str:
    try:
        return signals.Signals(number).name
    except (ValueError, TypeError):
        return f"signal {number}"


def collapse_runs(values: list[str], axis: list[str]) -> list[str]:
    """Values as people read them: runs of neighbours on the axis joined, '11.1-11.5'.

    `axis` is every value that was tested, in order; two values are neighbours when no
    tested value lies between them, so an untested 11.3 does not break 11.2-11.4.
    """
    position = {value: i for i, value in enumerate(axis)}
    ordered = sorted(set(values), key=lambda v: position.get(v, len(axis)))
    runs: list[list[str]] = []
    for value in ordered:
        if runs and value in position and runs[-1][-1] in position and position[value] == position[runs[-1][-1]] + 1:
            runs[-1].append(value)
        else:
            runs.append([value])
    return [run[0] if len(run) == 1 else f"{run[0]}-{run[-1]}" for run in runs]


def cell_identity(row: dict) -> tuple:
    """What makes two sweeps' cells the same cell: the stack and the GPU class (not the driver,
    whose change between sweeps is exactly what a diff is for)."""
    return (row["framework"], row["version"], row["variant"], row["python"], row["env"], row["gpu"], row["cc"])


def diff(before: list[dict], after: list[dict]) -> dict[str, list[dict]]:
    """Display rows of two sweeps -> newly broken, newly working, changed failure, added, removed,
    and untested: cells either side could not test, which say nothing about a change."""
    old = {cell_identity(r): r for r in before if r["code"] != "PENDING"}
    new = {cell_identity(r): r for r in after if r["code"] != "PENDING"}
    out: dict[str, list[dict]] = {"newly_broken": [], "newly_working": [], "changed": [], "added": [], "removed": [], "untested": []}
    for key in sorted(set(old) | set(new), key=str):
        a, b = old.get(key), new.get(key)
        if a is None:
            out["added"].append({"after": b})
        elif b is None:
            out["removed"].append({"before": a})
        elif UNTESTED in (a["code"], b["code"]):
            out["untested"].append({"before": a, "after": b})
        elif a["code"] == "PASS" and b["code"] != "PASS":
            out["newly_broken"].append({"before": a, "after": b})
        elif a["code"] != "PASS" and b["code"] == "PASS":
            out["newly_working"].append({"before": a, "after": b})
        elif a["code"] != b["code"]:
            out["changed"].append({"before": a, "after": b})
    return out


def as_read(row: dict) -> dict:
    """A stored result row as this gpucompat judges it: a verdict written before its could-not-test cause existed is read
    as that cause (no migration; every reader takes rows through this): NO_MATCH, a job that never started, is UNTESTED
    not-scheduled; a `current` env whose probe found the framework's own module missing (ModuleNotFoundError naming it,
    at import: stored IMPORT_FAILED before resolve_one said so first) is UNTESTED not-installed. Any other row: itself."""
    code, evidence = row.get("code"), row.get("evidence") or {}
    if code not in (Code.NO_MATCH.value, Code.IMPORT_FAILED.value):
        return row
    if isinstance(evidence, str):  # read through sqlite3 (answers/observed.py): the JSON as stored
        import json

        evidence = json.loads(evidence)
    if code == Code.NO_MATCH.value:
        cause, what = "not-scheduled", evidence.get("scheduler") or row.get("summary") or ""
    elif code == Code.IMPORT_FAILED.value and row.get("env") == "current" and _module_missing(row["framework"], evidence):
        cause, what = "not-installed", _message(evidence["stage_facts"])
    else:
        return row
    judged = untested(row.get("stage") or "schedule", cause, what, evidence)
    return {**row, "code": judged.code, "summary": judged.summary, "evidence": {**judged.evidence, "stored_as": code}}


def _module_missing(framework: str, evidence: dict) -> bool:
    """The probe's import stage failed because the framework's own top-level module is not there (not a module it needs)."""
    from .envs.current import IMPORT_NAMES

    error = (evidence.get("stage_facts") or {}).get("error") or {}
    module = IMPORT_NAMES.get(framework)
    return bool(module) and error.get("type") == "ModuleNotFoundError" and error.get("message") == f"No module named '{module}'"


def shown_version(row: dict) -> str:
    """The stack's version as a person reads it: a `current` env learns it only from its probe."""
    if row["version"] == "installed":
        never_ran = row.get("env") == "container" or row.get("stage") == "schedule"  # no probe: nothing was looked at
        return row.get("probe_version") or ("not known (the probe did not run)" if never_ran else "not installed")
    return row["version"]


def shown_python(row: dict) -> str:
    """The Python as a person reads it: for a `current` env, the one its probe ran in."""
    return (row.get("probe_python") or row["python"]) if row["python"] in ("current", "image") else row["python"]


PROHIBITED = ("the GPU's compute mode is Prohibited, so no process may create a context on it ({where}); "
              "a site setting (nvidia-smi --compute-mode), not the stack")


def _gpu_fault(facts: dict, stage: str, text: str, evidence: dict) -> Outcome | None:
    """Could not test: NVML saw the GPU itself fail during the job (an Xid, uncorrectable ECC, lost)."""
    fault = gpu_state.fault(facts, text)
    return untested(stage, "gpu-fault", f"{fault}; drain {gpu_state.where(facts)}", evidence) if fault else None


def _not_the_stack(facts: dict, stage: str, record: dict, evidence: dict) -> Outcome | None:
    """Could not test: no GPU here, or CUDA cannot start in this job's process environment (cuda_start.py).
    A CPU-only build is the stack's on every node, so it is judged first, as the stack's."""
    if stage == "import":  # a framework that does not import is the stack's, unless the environment made it fail
        fault = cuda_start.import_fault(facts, _stage_text(record, ""))
        return untested(stage, "env-fault", fault, evidence) if fault else None
    if record.get("facts", {}).get("cuda_build") is False:
        return None
    device = facts.get("stages", {}).get("device") or {}
    if stage != "device" and device.get("ok"):  # the framework saw a GPU: CUDA started, whatever the probe's own call met
        fault = cuda_start.shadowed(facts)
        return untested(stage, "env-fault", fault, evidence) if fault else None
    gone = cuda_start.no_gpu(facts)
    if gone:
        return untested(stage, "no-gpu", gone, evidence)
    fault = cuda_start.env_fault(facts)
    return untested(stage, "env-fault", fault, {**evidence, "cuda_start": cuda_start.started(facts)}) if fault else None


def _stopped_by_variable(facts: dict, judged: Outcome) -> Outcome:
    """A failure under a variable that stops stacks which run on a clean node (forced or disabled PTX JIT, JAX
    with no GPU platform) is the variable's: could not test, the failure's own words kept after its name."""
    stopping = None if clean_rerun.record(facts) else cuda_start.stopping_variable(facts)  # the re-run's evidence decides instead
    if not stopping:
        return judged
    variable = stopping.split("=", 1)[0]
    text = judged.summary if variable in judged.summary else f"{stopping} — {judged.summary}"
    return untested(judged.stage, "env-fault", text, {**judged.evidence, "stack_would_be": judged.code})


def _gpu_busy(facts: dict, stage: str, text: str, evidence: dict) -> Outcome | None:
    """Could not test: another process held the GPU's memory or its context when this job failed for room."""
    busy = gpu_state.busy(facts, text)
    return untested(stage, "gpu-busy", f"{busy} ({gpu_state.where(facts)})", evidence) if busy else None


def _library_failure(facts: dict, record: dict) -> tuple[str, str] | None:
    """The failed rung's CUDA library judged by its own fat binary (read by the probe): no kernel it can run
    on this GPU, or PTX newer than the driver can JIT-compile. None where the binary was not read or does
    not explain the failure; a status string never decides when the binary can be read."""
    stage_facts = record.get("facts", {})
    rung = _failed_rung(stage_facts)
    library = rung.get("library") or {}
    archs = library.get("archs") or {}
    devices = facts.get("stages", {}).get("device", {}).get("facts", {}).get("devices") or [{}]
    cc = devices[0].get("cc")
    if not archs.get("entries") or not cc:
        return None
    files = library.get("files") or []
    driver = re.search(r"\b([0-9]{3,}\.[0-9]+(?:\.[0-9]+)?)\b", facts.get("system", {}).get("proc_driver_version") or "")
    source = "the fat binaries of " + ", ".join(f["path"] for f in files[:3])
    forced = forced_ptx_jit(facts)
    reason = arch_rule(cc, [] if forced else archs.get("sass"), archs.get("ptx"), source,
                       build_cuda=ptx_cuda(archs.get("ptx_isa") or []), driver=driver.group(1) if driver else None)
    version = next((f.get("version") for f in files if f.get("version")), None)
    named = f"{library.get('name')}" + (f" {version}" if version else "")
    if forced and reason.verdict != FAIL:  # some of its PTX reaches this GPU, but the rest of its kernels are SASS the driver ignores
        return "COMPUTE_ERROR", (f"{FORCED_PTX_JIT}; {named}'s fat binaries ({archs.get('entries')} kernel images, read from {source}) "
                                 f"carry PTX only for {', '.join(archs.get('ptx') or [])}, so every kernel had to be compiled from "
                                 f"that PTX, and it failed: {_message(record)}; unset the variable")
    if reason.verdict != FAIL or not reason.code:
        return None
    if forced:
        ptx = ", ".join(archs.get("ptx") or []) or "no PTX at all"
        return reason.code, (f"{FORCED_PTX_JIT}; {named} carries SASS only for this GPU and its PTX ({ptx}) cannot be compiled for "
                             f"compute capability {cc}, so it cannot run under forced JIT (read from {source})")
    return reason.code, f"{named} cannot run on this GPU: {reason.text}"


FORCED_PTX_JIT = "CUDA_FORCE_PTX_JIT=1 makes the driver ignore the SASS in every binary and JIT-compile PTX instead"


def forced_ptx_jit(facts: dict) -> bool:
    """The job ran with CUDA_FORCE_PTX_JIT=1 (the probe records the variables that change kernel loading)."""
    return ((facts.get("system") or {}).get("cuda_env") or {}).get("CUDA_FORCE_PTX_JIT") == "1"


def _forced_jit_failure(facts: dict) -> tuple[str, str] | None:
    """A compute failure under CUDA_FORCE_PTX_JIT=1: the variable is the cause, not the build. Judged from the framework's
    own arch list where the probe read one (its PTX alone must reach this GPU); else the failure is named as the variable's."""
    if not forced_ptx_jit(facts):
        return None
    stages = facts.get("stages", {})
    archs = stages.get("import", {}).get("facts", {}).get("arch_list") or stages.get("device", {}).get("facts", {}).get("arch_list") or []
    cc = (stages.get("device", {}).get("facts", {}).get("devices") or [{}])[0].get("cc")
    ptx = [a for a in archs if a.startswith("compute_")]
    if archs and cc:
        reason = arch_rule(cc, [], ptx, "the framework's arch list")
        if reason.verdict == FAIL:
            sass = [a for a in archs if a.startswith("sm_")]
            return "ARCH_UNSUPPORTED", (f"{FORCED_PTX_JIT}: the build has SASS {', '.join(sass) or 'for no GPU'}, but its PTX "
                                        f"({', '.join(ptx) or 'none'}) cannot be compiled for compute capability {cc}; unset the variable")
    return None


def _failed_rung(stage_facts: dict) -> dict:
    return next((r for r in stage_facts.get("rungs", []) if r.get("name") == stage_facts.get("failed_rung")), {})
