"""`kubernetes`: one Job per cell, created and watched with the official client.

What goes to the cluster (all of it written under the work directory first, so a dry run or
`kubectl apply -f` sends exactly the same objects):

- ConfigMaps, immutable and named by a hash of their content: one holds the probe; one per
  distinct environment holds its install.sh and requirements.txt, rendered by the same
  `envs.provider(...).install_script` every executor uses (the stack's Python, its index,
  the wheelhouse, offline mode). Each stays far below the 1 MiB a ConfigMap may hold; one
  that would not fit is refused with one sentence before anything is created.
- One Job per cell (backoffLimit 0, restartPolicy Never): the plan's image runs a fixed
  POSIX sh script that only reads those files (nothing from a plan is interpolated into
  it), asks for one `nvidia.com/gpu`, the plan's cpu/memory requests, selects the class's
  nodes by GPU Feature Discovery labels (declared classes too: product name and compute
  capability as GFD writes them) and tolerates the `nvidia.com/gpu` taint.

Time limits: the script stops an install that runs past the install timeout, the probe arms
its own per-stage alarms, the pod's activeDeadlineSeconds (counted from the kubelet taking
the pod, so it covers the image pull: pending + install + cell) bounds the rest, and the
Job's activeDeadlineSeconds (that plus the pending timeout) is a last backstop. On SIGTERM
the script prints the probe's result before it exits, so a deadline leaves the stage reached.

Watching: one labelled list of the sweep's Jobs per poll interval (whatever the number of
cells), plus one labelled list of its pods only while some Job has no running pod. Jobs are
named by the sweep's label (unique per store and sweep) and the cell id; `--resume` adopts a
Job that is still running or finished uncollected, and replaces one whose result was stored.
No live cluster was run in this project's tests (see docs/executors.md).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from .. import envs
from ..errors import UserError
from ..model import BenchSpec, Cell, Observation, Target, Timeouts
from ..quoting import k8s_name, shell_word
from .base import DONE, PROBE_SOURCE, RUNNING, WAITING, JobDir, JobSettings, probe_arguments

try:
    from kubernetes.client.exceptions import ApiException
except ImportError:  # the client is an extra; without it nothing reaches a cluster anyway
    class ApiException(Exception):  # type: ignore[no-redef]
        status = None
        reason = body = None

# Lines the job script prints to the pod log, the only channel back from the pod.
BEGIN, END = "GPUCOMPAT-RESULT-BEGIN", "GPUCOMPAT-RESULT-END"
STAGE_MARK = "GPUCOMPAT-STAGE"  # "GPUCOMPAT-STAGE install" / "... probe"
EXIT_MARK = "GPUCOMPAT-EXIT"  # the script ended on its own, with this exit code
TERM_MARK = "GPUCOMPAT-TERMINATED"  # the container got SIGTERM (a deadline, an eviction, a deletion)
NO_UV_MARK = "GPUCOMPAT-NO-UV"
INSTALL_FAILED_MARK = "GPUCOMPAT-INSTALL-FAILED"
INSTALL_TIMEOUT_MARK = "GPUCOMPAT-INSTALL-TIMEOUT"
INSTALL_LOG_BEGIN, INSTALL_LOG_END = "GPUCOMPAT-INSTALL-LOG-BEGIN", "GPUCOMPAT-INSTALL-LOG-END"

SWEEP_LABEL, CELL_LABEL = "gpucompat/sweep", "gpucompat/cell"
COLLECTED = "gpucompat/collected"  # annotation on a Job whose result gpucompat has read
GPU_RESOURCE = "nvidia.com/gpu"
# GPU Feature Discovery's labels (NVIDIA/k8s-device-plugin, internal/lm/resource.go)
PRODUCT, CC_MAJOR, CC_MINOR = "nvidia.com/gpu.product", "nvidia.com/gpu.compute.major", "nvidia.com/gpu.compute.minor"

PROBE_MOUNT, ENV_MOUNT, WORK_DIR = "/gpucompat", "/gpucompat-env", "/gpucompat-work"
CONFIGMAP_LIMIT = 1024 * 1024  # bytes of data a ConfigMap may hold (kubernetes.io, ConfigMaps)
API_TIMEOUT = 60  # seconds for one API call
API_PATIENCE = 300.0  # an API that does not answer for this long ends the sweep with one sentence
STUCK_PATIENCE = 300.0  # a container that cannot be pulled or created, this long (or the pending timeout if shorter)
ID_FILE = ".gpucompat-k8s-id"

PULL_FAILURES = {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull", "RegistryUnavailable",
                 "SignatureValidationFailed"}
PERMANENT = {"InvalidImageName", "ErrImageNeverPull"}  # retrying cannot help
CREATE_FAILURES = {"CreateContainerConfigError", "CreateContainerError", "RunContainerError"}
START_FAILURES = {"StartError", "ContainerCannotRun"}  # the image has no /bin/sh, or it cannot be run
# Pod status reasons that say the cluster stopped the pod, not the stack (besides a DisruptionTarget condition).
DISRUPTED = {"Evicted", "Preempting", "NodeLost", "NodeShutdown", "Shutdown", "Terminated", "UnexpectedAdmissionError", "NodeAffinity"}
# The image is the plan's choice, not the stack's: an image that cannot run the job is "could not test".
IMAGE_CAUSE = "image"
PROBE_STAGES = ("import", "device", "compute", "bench")

_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?", re.ASCII)


def gfd_product(name: str) -> str:
    """The value GPU Feature Discovery writes to nvidia.com/gpu.product for a device name: its
    sanitise() drops every character but letters, digits, '-', '_', '.' and spaces, then joins
    the words with '-' ("NVIDIA A100-SXM4-80GB" -> "NVIDIA-A100-SXM4-80GB"). Shared GPUs get
    "-SHARED" appended and MIG devices "-MIG-<profile>"; those are named by discovery."""
    return "-".join(re.sub(r"[^A-Za-z0-9\-_. ]", "", name).split())


def node_selector(target: Target) -> dict[str, str]:
    """A discovered class: the GFD labels discovery found on its nodes. A declared class: its name
    and compute capability as GFD labels, so it selects exactly the nodes of that class."""
    if target.selector:
        return dict(item.split("=", 1) for item in target.selector)
    if not target.declared:
        return {}
    selector = {PRODUCT: gfd_product(target.name)}
    if target.cc:
        major, _, minor = target.cc.partition(".")
        selector[CC_MAJOR], selector[CC_MINOR] = major, minor or "0"
    for key, value in selector.items():
        if not value or len(value) > 63 or not _LABEL_VALUE.fullmatch(value):
            raise UserError(f"the GPU class {target.name[:60]!r} cannot be selected by the node label {key}={value[:70]!r}; "
                            "declare its name as the driver reports it (e.g. 'NVIDIA A100-SXM4-80GB').")
    return selector


def sweep_label(workdir: Path) -> str:
    """The sweep's name on the cluster, on every object it creates: its work directory's name and a
    hash of the directory's full path (the store it belongs to: job directories live beside the
    database) and of a random id kept in the directory (two machines whose stores have the same
    path, e.g. /root/.local/share/gpucompat, stay apart). A resumed sweep reuses the directory, so
    it finds its own label again. At most 50 characters, so a Job's name (the label, '-c', the
    cell id) stays within 63."""
    workdir = workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    marker = workdir / ID_FILE
    try:
        with marker.open("x") as handle:
            handle.write(uuid.uuid4().hex + "\n")
    except FileExistsError:
        pass
    token = marker.read_text().strip()
    return k8s_name(f"gpucompat-{workdir.name}", f"{workdir}\n{token}", limit=50)


def _digest(*texts: str) -> str:
    return hashlib.sha256("\0".join(texts).encode()).hexdigest()[:12]


def _labels(sweep: str, **more: str) -> dict[str, str]:
    return {"app.kubernetes.io/managed-by": "gpucompat", SWEEP_LABEL: sweep, **more}


def _config_map(name: str, sweep: str, namespace: str, data: dict[str, str], what: str) -> dict:
    size = sum(len(k.encode()) + len(v.encode()) for k, v in data.items())
    if size > CONFIGMAP_LIMIT:
        raise UserError(f"{what} is {size} bytes, more than one ConfigMap can hold ({CONFIGMAP_LIMIT}); "
                        "this stack cannot be sent to Kubernetes as it is.")
    return {"apiVersion": "v1", "kind": "ConfigMap", "immutable": True,
            "metadata": {"name": name, "namespace": namespace, "labels": _labels(sweep)}, "data": data}


def probe_config_map(sweep: str, namespace: str) -> dict:
    source = PROBE_SOURCE.read_text()
    return _config_map(f"{sweep}-p{_digest(source)}", sweep, namespace, {"probe.py": source}, "the probe")


def env_config_map(sweep: str, namespace: str, install: str, requirements: str) -> dict:
    """One environment's files; cells that build the same environment share it."""
    return _config_map(f"{sweep}-e{_digest(install, requirements)}", sweep, namespace,
                       {"install.sh": install, "requirements.txt": requirements}, "an environment's install.sh and requirements.txt")


