"""The Kubernetes executor up to the API boundary. No cluster can run here, so:

- every manifest is validated by kubernetes-validate against the 1.30 schemas (strict);
- the API is the official client itself (BatchV1Api, CoreV1Api: its argument checks, its URLs,
  its JSON, its exception types) talking to an in-memory API server (`FakeApiServer`) that
  answers as the real one does: objects as the API returns them, built from the client's own
  model classes (V1Job, V1JobStatus, V1JobCondition, V1Pod, ...), 409 Conflict with a Status
  body for a name that exists, 404 for one that does not; it records every request;
- the container's script is run here with /bin/sh, the kubelet's part (ConfigMap volumes as
  files, the emptyDir as the working directory, SIGTERM at a deadline) played by the test.
"""

from __future__ import annotations

import base64
import json
import re
import signal
import subprocess
import sys
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import parse_qsl, urlsplit

import pytest

kubernetes = pytest.importorskip("kubernetes", reason="the official client is part of the kubernetes extra")
kubernetes_validate = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate is part of the test extra")

from kubernetes import client as k8s  # noqa: E402
from kubernetes.client import rest  # noqa: E402
from kubernetes.client.exceptions import ApiException  # noqa: E402

from gpucompat import analysis, envs  # noqa: E402
from gpucompat import sweep as sweeps  # noqa: E402
from gpucompat.discover.kubernetes import classes_from_nodes  # noqa: E402
from gpucompat.errors import UserError  # noqa: E402
from gpucompat.executors import kubernetes as kx  # noqa: E402
from gpucompat.executors.base import DONE, RUNNING, WAITING, JobSettings  # noqa: E402
from gpucompat.model import Cell, ResolvedStack, Stack, Target, Timeouts  # noqa: E402
from gpucompat.probe_build import probe_pyz  # noqa: E402
from gpucompat.store import Store, runs_dir_for  # noqa: E402

SERIALIZE = k8s.ApiClient().sanitize_for_serialization
IMAGE = "nvcr.io/nvidia/pytorch:25.01-py3"
A100 = Target("NVIDIA A100-SXM4-80GB", "8.0", declared=True)
V100 = Target("Tesla V100-SXM2-16GB", "7.0", declared=True)
CU128 = Stack("torch", "2.7.1", "cu128", "3.9", "uv", ("torch==2.7.1",), "https://download.pytorch.org/whl/cu128")
CU128_RESOLVED = ResolvedStack(CU128, True, ("torch==2.7.1+cu128", "nvidia-cuda-runtime-cu12==12.8.57", "filelock==3.13.1"), "12.8")
CURRENT = Stack("cuda-runtime", "installed", "default", "current", "current")
CURRENT_RESOLVED = ResolvedStack(CURRENT, True)
PASSING = {"finished": True, "current_stage": "done", "stages": {
    "import": {"ok": True, "facts": {}}, "device": {"ok": True, "facts": {"devices": [{"name": "NVIDIA A100-SXM4-80GB", "cc": "8.0"}]}},
    "compute": {"ok": True, "facts": {"op": "a memcpy round trip"}}}}


# -- the API server -----------------------------------------------------------------------------

def _status(code: int, reason: str, message: str, **details) -> dict:
    """A metav1.Status body, as the API server sends with an error."""
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "details": details, "code": code}


def _matches(labels: dict, selector: str | None) -> bool:
    return all(labels.get(k) == v for k, v in (item.split("=", 1) for item in (selector or "").split(",") if item))


def _merge(base: dict, patch: dict) -> dict:
    for key, value in patch.items():
        base[key] = _merge(base.get(key) or {}, value) if isinstance(value, dict) else value
    return base


