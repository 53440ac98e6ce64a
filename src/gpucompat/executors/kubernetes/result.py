"""What a finished Job says: the marker lines the job script printed to the pod log, and the Job's
conditions and the pod's status (batch/v1 JobStatus, core/v1 PodStatus), read into the Observation
that analysis.classify reads. Pure functions of the API's objects and the log text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from ...model import Observation
from .manifest import BEGIN, END, EXIT_MARK, INSTALL_FAILED_MARK, INSTALL_LOG_BEGIN, INSTALL_LOG_END, INSTALL_TIMEOUT_MARK, NO_UV_MARK, STAGE_MARK, TERM_MARK

START_FAILURES = {"StartError", "ContainerCannotRun"}  # the image has no /bin/sh, or it cannot be run
# Pod status reasons that say the cluster stopped the pod, not the stack (besides a DisruptionTarget condition).
DISRUPTED = {"Evicted", "Preempting", "NodeLost", "NodeShutdown", "Shutdown", "Terminated", "UnexpectedAdmissionError", "NodeAffinity"}
# The image is the plan's choice, not the stack's: an image that cannot run the job is "could not test".
IMAGE_CAUSE = "image"
PROBE_STAGES = ("import", "device", "compute", "bench")


def result_from_log(log: str) -> dict:
    """The probe's JSON between the marker lines of a pod log ({} if it never got there)."""
    found = re.findall(re.escape(BEGIN) + r"\s*(.*?)\s*" + re.escape(END), log or "", re.S)
    if not found:
        return {}
    try:
        facts = json.loads(found[-1])
    except ValueError:
        return {}
    return facts if isinstance(facts, dict) else {}


@dataclass
class LogReport:
    """What the job script said in the pod log."""

    facts: dict
    stages: list[str] = field(default_factory=list)
    exit_code: int | None = None  # the script ended on its own with this code
    terminated: bool = False  # SIGTERM reached the script
    no_uv: bool = False
    install_failed: int | None = None
    install_timeout: bool = False
    install_log: str = ""
    rest: str = ""  # everything else: the probe's own output, the runtime's messages

    def stage_reached(self) -> str | None:
        """The stage that was running when the pod was stopped (None: the log says nothing)."""
        if "probe" in self.stages:
            current = self.facts.get("current_stage")
            return current if current in PROBE_STAGES else "import"
        return "install" if "install" in self.stages else None


def parse_log(log: str) -> LogReport:
    log = log or ""
    report = LogReport(facts=result_from_log(log))
    report.stages = re.findall(rf"^{STAGE_MARK} (\w+)\s*$", log, re.M)
    codes = re.findall(rf"^{EXIT_MARK} (\d+)\s*$", log, re.M)
    report.exit_code = int(codes[-1]) if codes else None
    report.terminated = bool(re.search(rf"^{TERM_MARK}\s*$", log, re.M))
    report.no_uv = bool(re.search(rf"^{NO_UV_MARK}\s*$", log, re.M))
    failed = re.findall(rf"^{INSTALL_FAILED_MARK} (\d+)\s*$", log, re.M)
    report.install_failed = int(failed[-1]) if failed else None
    report.install_timeout = bool(re.search(rf"^{INSTALL_TIMEOUT_MARK}\s*$", log, re.M))
    logs = re.findall(re.escape(INSTALL_LOG_BEGIN) + r"\n?(.*?)\n?" + re.escape(INSTALL_LOG_END), log, re.S)
    report.install_log = logs[-1] if logs else ""
    rest = re.sub(re.escape(BEGIN) + r".*?" + re.escape(END), "", log, flags=re.S)
    rest = re.sub(re.escape(INSTALL_LOG_BEGIN) + r".*?" + re.escape(INSTALL_LOG_END), "", rest, flags=re.S)
    report.rest = "\n".join(line for line in rest.splitlines() if not line.startswith("GPUCOMPAT-"))
    return report


def _condition(conditions, kind: str):
    """The condition of that type whose status is True, or None."""
    return next((c for c in conditions or [] if c.type == kind and c.status == "True"), None)


def finished(job) -> bool:
    """A Job is finished when it has a terminal condition, Complete or Failed (batch/v1 JobStatus)."""
    status = job.status
    return bool(status and (_condition(status.conditions, "Complete") or _condition(status.conditions, "Failed")))


def _container(pod):
    statuses = (pod.status.container_statuses or []) if pod is not None and pod.status else []
    return next((s for s in statuses if s.name == "probe"), statuses[0] if statuses else None)


