"""The Kubernetes `JobBackend`: a job is one Kubeflow Training Operator v1 ``PyTorchJob``/``TFJob``
or one ``batch/v1`` Job (`kubeflow.job_manifest`) in the project's namespace.

Guarantees:

- Reads come from watch caches: one `WatchCache` per (kind, project) for the three kinds, limited
  to the platform's objects (``app.kubernetes.io/managed-by=jupyterhub-mlplatform``), started on
  the first use of a project and kept until `close` (one list each, then watches with bookmarks
  resumed from the last resourceVersion; a re-list only after 410 Gone). `get` and `list` make no
  API request once a project's caches are loaded.
- A job is found by its jobId annotation (`model.JOB_ID_ANNOTATION`), never by name alone, and only
  in its own project's namespace: another project's job is `JobNotFound`.
- `submit` creates the job object (nothing half-made): a jobId already in the cache, or a 409, is
  `JobExists`; submits of one jobId in a project run one at a time here (two backends at the same
  instant are not guarded); a create that got no answer in time is looked for by name a few times (a
  slow server may have made it); a 403 is `UserInputError(…, 403)` naming the quota, or the cluster's
  admission control (a webhook's or policy's denial; a webhook's 400 too), or the project; any other failure is
  `UpstreamError` with the API's reason. The created object is put into the cache at once. A shipped
  package travels as `kube_package` says (staged before the create, or in a ConfigMap owned by the
  object right after it), and a dataset chosen as a private writable copy (``frames:copy``) becomes a
  claim from its snapshot owned by the object (`dataset_copies`; not for sweeps): if either fails the
  object is deleted again and the error raised, so all exist or none.
- `cancel` merge-patches `kubeflow.cancel_patch` (the controller suspends the job and deletes its
  pods): the job reads CANCELLING, then CANCELLED; a job that already ended is `JobFinished`.
- `logs` reads ``pods/<pod>/log`` of the task's main container (``pytorch``, ``tensorflow`` or
  ``trainer``): lines numbered from 1 per task, the first `after` skipped. With ``follow`` it
  waits for the pod to exist and its container to start (ending if the job ends first), streams,
  reconnects after a dropped stream without repeating a line, and ends when the container has
  terminated and every line was sent (a replaced pod continues the numbering). Without ``follow``
  it ends at the current end of the log. Each line's ``time`` is the kubelet's (``timestamps=true``,
  RFC 3339 UTC as given); its ``stream`` is None (``stream=Stdout|Stderr`` is alpha in Kubernetes
  1.37: stdout and stderr come merged). A task the job does not have is `UserInputError("task", …)`.
- Sweeps (a plan with ``sweep``, or a user's own Katib Experiment: `submit_experiment`) are Katib
  ``Experiment``s, dispatched to `kube_sweeps`, which says how they are made, read, cancelled and
  logged (``trial-<id>``). A jobId is unique across jobs and sweeps of a project; the jobs a sweep's
  Trials own are read as its trials. Pods and their logs are read through `kube_pods`.
- A job whose pods are held for datasets still loading (the operator's scheduling gate) carries
  ``statusMessage`` (`waiting`: "waiting for the dataset 'x' to finish loading (42%)") in `get` and
  `list`, from two more label-filtered watches per project: its held pods and its dataset PVCs.

Request and response bodies are never logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import os
import re
from dataclasses import dataclass, field
from typing import AsyncIterator, Awaitable, Callable, Mapping

from hub_ext.core.credentials import MANAGED_BY
from hub_ext.core.errors import UpstreamError, UserInputError
from hub_ext.kube.client import Conflict, Forbidden, Kube, KubeError, NotFound, Unavailable, reason
from hub_ext.kube.watchcache import WatchCache
from hub_ext.operator.rules.gates import GATED_LABEL
from server_ext.errors import JobExists, JobFinished, JobNotFound
from server_ext.jobs.backend import FINAL, LogLine
from server_ext.jobs.kube import katib as katib
from server_ext.jobs.kube import waiting
from server_ext.jobs.kube.kubeflow import (
    CONTAINER,
    KubeSettings,
    api_version,
    cancel_patch,
    job_manifest,
    pod_selector,
    resource_path,
)
from server_ext.jobs.kube.native_experiment import native_experiment
from server_ext.jobs.kube.status import job_json
from server_ext.jobs.model import JOB_ID_ANNOTATION
from server_ext.jobs.plan import JobPlan, task_name
from server_ext.runtimes.kube import dataset_copies
from server_ext.runtimes.kube import package as kube_package
from server_ext.runtimes.kube import pods as kube_pods
from server_ext.runtimes.kube import sweeps as kube_sweeps

log = logging.getLogger("mlplatform.jobs.kube")

KINDS = ("PyTorchJob", "TFJob", "Job")
SELECTOR = ",".join(f"{k}={v}" for k, v in MANAGED_BY.items())
MERGE_PATCH = "application/merge-patch+json"
_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_REPLICA_SPECS = {"PyTorchJob": "pytorchReplicaSpecs", "TFJob": "tfReplicaSpecs"}
_ROLE_OF_TYPE = {"master": "master", "chief": "master", "worker": "worker", "ps": "ps",
                 "evaluator": "evaluator"}


@dataclass
class _Project:
    caches: dict[str, WatchCache]  # kind → cache
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    views: dict[str, tuple[str, dict]] = field(default_factory=dict)  # uid → (resourceVersion, job JSON)
    sweeps: kube_sweeps.Sweeps | None = None  # None: the cluster does not serve Katib
    held: WatchCache | None = None  # the project's pods held for datasets (`waiting`)
    datasets: WatchCache | None = None  # the project's dataset PVCs
    source_annotation: str = ""

    def all_caches(self) -> list[WatchCache]:
        extra = [c for c in (self.held, self.datasets) if c is not None]
        return [*self.caches.values(), *extra, *(self.sweeps.caches() if self.sweeps else [])]

    def waiting(self) -> dict[str, str]:
        """Job object name → its `waiting.status_message`, for the jobs with held pods."""
        if self.held is None or self.datasets is None:
            return {}
        return waiting.messages(self.held.items(), self.datasets.items(), self.source_annotation)

    def dataset_changed(self) -> None:
        """A dataset's progress moves every second while it loads: a change for waiters only
        while a job of the project is held."""
        if self.held is not None and self.held.items():
            self.pulse()

    def jobs(self) -> list[dict]:
        """Every job's JSON; an object's JSON is computed again only when its resourceVersion
        changed (a list of thousands of jobs then costs the filter, not thousands of conversions).
        The dicts are shared between calls: callers must not change them."""
        fresh: dict[str, tuple[str, dict]] = {}
        out = []
        messages = self.waiting()
        for cache in self.caches.values():
            for obj in cache.items():
                if not _job_id(obj):
                    continue
                meta = obj["metadata"]
                uid, rv = meta.get("uid") or f"{meta.get('namespace')}/{meta['name']}", meta.get("resourceVersion", "")
                hit = self.views.get(uid)
                fresh[uid] = hit if hit is not None and hit[0] == rv else (rv, job_json(obj))
                out.append(waiting.with_message(fresh[uid][1], obj, messages))
        self.views = fresh
        return out + (self.sweeps.sweeps() if self.sweeps else [])

    def pulse(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()


def _typed(kind: str):
    """List items may come without kind/apiVersion (built-in kinds do): the cache keeps them typed."""
    version = api_version(kind)
    return lambda obj: obj if obj.get("kind") else {**obj, "kind": kind, "apiVersion": version}


def _job_id(obj: dict) -> str | None:
    meta = obj.get("metadata") or {}
    if any(o.get("kind") == "Trial" for o in meta.get("ownerReferences") or []):
        return None  # a sweep trial's job
    return (meta.get("annotations") or {}).get(JOB_ID_ANNOTATION)


def tasks_of(kind: str, obj: dict) -> list[str]:
    """The task names (``worker-replica-1``) of a job object, from its replica specs."""
    if kind == "Job":
        return ["master-replica-0"]
    specs = (obj.get("spec") or {}).get(_REPLICA_SPECS[kind]) or {}
    return [f"{_ROLE_OF_TYPE.get(rtype.lower(), rtype.lower())}-replica-{i}"
            for rtype, spec in specs.items() for i in range(int(spec.get("replicas", 1)))]


class KubeBackend:
    # a job's pods that mount a dataset still loading are held by the operator's webhook until it is
    # loaded (`hub_ext.operator.rules.gates`; its failurePolicy is Fail: no pod is made in a project while
    # it is down), so the jobs service accepts such a dataset; `waiting` says so in statusMessage
    holds_for_datasets = True


    def __init__(self, kube: Kube, settings: KubeSettings, *, watch_timeout: int = 300, load_timeout: float = 10,
                 poll_interval: float = 1.0, staging_env: Mapping[str, str] | None = None):
        """`staging_env`: where staging credentials are named (``GOOGLE_APPLICATION_CREDENTIALS``,
        ``AWS_SHARED_CREDENTIALS_FILE``…); default this process's environment (the notebook server's)."""
        self.kube, self.settings = kube, settings
        self.staging_env = staging_env
        self.watch_timeout, self.load_timeout, self.poll_interval = watch_timeout, load_timeout, poll_interval
        self._projects: dict[str, _Project] = {}
        self._katib: bool | None = None  # whether the cluster serves Katib (asked once)
        self._claims: dict[tuple[str, str], list] = {}  # (project, jobId) → [lock, submits holding or awaiting it]

    # ---- caches --------------------------------------------------------------------------------------
    async def _project(self, project: str) -> _Project:
        if not _NAMESPACE.fullmatch(project or ""):
            raise UserInputError("project", f"{project!r} is not a project name (a DNS label)")
        if self._projects.get(project) is None and self._katib is None:
            self._katib = await kube_sweeps.katib_served(self.kube)
        p = self._projects.get(project)
        if p is None:
            caches: dict[str, WatchCache] = {}
            p = self._projects[project] = _Project(caches)
            for kind in KINDS:
                caches[kind] = WatchCache(self.kube, resource_path(kind, project), label_selector=SELECTOR,
                                          watch_timeout=self.watch_timeout, on_change=p.pulse,
                                          transform=_typed(kind)).start()
            mounts = self.settings.mounts
            p.source_annotation = mounts.source_annotation
            p.held = WatchCache(self.kube, f"/api/v1/namespaces/{project}/pods", label_selector=f"{GATED_LABEL}=true",
                                watch_timeout=self.watch_timeout, on_change=p.pulse, transform=waiting.slim_pod).start()
            p.datasets = WatchCache(self.kube, f"/api/v1/namespaces/{project}/persistentvolumeclaims",
                                    label_selector=mounts.dataset_label, watch_timeout=self.watch_timeout,
                                    on_change=p.dataset_changed).start()
            if self._katib:
                p.sweeps = kube_sweeps.open_sweeps(self.kube, project, SELECTOR, self.watch_timeout, p.pulse)
            log.info("project %s: watching its jobs%s", project, " and sweeps" if self._katib else "")
        for cache in p.all_caches():
            if not await cache.wait_loaded(self.load_timeout):
                if cache.state == "forbidden" and self._projects.get(project) is p:
                    del self._projects[project]  # try afresh next time (RBAC may be fixed)
                    for c in p.all_caches():
                        await c.stop()
                raise UpstreamError(f"list the jobs of project {project}",
                                    cache.error or "the Kubernetes API did not answer in time")
        return p

    @staticmethod
    def _find(p: _Project, job_id: str) -> tuple[str, dict] | None:
        for kind, cache in p.caches.items():
            for obj in cache.items():
                if _job_id(obj) == job_id:
                    return kind, obj
        return None

    async def _job(self, project: str, job_id: str) -> tuple[_Project, str, dict]:
        p = await self._project(project)
        found = self._find(p, job_id)
        if found is None:
            raise JobNotFound(project, job_id)
        return (p, *found)

    # ---- JobBackend ----------------------------------------------------------------------------------
    def _taken(self, p: _Project, job_id: str) -> bool:
        return self._find(p, job_id) is not None or (p.sweeps is not None and p.sweeps.find(job_id) is not None)

    @contextlib.asynccontextmanager
    async def _claim(self, project: str, job_id: str):
        """One submit of `job_id` in `project` at a time: its check of the caches and its create."""
        key = (project, job_id)
        claim = self._claims.setdefault(key, [asyncio.Lock(), 0])
        claim[1] += 1
        try:
            async with claim[0]:
                yield
        finally:
            claim[1] -= 1
            if not claim[1]:
                del self._claims[key]

    async def submit(self, plan: JobPlan) -> dict:
        async with self._claim(plan.project, plan.job.job_id):
            return await self._submit(plan)

    async def _submit(self, plan: JobPlan) -> dict:
        project, job_id = plan.project, plan.job.job_id
        p = await self._project(project)
        if self._taken(p, job_id):
            raise JobExists(project, job_id)
        plan = dataset_copies.with_copy_claims(plan)
        if plan.sweep is not None:
            if any(d.copy for d in plan.datasets):
                raise UserInputError(dataset_copies.FIELD, "a sweep's trials cannot share one writable copy of a "
                                                           "dataset: mount it shared (without ':copy')")
            sweeps = kube_sweeps.required(p.sweeps, project, "trainingInput.hyperparameters")
            obj = await self._create_shipped(plan, kube_sweeps.katib_path("experiments", project),
                                             katib.experiment_manifest(plan, self.settings),
                                             lambda obj: kube_sweeps.discard(self.kube, sweeps, project, obj))
            return kube_sweeps.created(sweeps, obj, project, job_id, plan.owner)
        cache = p.caches[plan.kind]

        async def forget(obj: dict) -> None:  # kube_package deleted it; in case the watch saw it meanwhile
            cache.remove(project, plan.name)

        obj = await self._create_shipped(plan, resource_path(plan.kind, project), job_manifest(plan, self.settings),
                                         forget)
        await dataset_copies.make(self.kube, plan, obj)
        cache.put(obj)
        log.info("job %s in %s: created %s %s for %s", job_id, project, plan.kind, plan.name, plan.owner)
        return job_json(obj)

    async def submit_experiment(self, project: str, owner: str, doc: dict) -> dict:
        """A user's own Katib Experiment, as `native_experiment.native_experiment` accepts it."""
        manifest = native_experiment(doc, project, owner)
        job_id = manifest["metadata"]["annotations"][JOB_ID_ANNOTATION]
        async with self._claim(project, job_id):
            p = await self._project(project)
            if self._taken(p, job_id):
                raise JobExists(project, job_id)
            sweeps = kube_sweeps.required(p.sweeps, project, "kind")
            obj = await self._create(kube_sweeps.katib_path("experiments", project), manifest, project, job_id)
            return kube_sweeps.created(sweeps, obj, project, job_id, owner, "the native Experiment")

    async def _create_shipped(self, plan: JobPlan, path: str, manifest: dict,
                              undo: Callable[[dict], Awaitable[None]]) -> dict:
        """`_create` with the plan's package, as `kube_package` says: staged before, or shipped in a
        ConfigMap after (on any failure there, `undo(obj)` and raise)."""
        pkg = plan.package
        if pkg is not None and pkg.delivery == "bucket":
            await kube_package.stage(plan, os.environ if self.staging_env is None else self.staging_env)
        obj = await self._create(path, manifest, plan.project, plan.job.job_id)
        if pkg is not None and pkg.configmap is not None:
            try:
                await kube_package.ship_in_configmap(self.kube, plan, obj)
            except BaseException:
                await undo(obj)
                raise
        return obj

    async def _create(self, path: str, manifest: dict, project: str, job_id: str) -> dict:
        """POST one object; the API's refusals as the module docstring says."""
        try:
            return await self.kube.request("POST", path, manifest)
        except Conflict:
            raise JobExists(project, job_id) from None
        except Unavailable as e:
            if e.code == 0:  # no answer in time: the server may have made it all the same
                made = await self._made_meanwhile(path, manifest)
                if made is not None:
                    return made
            log.warning("job %s in %s: create failed: %s", job_id, project, reason(e))
            raise UpstreamError(f"create job {job_id}", reason(e)) from None
        except KubeError as e:
            why = reason(e)
            if isinstance(e, Forbidden) and "quota" in why:
                raise UserInputError("trainingInput", f"the quota of project {project} does not allow this "
                                                      f"job ({why})", 403) from None
            # a webhook's or an admission policy's denial (Katib's Experiment validator answers 400)
            if e.code in (400, 403) and ("denied the request" in why or "denied request" in why):
                raise UserInputError("trainingInput", f"the cluster's admission control refused this job ({why})",
                                     e.code) from None
            if isinstance(e, Forbidden):
                raise UserInputError("project", f"jobs may not be created in project {project} ({why})", 403) from None
            log.warning("job %s in %s: create failed: %s", job_id, project, why)
            raise UpstreamError(f"create job {job_id}", why) from None

    async def _made_meanwhile(self, path: str, manifest: dict, tries: int = 6, pause: float = 0.5) -> dict | None:
        """After a create that got no answer: the object, if the server made it (ours: same name and
        the same annotations, which hold the jobId and the submitted spec; submits of one jobId run
        one at a time here), read back a few times while a slow server may still be making it."""
        name, wanted = manifest["metadata"]["name"], manifest["metadata"].get("annotations") or {}
        for attempt in range(tries):
            try:
                found = await self.kube.get(f"{path}/{name}")
            except KubeError:
                found = None
            if found is not None:
                have = (found.get("metadata") or {}).get("annotations") or {}
                return found if all(have.get(k) == v for k, v in wanted.items()) else None
            if attempt < tries - 1:
                await asyncio.sleep(pause)
        return None

    async def _sweep(self, project: str, job_id: str) -> tuple[_Project, dict | None]:
        p = await self._project(project)
        return p, (p.sweeps.find(job_id) if p.sweeps is not None else None)

    async def get(self, project: str, job_id: str) -> dict:
        p, experiment = await self._sweep(project, job_id)
        if experiment is not None:
            return p.sweeps.json_of(experiment)
        p, _, obj = await self._job(project, job_id)
        return waiting.with_message(job_json(obj), obj, p.waiting())

    async def list(self, project: str) -> list[dict]:
        return (await self._project(project)).jobs()

    async def cancel(self, project: str, job_id: str) -> dict:
        p, experiment = await self._sweep(project, job_id)
        if experiment is not None:
            return await kube_sweeps.cancel(self.kube, p.sweeps, project, job_id, experiment)
        p, kind, obj = await self._job(project, job_id)
        job = job_json(obj)
        if job["state"] in FINAL:
            raise JobFinished(job_id, job["state"])
        if job["state"] == "CANCELLING":
            return job
        name = obj["metadata"]["name"]
        when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        try:
            obj = await self.kube.request("PATCH", resource_path(kind, project, name), cancel_patch(kind, when),
                                          content_type=MERGE_PATCH)
        except NotFound:
            p.caches[kind].remove(project, name)
            raise JobNotFound(project, job_id) from None
        except KubeError as e:
            log.warning("job %s in %s: cancel failed: %s", job_id, project, reason(e))
            raise UpstreamError(f"cancel job {job_id}", reason(e)) from None
        p.caches[kind].put(obj)
        log.info("job %s in %s: cancel requested", job_id, project)
        return job_json(obj)

    async def close(self) -> None:
        projects, self._projects = list(self._projects.values()), {}
        for p in projects:
            for cache in p.all_caches():
                await cache.stop()

    # ---- logs ------------------------------------------------------------------------------------------
    def logs(self, project: str, job_id: str, task: str = "master-replica-0", *, follow: bool = False,
             after: int = 0) -> AsyncIterator[LogLine]:
        return self._logs(project, job_id, task, follow, max(0, int(after)))

    async def _logs(self, project: str, job_id: str, task: str, follow: bool, after: int) -> AsyncIterator[LogLine]:
        p, experiment = await self._sweep(project, job_id)
        label = task = task_name(task)
        if experiment is not None:
            trial, task = kube_sweeps.trial_task(p.sweeps, project, job_id, experiment, task)
            kind, obj, container = trial.kind, trial.job, trial.container
            ended = lambda: kube_sweeps.trial_ended(p.sweeps, trial.name)  # noqa: E731
        else:
            p, kind, obj = await self._job(project, job_id)
            container = CONTAINER[kind]
            ended = lambda: self._ended(p, job_id)  # noqa: E731
        tasks = tasks_of(kind, obj)
        if task not in tasks:
            raise UserInputError("task", f"job {job_id} has no task {label!r} (it has {', '.join(tasks)})")
        selector = pod_selector(kind, obj["metadata"]["name"], task)
        pod_name = pod_uid = None
        base = read = 0  # lines of pods replaced earlier; complete lines of this pod's log read so far
        while True:
            if pod_name is None:
                found = await kube_pods.task_pod(self.kube, project, job_id, selector)
                if found is None:
                    if not follow or ended():
                        return
                    await self._pause(p)
                    continue
                if pod_uid is not None and found[1] != pod_uid:  # a controller replaced the pod: a new log
                    base, read = base + read, 0
                pod_name, pod_uid = found
            partial = b""
            try:
                reader = kube_pods.read_log(self.kube, project, pod_name, container, follow, timestamps=True)
                async with contextlib.aclosing(reader) as lines:
                    async for raw in lines:
                        if not raw.endswith(b"\n"):
                            partial = raw  # the last one: kept only once the container has ended
                            continue
                        read += 1
                        if base + read > after:
                            when, text = timed(raw)
                            yield LogLine(base + read, label, text, when)
            except KubeError as e:
                if follow and isinstance(e, Unavailable) and e.code == 0:  # no answer, or the stream broke
                    log.info("job %s in %s: log stream of %s broke (%s); reconnecting", job_id, project, task,
                             reason(e))
                    await self._pause(p)
                    continue
                waiting = e.code == 400 and "waiting to start" in e.body  # the container has not started
                if not (waiting or isinstance(e, NotFound) or (follow and isinstance(e, Unavailable))):
                    raise UpstreamError(f"read the log of {task} of job {job_id}", reason(e)) from None
                if not follow or ended():
                    return
                if isinstance(e, NotFound):
                    pod_name = None
                await self._pause(p)
                continue
            if not follow and not partial:
                return
            pod = await kube_pods.get_pod(self.kube, project, pod_name, job_id)
            done = kube_pods.terminated(pod, container)
            if partial and (done or not follow):
                read += 1
                if base + read > after:
                    when, text = timed(partial)
                    yield LogLine(base + read, label, text, when)
            if done or not follow:
                return
            if pod is not None and pod["metadata"].get("uid") != pod_uid:
                pod_name = None  # replaced under the same name: look it up again
            await self._pause(p)

    async def trial_metrics(self, project: str, job_id: str, trial_id: str) -> list[dict]:
        p, experiment = await self._sweep(project, job_id)
        if experiment is None:
            await self._job(project, job_id)  # JobNotFound when there is no such job at all
            raise JobNotFound(project, f"{job_id}/trials/{trial_id}")
        return await kube_sweeps.trial_metrics(self.kube, p.sweeps, project, job_id, experiment, trial_id)

    def _ended(self, p: _Project, job_id: str) -> bool:
        found = self._find(p, job_id)
        return found is None or job_json(found[1])["state"] in FINAL

    async def _pause(self, p: _Project) -> None:
        """Until a job of the project changes, or `poll_interval` (pods are not watched)."""
        try:
            await asyncio.wait_for(p.changed.wait(), self.poll_interval)
        except asyncio.TimeoutError:
            pass


def _text(raw: bytes) -> str:
    text = raw.decode("utf-8", errors="replace")
    return text[:-1] if text.endswith("\n") else text


_STAMPED = re.compile(rb"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)) ?(.*)", re.DOTALL)


def timed(raw: bytes) -> tuple[str | None, str]:
    """(time, text) of a line read with ``timestamps=true`` (the kubelet's RFC 3339 time, then a
    space); (None, the line) for one without a time."""
    match = _STAMPED.fullmatch(raw)
    if match is None:
        return None, _text(raw)
    return match.group(1).decode(), _text(match.group(2))
