"""`kubernetes`: one Job per cell, created and watched with the official client.

Each Job runs the plan's image with the probe (mounted from a ConfigMap), asks for one
`nvidia.com/gpu`, selects the class's nodes by their GPU Feature Discovery labels,
tolerates the usual `nvidia.com/gpu` taint, and is bounded by activeDeadlineSeconds with
backoffLimit 0. The probe's result comes back in the pod log, between two marker lines.
A pod unschedulable past the pending timeout is NO_MATCH with the scheduler's event
message. Without a reachable cluster the manifests are written and the exact
`kubectl apply` command is printed. No live cluster was run in this project's tests.
"""

from __future__ import annotations

import json
import math
import re
import time
from pathlib import Path

from ..errors import UserError
from ..model import Cell, Observation, Target, Timeouts
from .base import DONE, PROBE_SOURCE, RUNNING, WAITING, JobDir, JobSettings, stage_timeout_arg
from .quoting import k8s_name, shell_word

BEGIN, END = "GPUCOMPAT-RESULT-BEGIN", "GPUCOMPAT-RESULT-END"


def node_selector(target: Target) -> dict[str, str]:
    return dict(item.split("=", 1) for item in target.selector)


def sweep_label(workdir: Path) -> str:
    """The sweep's name on the cluster: its work directory's name, made unique by a hash of the
    whole path (the store it belongs to), so two stores sharing a namespace never collide. At most
    50 characters, so a Job's name (the label, '-c', the cell id) stays within 63."""
    return k8s_name(f"gpucompat-{workdir.name}", str(workdir.resolve()), limit=50)


def job_manifest(cell: Cell, sweep: str, image: str, namespace: str, timeouts: Timeouts) -> dict:
    """`sweep` is sweep_label(workdir)."""
    stage_timeouts = stage_timeout_arg(timeouts)
    script = ["cp /gpucompat/probe.py /tmp/probe.py && cd /tmp || exit 70"]
    python = "python3"
    if cell.stack.env == "uv":
        pins = " ".join(shell_word(p) for p in cell.resolved.pins)
        script.append(f"(uv venv --quiet env && uv pip install --python env/bin/python --no-deps {pins}) > install.log 2>&1 "
                      f"|| {{ echo {BEGIN}; echo '{{\"install_failed\": true}}'; echo {END}; tail -c 4000 install.log; exit 0; }}")
        python = "env/bin/python"
    script.append(f"{python} probe.py --framework {shell_word(cell.stack.framework)} --result result.json --stage-timeouts {stage_timeouts}; "
                  f"code=$?; echo {BEGIN}; cat result.json; echo; echo {END}; exit $code")
    labels = {"app.kubernetes.io/managed-by": "gpucompat", "gpucompat/sweep": sweep, "gpucompat/cell": str(cell.id)}
    pod_spec = {
        "restartPolicy": "Never",
        "containers": [{
            "name": "probe",
            "image": image,
            "command": ["/bin/sh", "-c", "\n".join(script)],
            "resources": {"limits": {"nvidia.com/gpu": 1}},
            "volumeMounts": [{"name": "gpucompat", "mountPath": "/gpucompat", "readOnly": True}],
        }],
        "volumes": [{"name": "gpucompat", "configMap": {"name": sweep}}],
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    }
    if cell.target.selector:
        pod_spec["nodeSelector"] = node_selector(cell.target)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"{sweep}-c{cell.id}", "namespace": namespace, "labels": labels},
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": math.ceil(timeouts.install + timeouts.cell),
            "ttlSecondsAfterFinished": 7 * 24 * 3600,
            "template": {"metadata": {"labels": labels}, "spec": pod_spec},
        },
    }


def config_map(sweep: str, namespace: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": sweep, "namespace": namespace},
            "data": {"probe.py": PROBE_SOURCE.read_text()}}