def _disruption(pod) -> tuple[str, str] | None:
    """(cause, what happened) when the cluster stopped the pod (preemption, eviction, node loss,
    node shutdown): the DisruptionTarget condition's reason, or the pod's own status reason."""
    status = pod.status
    target = _condition(status.conditions, "DisruptionTarget")
    if target is not None:
        reason, message = target.reason or "DisruptionTarget", target.message or ""
    elif status.reason and (status.reason in DISRUPTED or status.reason.startswith("OutOf")):
        reason, message = status.reason, status.message or ""
    else:
        return None
    text = f"{message} {status.message or ''}".lower()
    cause = "disk" if "ephemeral" in text or "diskpressure" in text else "scheduler"
    return cause, f"the cluster stopped the pod ({reason}): {message or status.message or 'no message'}"


def _seconds(pod) -> float:
    state = _container(pod)
    terminated = state.state.terminated if state is not None and state.state else None
    if terminated is not None and terminated.started_at and terminated.finished_at:
        return round((terminated.finished_at - terminated.started_at).total_seconds(), 3)
    return 0.0


def observation_from(job, pod, log: str, log_error: str | None = None) -> Observation:
    """A finished Job (V1Job), its pod (V1Pod, None if it is gone) and the pod's log -> what
    analysis.classify reads. The log decides what the script itself reported; the Job's
    conditions and the pod's status decide the rest (batch/v1 JobStatus, core/v1 PodStatus)."""
    report = parse_log(log)
    failed = _condition(job.status.conditions if job.status else None, "Failed")
    container = _container(pod)
    terminated = container.state.terminated if container is not None and container.state else None
    stderr = report.rest
    if terminated is not None and terminated.reason not in (None, "Completed", "Error"):
        stderr += f"\ncontainer terminated: {terminated.reason} (exit {terminated.exit_code})"
    stderr = stderr[-3000:]
    duration = _seconds(pod) if pod is not None else 0.0
    image = job.spec.template.spec.containers[0].image if job.spec and job.spec.template.spec.containers else "?"

    if report.exit_code is not None:  # the script ended on its own: what it printed is the whole story
        if report.no_uv:
            return Observation(facts={}, untested=(IMAGE_CAUSE, f"uv is not on the PATH of the image {image}; "
                                                   "uv environments need an image that has it"), duration_s=duration)
        if report.install_timeout:
            return Observation(facts={}, timed_out_stage="install", install_log=report.install_log, duration_s=duration)
        if report.install_failed is not None:
            return Observation(facts={}, install_failed=True, install_log=report.install_log, duration_s=duration)
        code = report.exit_code
        return Observation(facts=report.facts, returncode=code, signal=code - 128 if code > 128 else None, stderr=stderr,
                           duration_s=duration)

    deadline = (failed is not None and failed.reason == "DeadlineExceeded") or (
        pod is not None and pod.status.reason == "DeadlineExceeded")
    if deadline and not report.facts.get("finished"):
        what = (pod.status.message if pod is not None and pod.status.reason == "DeadlineExceeded" else None) or (
            failed.message if failed is not None else None) or "activeDeadlineSeconds was reached"
        stage = report.stage_reached()
        if stage is None:  # the pod and its log are gone, or it never started its script
            return Observation(facts={}, untested=("scheduler", f"{what}; nothing in the pod log says which stage ran (the pod "
                                                   "was deleted with its log, or never started)"))
        if stage == "install":
            return Observation(facts={}, timed_out_stage="install", install_log=report.install_log or report.rest[-6000:],
                               duration_s=duration)
        return Observation(facts=report.facts, timed_out_stage=stage, stderr=stderr, duration_s=duration)
    if pod is None:
        why = f"{failed.reason}: {failed.message}" if failed is not None else "no pod left"
        return Observation(facts={}, untested=("scheduler", f"the Job's pod is gone before its log was read (its node was lost, "
                                               f"or it was deleted): {why}"))
    disrupted = _disruption(pod)
    if disrupted:
        return Observation(facts=report.facts, untested=disrupted, stderr=stderr, duration_s=duration)
    if not log and log_error:
        return Observation(facts={}, untested=("scheduler", f"the pod's log could not be read: {log_error}"))
    if terminated is not None and terminated.reason in START_FAILURES:
        return Observation(facts={}, untested=(IMAGE_CAUSE, f"the container of image {image} could not start: "
                                               f"{terminated.reason}: {terminated.message or ''}".strip()))
    code = terminated.exit_code if terminated is not None else (143 if report.terminated else None)
    if report.terminated and (code is None or code == 0):
        code = 143  # SIGTERM from outside: someone deleted the pod
    return Observation(facts=report.facts, returncode=code, signal=code - 128 if code and code > 128 else None,
                       stderr=stderr, duration_s=duration)
