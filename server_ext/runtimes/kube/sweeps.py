"""The sweeps of the Kubernetes `JobBackend` (`kube_backend.KubeBackend` dispatches here): a sweep is
one Katib v1beta1 ``Experiment`` in the project's namespace (`katib.experiment_manifest`, or a user's
own Experiment through `native_experiment`), its trials Katib's ``Trial`` objects, each running one
job (named after the Trial) that the Training Operator or the Job controller runs.

Guarantees:

- **Caches**: per project, one `WatchCache` of Experiments with the platform's label selector
  (``app.kubernetes.io/managed-by``), one of Trials with the selector ``katib.kubeflow.org/experiment``
  (the label Katib's experiment controller puts on every Trial it makes; Trials copy the
  Experiment's labels too, but the platform does not rely on that). A Trial belongs to the
  Experiment its label names and, when it has one, whose uid its ownerReference holds. Whether the
  cluster serves Katib is asked once per backend (discovery of ``kubeflow.org/v1beta1``): without
  it, projects still work for jobs, and a sweep is refused (`required`: `UserInputError`).
- **Create**: `KubeBackend.submit` (a plan with ``sweep``) and `submit_experiment` create the
  Experiment as they create a job (same refusals; `kube_package` ships a plan's package); `created`
  puts it into the cache at once, so a `get` right after sees it. Should the package ConfigMap
  fail, `discard` removes the Experiment again (Background propagation, precondition on its uid;
  a failed delete is not raised over the package's error).
- **Reads**: `get`/`list` answer `sweep_status.sweep_json(experiment, trials)` from the caches (and,
  while the sweep has not ended, ``statusMessage`` when the pod of its Katib service cannot start:
  `katib_services.trouble`, from a third cache of the pods labelled as Katib's services), no
  API request; the JSON of a sweep is computed again only when the resourceVersion of its
  Experiment or of one of its Trials changed (or a Trial came or went).
- **Trial ids** are ``"1"``, ``"2"``… in creation order: Trials sorted by (creationTimestamp,
  name). Task ``trial-<id>`` is that Trial's job's master, ``trial-<id>/<task>`` another replica.
- **Cancel** (Katib v1beta1 has no stop for an Experiment: only ``maxTrialCount``,
  ``parallelTrialCount`` and ``maxFailedTrialCount`` may change, and its validator refuses a
  ``maxTrialCount`` not above the Trials already made; deleting the Experiment would lose the
  finished Trials): a merge patch records ``mlplatform.io/cancel-requested`` (and `UNLIMITED` as
  ``maxTrialCount`` where there was none: Katib restarts an ended Experiment without one); then
  the Experiment is ended as Katib ends one, through its status subresource (`_end`: ``Running``
  False, ``Failed`` True with reason `CANCELLED_REASON`, ``completionTime``; optimistic, retried on
  a conflict with Katib's own update), so Katib's controller makes no more Trials and removes the
  suggestion service; then each Trial still running (a fresh list: one made a moment ago too) is
  ended the same way with Katib's ``Killed`` condition (reason `KILLED_REASON`) and its job
  deleted (its pods go with it), and deleted again 1, 3 and 10 s later (`_reap`: Katib's trial
  controller, reading a Trial a moment old, can make a retained job anew). Every Trial stays: the
  finished ones as they ended, the stopped
  ones CANCELLED; the sweep stays listed, CANCELLED, whether or not a trial had finished. Members
  may write only this to Experiments' and Trials' status (the project Role; the
  ValidatingAdmissionPolicy ``mlplatform-sweep-cancel``).
- **Logs**: ``trial-<id>[/<task>]`` streams that Trial's job's pod, as a job's task (same
  numbering, follow and resume rules); it ends when the Trial has completed or is gone.
- **Trial metrics** (`trial_metrics`): read from the log of the trial's master pod
  (``timestamps=true``) as `metric_reports.series` parses it: the reports of
  ``hyperparameterMetricTag`` as the user wrote it (the Experiment's ``objectiveMetricName`` for
  a user's own Experiment; Katib's name for a tag it cannot collect as it is, `katib.metric_name`,
  is never shown), oldest first. The log
  has them whether the trainer prints ``<tag>=<number>`` or reports through ``cloudml-hypertune``:
  the trial program echoes each line written to the metrics file (`katib_trial.WATCH_PY`). A trial
  whose pods are gone has an empty series (Katib's DB keeps them on a real cluster; it is not
  reachable from here).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import re
from dataclasses import dataclass, field
from typing import Callable

from hub_ext.core.errors import UpstreamError, UserInputError
from hub_ext.kube.client import Conflict, Kube, KubeError, NotFound, reason, serves
from hub_ext.kube.watchcache import WatchCache
from server_ext.errors import JobFinished, JobNotFound
from server_ext.jobs.backend import FINAL
from server_ext.jobs.kube import katib as katib_mapping
from server_ext.jobs.kube import katib_services
from server_ext.jobs.kube import metric_reports as metric_reports
from server_ext.jobs.kube import sweep_status as sweep_status
from server_ext.jobs.kube.katib import EXPERIMENT_LABEL
from server_ext.jobs.kube.kubeflow import CANCEL_ANNOTATION, CONTAINER, pod_selector, resource_path
from server_ext.jobs.model import JOB_ID_ANNOTATION
from server_ext.runtimes.kube import pods as kube_pods

log = logging.getLogger("mlplatform.jobs.kube")

GROUP_VERSION = "kubeflow.org/v1beta1"
CANCELLED_REASON = "ExperimentCancelled"  # the reason of the Failed condition a cancel puts on an Experiment
KILLED_REASON = "TrialCancelled"  # the reason of the Killed condition it puts on each running Trial
UNLIMITED = 2**31 - 1  # maxTrialCount for an Experiment that had none (Katib's is an int32)
MERGE_PATCH = "application/merge-patch+json"
COMPLETED = ("Succeeded", "Failed", "Killed", "EarlyStopped", "MetricsUnavailable")
_TRIAL_TASK = re.compile(r"trial-(?P<id>[1-9][0-9]*)(?:/(?P<task>.+))?")


def katib_path(plural: str, namespace: str, name: str | None = None) -> str:
    path = f"/apis/{GROUP_VERSION}/namespaces/{namespace}/{plural}"
    return f"{path}/{name}" if name else path


def _typed(kind: str):
    return lambda obj: obj if obj.get("kind") else {**obj, "kind": kind, "apiVersion": GROUP_VERSION}


def _true(obj: dict, type_: str) -> bool:
    return any(c.get("type") == type_ and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or [])


def trial_completed(trial: dict) -> bool:
    return any(_true(trial, t) for t in COMPLETED)


def _order(trial: dict) -> tuple[str, str]:
    meta = trial["metadata"]
    return meta.get("creationTimestamp") or "", meta["name"]


@dataclass
class Sweeps:
    """The sweep caches of one project."""
    experiments: WatchCache
    trials: WatchCache
    views: dict[str, tuple[tuple, dict]] = field(default_factory=dict)  # uid → (versions, sweep JSON)
    services: WatchCache | None = None  # the pods of Katib's services (`katib_services`)

    def caches(self) -> list[WatchCache]:
        return [self.experiments, self.trials, *([self.services] if self.services is not None else [])]

    def find(self, job_id: str) -> dict | None:
        return next((e for e in self.experiments.items()
                     if ((e["metadata"].get("annotations") or {}).get(JOB_ID_ANNOTATION)) == job_id), None)

    @staticmethod
    def _by_experiment(objects: list[dict]) -> dict[str, list[dict]]:
        """`objects` (Trials, service pods) by the Experiment Katib's label names."""
        out: dict[str, list[dict]] = {}
        for o in objects:
            out.setdefault((o["metadata"].get("labels") or {}).get(EXPERIMENT_LABEL, ""), []).append(o)
        return out

    def _grouped(self) -> dict[str, list[dict]]:
        return self._by_experiment(self.trials.items())

    def _services_grouped(self) -> dict[str, list[dict]]:
        return self._by_experiment(self.services.items() if self.services is not None else [])

    @staticmethod
    def _own(experiment: dict, trials: list[dict]) -> list[dict]:
        uid = experiment["metadata"].get("uid")
        return sorted([t for t in trials if not t["metadata"].get("ownerReferences") or
                       any(o.get("uid") == uid for o in t["metadata"]["ownerReferences"])], key=_order)

    def trials_of(self, experiment: dict, grouped: dict | None = None) -> list[dict]:
        """The Experiment's trials in trial-id order (id = position + 1)."""
        grouped = self._grouped() if grouped is None else grouped
        return self._own(experiment, grouped.get(experiment["metadata"]["name"], []))

    def _view(self, experiment: dict, trials: list[dict], services: list[dict], fresh: dict) -> dict:
        meta = experiment["metadata"]
        uid = meta.get("uid") or meta["name"]
        versions = (meta.get("resourceVersion"), tuple(t["metadata"].get("resourceVersion", "") for t in trials),
                    tuple(p["metadata"].get("resourceVersion", "") for p in services))
        hit = self.views.get(uid)
        view = hit if hit is not None and hit[0] == versions else (versions, _with_trouble(
            sweep_status.sweep_json(experiment, trials), katib_services.trouble(experiment, services)))
        fresh[uid] = view
        return view[1]

    def json_of(self, experiment: dict) -> dict:
        fresh = dict(self.views)
        services = self._services_grouped().get(experiment["metadata"]["name"], [])
        out = self._view(experiment, self.trials_of(experiment), services, fresh)
        self.views = fresh
        return out

    def sweeps(self) -> list[dict]:
        """Every sweep's JSON (shared dicts: callers must not change them)."""
        grouped, services, fresh = self._grouped(), self._services_grouped(), {}
        out = [self._view(e, self.trials_of(e, grouped), services.get(e["metadata"]["name"], []), fresh)
               for e in self.experiments.items()
               if (e["metadata"].get("annotations") or {}).get(JOB_ID_ANNOTATION)]
        self.views = fresh
        return out

    def trial(self, experiment: dict, trial_id: str) -> dict | None:
        trials = self.trials_of(experiment)
        i = int(trial_id) if str(trial_id).isdigit() else 0
        return trials[i - 1] if 1 <= i <= len(trials) else None