def deadlines(timeouts: Timeouts) -> tuple[int, int]:
    """(the pod's activeDeadlineSeconds, the Job's). The pod's counts from the kubelet taking the pod,
    before the image pull (allowed the pending timeout); the Job's from its creation, so it also
    allows the scheduler's wait, which gpucompat itself ends at the pending timeout."""
    pod = math.ceil(timeouts.pending + timeouts.install + timeouts.cell)
    return pod, pod + math.ceil(timeouts.pending) + 60


def job_script(framework: str, python: str, install: bool, timeouts: Timeouts, bench: BenchSpec | None = None) -> str:
    """The container's /bin/sh -c script. Only constants, numbers and quoted words go into it; the
    environment's files come from their ConfigMap. Long steps run in the background under `wait`,
    so SIGTERM is handled at once: the trap prints what the probe wrote so far and exits."""
    lines = [
        f"cp {PROBE_MOUNT}/probe.py probe.py || exit 70",
        "stage=start; child=; dog=",
        "report() {",
        f'  if [ "$stage" = install ]; then echo {INSTALL_LOG_BEGIN}; tail -c 6000 install.log 2>/dev/null; echo; echo {INSTALL_LOG_END}; fi',
        f'  if [ "$stage" = probe ]; then echo {BEGIN}; cat result.json 2>/dev/null; echo; echo {END}; fi',
        "}",
        f"trap 'echo {TERM_MARK}; kill -TERM $child $dog 2>/dev/null; report; exit 143' TERM",
    ]
    if install:
        lines += [
            f"command -v uv >/dev/null 2>&1 || {{ echo {NO_UV_MARK}; echo '{EXIT_MARK} 1'; exit 1; }}",
            f"cp {ENV_MOUNT}/install.sh {ENV_MOUNT}/requirements.txt . || exit 70",
            "unset PYTHONPATH  # a built environment is tested as built",
            f"stage=install; echo '{STAGE_MARK} install'",
            "sh install.sh > install.log 2>&1 & child=$!",
            # the watchdog: after the install timeout, mark it and stop the install (its own sleep goes with it)
            f"( trap 'kill \"$nap\" 2>/dev/null; exit 0' TERM; sleep {math.ceil(timeouts.install)} & nap=$!; wait \"$nap\" && "
            "{ touch install.timeout; kill -TERM \"$child\" 2>/dev/null; } ) & dog=$!",
            'wait "$child"; status=$?; child=',
            'kill "$dog" 2>/dev/null; dog=',
            'if [ "$status" -ne 0 ]; then',
            f"  if [ -e install.timeout ]; then echo {INSTALL_TIMEOUT_MARK}; else echo \"{INSTALL_FAILED_MARK} $status\"; fi",
            f"  report; echo '{EXIT_MARK} 1'; exit 1",
            "fi",
        ]
    lines += [
        f"stage=probe; echo '{STAGE_MARK} probe'",
        f"{shell_word(python)} probe.py {probe_arguments(framework, timeouts, bench)} & child=$!",
        'wait "$child"; code=$?; child=',
        "report",
        f'echo "{EXIT_MARK} $code"',
        'exit "$code"',
    ]
    return "\n".join(lines) + "\n"