def result_from_log(log: str) -> dict:
    """The probe's JSON between the marker lines of a pod log ({} if it never got there)."""
    found = re.search(re.escape(BEGIN) + r"\s*(.*?)\s*" + re.escape(END), log, re.S)
    if not found:
        return {}
    try:
        return json.loads(found.group(1))
    except ValueError:
        return {}


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
        self.requests = {"memory": f"{memory}Mi" if memory else None, "cpu": str(cpu) if cpu else None}
        self.image = image
        self.namespace = namespace
        self.poll_s = poll_s
        self.client = None
        self.submitted = ""
        self._jobs: dict[int, str] = {}
        self._started = 0.0
        self._no_match: dict[int, str] = {}

    def precheck(self, cells: list[Cell]) -> dict[int, str | None]:
        """A class whose labels no node carries can never be scheduled; without a cluster, defer."""
        try:
            from ..discover.kubernetes import api, classes_from_nodes

            client = api()
            nodes = [client.ApiClient().sanitize_for_serialization(n) for n in client.CoreV1Api().list_node(_request_timeout=30).items]
        except Exception:  # noqa: BLE001 - no cluster to ask
            return {cell.id: None for cell in cells}
        selectors = {t.selector for t in classes_from_nodes(nodes)}
        return {cell.id: None if not cell.target.selector or cell.target.selector in selectors
                else f"no node carries the labels {', '.join(cell.target.selector)}" for cell in cells}

    def prepare(self, cells: list[Cell], workdir: Path) -> list[JobDir]:
        workdir.mkdir(parents=True, exist_ok=True)
        sweep = sweep_label(workdir)
        (workdir / "configmap.json").write_text(json.dumps(config_map(sweep, self.namespace), indent=1))
        jobs = []
        for cell in cells:
            path = workdir / f"cell-{cell.id}"
            path.mkdir(parents=True, exist_ok=True)
            (path / "job.json").write_text(json.dumps(job_manifest(cell, sweep, self.image, self.namespace, self.timeouts), indent=1))
            jobs.append(JobDir(cell, path, path, self.image))
        return jobs

    def submit(self, jobs: list[JobDir]) -> None:
        if not jobs:
            return
        workdir = jobs[0].path.parent
        try:
            from ..discover.kubernetes import api

            client = api()
            core, batch = client.CoreV1Api(), client.BatchV1Api()
            core.create_namespaced_config_map(self.namespace, json.loads((workdir / "configmap.json").read_text()))
            for job in jobs:
                manifest = json.loads((job.path / "job.json").read_text())
                batch.create_namespaced_job(self.namespace, manifest)
                self._jobs[job.id] = manifest["metadata"]["name"]
            self.client = client
            self._started = time.monotonic()
        except UserError as exc:
            files = " ".join(shell_word(p) for p in [workdir / "configmap.json", *(j.path / "job.json" for j in jobs)])
            self.submitted = f"no cluster ({exc}); apply by hand: kubectl apply -f {files}"
            raise UserError(self.submitted) from None

    def poll(self) -> dict[int, str]:
        states = {}
        core, batch = self.client.CoreV1Api(), self.client.BatchV1Api()
        for cell_id, name in self._jobs.items():
            if cell_id in self._no_match:
                states[cell_id] = DONE
                continue
            status = batch.read_namespaced_job_status(name, self.namespace).status
            if status.succeeded or status.failed:
                states[cell_id] = DONE
                continue
            pods = core.list_namespaced_pod(self.namespace, label_selector=f"job-name={name}").items
            phase = pods[0].status.phase if pods else "Pending"
            if phase == "Pending" and time.monotonic() - self._started > self.timeouts.pending:
                events = core.list_namespaced_event(self.namespace, field_selector=f"involvedObject.name={pods[0].metadata.name}").items if pods else []
                reason = next((e.message for e in events if e.reason == "FailedScheduling"), "pending")
                batch.delete_namespaced_job(name, self.namespace, propagation_policy="Background")
                self._no_match[cell_id] = f"unschedulable for more than {self.timeouts.pending:.0f} s: {reason}"
                states[cell_id] = DONE
            else:
                states[cell_id] = WAITING if phase == "Pending" else RUNNING
        return states

    def collect(self, job: JobDir) -> Observation:
        if job.id in self._no_match:
            return Observation(facts={}, no_match=self._no_match[job.id])
        core = self.client.CoreV1Api()
        pods = core.list_namespaced_pod(self.namespace, label_selector=f"job-name={self._jobs[job.id]}").items
        log = core.read_namespaced_pod_log(pods[0].metadata.name, self.namespace) if pods else ""
        (job.path / "pod.log").write_text(log)
        facts = result_from_log(log)
        if facts.get("install_failed"):
            return Observation(facts={}, install_failed=True, install_log=log[-4000:])
        terminated = pods[0].status.container_statuses[0].state.terminated if pods and pods[0].status.container_statuses else None
        code = terminated.exit_code if terminated else None
        deadline = terminated is None or (terminated.reason == "DeadlineExceeded")
        return Observation(facts=facts, returncode=code, signal=code - 128 if code and code > 128 else None,
                           timed_out_stage=facts.get("current_stage") if deadline and facts and not facts.get("finished") else None,
                           stderr=log[-3000:])

    def cancel(self, jobs: list[JobDir]) -> None:
        if self.client:
            batch = self.client.BatchV1Api()
            for name in self._jobs.values():
                batch.delete_namespaced_job(name, self.namespace, propagation_policy="Background")