def _with_trouble(view: dict, words: str) -> dict:
    """A sweep not ended whose Katib service cannot start says why (``statusMessage``)."""
    return {**view, "statusMessage": words} if words and view.get("state") not in FINAL else view


async def katib_served(kube: Kube) -> bool:
    """Whether the cluster serves Katib's Experiments and Trials (discovery); `UpstreamError` if it cannot tell."""
    return await serves(kube, GROUP_VERSION, {"experiments", "trials"}, "Katib")


def open_sweeps(kube: Kube, project: str, selector: str, watch_timeout: int, on_change: Callable[[], None]) -> Sweeps:
    def cache(plural: str, kind: str, label_selector: str) -> WatchCache:
        return WatchCache(kube, katib_path(plural, project), label_selector=label_selector,
                          watch_timeout=watch_timeout, on_change=on_change, transform=_typed(kind)).start()
    services = WatchCache(kube, f"/api/v1/namespaces/{project}/pods", label_selector=katib_services.SERVICE_LABEL,
                          watch_timeout=watch_timeout, on_change=on_change, transform=katib_services.slim_pod).start()
    return Sweeps(cache("experiments", "Experiment", selector), cache("trials", "Trial", EXPERIMENT_LABEL),
                  services=services)


def required(sweeps: Sweeps | None, project: str, field: str) -> Sweeps:
    """The project's sweeps; `UserInputError` on `field` when the cluster does not serve Katib."""
    if sweeps is None:
        raise UserInputError(field, f"hyperparameter sweeps need Katib (kubeflow.org/v1beta1 Experiments), "
                                    f"which this cluster does not serve (project {project})")
    return sweeps