def job_manifest(cell: Cell, sweep: str, image: str, namespace: str, timeouts: Timeouts, *, probe_map: str | None = None,
                 env_map: str | None = None, python: str = "python3", requests: dict | None = None,
                 wheelhouse: str | None = None, bench: BenchSpec | None = None) -> dict:
    """`sweep` is sweep_label(workdir); `probe_map` and `env_map` the names of the ConfigMaps with the
    probe and with this cell's install.sh and requirements.txt (None: nothing is installed)."""
    labels = _labels(sweep, **{CELL_LABEL: str(cell.id)})
    resources: dict = {"limits": {GPU_RESOURCE: "1"}}  # an extended resource: the limit is also the request
    asked = {key: value for key, value in (requests or {}).items() if value}
    if asked:
        resources["requests"] = asked
    mounts = [{"name": "probe", "mountPath": PROBE_MOUNT, "readOnly": True}, {"name": "work", "mountPath": WORK_DIR}]
    volumes = [{"name": "probe", "configMap": {"name": probe_map or probe_config_map(sweep, namespace)["metadata"]["name"]}},
               {"name": "work", "emptyDir": {}}]
    if env_map:
        mounts.append({"name": "env", "mountPath": ENV_MOUNT, "readOnly": True})
        volumes.append({"name": "env", "configMap": {"name": env_map}})
    if wheelhouse and env_map:
        # the install script names the wheelhouse by its path: the same directory on every GPU node
        mounts.append({"name": "wheelhouse", "mountPath": wheelhouse, "readOnly": True})
        volumes.append({"name": "wheelhouse", "hostPath": {"path": wheelhouse, "type": "Directory"}})
    pod_deadline, job_deadline = deadlines(timeouts)
    pod_spec = {
        "restartPolicy": "Never",
        "activeDeadlineSeconds": pod_deadline,
        "terminationGracePeriodSeconds": 30,
        "containers": [{
            "name": "probe",
            "image": image,
            "command": ["/bin/sh", "-c", job_script(cell.stack.framework, python, env_map is not None, timeouts, bench)],
            "workingDir": WORK_DIR,
            "resources": resources,
            "volumeMounts": mounts,
        }],
        "volumes": volumes,
        "tolerations": [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}],
    }
    selector = node_selector(cell.target)
    if selector:
        pod_spec["nodeSelector"] = selector
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"{sweep}-c{cell.id}", "namespace": namespace, "labels": labels},
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": job_deadline,
            "ttlSecondsAfterFinished": 7 * 24 * 3600,
            "template": {"metadata": {"labels": labels}, "spec": pod_spec},
        },
    }


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


