"""The sweep's Jobs on the cluster, through the official client: created (adopting or replacing one
an earlier run of the sweep left), watched with one labelled list of the sweep's Jobs per poll
interval (plus one of its pods only while some Job has no running pod), judged while they wait
(unschedulable, an image that cannot be pulled, a silent API), read once finished (the pod and its
log), and deleted. The executor (__init__.py) hands it the manifests it rendered (manifest.py).
"""

from __future__ import annotations

import json
import math
import time

from ...errors import UserError
from ...model import Observation, Timeouts
from ..base import DONE, RUNNING, WAITING
from .manifest import CELL_LABEL, COLLECTED, SWEEP_LABEL
from .result import IMAGE_CAUSE, _container, finished

try:
    from kubernetes.client.exceptions import ApiException
except ImportError:  # the client is an extra; without it nothing reaches a cluster anyway
    class ApiException(Exception):  # type: ignore[no-redef]
        status = None
        reason = body = None

API_TIMEOUT = 60  # seconds for one API call
API_PATIENCE = 300.0  # an API that does not answer for this long ends the sweep with one sentence
STUCK_PATIENCE = 300.0  # a container that cannot be pulled or created, this long (or the pending timeout if shorter)

PULL_FAILURES = {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull", "RegistryUnavailable",
                 "SignatureValidationFailed"}
PERMANENT = {"InvalidImageName", "ErrImageNeverPull"}  # retrying cannot help
CREATE_FAILURES = {"CreateContainerConfigError", "CreateContainerError", "RunContainerError"}


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