# ---- create ------------------------------------------------------------------------------------------------
def created(sweeps: Sweeps, obj: dict, project: str, job_id: str, owner: str, what: str = "Experiment") -> dict:
    """An Experiment just created, put into the cache at once; its sweep JSON."""
    sweeps.experiments.put(obj)
    log.info("sweep %s in %s: created %s %s for %s", job_id, project, what, obj["metadata"]["name"], owner)
    return sweeps.json_of(obj)


async def discard(kube: Kube, sweeps: Sweeps, project: str, obj: dict) -> None:
    """Remove an Experiment just created (its package could not be shipped); a failed delete is not raised."""
    name = obj["metadata"]["name"]
    sweeps.experiments.remove(project, name)
    with contextlib.suppress(KubeError):
        await asyncio.shield(kube.request(
            "DELETE", katib_path("experiments", project, name),
            {"propagationPolicy": "Background", "preconditions": {"uid": obj["metadata"]["uid"]}}))


# ---- cancel ------------------------------------------------------------------------------------------------
async def cancel(kube: Kube, sweeps: Sweeps, project: str, job_id: str, experiment: dict) -> dict:
    job = sweeps.json_of(experiment)
    if job["state"] in FINAL:
        raise JobFinished(job_id, job["state"])
    if job["state"] == "CANCELLING":
        return job
    name, spec = experiment["metadata"]["name"], experiment.get("spec") or {}
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    path = katib_path("experiments", project, name)
    try:
        patch: dict = {"metadata": {"annotations": {CANCEL_ANNOTATION: when}}}
        if spec.get("maxTrialCount") is None:  # Katib restarts an ended Experiment that has no maxTrialCount
            patch["spec"] = {"maxTrialCount": UNLIMITED}
        obj = await kube.request("PATCH", path, patch, content_type=MERGE_PATCH)
        obj = await _end(kube, path, obj, "Failed", CANCELLED_REASON, "Experiment was cancelled: no new trials", when)
        sweeps.experiments.put(obj)
        # from a fresh list (not the cache), once Katib's controller makes no more: a Trial made a moment ago too
        listed = await kube.list(katib_path("trials", project), labelSelector=f"{EXPERIMENT_LABEL}={name}")
        active = [t for t in sweeps._own(obj, listed.get("items") or []) if not trial_completed(t)]
        for trial in active:
            await _stop_trial(kube, project, trial, when)
    except NotFound:
        sweeps.experiments.remove(project, name)
        raise JobNotFound(project, job_id) from None
    except KubeError as e:
        log.warning("sweep %s in %s: cancel failed: %s", job_id, project, reason(e))
        raise UpstreamError(f"cancel job {job_id}", reason(e)) from None
    log.info("sweep %s in %s: cancelled; %d running trial(s) stopped", job_id, project, len(active))
    return sweeps.json_of(obj)


