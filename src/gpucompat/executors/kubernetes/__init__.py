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

The parts: manifest.py renders the objects and the job script (pure functions), api.py is the
watcher that creates, lists and reads them through the API, result.py reads a finished Job's
status and pod log into an Observation; this module is the executor that joins them.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from ... import envs
from ...errors import UserError
from ...model import Cell, Observation
from ...quoting import shell_word
from ..base import JobDir, JobSettings

# The names this module had before it was split into manifest, api and result stay importable from it.
from .api import API_PATIENCE, API_TIMEOUT, CREATE_FAILURES, PERMANENT, PULL_FAILURES, STUCK_PATIENCE, ApiException, JobWatcher  # noqa: F401
from .manifest import BEGIN, CC_MAJOR, CC_MINOR, CELL_LABEL, COLLECTED, CONFIGMAP_LIMIT, END, ENV_MOUNT, EXIT_MARK, GPU_RESOURCE  # noqa: F401
from .manifest import ID_FILE, INSTALL_FAILED_MARK, INSTALL_LOG_BEGIN, INSTALL_LOG_END, INSTALL_TIMEOUT_MARK, NO_UV_MARK, PROBE_MOUNT  # noqa: F401
from .manifest import PRODUCT, STAGE_MARK, SWEEP_LABEL, TERM_MARK, WORK_DIR, deadlines, env_config_map, gfd_product, job_manifest  # noqa: F401
from .manifest import job_script, node_selector, pod_image, probe_config_map, sweep_label  # noqa: F401
from .result import DISRUPTED, IMAGE_CAUSE, PROBE_STAGES, START_FAILURES, LogReport, finished, observation_from, parse_log, result_from_log  # noqa: F401


def _write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=1) + "\n")


def _watcher_attribute(name: str) -> property:
    return property(lambda self: getattr(self.watcher, name), lambda self, value: setattr(self.watcher, name, value))


class KubernetesExecutor:
    name = "kubernetes"

    detached = False

    # the watcher's, under the names they have always had here (the API's clients, the sweep's label, ...)
    core, batch, sweep, adopted, poll_s = (_watcher_attribute(n) for n in ("core", "batch", "sweep", "adopted", "poll_s"))
    _names = _watcher_attribute("names")  # cell -> its Job's name

    def __init__(self, settings: JobSettings, image: str | None = None, namespace: str = "default", memory: int | None = None,
                 cpu: int | None = None, max_running: int | None = None, poll_s: float = 2.0):
        if not image:
            raise UserError("the kubernetes executor needs an image: add [kubernetes] image = \"...\" to the plan.")
        self.timeouts = settings.timeouts
        self.wheelhouse = settings.wheelhouse
        self.offline = settings.offline
        self.bench = settings.bench
        self.requests = {"memory": f"{memory}Mi" if memory else None, "cpu": str(cpu) if cpu else None}
        self.image = image
        self.namespace = namespace
        self.max_running = max_running  # [kubernetes] max_running: Jobs of the sweep unfinished at once (the watcher holds the rest)
        self.watcher = JobWatcher(namespace, settings.timeouts, image, poll_s, max_running)  # the cells' Jobs on the cluster
        self.submitted = ""
        self._maps: dict[int, list[Path]] = {}  # cell -> the ConfigMap files its Job mounts

    def precheck(self, cells: list[Cell]) -> dict[int, str | None]:
        """A class whose labels no node carries can never be scheduled; without a cluster (or without
        the right to list nodes), defer to the scheduler."""
        try:
            core, _ = self.watcher.connect()
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
            self.watcher.container_cells[cell.id] = cell.stack.env == "container"
            jobs.append(JobDir(cell, path, path, python))
        return jobs

    # -- submit, adopt -----------------------------------------------------------------------------

    def submit(self, jobs: list[JobDir]) -> None:
        if not jobs:
            return
        workdir = jobs[0].path.parent
        maps = list(dict.fromkeys(p for job in jobs for p in self._maps.get(job.id, [workdir / "configmap.json"])))
        try:
            self.watcher.connect()
        except UserError as exc:
            files = " ".join(shell_word(p) for p in [*maps, *(j.path / "job.json" for j in jobs)])
            self.submitted = f"no cluster ({exc}); apply by hand: kubectl apply -f {files}"
            raise UserError(self.submitted) from None
        for path in maps:
            self.watcher.ensure_config_map(json.loads(path.read_text()))
        now = time.monotonic()
        for job in jobs:
            manifest = json.loads((job.path / "job.json").read_text())
            self.watcher.watch(job.id, manifest, now)
        adopted = f", {len(self.adopted)} of them adopted from an earlier run" if self.adopted else ""
        self.submitted = f"{len(jobs)} Jobs in namespace {self.namespace} labelled {SWEEP_LABEL}={self.sweep}{adopted}"

    # -- watch, results ----------------------------------------------------------------------------

    def poll(self) -> dict[int, str]:
        """At most once per poll interval (the sweep asks every 50 ms): one list of the sweep's Jobs by
        label, and one list of its pods only while some Job has no running pod."""
        return self.watcher.poll()

    def collect(self, job: JobDir) -> Observation:
        decided = self.watcher.decided(job.id)
        if decided is not None:
            return decided
        finished_job, pod, log, log_error = self.watcher.read(job.id)
        (job.path / "pod.log").write_text(log)
        _write_json(job.path / "k8s-status.json", self.watcher.status(finished_job, pod))
        observation = observation_from(finished_job, pod, log, log_error)
        self.watcher.mark_collected(job.id)
        return observation

    def cancel(self, jobs: list[JobDir]) -> None:
        self.watcher.cancel([job.id for job in jobs])