class JobWatcher:
    """One sweep's Jobs in one namespace: the API's two clients, and per cell its Job's name and state."""

    def __init__(self, namespace: str, timeouts: Timeouts, image: str, poll_s: float = 2.0, max_running: int | None = None):
        self.namespace = namespace
        # [kubernetes] max_running: at most this many of the sweep's Jobs exist unfinished at once; the others are created
        # as earlier ones finish. One Job per cell, so a Job's own `parallelism` (pods of one Job) cannot cap the sweep.
        self.max_running = max_running
        self._held: dict[int, dict] = {}  # cell -> manifest, not created yet because max_running Jobs are unfinished
        self.timeouts = timeouts
        self.image = image  # the plan's image, named when a Job's own spec is not at hand
        self.poll_s = poll_s
        self.core = None  # CoreV1Api and BatchV1Api, made from the kubeconfig on first use
        self.batch = None
        self.sweep: str | None = None
        self.adopted: set[int] = set()  # cells whose Job an earlier run had created
        self.names: dict[int, str] = {}  # cell -> its Job's name
        self.container_cells: dict[int, bool] = {}  # cell -> its stack is a container image (env "container")
        self._cells: list[int] = []  # every cell handed to watch, in order
        self._to_create: dict[int, dict] = {}  # cell -> manifest, once the Job of that name left from a stored result is gone
        self._since: dict[int, float] = {}  # cell -> when this executor created (or adopted) its Job
        self._stuck: dict[int, float] = {}  # cell -> since when its container cannot be pulled or created
        self._finished: dict[int, object] = {}  # cell -> its V1Job in a terminal condition
        self._final: dict[int, Observation] = {}  # cell -> decided without a pod log (NO_MATCH, refused, deleted)
        self._states: dict[int, str] = {}
        self._polled = -math.inf
        self._failing_since: float | None = None

    def connect(self):
        if self.core is None or self.batch is None:
            from ...discover.kubernetes import api

            client = api()
            self.core, self.batch = client.CoreV1Api(), client.BatchV1Api()
        return self.core, self.batch

    # -- create, adopt -----------------------------------------------------------------------------

    def watch(self, cell_id: int, manifest: dict, now: float) -> None:
        """Create the cell's Job from its manifest (or adopt the one an earlier run created) and watch it."""
        self.sweep = manifest["metadata"]["labels"][SWEEP_LABEL]
        if self.max_running and self._unfinished() >= self.max_running:
            self._cells.append(cell_id)
            self._held[cell_id] = manifest
            return
        self._cells.append(cell_id)
        self._since[cell_id] = now
        self._start(cell_id, manifest)

    def _unfinished(self) -> int:
        """The cells whose Job exists (or is about to) and has not finished: what max_running counts."""
        return sum(1 for c in self._cells if c not in self._final and c not in self._finished and c not in self._held)

    def _release_held(self, now: float) -> None:
        """Create held Jobs, oldest first, while fewer than max_running are unfinished; their pending clock starts now."""
        while self._held and self._unfinished() < (self.max_running or 0):
            cell_id = next(iter(self._held))
            manifest = self._held.pop(cell_id)
            self._since[cell_id] = now
            self._start(cell_id, manifest)

    def ensure_config_map(self, manifest: dict) -> None:
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
        self.names[cell_id] = manifest["metadata"]["name"]
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
            self.names[cell_id] = name  # still running, or finished and never collected: its result is this cell's
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
            elif cell_id in self._held:
                states[cell_id] = WAITING
            elif cell_id in self._to_create:
                old = by_name.get(self._to_create[cell_id]["metadata"]["name"])
                if old is None:
                    manifest = self._to_create.pop(cell_id)
                    self._since[cell_id] = now
                    self._start(cell_id, manifest)
                states[cell_id] = DONE if cell_id in self._final else WAITING
            else:
                job = by_name.get(self.names[cell_id])
                if job is None:
                    self._final[cell_id] = Observation(facts={}, untested=("interrupted", f"the Job {self.names[cell_id]} was "
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
        if self._held:
            self._release_held(now)  # for the Jobs that finished in this poll; theirs show at the next one
            states.update({cell_id: DONE for cell_id in self._final if states.get(cell_id) != DONE})
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
                if reason in PULL_FAILURES and self.container_cells.get(cell_id):
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
            self._delete(self.names[cell_id])
        except Exception:  # noqa: BLE001 - best effort: a Job left behind still ends by its activeDeadlineSeconds
            pass

    # -- results ---------------------------------------------------------------------------------

    def decided(self, cell_id: int) -> Observation | None:
        """The cell's verdict where it was decided without a pod log (NO_MATCH, refused, deleted)."""
        return self._final.get(cell_id)

    def read(self, cell_id: int) -> tuple:
        """A finished cell's (V1Job, its newest pod or None, the pod's log, why the log could not be read or None)."""
        finished_job = self._finished[cell_id]
        pod, log, log_error = None, "", None
        try:
            pods = self.core.list_namespaced_pod(self.namespace, label_selector=f"{SWEEP_LABEL}={self.sweep},{CELL_LABEL}={cell_id}",
                                                 _request_timeout=API_TIMEOUT).items
            pod = _newest(_owned_by(pods, finished_job))
            if pod is not None:
                log = self.core.read_namespaced_pod_log(pod.metadata.name, self.namespace, container="probe",
                                                        _request_timeout=API_TIMEOUT) or ""
        except Exception as exc:  # noqa: BLE001 - recorded as the reason the cell could not be read
            log_error = _api_error(exc)
        return finished_job, pod, log, log_error

    def status(self, finished_job, pod) -> dict:
        """The Job's and the pod's status as the API wrote them, for k8s-status.json."""
        serialize = self.core.api_client.sanitize_for_serialization
        return {"job": serialize(finished_job.status), "pod": serialize(pod.status) if pod else None}

    def mark_collected(self, cell_id: int) -> None:
        """So that `--resume` runs this cell afresh if its verdict is retried (UNTESTED), instead of
        adopting the same finished Job again."""
        name = self.names[cell_id]
        try:
            self.batch.patch_namespaced_job(name, self.namespace, {"metadata": {"annotations": {COLLECTED: "true"}}},
                                            _content_type="application/merge-patch+json", _request_timeout=API_TIMEOUT)
        except Exception:  # noqa: BLE001 - at worst a retried cell reads the same Job once more
            pass

    def cancel(self, cell_ids: list[int]) -> None:
        if self.batch is None:
            return
        for cell_id in cell_ids:
            self._to_create.pop(cell_id, None)
            self._held.pop(cell_id, None)
            name = self.names.get(cell_id)
            if name and cell_id not in self._final:
                try:
                    self._delete(name)
                except Exception:  # noqa: BLE001 - cancelling is best effort: the Jobs end by their deadlines
                    pass