async def _end(kube: Kube, path: str, fresh: dict, end: str, why: str, message: str, when: str) -> dict:
    """End the Katib Experiment or Trial `fresh` (as just read, at `path`) as Katib ends one, through
    its status: ``Running`` False, the condition `end` True with reason `why`, ``completionTime``.
    Optimistic (on `fresh`'s resourceVersion): on a conflict with Katib's own update, read and try
    again; one that ended meanwhile is left as it ended. An ended Experiment makes no more Trials and
    loses its suggestion service; a Killed Trial counts as completed, and Katib deletes its job
    unless the template retains it."""
    for attempt in range(8):
        if attempt:
            fresh = await kube.request("GET", path)
        conditions = (fresh.get("status") or {}).get("conditions") or []
        if any(c.get("type") in COMPLETED and c.get("status") == "True" for c in conditions):
            return fresh
        ended = [{**c, "status": "False", "lastUpdateTime": when, "lastTransitionTime": when}
                 if c.get("type") == "Running" and c.get("status") == "True" else c for c in conditions]
        ended.append({"type": end, "status": "True", "reason": why, "message": message,
                      "lastUpdateTime": when, "lastTransitionTime": when})
        body = {"metadata": {"resourceVersion": fresh["metadata"]["resourceVersion"]},
                "status": {"conditions": ended, "completionTime": when}}
        try:
            return await kube.request("PATCH", path + "/status", body, content_type=MERGE_PATCH)
        except Conflict:
            await asyncio.sleep(0.05 * (attempt + 1))
    raise Conflict(409, f"{path} kept changing while it was being cancelled")


async def _stop_trial(kube: Kube, project: str, trial: dict, when: str) -> None:
    """Mark a running Trial ``Killed`` (Katib's own condition for it, which Katib never sets itself)
    and delete its job (and so its pods): Katib would keep it with ``retain``, and a Trial whose job
    is gone is never given a new one once it has completed. Katib's trial controller, reading a
    Trial from its cache a moment old (not yet Killed) just after the delete, may make the job again,
    and a retained job it keeps: `_reap` deletes it again (members may not change a Trial's spec)."""
    name = trial["metadata"]["name"]
    try:
        await _end(kube, katib_path("trials", project, name), trial, "Killed", KILLED_REASON, "the sweep was cancelled",
                   when)
    except NotFound:
        return  # removed meanwhile
    kind = ((trial.get("spec") or {}).get("runSpec") or {}).get("kind")
    if kind in CONTAINER:
        path = resource_path(kind, project, name)
        await _delete_job(kube, path)
        task = asyncio.ensure_future(_reap(kube, path))
        _REAPING.add(task)
        task.add_done_callback(_REAPING.discard)


_REAPING: set[asyncio.Task] = set()  # the `_reap` tasks running (a reference each, until done)
REAP_AFTER_S = (1.0, 3.0, 10.0)  # when a killed trial's job is deleted again, should Katib have made it anew


