"""What goes to the cluster for one cell, rendered without touching it: the ConfigMaps (the probe,
each environment's install.sh and requirements.txt), the Job and the POSIX sh script its container
runs, its deadlines, and the node selector of its GPU class. Pure functions of the plan and the work
directory; the executor writes them under the work directory and the watcher (api.py) sends them.
"""

from __future__ import annotations

import base64
import hashlib
import math
import re
import uuid
from pathlib import Path

from ...errors import UserError
from ...model import BenchSpec, Cell, Target, Timeouts
from ...quoting import k8s_name, shell_word
from ..base import PROBE_FILE, probe_arguments, probe_pyz

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
ID_FILE = ".gpucompat-k8s-id"

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


def _config_map(name: str, sweep: str, namespace: str, data: dict[str, str], what: str, binary: dict[str, bytes] | None = None) -> dict:
    """`binary`: files that are not UTF-8 text, sent base64-encoded as binaryData (and counted so)."""
    encoded = {key: base64.b64encode(value).decode() for key, value in (binary or {}).items()}
    size = sum(len(k.encode()) + len(v.encode()) for k, v in {**data, **encoded}.items())
    if size > CONFIGMAP_LIMIT:
        raise UserError(f"{what} is {size} bytes, more than one ConfigMap can hold ({CONFIGMAP_LIMIT}); "
                        "this stack cannot be sent to Kubernetes as it is.")
    manifest = {"apiVersion": "v1", "kind": "ConfigMap", "immutable": True,
                "metadata": {"name": name, "namespace": namespace, "labels": _labels(sweep)}}
    if data:
        manifest["data"] = data
    if encoded:
        manifest["binaryData"] = encoded
    return manifest


def probe_config_map(sweep: str, namespace: str) -> dict:
    """probe.pyz as binaryData, named after its file (gpucompat's version and the digest of the probe's sources)."""
    pyz = probe_pyz()
    return _config_map(f"{sweep}-p{_digest(pyz.name)}", sweep, namespace, {}, "the probe", {PROBE_FILE: pyz.read_bytes()})


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
        f"cp {PROBE_MOUNT}/{PROBE_FILE} {PROBE_FILE} || exit 70",
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
        f"{shell_word(python)} {PROBE_FILE} {probe_arguments(framework, timeouts, bench)} & child=$!",
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


def pod_image(image: str) -> str:
    """A container stack's image as a pod names it: an OCI reference (docker:// dropped). SIF files and
    oras:// artifacts are Apptainer's, which a kubelet cannot run."""
    from ...envs.container import image_kind, oci_name

    if image_kind(image) in ("sif", "oras"):
        raise UserError(f"Kubernetes runs OCI images; {image[:100]!r} is Apptainer's (a SIF file or an oras:// artifact): "
                        "run it with the local, slurm or htcondor executor.")
    return oci_name(image)