def _api_error(exc: BaseException) -> str:
    """One line from an API error: status, reason and the server's own message."""
    if isinstance(exc, ApiException) and getattr(exc, "status", None):
        message = ""
        try:
            message = json.loads(exc.body or "{}").get("message", "")
        except (ValueError, AttributeError):
            message = str(exc.body or "")[:200]
        return f"{exc.status} {exc.reason}" + (f": {message}" if message else "")
    return f"{exc.__class__.__name__}: {str(exc)[:200]}"


def _newest(items):
    def when(item):
        stamp = item.metadata.creation_timestamp
        return stamp.timestamp() if stamp else 0.0

    return max(items, key=when) if items else None


def _owned_by(pods, job) -> list:
    """The pods of exactly this Job (an older Job of the same name may still be going)."""
    uid = job.metadata.uid
    return [p for p in pods if not uid or any(o.uid == uid for o in p.metadata.owner_references or [])]


def pod_image(image: str) -> str:
    """A container stack's image as a pod names it: an OCI reference (docker:// dropped). SIF files and
    oras:// artifacts are Apptainer's, which a kubelet cannot run."""
    from ..envs.container import image_kind, oci_name

    if image_kind(image) in ("sif", "oras"):
        raise UserError(f"Kubernetes runs OCI images; {image[:100]!r} is Apptainer's (a SIF file or an oras:// artifact): "
                        "run it with the local, slurm or htcondor executor.")
    return oci_name(image)


def _write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=1) + "\n")


