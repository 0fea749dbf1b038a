"""The Kubernetes `JobBackend`: a job is one Kubeflow Training Operator v1 ``PyTorchJob``/``TFJob``
or one ``batch/v1`` Job (`kubeflow.job_manifest`), or one Kubeflow Trainer v2 ``TrainJob``
(`trainjob.trainjob_manifest`), in the project's namespace.

Guarantees:

- Reads come from watch caches (`project_caches`: one per kind and project, limited to the
  platform's objects), started on the first use of a project and kept until `close`. `get` and
  `list` make no API request once a project's caches are loaded; caches that cannot load in
  `load_timeout` are `UpstreamError` (a project whose listing is forbidden is tried afresh next time).
- A job is found by its jobId annotation (`model.JOB_ID_ANNOTATION`), never by name alone, and only
  in its own project's namespace: another project's job is `JobNotFound`; a project name that is
  not a DNS label is `UserInputError("project", …)`.
- `submit` creates the job object (nothing half-made; the API's refusals: `job_create`): a jobId
  already in the cache, or a 409, is `JobExists`; submits of one jobId in a project run one at a
  time here (two backends at the same instant are not guarded). The created object is put into the
  cache at once. A shipped package travels as `kube_package` says, and a dataset chosen as a private
  writable copy (``frames:copy``) becomes a claim from its snapshot owned by the object
  (`dataset_copies`; not for sweeps): if either fails the object is deleted again and the error
  raised, so all exist or none.
- Which API a job gets (`KubeSettings.training_api`, decided by `trainjob.on_trainer_v2`): ``auto``
  (the default: as ``v2`` where the cluster serves ``trainer.kubeflow.org/v1alpha1``, asked once,
  else ``v1``), ``v2`` (a TrainJob for every job `trainjob.unsupported` allows; the others on v1),
  ``v1``; a sweep's trials alike (Katib's TrainJob trials: Katib must have started after Trainer's
  CRDs were installed, or it does not watch TrainJobs). Wherever Trainer v2 is served the project's
  TrainJobs are read beside its v1 jobs, so jobs made before a switch stay listed, described and
  streamed. A cluster without the Training Operator (``kubeflow.org/v1``, asked once) has no
  PyTorchJob/TFJob caches, and a job that would need one is refused (`UserInputError` on
  ``trainingInput``, saying why no TrainJob runs it) before anything is made.
- `cancel` merge-patches `kubeflow.cancel_patch` (the controller suspends the job and deletes its
  pods): the job reads CANCELLING, then CANCELLED; a job that already ended is `JobFinished`.
- `logs` reads the log of the task's main container (``pytorch``, ``tensorflow``, ``trainer`` or
  a TrainJob's ``node``) as
  `job_logs.TaskLog` says (numbered lines, ``follow`` across reconnects and replaced pods). A task
  the job does not have is `UserInputError("task", …)`.
- Sweeps (a plan with ``sweep``, or a user's own Katib Experiment: `submit_experiment`) are Katib
  ``Experiment``s, dispatched to `kube_sweeps`, which says how they are made, read, cancelled and
  logged (``trial-<id>``). A jobId is unique across jobs and sweeps of a project; the jobs a sweep's
  Trials own are read as its trials. Pods and their logs are read through `kube_pods`.
- A job whose pods are held for datasets still loading (the operator's scheduling gate) carries
  ``statusMessage`` (`waiting`: "waiting for the dataset 'x' to finish loading (42%)") in `get` and
  `list`, from two more label-filtered watches per project: its held pods and its dataset PVCs.
- Where the cluster serves Kueue, a job object (and a sweep's trial template, so every trial's job)
  is created with the queue label naming the
  project's LocalQueue ``default`` (`hub_ext.manifests.queues`), and a job Kueue holds carries
  ``statusMessage`` from its Workload (`queued`), from the first answer of a project just opened
  (a CLI call opens one: it waits up to `WORKLOADS_WAIT` for the Workloads, never fails for
  them). The label is not left to Kueue's defaulting of
  queue-less jobs: its webhook asks its own in-memory list of LocalQueues, which lags (a LocalQueue
  just made, a manager just (re)started: readyz answers before its queue controllers run), and a
  job it misses gets a Workload with no queue that Kueue never admits ("LocalQueue  doesn't
  exist"); a named queue that Kueue learns of later is found by its Workloads then.

- `get` of a job carries ``trainingOutput.progress`` (`server_ext.jobs.progress`): a TrainJob's
  from its ``status.trainerStatus``; a v1 job's from the last progress line among the last
  `job_logs.PROGRESS_TAIL` lines of its master's log, read at most every `PROGRESS_TTL` seconds.
  `list` carries only the TrainJobs' (it answers from the watch caches, reading no log).

Request and response bodies are never logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import re
from dataclasses import replace
from typing import AsyncIterator, Mapping

from hub_ext.core.errors import UpstreamError, UserInputError
from hub_ext.kube.client import Kube, KubeError, NotFound, reason
from hub_ext.manifests.queues import LOCAL_QUEUE, QUEUE_LABEL
from server_ext.errors import JobExists, JobFinished, JobNotFound
from server_ext.jobs.backend import FINAL, LogLine
from server_ext.jobs.kube import katib as katib
from server_ext.jobs.kube import waiting
from server_ext.jobs.kube.kubeflow import (
    CONTAINER,
    KubeSettings,
    cancel_patch,
    job_manifest,
    pod_selector,
    resource_path,
)
from server_ext.jobs.kube.native_experiment import native_experiment
from server_ext.jobs.kube.trainjob import on_trainer_v2, trainjob_manifest, why_not_v2
from server_ext.jobs.kube.status import job_json
from server_ext.jobs.model import JOB_ID_ANNOTATION
from server_ext.jobs.plan import JobPlan, task_name
from server_ext.runtimes.kube import dataset_copies, job_create
from server_ext.runtimes.kube import sweeps as kube_sweeps
from server_ext.runtimes.kube.job_logs import TaskLog
from server_ext.runtimes.kube.project_caches import (
    V1_KINDS,
    Project,
    kueue_served,
    open_project,
    tasks_of,
    trainer_served,
    training_operator_served,
)

log = logging.getLogger("mlplatform.jobs.kube")

MERGE_PATCH = "application/merge-patch+json"
_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
WORKLOADS_WAIT = 5  # seconds a project just opened waits for its Kueue Workloads (optional: `required_caches`)
PROGRESS_TTL = 10.0  # seconds a v1 job's progress, read from its log, is reused by `get`


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
        self._projects: dict[str, Project] = {}
        self._katib: bool | None = None  # whether the cluster serves Katib (asked once)
        self._kueue: bool | None = None  # whether the cluster serves Kueue's Workloads (asked once)
        self._trainer: bool | None = None  # whether the cluster serves Trainer v2's TrainJobs (asked once)
        self._v1: bool | None = None  # whether the cluster serves the Training Operator v1 (asked once)
        self._claims: dict[tuple[str, str], list] = {}  # (project, jobId) → [lock, submits holding or awaiting it]
        self._progress: dict[tuple[str, str], tuple[float, dict | None]] = {}  # (project, jobId) → (when, progress)

    # ---- caches --------------------------------------------------------------------------------------
    async def _project(self, project: str) -> Project:
        if not _NAMESPACE.fullmatch(project or ""):
            raise UserInputError("project", f"{project!r} is not a project name (a DNS label)")
        if self._projects.get(project) is None and self._katib is None:
            v1 = await training_operator_served(self.kube)  # either raises: asked again next time
            katib = await kube_sweeps.katib_served(self.kube)
            self._kueue = await kueue_served(self.kube)
            self._trainer = await trainer_served(self.kube)
            self._v1, self._katib = v1, katib
        p = opened = self._projects.get(project)
        if p is None:
            p = self._projects[project] = open_project(self.kube, self.settings, project, bool(self._katib),
                                                       self.watch_timeout, kueue=bool(self._kueue),
                                                       trainer=bool(self._trainer), v1=bool(self._v1))
        for cache in p.required_caches():
            if not await cache.wait_loaded(self.load_timeout):
                if cache.state == "forbidden" and self._projects.get(project) is p:
                    del self._projects[project]  # try afresh next time (RBAC may be fixed)
                    for c in p.all_caches():
                        await c.stop()
                raise UpstreamError(f"list the jobs of project {project}",
                                    cache.error or "the Kubernetes API did not answer in time")
        if opened is None and p.workloads is not None:  # the queue's words from the first answer on (a CLI
            await p.workloads.wait_loaded(min(self.load_timeout, WORKLOADS_WAIT))  # call is one); never a failure
        return p

    async def _job(self, project: str, job_id: str) -> tuple[Project, str, dict]:
        p = await self._project(project)
        found = p.find(job_id)
        if found is None:
            raise JobNotFound(project, job_id)
        return (p, *found)

    # ---- JobBackend ----------------------------------------------------------------------------------
    def _taken(self, p: Project, job_id: str) -> bool:
        return p.find(job_id) is not None or (p.sweeps is not None and p.sweeps.find(job_id) is not None)

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

    def _queue_labels(self) -> dict[str, str]:
        """The project's queue named where Kueue is served, as the spawner names it on notebook pods
        (module docstring); else none."""
        return {QUEUE_LABEL: LOCAL_QUEUE} if self._kueue else {}

    async def submit(self, plan: JobPlan) -> dict:
        async with self._claim(plan.project, plan.job.job_id):
            return await self._submit(plan)

    async def _submit(self, plan: JobPlan) -> dict:
        project, job_id = plan.project, plan.job.job_id
        p = await self._project(project)
        if self._taken(p, job_id):
            raise JobExists(project, job_id)
        plan = dataset_copies.with_copy_claims(plan)
        if on_trainer_v2(plan, self.settings.training_api, bool(self._trainer)):
            plan = replace(plan, trainer_v2=True)  # a sweep's trials too: Katib runs TrainJob trials
        elif plan.kind in V1_KINDS and not self._v1:
            raise UserInputError("trainingInput", f"this job needs the Kubeflow Training Operator (a {plan.kind}), "
                                 "which this cluster does not run, and cannot run as a Kubeflow Trainer v2 TrainJob: "
                                 + why_not_v2(plan, self.settings.training_api, bool(self._trainer)))
        if plan.sweep is not None:
            if any(d.copy for d in plan.datasets):
                raise UserInputError(dataset_copies.FIELD, "a sweep's trials cannot share one writable copy of a "
                                                           "dataset: mount it shared (without ':copy')")
            sweeps = kube_sweeps.required(p.sweeps, project, "trainingInput.hyperparameters")
            experiment = katib.experiment_manifest(plan, self.settings)
            if queue := self._queue_labels():  # every trial's job names the queue too
                experiment["spec"]["trialTemplate"]["trialSpec"]["metadata"] = {"labels": queue}
            obj = await job_create.create_shipped(self.kube, plan, kube_sweeps.katib_path("experiments", project),
                                                  experiment,
                                                  lambda obj: kube_sweeps.discard(self.kube, sweeps, project, obj),
                                                  self.staging_env)
            return kube_sweeps.created(sweeps, obj, project, job_id, plan.owner)
        cache = p.caches[plan.kind]

        async def forget(obj: dict) -> None:  # kube_package deleted it; in case the watch saw it meanwhile
            cache.remove(project, plan.name)

        manifest = trainjob_manifest(plan, self.settings) if plan.trainer_v2 else job_manifest(plan, self.settings)
        manifest["metadata"]["labels"].update(self._queue_labels())
        obj = await job_create.create_shipped(self.kube, plan, resource_path(plan.kind, project),
                                              manifest, forget, self.staging_env)
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
            obj = await job_create.create(self.kube, kube_sweeps.katib_path("experiments", project), manifest, project,
                                          job_id)
            return kube_sweeps.created(sweeps, obj, project, job_id, owner, "the native Experiment")

    async def _sweep(self, project: str, job_id: str) -> tuple[Project, dict | None]:
        p = await self._project(project)
        return p, (p.sweeps.find(job_id) if p.sweeps is not None else None)

    async def get(self, project: str, job_id: str) -> dict:
        p, experiment = await self._sweep(project, job_id)
        if experiment is not None:
            return p.sweeps.json_of(experiment)
        p, kind, obj = await self._job(project, job_id)
        job = waiting.with_message(job_json(obj), obj, p.waiting())
        if kind != "TrainJob" and job["state"] not in ("QUEUED", "PREPARING"):
            reported = await self._log_progress(project, job_id, kind, obj)
            if reported:
                job.setdefault("trainingOutput", {})["progress"] = reported
        return job

    async def _log_progress(self, project: str, job_id: str, kind: str, obj: dict) -> dict | None:
        """A v1 job's progress: the last progress line of its master's log, read at most every
        `PROGRESS_TTL` seconds per job (a TrainJob's comes from its status: `job_json`)."""
        key, now = (project, job_id), asyncio.get_running_loop().time()
        seen = self._progress.get(key)
        if seen is not None and now - seen[0] < PROGRESS_TTL:
            return seen[1]
        tasks = tasks_of(kind, obj)
        source = TaskLog(self.kube, project, job_id, tasks[0], tasks[0],
                         pod_selector(kind, obj["metadata"]["name"], tasks[0], tasks), CONTAINER[kind])
        reported = await source.progress()
        self._progress[key] = (now, reported)
        return reported

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
        source = TaskLog(self.kube, project, job_id, task, label,
                         pod_selector(kind, obj["metadata"]["name"], task, tasks), container)
        async with contextlib.aclosing(source.lines(follow, after, ended, lambda: self._pause(p))) as lines:
            async for line in lines:
                yield line

    async def trial_metrics(self, project: str, job_id: str, trial_id: str) -> list[dict]:
        p, experiment = await self._sweep(project, job_id)
        if experiment is None:
            await self._job(project, job_id)  # JobNotFound when there is no such job at all
            raise JobNotFound(project, f"{job_id}/trials/{trial_id}")
        return await kube_sweeps.trial_metrics(self.kube, p.sweeps, project, job_id, experiment, trial_id)

    def _ended(self, p: Project, job_id: str) -> bool:
        found = p.find(job_id)
        return found is None or job_json(found[1])["state"] in FINAL

    async def _pause(self, p: Project) -> None:
        """Until a job of the project changes, or `poll_interval` (pods are not watched)."""
        try:
            await asyncio.wait_for(p.changed.wait(), self.poll_interval)
        except asyncio.TimeoutError:
            pass