async def _delete_job(kube: Kube, path: str) -> None:
    with contextlib.suppress(NotFound):
        await kube.request("DELETE", path, {"propagationPolicy": "Background"})


async def _reap(kube: Kube, path: str) -> None:
    """Delete a killed trial's job again at `REAP_AFTER_S` (see `_stop_trial`); a failure is logged only."""
    for delay in REAP_AFTER_S:
        await asyncio.sleep(delay)
        try:
            await _delete_job(kube, path)
        except Exception as e:  # the backend closed, the API away: the job is Katib's to keep then
            log.info("a cancelled trial's job %s: not deleted again: %s", path, e)
            return


# ---- trials: tasks, logs and metrics -----------------------------------------------------------------------
@dataclass(frozen=True)
class TrialTask:
    kind: str  # the trial job's kind (PyTorchJob, TFJob, Job)
    name: str  # the job's (= the Trial's) name
    job: dict  # the job object as the Trial asks for it (runSpec)
    container: str  # the main container of its pods
    trial: str  # the Trial's name


def trial_task(sweeps: Sweeps, project: str, job_id: str, experiment: dict, task: str) -> tuple[TrialTask, str]:
    """The trial job behind ``trial-<id>[/<task>]`` and the task inside it (``master-replica-0``…)."""
    m = _TRIAL_TASK.fullmatch(task)
    if not m:
        raise UserInputError("task", f"job {job_id} is a hyperparameter sweep: its tasks are trial-<id> and "
                                     "trial-<id>/<task> (e.g. trial-3/worker-replica-1)")
    trial = sweeps.trial(experiment, m["id"])
    if trial is None:
        raise JobNotFound(project, f"{job_id}/trials/{m['id']}")
    run_spec = (trial.get("spec") or {}).get("runSpec") or {}
    kind = run_spec.get("kind") or ((experiment["spec"].get("trialTemplate") or {}).get("trialSpec") or {}).get("kind")
    primary = (trial.get("spec") or {}).get("primaryContainerName") or \
        (experiment["spec"].get("trialTemplate") or {}).get("primaryContainerName")
    if kind not in CONTAINER:
        raise UserInputError("task", f"trial {m['id']} of job {job_id} runs a {kind}, whose logs are not read here")
    if kind == "Job" and not primary:
        containers = ((run_spec.get("spec") or {}).get("template") or {}).get("spec", {}).get("containers") or [{}]
        primary = containers[0].get("name")
    job = {**run_spec, "metadata": {**(run_spec.get("metadata") or {}), "name": trial["metadata"]["name"]}}
    return TrialTask(kind, trial["metadata"]["name"], job, primary or CONTAINER[kind], trial["metadata"]["name"]), \
        (m["task"] or "master-replica-0")


def trial_ended(sweeps: Sweeps, trial_name: str) -> bool:
    trial = next((t for t in sweeps.trials.items() if t["metadata"]["name"] == trial_name), None)
    return trial is None or trial_completed(trial) or bool(trial["metadata"].get("deletionTimestamp"))


async def trial_metrics(kube: Kube, sweeps: Sweeps, project: str, job_id: str, experiment: dict,
                        trial_id: str) -> list[dict]:
    """A trial's metric series (see the module docstring); `JobNotFound` for a trial the sweep does not have."""
    if not str(trial_id).isdigit() or sweeps.trial(experiment, str(trial_id)) is None:
        raise JobNotFound(project, f"{job_id}/trials/{trial_id}")
    trial, task = trial_task(sweeps, project, job_id, experiment, f"trial-{trial_id}")
    spec = katib_mapping.spec_of(experiment)  # the user's tag, which the log's reports carry
    tag = spec.metric if spec else ((experiment.get("spec") or {}).get("objective") or {}).get(
        "objectiveMetricName") or ""
    found = await kube_pods.task_pod(kube, project, job_id, pod_selector(trial.kind, trial.name, task))
    if found is None:
        return []
    text = b""
    try:
        async with contextlib.aclosing(kube_pods.read_log(kube, project, found[0], trial.container, False,
                                                          True)) as lines:
            async for raw in lines:
                text += raw
    except KubeError as e:
        if e.code in (400, 404):  # not started yet, or gone
            return []
        raise UpstreamError(f"read the metrics of trial {trial_id} of job {job_id}", reason(e)) from None
    return metric_reports.series(text.decode("utf-8", errors="replace"), tag)