class KubernetesExecutor:
    name = "kubernetes"

    detached = False

    def __init__(self, settings: JobSettings, image: str | None = None, namespace: str = "default", memory: int | None = None,
                 cpu: int | None = None, poll_s: float = 2.0):
        if not image:
            raise UserError("the kubernetes executor needs an image: add [kubernetes] image = \"...\" to the plan.")
        self.timeouts = settings.timeouts
        self.wheelhouse = settings.wheelhouse
        self.offline = settings.offline
        self.bench = settings.bench
        self.requests = {"memory": f"{memory}Mi" if memory else None, "cpu": str(cpu) if cpu else None}
        self.image = image
        self.namespace = namespace
        self.poll_s = poll_s
        self.core = None  # CoreV1Api and BatchV1Api, made from the kubeconfig on first use
        self.batch = None
        self.submitted = ""
        self.sweep: str | None = None
        self.adopted: set[int] = set()  # cells whose Job an earlier run had created
        self._cells: list[int] = []  # every cell handed to submit, in order
        self._names: dict[int, str] = {}  # cell -> its Job's name
        self._container_cells: dict[int, bool] = {}  # cell -> its stack is a container image (env "container")
        self._to_create: dict[int, dict] = {}  # cell -> manifest, once the Job of that name left from a stored result is gone
        self._since: dict[int, float] = {}  # cell -> when this executor created (or adopted) its Job
        self._stuck: dict[int, float] = {}  # cell -> since when its container cannot be pulled or created
        self._finished: dict[int, object] = {}  # cell -> its V1Job in a terminal condition
        self._final: dict[int, Observation] = {}  # cell -> decided without a pod log (NO_MATCH, refused, deleted)
        self._maps: dict[int, list[Path]] = {}  # cell -> the ConfigMap files its Job mounts
        self._states: dict[int, str] = {}
        self._polled = -math.inf
        self._failing_since: float | None = None

    # -- the API ---------------------------------------------------------------------------------

    def _connect(self):
        if self.core is None or self.batch is None:
            from ..discover.kubernetes import api

            client = api()
            self.core, self.batch = client.CoreV1Api(), client.BatchV1Api()
        return self.core, self.batch

    def precheck(self, cells: list[Cell]) -> dict[int, str | None]:
        """A class whose labels no node carries can never be scheduled; without a cluster (or without
        the right to list nodes), defer to the scheduler."""
        try:
            core, _ = self._connect()
            nodes = core.list_node(_request_timeout=30).items
        except Exception:  # noqa: BLE001 - no cluster to ask
            return {cell.id: None for cell in cells}
        node_labels = [n.metadata.labels or {} for n in nodes]
        verdicts: dict[int, str | None] = {}
        for cell in cells:
            try:
                selector = node_selector(cell.target)
            except UserError:
                verdicts[cell.id] = None  # prepare says why, in one sentence
                continue
            if not selector or any(all(labels.get(k) == v for k, v in selector.items()) for labels in node_labels):
                verdicts[cell.id] = None
                continue
            offered = sorted({f"{labels[PRODUCT]} (cc {labels.get(CC_MAJOR, '?')}.{labels.get(CC_MINOR, '?')})"
                              for labels in node_labels if PRODUCT in labels})
            verdicts[cell.id] = (f"no node carries the labels {', '.join(f'{k}={v}' for k, v in selector.items())}"
                                 + (f"; the GPU nodes offer {', '.join(offered[:6])}" if offered else "; no node has GPU Feature Discovery labels"))
        return verdicts

    # -- files -----------------------------------------------------------------------------------

    def prepare(self, cells: list[Cell], workdir: Path) -> list[JobDir]:
        workdir.mkdir(parents=True, exist_ok=True)
        if self.wheelhouse and not Path(self.wheelhouse).is_absolute():
            raise UserError(f"the wheelhouse {self.wheelhouse[:100]!r} must be an absolute path: Kubernetes mounts it from "
                            "the GPU nodes at that same path.")
        self.sweep = sweep = sweep_label(workdir)
        probe = probe_config_map(sweep, self.namespace)
        _write_json(workdir / "configmap.json", probe)
        jobs = []
        for cell in cells:
            path = workdir / f"cell-{cell.id}"
            path.mkdir(parents=True, exist_ok=True)
            for stale in ("pod.log", "k8s-status.json"):  # a resumed cell starts over
                (path / stale).unlink(missing_ok=True)
            provider = envs.provider(cell.stack.env)
            image = self.image
            if cell.stack.env == "container":  # the pod runs the stack's image itself: the kubelet pulls it, nothing is installed
                image, script = pod_image(cell.stack.image or ""), None
            else:
                script = provider.install_script(cell.resolved, "env", "requirements.txt", self.wheelhouse, self.offline,
                                                 uv="uv", same_machine=False)
            maps = [workdir / "configmap.json"]
            env_name, python = None, "python3"  # env "current": the image's own python3, as it is
            if script is not None:
                requirements = provider.requirements_text(cell.resolved)
                (path / "install.sh").write_text(script)
                (path / "requirements.txt").write_text(requirements)
                env = env_config_map(sweep, self.namespace, script, requirements)
                env_name = env["metadata"]["name"]
                env_dir = workdir / f"env-{env_name[-12:]}"
                env_dir.mkdir(exist_ok=True)
                _write_json(env_dir / "configmap.json", env)
                maps.append(env_dir / "configmap.json")
                python = provider.interpreter(cell.resolved, "env")
            manifest = job_manifest(cell, sweep, image, self.namespace, self.timeouts, probe_map=probe["metadata"]["name"],
                                    env_map=env_name, python=python, requests=self.requests, wheelhouse=self.wheelhouse, bench=self.bench)
            _write_json(path / "job.json", manifest)
            self._maps[cell.id] = maps
            self._container_cells[cell.id] = cell.stack.env == "container"
            jobs.append(JobDir(cell, path, path, python))
        return jobs

    # -- submit, adopt -----------------------------------------------------------------------------

    def submit(self, jobs: list[JobDir]) -> None:
        if not jobs:
            return
        workdir = jobs[0].path.parent
        maps = list(dict.fromkeys(p for job in jobs for p in self._maps.get(job.id, [workdir / "configmap.json"])))
        try:
            self._connect()
        except UserError as exc:
            files = " ".join(shell_word(p) for p in [*maps, *(j.path / "job.json" for j in jobs)])
            self.submitted = f"no cluster ({exc}); apply by hand: kubectl apply -f {files}"
            raise UserError(self.submitted) from None
        for path in maps:
            self._ensure_config_map(json.loads(path.read_text()))
        now = time.monotonic()
        for job in jobs:
            manifest = json.loads((job.path / "job.json").read_text())
            self.sweep = manifest["metadata"]["labels"][SWEEP_LABEL]
            self._cells.append(job.id)
            self._since[job.id] = now
            self._start(job.id, manifest)
        adopted = f", {len(self.adopted)} of them adopted from an earlier run" if self.adopted else ""
        self.submitted = f"{len(jobs)} Jobs in namespace {self.namespace} labelled {SWEEP_LABEL}={self.sweep}{adopted}"

    def _ensure_config_map(self, manifest: dict) -> None:
        try:
            self.core.create_namespaced_config_map(self.namespace, manifest, _request_timeout=API_TIMEOUT)
        except ApiException as exc:
            if exc.status == 409:  # created by an earlier run of this sweep: same name, so the same (immutable) content
                return
            raise UserError(f"the Kubernetes API refused the ConfigMap {manifest['metadata']['name']} in namespace "
                            f"{self.namespace}: {_api_error(exc)}") from None

    def _create(self, cell_id: int, manifest: dict) -> bool:
        """Create the cell's Job: True if it was created or refused (the refusal recorded), False if one
        of that name is already there (409 Conflict)."""
        try:
            self.batch.create_namespaced_job(self.namespace, manifest, _request_timeout=API_TIMEOUT)
        except ApiException as exc:
            if exc.status == 409:
                return False
            self._refused(cell_id, exc)
            return True
        self._names[cell_id] = manifest["metadata"]["name"]
        return True

    def _start(self, cell_id: int, manifest: dict) -> None:
        """Create the cell's Job; one of that name already there is adopted if its result was never
        read, and replaced if it was (a cell `--resume` retries)."""
        if self._create(cell_id, manifest):
            return
        name = manifest["metadata"]["name"]
        try:
            existing = self.batch.read_namespaced_job(name, self.namespace, _request_timeout=API_TIMEOUT)
        except ApiException as exc:
            if exc.status == 404:  # gone in between: create it at the next poll
                self._to_create[cell_id] = manifest
                return
            self._refused(cell_id, exc)
            return
        labels = existing.metadata.labels or {}
        if labels.get(SWEEP_LABEL) != self.sweep or labels.get(CELL_LABEL) != str(cell_id):
            raise UserError(f"a Job named {name} already exists in namespace {self.namespace} and was not made for cell "
                            f"{cell_id} of this sweep; delete it or choose another namespace.")
        if existing.metadata.deletion_timestamp is None and not (existing.metadata.annotations or {}).get(COLLECTED):
            self._names[cell_id] = name  # still running, or finished and never collected: its result is this cell's
            self.adopted.add(cell_id)
            return
        if existing.metadata.deletion_timestamp is None:
            self._delete(name)  # in the background: the Job object goes at once, its pod after it
            if self._create(cell_id, manifest):
                return
        self._to_create[cell_id] = manifest  # still going: created again once it is gone (a later poll)

    def _refused(self, cell_id: int, exc: BaseException) -> None:
        if getattr(exc, "status", None) in (400, 422):  # the API says the manifest is wrong: ours
            self._final[cell_id] = Observation(facts={}, internal=f"the Kubernetes API refused the Job: {_api_error(exc)}")
        else:  # a quota, a policy, a server error: the cluster would not take the job
            self._final[cell_id] = Observation(facts={}, untested=("scheduler", f"the Kubernetes API refused the Job: {_api_error(exc)}"))

    def _delete(self, name: str) -> None:
        try:
            self.batch.delete_namespaced_job(name, self.namespace, propagation_policy="Background", _request_timeout=API_TIMEOUT)
        except ApiException as exc:
            if exc.status != 404:
                raise

    # -- watch -----------------------------------------------------------------------------------

    def poll(self) -> dict[int, str]:
        """At most once per poll interval (the sweep asks every 50 ms): one list of the sweep's Jobs by
        label, and one list of its pods only while some Job has no running pod."""
        now = time.monotonic()
        if now - self._polled < self.poll_s:
            return dict(self._states)
        self._polled = now
        try:
            listed = self.batch.list_namespaced_job(self.namespace, label_selector=f"{SWEEP_LABEL}={self.sweep}",
                                                    _request_timeout=API_TIMEOUT).items
        except Exception as exc:  # noqa: BLE001 - a blip is waited out, a lasting silence is one sentence
            self._api_trouble(now, exc)
            return dict(self._states)
        self._failing_since = None
        by_name = {job.metadata.name: job for job in listed}
        states: dict[int, str] = {}
        not_running = []
        for cell_id in self._cells:
            if cell_id in self._final or cell_id in self._finished:
                states[cell_id] = DONE
            elif cell_id in self._to_create:
                old = by_name.get(self._to_create[cell_id]["metadata"]["name"])
                if old is None:
                    manifest = self._to_create.pop(cell_id)
                    self._since[cell_id] = now
                    self._start(cell_id, manifest)
                states[cell_id] = DONE if cell_id in self._final else WAITING
            else:
                job = by_name.get(self._names[cell_id])
                if job is None:
                    self._final[cell_id] = Observation(facts={}, untested=("interrupted", f"the Job {self._names[cell_id]} was "
                                                                           "deleted from outside before it finished"))
                    states[cell_id] = DONE
                elif finished(job):
                    self._finished[cell_id] = job
                    states[cell_id] = DONE
                elif job.status is not None and (job.status.ready or 0) > 0:
                    self._stuck.pop(cell_id, None)
                    states[cell_id] = RUNNING
                else:
                    not_running.append((cell_id, job))
        if not_running:
            try:
                pods = self.core.list_namespaced_pod(self.namespace, label_selector=f"{SWEEP_LABEL}={self.sweep}",
                                                     _request_timeout=API_TIMEOUT).items
            except Exception as exc:  # noqa: BLE001
                self._api_trouble(now, exc)
                pods = None
            for cell_id, job in not_running:
                states[cell_id] = WAITING if pods is None else self._not_running(cell_id, job, _owned_by(pods, job), now)
        self._states = states
        return dict(states)

    def _api_trouble(self, now: float, exc: BaseException) -> None:
        if self._failing_since is None:
            self._failing_since = now
        if now - self._failing_since > API_PATIENCE:
            raise UserError(f"the Kubernetes API has not answered for {API_PATIENCE:.0f} s ({_api_error(exc)}); "
                            "resume the sweep with `gpucompat sweep --resume ID` once it answers.")

    def _not_running(self, cell_id: int, job, pods: list, now: float) -> str:
        """A Job with no ready pod: pending (scheduling, pulling the image) or just ending."""
        pending = self.timeouts.pending
        waited = now - self._since.get(cell_id, now)
        pod = _newest(pods)
        if pod is None:
            if waited > pending:
                self._give_up(cell_id, Observation(facts={}, untested=("scheduler", f"the Job created no pod in {pending:.0f} s: "
                                                                       f"{self._event_message('Job', job.metadata.name, 'FailedCreate')}")))
                return DONE
            return WAITING
        if pod.status is not None and pod.status.phase not in (None, "Pending"):
            return RUNNING  # started (a cluster too old to count ready pods), or ending: the Job's condition follows
        container = _container(pod)
        waiting = container.state.waiting if container is not None and container.state else None
        reason = waiting.reason if waiting is not None else None
        if reason in PULL_FAILURES or reason in CREATE_FAILURES:
            since = self._stuck.setdefault(cell_id, now)
            if reason in PERMANENT or now - since > min(pending, STUCK_PATIENCE):
                cause = IMAGE_CAUSE if reason in PULL_FAILURES else "scheduler"
                image = job.spec.template.spec.containers[0].image if job.spec and job.spec.template.spec.containers else self.image
                what = f"the image {image} could not be pulled" if reason in PULL_FAILURES else "the container could not be created"
                if reason in PULL_FAILURES and self._container_cells.get(cell_id):
                    # the stack's own image: analysis tells "no such image or tag" (ENV_UNRESOLVABLE) from "could not pull"
                    self._give_up(cell_id, Observation(facts={}, install_failed=True,
                                                       install_log=f"{what}: {reason}: {waiting.message or 'no message'}"))
                    return DONE
                self._give_up(cell_id, Observation(facts={}, untested=(cause, f"{what}: {reason}: {waiting.message or 'no message'}")))
                return DONE
            return WAITING
        self._stuck.pop(cell_id, None)
        if waited <= pending:
            return WAITING
        scheduled = next((c for c in (pod.status.conditions if pod.status else None) or [] if c.type == "PodScheduled"), None)
        if scheduled is not None and scheduled.status == "False":
            message = self._event_message("Pod", pod.metadata.name, "FailedScheduling") or scheduled.message or scheduled.reason or "pending"
            self._give_up(cell_id, Observation(facts={}, no_match=f"unschedulable for more than {pending:.0f} s: {message}"))
        else:
            where = f" on {pod.spec.node_name}" if pod.spec is not None and pod.spec.node_name else ""
            message = (f"{reason}: {waiting.message}" if waiting is not None and waiting.message else reason) or "pending"
            self._give_up(cell_id, Observation(facts={}, untested=("scheduler", f"scheduled{where} but not started within "
                                                                   f"{pending:.0f} s: {message}")))
        return DONE

    def _event_message(self, kind: str, name: str, reason: str) -> str:
        """The newest event of that reason about the object (the scheduler's or the controller's words)."""
        try:
            events = self.core.list_namespaced_event(self.namespace, field_selector=f"involvedObject.kind={kind},involvedObject.name={name}",
                                                     _request_timeout=API_TIMEOUT).items
        except Exception:  # noqa: BLE001 - the message is evidence, not a necessity
            return ""

        def when(event):
            stamp = event.last_timestamp or event.event_time or event.metadata.creation_timestamp
            return stamp.timestamp() if stamp else 0.0

        matching = [e for e in events if e.reason == reason]
        return (max(matching, key=when).message or "") if matching else ""

    def _give_up(self, cell_id: int, observation: Observation) -> None:
        self._final[cell_id] = observation
        try:
            self._delete(self._names[cell_id])
        except Exception:  # noqa: BLE001 - best effort: a Job left behind still ends by its activeDeadlineSeconds
            pass

    # -- results ---------------------------------------------------------------------------------

    def collect(self, job: JobDir) -> Observation:
        if job.id in self._final:
            return self._final[job.id]
        finished_job = self._finished[job.id]
        pod, log, log_error = None, "", None
        try:
            pods = self.core.list_namespaced_pod(self.namespace, label_selector=f"{SWEEP_LABEL}={self.sweep},{CELL_LABEL}={job.id}",
                                                 _request_timeout=API_TIMEOUT).items
            pod = _newest(_owned_by(pods, finished_job))
            if pod is not None:
                log = self.core.read_namespaced_pod_log(pod.metadata.name, self.namespace, container="probe",
                                                        _request_timeout=API_TIMEOUT) or ""
        except Exception as exc:  # noqa: BLE001 - recorded as the reason the cell could not be read
            log_error = _api_error(exc)
        (job.path / "pod.log").write_text(log)
        serialize = self.core.api_client.sanitize_for_serialization
        _write_json(job.path / "k8s-status.json", {"job": serialize(finished_job.status), "pod": serialize(pod.status) if pod else None})
        observation = observation_from(finished_job, pod, log, log_error)
        self._mark_collected(self._names[job.id])
        return observation

    def _mark_collected(self, name: str) -> None:
        """So that `--resume` runs this cell afresh if its verdict is retried (UNTESTED), instead of
        adopting the same finished Job again."""
        try:
            self.batch.patch_namespaced_job(name, self.namespace, {"metadata": {"annotations": {COLLECTED: "true"}}},
                                            _content_type="application/merge-patch+json", _request_timeout=API_TIMEOUT)
        except Exception:  # noqa: BLE001 - at worst a retried cell reads the same Job once more
            pass

    def cancel(self, jobs: list[JobDir]) -> None:
        if self.batch is None:
            return
        for job in jobs:
            self._to_create.pop(job.id, None)
            name = self._names.get(job.id)
            if name and job.id not in self._final:
                try:
                    self._delete(name)
                except Exception:  # noqa: BLE001 - cancelling is best effort: the Jobs end by their deadlines
                    pass