class FakeApiServer:
    """What the official client's REST layer talks to: requests in, HTTP responses out."""

    def __init__(self):
        self.calls: list[tuple[str, str, dict]] = []
        self.jobs: dict[str, dict] = {}
        self.configmaps: dict[str, dict] = {}
        self.pods: dict[str, dict] = {}
        self.events: list[dict] = []
        self.logs: dict[str, str] = {}
        self.nodes: list[dict] = []
        self.on_list_jobs = None  # the job controller's and kubelet's part, where a test plays it
        self._clock = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)

    # the REST layer's entry point (kubernetes.client.rest.RESTClientObject.request)
    def request(self, method, url, headers=None, body=None, post_params=None, _request_timeout=None):
        parts = urlsplit(url)
        query = dict(parse_qsl(parts.query))
        self.calls.append((method, parts.path, query))
        code, data = self.route(method, parts.path, query, body, (headers or {}).get("Content-Type"))
        text = data if isinstance(data, str) else json.dumps(data)
        kind = "text/plain" if isinstance(data, str) else "application/json"
        return rest.RESTResponse(SimpleNamespace(status=code, reason={200: "OK", 201: "Created", 400: "Bad Request", 404: "Not Found",
                                                                       409: "Conflict"}.get(code, "?"),
                                                 data=text.encode(), headers={"content-type": kind}))

    def route(self, method, path, query, body, content_type):
        ns = r"/namespaces/(?P<ns>[^/]+)"
        for pattern, handler in (
            (rf"^/apis/batch/v1{ns}/jobs$", self._jobs),
            (rf"^/apis/batch/v1{ns}/jobs/(?P<name>[^/]+)$", self._job),
            (rf"^/api/v1{ns}/configmaps$", self._configmaps),
            (rf"^/api/v1{ns}/pods$", self._pods),
            (rf"^/api/v1{ns}/pods/(?P<name>[^/]+)/log$", self._log),
            (rf"^/api/v1{ns}/events$", self._events),
            (r"^/api/v1/nodes$", self._nodes),
        ):
            found = re.match(pattern, path)
            if found:
                return handler(method, query, body, content_type, **found.groupdict())
        raise AssertionError(f"the executor called an API this server does not know: {method} {path}")

    def _stamp(self) -> str:
        self._clock += timedelta(seconds=1)
        return self._clock.strftime("%Y-%m-%dT%H:%M:%SZ")

    def _create(self, store: dict, kind: str, body: dict, ns: str):
        kubernetes_validate.validate(body, "1.30", strict=True)  # what the API server would refuse, the test refuses
        name = body["metadata"]["name"]
        if name in store:
            return 409, _status(409, "AlreadyExists", f'{kind} "{name}" already exists', name=name, kind=kind)
        obj = json.loads(json.dumps(body))
        obj["metadata"].update(namespace=ns, uid=str(uuid.uuid4()), creationTimestamp=self._stamp(), resourceVersion="1")
        if kind == "jobs":
            obj["status"] = {}
        store[name] = obj
        return 201, obj

    def _jobs(self, method, query, body, content_type, ns):
        if method == "POST":
            return self._create(self.jobs, "jobs", body, ns)
        assert method == "GET"
        if self.on_list_jobs:
            self.on_list_jobs(self)
        items = [j for j in self.jobs.values() if _matches(j["metadata"].get("labels", {}), query.get("labelSelector"))]
        return 200, {"apiVersion": "batch/v1", "kind": "JobList", "metadata": {"resourceVersion": "9"}, "items": items}

    def _job(self, method, query, body, content_type, ns, name):
        job = self.jobs.get(name)
        if job is None:
            return 404, _status(404, "NotFound", f'jobs.batch "{name}" not found', name=name, kind="jobs")
        if method == "GET":
            return 200, job
        if method == "PATCH":
            if content_type != "application/merge-patch+json" or not isinstance(body, dict):
                return 400, _status(400, "BadRequest", "the body does not match its patch type")
            return 200, _merge(job, body)
        assert method == "DELETE" and query.get("propagationPolicy") == "Background"
        del self.jobs[name]
        for pod_name in [p for p, pod in self.pods.items() if pod["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]]:
            del self.pods[pod_name]  # the garbage collector's part, at once
        return 200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": {"name": name, "kind": "jobs"}}

    def _configmaps(self, method, query, body, content_type, ns):
        assert method == "POST"
        return self._create(self.configmaps, "configmaps", body, ns)

    def _pods(self, method, query, body, content_type, ns):
        items = [p for p in self.pods.values() if _matches(p["metadata"].get("labels", {}), query.get("labelSelector"))]
        return 200, {"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": items}

    def _log(self, method, query, body, content_type, ns, name):
        if name not in self.pods:
            return 404, _status(404, "NotFound", f'pods "{name}" not found', name=name, kind="pods")
        assert query.get("container") == "probe"
        return 200, self.logs.get(name, "")

    def _events(self, method, query, body, content_type, ns):
        wanted = dict(item.split("=", 1) for item in query.get("fieldSelector", "").split(",") if item)
        items = [e for e in self.events if all({"involvedObject.kind": e["involvedObject"].get("kind"),
                                                 "involvedObject.name": e["involvedObject"].get("name")}.get(k) == v for k, v in wanted.items())]
        return 200, {"apiVersion": "v1", "kind": "EventList", "metadata": {}, "items": items}

    def _nodes(self, method, query, body, content_type):
        return 200, {"apiVersion": "v1", "kind": "NodeList", "metadata": {}, "items": self.nodes}

    # -- the job controller's and the kubelet's part, played by the tests ----------------------

    def set_job_status(self, name: str, status: k8s.V1JobStatus) -> None:
        self.jobs[name]["status"] = SERIALIZE(status)

    def add_pod(self, job_name: str, status: k8s.V1PodStatus, log: str = "", node: str | None = "gpu-node-1") -> str:
        job = self.jobs[job_name]
        name = f"{job_name}-{uuid.uuid4().hex[:5]}"
        template = job["spec"]["template"]
        pod = k8s.V1Pod(
            api_version="v1", kind="Pod",
            metadata=k8s.V1ObjectMeta(name=name, namespace=job["metadata"]["namespace"], uid=str(uuid.uuid4()),
                                      creation_timestamp=datetime.strptime(self._stamp(), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc),
                                      labels={**template["metadata"]["labels"], "job-name": job_name,
                                              "batch.kubernetes.io/controller-uid": job["metadata"]["uid"]},
                                      owner_references=[k8s.V1OwnerReference(api_version="batch/v1", kind="Job", name=job_name,
                                                                             uid=job["metadata"]["uid"], controller=True)]),
            spec=k8s.V1PodSpec(containers=[k8s.V1Container(name="probe", image=template["spec"]["containers"][0]["image"])],
                               node_name=node),
            status=status)
        self.pods[name] = SERIALIZE(pod)
        self.logs[name] = log
        return name

    def count(self, method: str, path_end: str) -> int:
        return sum(1 for m, path, _ in self.calls if m == method and path.endswith(path_end))


def api_objects(server: FakeApiServer):
    api_client = k8s.ApiClient()
    api_client.rest_client = server  # the client's whole stack runs; only the HTTP exchange is played
    return k8s.CoreV1Api(api_client), k8s.BatchV1Api(api_client)


def make_executor(server: FakeApiServer, timeouts: Timeouts = Timeouts(), poll_s: float = 2.0, **options) -> kx.KubernetesExecutor:
    executor = kx.KubernetesExecutor(JobSettings(timeouts, options.pop("wheelhouse", None), options.pop("offline", False)),
                                     image=IMAGE, namespace="gpu-tests", poll_s=poll_s, **options)
    executor.core, executor.batch = api_objects(server)
    return executor


class Clock:
    def __init__(self, monkeypatch):
        self.now = 1000.0
        monkeypatch.setattr(kx.time, "monotonic", lambda: self.now)

    def advance(self, seconds: float) -> None:
        self.now += seconds


def running_status() -> k8s.V1JobStatus:
    return k8s.V1JobStatus(active=1, ready=1, start_time=datetime(2026, 3, 1, tzinfo=timezone.utc))


def complete_status() -> k8s.V1JobStatus:
    return k8s.V1JobStatus(succeeded=1, conditions=[
        k8s.V1JobCondition(type="SuccessCriteriaMet", status="True", reason="CompletionsReached"),
        k8s.V1JobCondition(type="Complete", status="True", reason="CompletionsReached", message="Reached expected number of succeeded pods")])


def failed_status(reason: str, message: str) -> k8s.V1JobStatus:
    return k8s.V1JobStatus(failed=1, conditions=[
        k8s.V1JobCondition(type="FailureTarget", status="True", reason=reason, message=message),
        k8s.V1JobCondition(type="Failed", status="True", reason=reason, message=message)])


def terminated_pod(phase: str, exit_code: int, reason: str | None = None, message: str | None = None, container_reason: str = "Error",
                   conditions: list | None = None) -> k8s.V1PodStatus:
    started = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
    return k8s.V1PodStatus(phase=phase, reason=reason, message=message, conditions=conditions, container_statuses=[
        k8s.V1ContainerStatus(name="probe", image=IMAGE, image_id="", ready=False, restart_count=0, state=k8s.V1ContainerState(
            terminated=k8s.V1ContainerStateTerminated(exit_code=exit_code, reason=container_reason, started_at=started,
                                                      finished_at=started + timedelta(seconds=42))))])


def cells(stack_resolved: ResolvedStack, targets: list[Target], start: int = 1) -> list[Cell]:
    return [Cell(i, stack_resolved.stack, t, stack_resolved) for i, t in enumerate(targets, start)]


# -- playing the kubelet: the container's script, run here -----------------------------------------

def fake_uv(tmp: Path) -> Path:
    """A `uv` for the pod's PATH: records its arguments, makes env/bin/python, fails or hangs on request."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    uv = bin_dir / "uv"
    uv.write_text('#!/bin/sh\necho "uv $*" >> "$UV_CALLS"\n'
                  'case "$1" in\n'
                  '  venv) mkdir -p env/bin && ln -sf "$ENV_PYTHON" env/bin/python ;;\n'
                  '  pip) if [ -n "$UV_SLEEP" ]; then sleep "$UV_SLEEP"; fi\n'
                  '       if [ -n "$UV_ERROR" ]; then echo "$UV_ERROR" >&2; exit 1; fi ;;\n'
                  'esac\n')
    uv.chmod(0o755)
    return bin_dir


def run_container(manifest: dict, configmaps: dict[str, dict], tmp: Path, env: dict, term_when=None, timeout: float = 120) -> str:
    """The pod's container, as the kubelet runs it: each ConfigMap volume is a directory of its keys,
    the emptyDir is the working directory; the mount paths are rewritten to those directories.
    `term_when(work)`: send SIGTERM (a deadline, an eviction) once it returns True. Returns the log."""
    spec = manifest["spec"]["template"]["spec"]
    container = spec["containers"][0]
    script = container["command"][2]
    paths = {}
    for volume in spec["volumes"]:
        mount = next(m for m in container["volumeMounts"] if m["name"] == volume["name"])
        directory = tmp / f"volume-{volume['name']}"
        directory.mkdir(parents=True, exist_ok=True)
        config_map = configmaps.get((volume.get("configMap") or {}).get("name"), {})
        for key, value in config_map.get("data", {}).items():
            (directory / key).write_text(value)
        for key, value in config_map.get("binaryData", {}).items():  # probe.pyz
            (directory / key).write_bytes(base64.b64decode(value))
        paths[mount["mountPath"]] = directory
    for mount_path in sorted(paths, key=len, reverse=True):
        script = script.replace(mount_path, str(paths[mount_path]))
    work = paths[container["workingDir"]]
    proc = subprocess.Popen(["/bin/sh", "-c", script], cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if term_when is not None:
        deadline = time.monotonic() + timeout
        while not term_when(work) and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=timeout)
    return out


def pod_env(tmp: Path, uv: bool = True, **more) -> dict:
    path = f"{fake_uv(tmp)}:/usr/bin:/bin" if uv else "/usr/bin:/bin"
    return {"PATH": path, "UV_CALLS": str(tmp / "uv-calls.txt"), "ENV_PYTHON": sys.executable, "HOME": str(tmp), **more}


def read_configmaps(workdir: Path) -> dict[str, dict]:
    found = {}
    for path in [workdir / "configmap.json", *workdir.glob("env-*/configmap.json")]:
        manifest = json.loads(path.read_text())
        found[manifest["metadata"]["name"]] = manifest
    return found


# -- manifests ------------------------------------------------------------------------------------

def test_every_manifest_validates_and_the_install_is_the_shared_renderer(tmp_path):
    executor = make_executor(FakeApiServer(), offline=True, memory=8192, cpu=2)
    jobs = executor.prepare(cells(CU128_RESOLVED, [A100, V100]) + cells(CURRENT_RESOLVED, [A100], start=3), tmp_path / "w")
    workdir = tmp_path / "w"
    manifests = [json.loads(p.read_text()) for p in sorted(workdir.rglob("*.json"))]
    assert len(manifests) == 5  # the probe's ConfigMap, one environment's, three Jobs
    for manifest in manifests:
        kubernetes_validate.validate(manifest, "1.30", strict=True)
    maps = read_configmaps(workdir)
    assert all(m["immutable"] is True for m in maps.values())
    env_map = next(m for name, m in maps.items() if "install.sh" in m.get("data", {}))
    probe_map = next(m for m in maps.values() if "binaryData" in m)  # the probe, zipped: binary data, not text
    assert base64.b64decode(probe_map["binaryData"]["probe.pyz"]) == probe_pyz().read_bytes() and "data" not in probe_map
    # exactly what every executor renders for this cell, with the stack's Python, index and offline mode
    expected = envs.provider("uv").install_script(CU128_RESOLVED, "env", "requirements.txt", None, True, uv="uv", same_machine=False)
    assert env_map["data"]["install.sh"] == expected == (jobs[0].path / "install.sh").read_text()
    assert "--python 3.9" in expected and "--index https://download.pytorch.org/whl/cu128" in expected and "--offline" in expected
    assert env_map["data"]["requirements.txt"] == "torch==2.7.1+cu128\nnvidia-cuda-runtime-cu12==12.8.57\nfilelock==3.13.1\n"
    job = json.loads((jobs[0].path / "job.json").read_text())
    container = job["spec"]["template"]["spec"]["containers"][0]
    script = container["command"][2]
    assert "torch==" not in script and "download.pytorch.org" not in script  # the files travel as data, never as shell text
    assert container["resources"] == {"limits": {"nvidia.com/gpu": "1"}, "requests": {"memory": "8192Mi", "cpu": "2"}}
    volumes = {v["name"]: v for v in job["spec"]["template"]["spec"]["volumes"]}
    assert volumes["env"]["configMap"]["name"] == env_map["metadata"]["name"]
    # both uv cells build the same environment: one ConfigMap; the current cell mounts none
    assert json.loads((jobs[1].path / "job.json").read_text())["spec"]["template"]["spec"]["volumes"] == job["spec"]["template"]["spec"]["volumes"]
    current = json.loads((jobs[2].path / "job.json").read_text())
    assert "env" not in {v["name"] for v in current["spec"]["template"]["spec"]["volumes"]}
    assert current["spec"]["template"]["spec"]["containers"][0]["command"][2].count("python3 probe.pyz") == 1
    pod_deadline, job_deadline = kx.deadlines(Timeouts())
    assert (job["spec"]["template"]["spec"]["activeDeadlineSeconds"], job["spec"]["activeDeadlineSeconds"]) == (pod_deadline, job_deadline)
    assert pod_deadline == 3600 + 1200 + 1800 and job_deadline == pod_deadline + 3600 + 60


def test_no_requests_unless_the_plan_sets_them(tmp_path):
    jobs = make_executor(FakeApiServer()).prepare(cells(CURRENT_RESOLVED, [A100]), tmp_path)
    container = json.loads((jobs[0].path / "job.json").read_text())["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"] == {"limits": {"nvidia.com/gpu": "1"}}


def test_a_wheelhouse_is_mounted_from_the_nodes_at_its_own_path(tmp_path):
    executor = make_executor(FakeApiServer(), wheelhouse="/shared/wheels")
    jobs = executor.prepare(cells(CU128_RESOLVED, [A100]), tmp_path)
    pod = json.loads((jobs[0].path / "job.json").read_text())["spec"]["template"]["spec"]
    kubernetes_validate.validate(json.loads((jobs[0].path / "job.json").read_text()), "1.30", strict=True)
    assert {"name": "wheelhouse", "hostPath": {"path": "/shared/wheels", "type": "Directory"}} in pod["volumes"]
    assert {"name": "wheelhouse", "mountPath": "/shared/wheels", "readOnly": True} in pod["containers"][0]["volumeMounts"]
    assert "--no-index --find-links /shared/wheels" in (jobs[0].path / "install.sh").read_text()
    with pytest.raises(UserError, match="absolute path"):
        make_executor(FakeApiServer(), wheelhouse="wheels").prepare(cells(CU128_RESOLVED, [A100]), tmp_path / "x")


def test_an_environment_too_big_for_a_configmap_is_one_sentence(tmp_path):
    huge = ResolvedStack(CU128, True, tuple(f"package-{i:07d}==1.0.{i}" for i in range(40000)), "12.8")
    with pytest.raises(UserError, match="more than one ConfigMap can hold"):
        make_executor(FakeApiServer()).prepare(cells(huge, [A100]), tmp_path)


# -- node selection ---------------------------------------------------------------------------------

def gfd_node(name: str, product: str, major: str, minor: str) -> dict:
    """A node as GPU Feature Discovery labels it (NVIDIA/k8s-device-plugin docs/gpu-feature-discovery)."""
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
        "nvidia.com/gpu.product": product, "nvidia.com/gpu.compute.major": major, "nvidia.com/gpu.compute.minor": minor,
        "nvidia.com/gpu.count": "4", "nvidia.com/gpu.family": "ampere" if major == "8" else "volta"}},
        "status": {"allocatable": {"nvidia.com/gpu": "4"}}}


def test_gfd_product_names_as_gpu_feature_discovery_writes_them():
    assert kx.gfd_product("NVIDIA A100-SXM4-80GB") == "NVIDIA-A100-SXM4-80GB"
    assert kx.gfd_product("Tesla V100-SXM2-16GB") == "Tesla-V100-SXM2-16GB"
    assert kx.gfd_product("NVIDIA H100 80GB HBM3") == "NVIDIA-H100-80GB-HBM3"
    assert kx.gfd_product("NVIDIA  GeForce (RTX) 4090") == "NVIDIA-GeForce-RTX-4090"  # dropped characters, runs of spaces


def test_a_declared_a100_selects_exactly_the_a100_nodes(tmp_path):
    jobs = make_executor(FakeApiServer()).prepare(cells(CURRENT_RESOLVED, [A100, V100]), tmp_path)
    selectors = [json.loads((j.path / "job.json").read_text())["spec"]["template"]["spec"]["nodeSelector"] for j in jobs]
    assert selectors[0] == {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "nvidia.com/gpu.compute.major": "8",
                            "nvidia.com/gpu.compute.minor": "0"}
    nodes = [gfd_node("a1", "NVIDIA-A100-SXM4-80GB", "8", "0"), gfd_node("v1", "Tesla-V100-SXM2-16GB", "7", "0")]
    # the declared class selects what discovery finds on the A100 node, and nothing on the V100 node
    discovered = {t.name: dict(item.split("=", 1) for item in t.selector) for t in classes_from_nodes(nodes)}
    assert selectors[0] == discovered["NVIDIA A100 SXM4 80GB"]
    assert [n["metadata"]["name"] for n in nodes if all(n["metadata"]["labels"].get(k) == v for k, v in selectors[0].items())] == ["a1"]
    assert [n["metadata"]["name"] for n in nodes if all(n["metadata"]["labels"].get(k) == v for k, v in selectors[1].items())] == ["v1"]


def test_precheck_names_the_labels_no_node_carries():
    server = FakeApiServer()
    server.nodes = [gfd_node("v1", "Tesla-V100-SXM2-16GB", "7", "0")]
    verdicts = make_executor(server).precheck(cells(CURRENT_RESOLVED, [A100, V100]))
    assert verdicts[2] is None
    assert "nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB" in verdicts[1] and "Tesla-V100-SXM2-16GB (cc 7.0)" in verdicts[1]
    assert server.count("GET", "/nodes") == 1


def test_a_name_that_cannot_be_a_label_is_refused_in_one_sentence(tmp_path):
    with pytest.raises(UserError, match="cannot be selected by the node label"):
        make_executor(FakeApiServer()).prepare(cells(CURRENT_RESOLVED, [Target("A" * 80, "8.0", declared=True)]), tmp_path)


# -- names --------------------------------------------------------------------------------------

def test_job_names_are_unique_per_store_and_sweep(tmp_path):
    first = runs_dir_for(tmp_path / "lab-a" / "results.db", "")
    second = runs_dir_for(tmp_path / "lab-b" / "results.db", "")
    labels = {kx.sweep_label(first / "sweep-1"), kx.sweep_label(second / "sweep-1"), kx.sweep_label(first / "sweep-2")}
    assert len(labels) == 3  # two stores sharing a namespace, and two sweeps of one store
    assert kx.sweep_label(first / "sweep-1") == kx.sweep_label(first / "sweep-1")  # --resume finds its own Jobs
    # two machines whose stores have the same path (e.g. both /root/.local/share/gpucompat): the same
    # directory with another machine's id is another sweep
    same_path = first / "sweep-1"
    before = kx.sweep_label(same_path)
    (same_path / kx.ID_FILE).write_text(uuid.uuid4().hex + "\n")
    assert kx.sweep_label(same_path) != before
    long_dir = tmp_path / ("x" * 200) / "sweep-123456"
    label = kx.sweep_label(long_dir)
    assert len(label) <= 50 and len(f"{label}-c{10**10}") <= 63
    kubernetes_validate.validate({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": f"{label}-c{10**10}"},
                                  "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "p", "image": "i"}]}}}},
                                 "1.30", strict=True)


# -- watching -----------------------------------------------------------------------------------

def submitted(server: FakeApiServer, tmp_path: Path, how_many: int, monkeypatch, timeouts: Timeouts = Timeouts(), **options):
    clock = Clock(monkeypatch)
    executor = make_executor(server, timeouts, **options)
    targets = [A100 if i % 2 else V100 for i in range(how_many)]
    jobs = executor.prepare(cells(CU128_RESOLVED, targets), tmp_path / "w")
    executor.submit(jobs)
    return executor, jobs, clock


def test_one_labelled_list_per_poll_for_a_sweep_of_50_cells(tmp_path, monkeypatch):
    server = FakeApiServer()
    executor, jobs, clock = submitted(server, tmp_path, 50, monkeypatch)
    assert server.count("POST", "/jobs") == 50 and server.count("POST", "/configmaps") == 2  # the probe, one environment
    for name in server.jobs:
        server.set_job_status(name, running_status())
    server.calls.clear()
    for _ in range(4):
        clock.advance(2.0)
        assert set(executor.poll().values()) == {RUNNING}
        for _ in range(39):  # the sweep asks every 50 ms; the API is asked once per poll interval
            clock.advance(0.05)
            assert set(executor.poll().values()) == {RUNNING}
    lists = [q for m, path, q in server.calls if m == "GET" and path.endswith("/jobs")]
    assert len(lists) == 4 and all(q == {"labelSelector": f"gpucompat/sweep={executor.sweep}"} for q in lists)
    assert len(server.calls) == 4  # no pod list while every Job runs, and no call per Job
    # three Jobs not running yet: one labelled list of pods per poll as well, still nothing per Job
    for name in list(server.jobs)[:3]:
        server.set_job_status(name, k8s.V1JobStatus(active=1, ready=0))
        server.add_pod(name, k8s.V1PodStatus(phase="Pending"))
    server.calls.clear()
    for _ in range(3):
        clock.advance(2.0)
        states = executor.poll()
    assert list(states.values()).count(WAITING) == 3 and list(states.values()).count(RUNNING) == 47
    assert [(m, path.rsplit("/", 1)[-1]) for m, path, _ in server.calls] == [("GET", "jobs"), ("GET", "pods")] * 3
    assert all(q.get("labelSelector") == f"gpucompat/sweep={executor.sweep}" for _, _, q in server.calls)


def test_unschedulable_past_the_pending_timeout_is_not_scheduled_with_the_schedulers_message(tmp_path, monkeypatch):
    server = FakeApiServer()
    executor, jobs, clock = submitted(server, tmp_path, 1, monkeypatch, Timeouts(pending=600))
    name = next(iter(server.jobs))
    message = "0/4 nodes are available: 4 node(s) didn't match Pod's node affinity/selector. preemption: 0/4 nodes are available."
    pod = server.add_pod(name, k8s.V1PodStatus(phase="Pending", conditions=[
        k8s.V1PodCondition(type="PodScheduled", status="False", reason="Unschedulable", message=message)]), node=None)
    server.events.append(SERIALIZE(k8s.CoreV1Event(
        metadata=k8s.V1ObjectMeta(name=f"{pod}.1"), involved_object=k8s.V1ObjectReference(kind="Pod", name=pod),
        reason="FailedScheduling", message=message, type="Warning")))
    assert executor.poll() == {jobs[0].id: WAITING}
    clock.advance(601)
    assert executor.poll() == {jobs[0].id: DONE}
    observation = executor.collect(jobs[0])
    outcome = analysis.classify(jobs[0].cell.resolved, observation)
    assert (outcome.code, outcome.cause, outcome.stage) == ("UNTESTED", "not-scheduled", "schedule") and message in outcome.summary
    assert name not in server.jobs and server.count("DELETE", name) == 1  # the pending Job is removed, not left to wait


@pytest.mark.parametrize("reason, patience", [("InvalidImageName", 0), ("ImagePullBackOff", 301)])
def test_an_image_that_cannot_be_pulled_is_untested_with_the_message(tmp_path, monkeypatch, reason, patience):
    server = FakeApiServer()
    executor, jobs, clock = submitted(server, tmp_path, 1, monkeypatch)
    name = next(iter(server.jobs))
    text = 'Back-off pulling image "nvcr.io/nvidia/pytorch:25.01-py3": 401 Unauthorized'
    server.add_pod(name, k8s.V1PodStatus(phase="Pending", container_statuses=[k8s.V1ContainerStatus(
        name="probe", image=IMAGE, image_id="", ready=False, restart_count=0,
        state=k8s.V1ContainerState(waiting=k8s.V1ContainerStateWaiting(reason=reason, message=text)))]))
    states = executor.poll()
    if patience:
        assert states == {jobs[0].id: WAITING}  # a pull can fail once and then work
        clock.advance(patience)
        states = executor.poll()
    assert states == {jobs[0].id: DONE}
    outcome = analysis.classify(jobs[0].cell.resolved, executor.collect(jobs[0]))
    assert outcome.code == "UNTESTED" and outcome.cause == kx.IMAGE_CAUSE and reason in outcome.summary and "401 Unauthorized" in outcome.summary


def test_a_job_deleted_from_outside_is_untested(tmp_path, monkeypatch):
    server = FakeApiServer()
    executor, jobs, clock = submitted(server, tmp_path, 1, monkeypatch)
    server.jobs.clear()
    assert executor.poll() == {jobs[0].id: DONE}
    outcome = analysis.classify(jobs[0].cell.resolved, executor.collect(jobs[0]))
    assert (outcome.code, outcome.cause) == ("UNTESTED", "interrupted")


# -- what comes back --------------------------------------------------------------------------------

def finish(server: FakeApiServer, executor, job, status: k8s.V1JobStatus, pod_status: k8s.V1PodStatus | None, log: str = ""):
    name = executor._names[job.id]
    if pod_status is not None:
        server.add_pod(name, pod_status, log)
    server.set_job_status(name, status)


def collected(server, executor, job, clock):
    clock.advance(executor.poll_s)
    assert executor.poll()[job.id] == DONE
    return executor.collect(job)


def test_job_deadline_exceeded_is_a_timeout_at_the_stage_the_probe_reached(tmp_path, monkeypatch):
    server = FakeApiServer()
    executor, jobs, clock = submitted(server, tmp_path, 1, monkeypatch)
    # the container, run here: the probe is in its device stage when the deadline's SIGTERM comes
    hung = tmp_path / "hung-python"
    hung.write_text('#!/bin/sh\ncat > result.json <<EOF\n{"finished": false, "current_stage": "device", "stages": '
                    '{"import": {"ok": true, "facts": {"cuda_runtime": "12.8"}}, "device": {"ok": false, "running": true, "facts": {}}}}\nEOF\n'
                    'exec sleep 60\n')
    hung.chmod(0o755)
    manifest = json.loads((jobs[0].path / "job.json").read_text())
    log = run_container(manifest, read_configmaps(tmp_path / "w"), tmp_path / "pod", pod_env(tmp_path, ENV_PYTHON=str(hung)),
                        term_when=lambda work: '"device"' in ((work / "result.json").read_text() if (work / "result.json").exists() else ""))
    assert kx.TERM_MARK in log and '"current_stage": "device"' in log
    finish(server, executor, jobs[0], failed_status("DeadlineExceeded", "Job was active longer than specified deadline"),
           terminated_pod("Failed", 143), log)
    observation = collected(server, executor, jobs[0], clock)
    outcome = analysis.classify(jobs[0].cell.resolved, observation)
    assert (outcome.code, outcome.stage) == ("TIMEOUT", "device")
    assert (jobs[0].path / "pod.log").read_text() == log
    assert json.loads((jobs[0].path / "k8s-status.json").read_text())["job"]["conditions"][-1]["reason"] == "DeadlineExceeded"


def test_the_pods_own_deadline_is_a_timeout_too_and_a_lost_log_is_untested():
    log = f"{kx.STAGE_MARK} install\n{kx.STAGE_MARK} probe\n{kx.TERM_MARK}\n{kx.BEGIN}\n" + json.dumps(
        {"finished": False, "current_stage": "compute", "stages": {"import": {"ok": True}, "device": {"ok": True}}}) + f"\n{kx.END}\n"
    job = k8s.V1Job(metadata=k8s.V1ObjectMeta(name="j", uid="u"), spec=k8s.V1JobSpec(template=k8s.V1PodTemplateSpec(
        spec=k8s.V1PodSpec(containers=[k8s.V1Container(name="probe", image=IMAGE)]))),
        status=failed_status("BackoffLimitExceeded", "Job has reached the specified backoff limit"))
    pod = terminated_pod("Failed", 143, reason="DeadlineExceeded", message="Pod was active on the node longer than the specified deadline")
    outcome = analysis.classify(CU128_RESOLVED, kx.observation_from(job, k8s.V1Pod(status=pod), log))
    assert (outcome.code, outcome.stage) == ("TIMEOUT", "compute")
    # a stalled install: the stage is install
    outcome = analysis.classify(CU128_RESOLVED, kx.observation_from(job, k8s.V1Pod(status=pod), f"{kx.STAGE_MARK} install\n{kx.TERM_MARK}\n"))
    assert (outcome.code, outcome.stage) == ("TIMEOUT", "install")
    # the Job's own deadline with its pod deleted: nothing says which stage ran (nor whether one did)
    job.status = failed_status("DeadlineExceeded", "Job was active longer than specified deadline")
    outcome = analysis.classify(CU128_RESOLVED, kx.observation_from(job, None, ""))
    assert (outcome.code, outcome.cause) == ("UNTESTED", "scheduler") and "longer than specified deadline" in outcome.summary


@pytest.mark.parametrize("pod_status, cause, words", [
    (terminated_pod("Failed", 137, reason="Evicted", message="The node was low on resource: memory. Threshold quantity: 100Mi."),
     "scheduler", "Evicted"),
    (terminated_pod("Failed", 137, reason="Evicted", message="Pod ephemeral local storage usage exceeds the total limit of containers 20Gi."),
     "disk", "ephemeral"),
    (terminated_pod("Failed", 143, conditions=[k8s.V1PodCondition(type="DisruptionTarget", status="True", reason="PreemptionByScheduler",
                                                                  message="Preempted in order to admit critical pod")]),
     "scheduler", "PreemptionByScheduler"),
    (terminated_pod("Failed", 143, reason="Terminated", message="Pod was terminated in response to imminent node shutdown."),
     "scheduler", "node shutdown"),
    (None, "scheduler", "node was lost"),
])
def test_an_evicted_preempted_or_lost_pod_is_untested(tmp_path, monkeypatch, pod_status, cause, words):
    server = FakeApiServer()
    executor, jobs, clock = submitted(server, tmp_path, 1, monkeypatch)
    log = f"{kx.STAGE_MARK} install\n{kx.STAGE_MARK} probe\n{kx.TERM_MARK}\n{kx.BEGIN}\n" + json.dumps(
        {"finished": False, "current_stage": "compute", "stages": {"import": {"ok": True}, "device": {"ok": True}}}) + f"\n{kx.END}\n"
    finish(server, executor, jobs[0], failed_status("BackoffLimitExceeded", "Job has reached the specified backoff limit"), pod_status, log)
    outcome = analysis.classify(jobs[0].cell.resolved, collected(server, executor, jobs[0], clock))
    assert (outcome.code, outcome.cause) == ("UNTESTED", cause) and words in outcome.summary


def test_the_container_script_reports_each_ending(tmp_path):
    """The real script under /bin/sh: a pass through the real probe (env current), a missing uv, an
    install that fails, an install that runs past its timeout; each classified as the sweep would."""
    executor = make_executor(FakeApiServer(), Timeouts(install=1))
    jobs = executor.prepare(cells(CURRENT_RESOLVED, [A100]) + cells(CU128_RESOLVED, [A100], start=2), tmp_path / "w")
    maps = read_configmaps(tmp_path / "w")
    current, uv_cell = (json.loads((j.path / "job.json").read_text()) for j in jobs)
    done = k8s.V1Job(metadata=k8s.V1ObjectMeta(name="j"), spec=k8s.V1JobSpec(template=k8s.V1PodTemplateSpec(
        spec=k8s.V1PodSpec(containers=[k8s.V1Container(name="probe", image=IMAGE)]))), status=complete_status())

    def outcome(manifest, directory, env, exit_code, resolved):
        log = run_container(manifest, maps, tmp_path / directory, env)
        pod = k8s.V1Pod(status=terminated_pod("Succeeded" if exit_code == 0 else "Failed", exit_code))
        return log, analysis.classify(resolved, kx.observation_from(done, pod, log))

    # the real probe, with this machine's python3 standing in for the image's: no GPU here
    log, result = outcome(current, "p1", {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path)}, 1, CURRENT_RESOLVED)
    assert f"{kx.EXIT_MARK} " in log and kx.result_from_log(log)["framework"] == "cuda-runtime"
    assert (result.code, result.cause, result.stage) == ("UNTESTED", "no-gpu", "device"), result  # the probe ran and said why
    log, result = outcome(uv_cell, "p2", pod_env(tmp_path / "p2", uv=False), 1, CU128_RESOLVED)
    assert (result.code, result.cause) == ("UNTESTED", kx.IMAGE_CAUSE) and "uv is not on the PATH" in result.summary
    error = "error: Distribution `torch==2.7.1+cu128` can't be installed because it doesn't have a wheel for the current platform"
    log, result = outcome(uv_cell, "p3", pod_env(tmp_path / "p3", UV_ERROR=error), 1, CU128_RESOLVED)
    assert (result.code, result.stage) == ("ENV_INSTALL_FAILED", "install") and "doesn't have a wheel" in result.summary
    calls = (tmp_path / "p3" / "uv-calls.txt").read_text()
    assert "uv venv --quiet --clear --python 3.9 env" in calls and "--index https://download.pytorch.org/whl/cu128" in calls
    began = time.monotonic()
    log, result = outcome(uv_cell, "p4", pod_env(tmp_path / "p4", UV_SLEEP="15"), 1, CU128_RESOLVED)
    assert (result.code, result.stage) == ("TIMEOUT", "install") and time.monotonic() - began < 10
    assert kx.INSTALL_TIMEOUT_MARK in log


# -- resume ---------------------------------------------------------------------------------------

def test_resume_adopts_existing_jobs_and_configmaps(tmp_path, monkeypatch):
    server = FakeApiServer()
    clock = Clock(monkeypatch)
    first = make_executor(server)
    targets = [A100, V100, A100]
    cell_list = cells(CU128_RESOLVED, targets)
    first_jobs = first.prepare(cell_list, tmp_path / "w")
    first.submit(first_jobs)  # and then the process was killed
    names = sorted(server.jobs)
    finish(server, first, first_jobs[0], complete_status(),
           terminated_pod("Succeeded", 0), f"{kx.STAGE_MARK} probe\n{kx.BEGIN}\n{json.dumps(PASSING)}\n{kx.END}\n{kx.EXIT_MARK} 0\n")
    server.set_job_status(first._names[2], running_status())
    server.set_job_status(first._names[3], complete_status())  # a Job whose result was stored (UNTESTED, now retried)
    server.jobs[first._names[3]]["metadata"]["annotations"] = {kx.COLLECTED: "true"}
    old_uid = server.jobs[first._names[3]]["metadata"]["uid"]
    server.calls.clear()

    second = make_executor(server)
    jobs = second.prepare(cell_list, tmp_path / "w")
    second.submit(jobs)  # every create answers 409 Conflict, raised by the client as ApiException
    assert server.count("POST", "/configmaps") == 2
    assert [path.rsplit("/", 1)[-1] for m, path, _ in server.calls if m == "GET"] == names  # each 409 answered by one read
    assert sorted(server.jobs) == names and second.adopted == {1, 2}
    assert server.count("DELETE", first._names[3]) == 1 and server.count("POST", "/jobs") == 4  # the stored one is replaced...
    assert server.jobs[second._names[3]]["metadata"]["uid"] != old_uid  # ...by a new Job of that name
    clock.advance(2)
    assert second.poll() == {1: DONE, 2: RUNNING, 3: WAITING}
    outcome = analysis.classify(CU128_RESOLVED, second.collect(jobs[0]))
    assert outcome.code == "PASS"
    assert server.jobs[second._names[1]]["metadata"]["annotations"] == {kx.COLLECTED: "true"}
    with pytest.raises(ApiException) as conflict:  # what the executor met: the client's own exception, status 409
        second.batch.create_namespaced_job("gpu-tests", json.loads((jobs[1].path / "job.json").read_text()))
    assert conflict.value.status == 409


def test_sweep_resume_through_the_real_sweep_run(tmp_path, monkeypatch):
    """`sweep --resume` after a kill: the store's pending cells, the work directory kept beside the
    database, Jobs and ConfigMaps already on the cluster. sweep.run finishes without an error and
    without a second Job for a cell; an UNTESTED cell is tried again in a fresh Job."""
    server = FakeApiServer()
    store = Store(f"sqlite:///{tmp_path / 'lab.db'}")
    plan = ('name = "k8s"\nexecutor = "kubernetes"\n[kubernetes]\nimage = "nvcr.io/nvidia/pytorch:25.01-py3"\nnamespace = "gpu-tests"\n'
            '[[targets]]\nname = "NVIDIA A100-SXM4-80GB"\ncc = "8.0"\n[[targets]]\nname = "Tesla V100-SXM2-16GB"\ncc = "7.0"\n'
            '[[stacks]]\nframework = "torch"\nversions = ["2.7.1"]\nvariants = ["cu128"]\npython = ["3.9"]\n')
    prediction = {"verdict": "uncertain", "code": None, "stage": None, "warnings": [], "reasons": []}
    sweep_id = store.create_sweep("k8s", "sweep", plan, None, sweeps.RunOptions().as_dict(), [A100, V100], [CU128_RESOLVED],
                                  lambda _r, _t: prediction)
    pending = store.cells_of(sweep_id)
    server.nodes = [gfd_node("a1", "NVIDIA-A100-SXM4-80GB", "8", "0"), gfd_node("v1", "Tesla-V100-SXM2-16GB", "7", "0")]
    fake_client = SimpleNamespace(CoreV1Api=lambda: api_objects(server)[0], BatchV1Api=lambda: api_objects(server)[1])
    monkeypatch.setattr("gpucompat.discover.kubernetes.api", lambda: fake_client)
    monkeypatch.setattr(kx.KubernetesExecutor, "__init__", _fast_polls(kx.KubernetesExecutor.__init__))
    # the first run: submitted, then killed (nothing recorded); the cluster ran the first cell to the end
    workdir = store.runs_dir / f"sweep-{sweep_id}"
    first = make_executor(server)
    first.submit(first.prepare(pending, workdir))
    pass_log = f"{kx.STAGE_MARK} probe\n{kx.BEGIN}\n{json.dumps(PASSING)}\n{kx.END}\n{kx.EXIT_MARK} 0\n"
    evicted = terminated_pod("Failed", 137, reason="Evicted", message="The node was low on resource: memory.")
    finish(server, first, SimpleNamespace(id=pending[0].id), complete_status(), terminated_pod("Succeeded", 0), pass_log)
    finish(server, first, SimpleNamespace(id=pending[1].id), failed_status("BackoffLimitExceeded", "backoff limit"), evicted, "")

    def controller(api: FakeApiServer):  # the job controller and kubelet: a new Job runs and passes
        for name, job in api.jobs.items():
            if not job.get("status"):
                api.add_pod(name, terminated_pod("Succeeded", 0), pass_log)
                job["status"] = SERIALIZE(complete_status())

    server.on_list_jobs = controller
    uids = {name: job["metadata"]["uid"] for name, job in server.jobs.items()}
    sweeps.run(store, sweep_id, sweeps.Progress())  # resume: both Jobs exist, the ConfigMaps too (409)
    rows = {r["gpu"]: (r["code"], r["summary"]) for r in store.result_rows(sweep_id)}
    assert rows["NVIDIA A100-SXM4-80GB"][0] == "PASS" and rows["Tesla V100-SXM2-16GB"][0] == "UNTESTED"
    assert {name: job["metadata"]["uid"] for name, job in server.jobs.items()} == uids  # adopted, not created twice
    assert server.count("POST", "/jobs") == 4 and server.count("DELETE", "") == 0  # the resume's two creates met 409
    sweeps.run(store, sweep_id, sweeps.Progress())  # resume again: the UNTESTED cell runs afresh, in a new Job
    rows = {r["gpu"]: r["code"] for r in store.result_rows(sweep_id)}
    assert rows == {"NVIDIA A100-SXM4-80GB": "PASS", "Tesla V100-SXM2-16GB": "PASS"}
    assert server.count("DELETE", "") == 1 and server.count("POST", "/configmaps") == 6  # 2 per run; the resumes' met 409
    assert server.jobs[next(n for n in uids if n.endswith(f"-c{pending[1].id}"))]["metadata"]["uid"] != uids[
        next(n for n in uids if n.endswith(f"-c{pending[1].id}"))]
    assert store.sweep(sweep_id)["status"] == "done"


def _fast_polls(init):
    def patched(self, *args, **kwargs):
        init(self, *args, **{**kwargs, "poll_s": 0.0})
    return patched


def test_the_executor_is_built_from_the_plans_table():
    from gpucompat.executors import make_executor as build
    from gpucompat.plan import parse_plan

    spec = parse_plan('executor = "kubernetes"\n[kubernetes]\nimage = "python:3.12"\nmemory = "8G"\ncpu = 2\n'
                      '[[targets]]\nname = "NVIDIA A100-SXM4-80GB"\ncc = "8.0"\n[[stacks]]\nframework = "cuda-runtime"\nversions = ["12.4"]\n')
    assert build(spec, None, False).requests == {"memory": "8192Mi", "cpu": "2"}


def test_max_running_creates_at_most_that_many_jobs_and_the_rest_as_they_finish(tmp_path, monkeypatch):
    # one Job per cell, so a Job's `parallelism` cannot cap the sweep: the watcher holds the others back
    server = FakeApiServer()
    executor, jobs, clock = submitted(server, tmp_path, 5, monkeypatch, Timeouts(pending=600), max_running=2)
    assert server.count("POST", "/jobs") == 2 and set(executor.poll().values()) == {WAITING}
    clock.advance(900)  # past the pending timeout: the held cells have waited on the sweep's cap, not on the cluster
    first, second = jobs[0], jobs[1]
    finish(server, executor, first, complete_status(), terminated_pod("Succeeded", 0))
    server.set_job_status(executor._names[second.id], running_status())
    states = executor.poll()
    assert states[first.id] == DONE and states[second.id] == RUNNING
    assert server.count("POST", "/jobs") == 3  # the third is created once the first finished
    third = executor._names[jobs[2].id]
    server.set_job_status(third, running_status())
    clock.advance(2.0)
    states = executor.poll()
    assert states[jobs[2].id] == RUNNING and states[jobs[3].id] == WAITING and server.count("POST", "/jobs") == 3
    executor.cancel(jobs[1:])  # Ctrl-C: the Jobs created are deleted, the held ones never created
    assert server.count("POST", "/jobs") == 3 and not server.jobs.keys() - {executor._names[first.id]}
