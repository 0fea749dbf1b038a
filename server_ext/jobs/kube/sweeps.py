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
- **Reads**: `get`/`list` answer `sweep_status.sweep_json(experiment, trials)` from the caches, no
  API request; the JSON of a sweep is computed again only when the resourceVersion of its
  Experiment or of one of its Trials changed (or a Trial came or went).
- **Trial ids** are ``"1"``, ``"2"``… in creation order: Trials sorted by (creationTimestamp,
  name), the trials cancelled away (below) included, so an id never changes once cancel removed
  trials. Task ``trial-<id>`` is that Trial's job's master, ``trial-<id>/<task>`` another replica.
- **Cancel** (Katib v1beta1 has no suspend for Experiments; only ``maxTrialCount``,
  ``parallelTrialCount`` and ``maxFailedTrialCount`` may change): one merge patch of the Experiment
  records ``mlplatform.io/cancel-requested`` and the active Trials being removed
  (``mlplatform.io/cancelled-trials``: name → creationTimestamp, parameterAssignments, startTime),
  and lowers ``maxTrialCount`` to the trials that have completed (Katib then makes no new trial: it
  adds only ``maxTrialCount - completed`` and ends the Experiment, ``ExperimentMaxTrialsReached``,
  once none is active) with ``parallelTrialCount``/``maxFailedTrialCount`` not above it; then the
  active Trials are deleted (their jobs and pods go with them: ownerReferences). The active Trials
  are read from a fresh list, so one Katib made a moment ago is stopped too. The removed trials stay
  in ``trainingOutput`` as cancelled (Katib's ``Killed`` condition, `tombstones`). Katib refuses
  ``maxTrialCount`` 0, so a sweep cancelled before any trial completed is deleted as a whole
  (Experiment, Trials, jobs, pods): it is then no longer listed.
- **Logs**: ``trial-<id>[/<task>]`` streams that Trial's job's pod, as a job's task (same
  numbering, follow and resume rules); it ends when the Trial has completed or is gone.
- **Trial metrics** (`trial_metrics`): read from the log of the trial's master pod
  (``timestamps=true``) as `metric_reports.series` parses it: the reports of
  ``hyperparameterMetricTag`` as the user wrote it (the Experiment's ``objectiveMetricName`` for
  a user's own Experiment; Katib's name for a tag it cannot collect as it is, `katib.metric_name`,
  is never shown), oldest first. The log
  has them whether the trainer prints ``<tag>=<number>`` or reports through ``cloudml-hypertune``:
  the trial program echoes each line written to the metrics file (`katib.WATCH_PY`). A trial
  whose pods are gone has an empty series (Katib's DB keeps them on a real cluster; it is not
  reachable from here).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import logging
import re
from dataclasses import dataclass, field
from typing import Callable


from hub_ext.errors import UpstreamError, UserInputError
from hub_ext.kube import Kube, KubeError, NotFound, reason
from hub_ext.watchcache import WatchCache

from ...errors import JobFinished, JobNotFound
from . import katib as katib_mapping
from . import pods as kube_pods
from . import metric_reports as metric_reports
from . import sweep_status as sweep_status
from ..backend import FINAL
from .kubeflow import CANCEL_ANNOTATION, CONTAINER, pod_selector
from ..model import JOB_ID_ANNOTATION

log = logging.getLogger("mlplatform.jobs.kube")

GROUP_VERSION = "kubeflow.org/v1beta1"
EXPERIMENT_LABEL = "katib.kubeflow.org/experiment"
CANCELLED_TRIALS = "mlplatform.io/cancelled-trials"
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


def tombstones(experiment: dict) -> list[dict]:
    """The Trials cancel removed, as Trial objects with Katib's ``Killed`` condition."""
    meta = experiment["metadata"]
    annotations = meta.get("annotations") or {}
    try:
        record = json.loads(annotations.get(CANCELLED_TRIALS) or "{}")
    except ValueError:
        record = {}
    when = annotations.get(CANCEL_ANNOTATION) or ""
    out = []
    for name, t in (record if isinstance(record, dict) else {}).items():
        status = {"conditions": [{"type": "Killed", "status": "True", "reason": "TrialKilled",
                                  "message": "the sweep was cancelled", "lastTransitionTime": when}],
                  "completionTime": when, **({"startTime": t["startTime"]} if t.get("startTime") else {})}
        out.append({"apiVersion": GROUP_VERSION, "kind": "Trial",
                    "metadata": {"name": name, "namespace": meta.get("namespace"),
                                 "creationTimestamp": t.get("creationTimestamp"),
                                 "labels": {EXPERIMENT_LABEL: meta["name"]}},
                    "spec": {"parameterAssignments": t.get("parameterAssignments") or []}, "status": status})
    return out


@dataclass
class Sweeps:
    """The sweep caches of one project."""
    experiments: WatchCache
    trials: WatchCache
    views: dict[str, tuple[tuple, dict]] = field(default_factory=dict)  # uid → (versions, sweep JSON)

    def caches(self) -> list[WatchCache]:
        return [self.experiments, self.trials]

    def find(self, job_id: str) -> dict | None:
        return next((e for e in self.experiments.items()
                     if ((e["metadata"].get("annotations") or {}).get(JOB_ID_ANNOTATION)) == job_id), None)

    def _grouped(self) -> dict[str, list[dict]]:
        out: dict[str, list[dict]] = {}
        for t in self.trials.items():
            out.setdefault((t["metadata"].get("labels") or {}).get(EXPERIMENT_LABEL, ""), []).append(t)
        return out

    @staticmethod
    def _own(experiment: dict, trials: list[dict]) -> list[dict]:
        uid = experiment["metadata"].get("uid")
        live = [t for t in trials if not t["metadata"].get("ownerReferences") or
                any(o.get("uid") == uid for o in t["metadata"]["ownerReferences"])]
        names = {t["metadata"]["name"] for t in live}
        return sorted(live + [t for t in tombstones(experiment) if t["metadata"]["name"] not in names], key=_order)

    def trials_of(self, experiment: dict, grouped: dict | None = None) -> list[dict]:
        """The Experiment's trials in trial-id order (id = position + 1)."""
        grouped = self._grouped() if grouped is None else grouped
        return self._own(experiment, grouped.get(experiment["metadata"]["name"], []))

    def _view(self, experiment: dict, trials: list[dict], fresh: dict) -> dict:
        meta = experiment["metadata"]
        uid = meta.get("uid") or meta["name"]
        versions = (meta.get("resourceVersion"), tuple(t["metadata"].get("resourceVersion", "") for t in trials))
        hit = self.views.get(uid)
        view = hit if hit is not None and hit[0] == versions else (versions, sweep_status.sweep_json(experiment, trials))
        fresh[uid] = view
        return view[1]

    def json_of(self, experiment: dict) -> dict:
        fresh = dict(self.views)
        out = self._view(experiment, self.trials_of(experiment), fresh)
        self.views = fresh
        return out

    def sweeps(self) -> list[dict]:
        """Every sweep's JSON (shared dicts: callers must not change them)."""
        grouped, fresh = self._grouped(), {}
        out = [self._view(e, self.trials_of(e, grouped), fresh) for e in self.experiments.items()
               if (e["metadata"].get("annotations") or {}).get(JOB_ID_ANNOTATION)]
        self.views = fresh
        return out

    def trial(self, experiment: dict, trial_id: str) -> dict | None:
        trials = self.trials_of(experiment)
        i = int(trial_id) if str(trial_id).isdigit() else 0
        return trials[i - 1] if 1 <= i <= len(trials) else None


async def katib_served(kube: Kube) -> bool:
    """Whether the cluster serves Katib's Experiments and Trials (discovery); `UpstreamError` if it cannot tell."""
    try:
        body = await kube.get(f"/apis/{GROUP_VERSION}")
    except KubeError as e:
        raise UpstreamError("discover Katib (kubeflow.org/v1beta1)", reason(e)) from None
    plurals = {r.get("name") for r in (body or {}).get("resources") or []}
    return {"experiments", "trials"} <= plurals


def open_sweeps(kube: Kube, project: str, selector: str, watch_timeout: int, on_change: Callable[[], None]) -> Sweeps:
    def cache(plural: str, kind: str, label_selector: str) -> WatchCache:
        return WatchCache(kube, katib_path(plural, project), label_selector=label_selector,
                          watch_timeout=watch_timeout, on_change=on_change, transform=_typed(kind)).start()
    return Sweeps(cache("experiments", "Experiment", selector), cache("trials", "Trial", EXPERIMENT_LABEL))


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
    try:
        listed = await kube.list(katib_path("trials", project), labelSelector=f"{EXPERIMENT_LABEL}={name}")
        trials = sweeps._own(experiment, listed.get("items") or [])
        active = [t for t in trials if not trial_completed(t) and not t["metadata"].get("deletionTimestamp")
                  and t.get("kind", "Trial") == "Trial" and t["metadata"].get("uid")]
        done = sum(1 for t in trials if trial_completed(t))
        if done == 0:  # Katib refuses maxTrialCount 0: the only way to stop it is to delete the Experiment
            gone = await kube.request("DELETE", katib_path("experiments", project, name),
                                      {"propagationPolicy": "Background",
                                       "preconditions": {"uid": experiment["metadata"]["uid"]}})
            sweeps.experiments.remove(project, name)
            log.info("sweep %s in %s: cancelled before any trial completed: Experiment %s deleted", job_id, project,
                     name)
            return {**sweep_status.sweep_json(gone if gone.get("metadata") else experiment, trials),
                    "state": "CANCELLED"}
        record = json.loads((experiment["metadata"].get("annotations") or {}).get(CANCELLED_TRIALS) or "{}")
        record.update({t["metadata"]["name"]: {"creationTimestamp": t["metadata"].get("creationTimestamp"),
                                               "parameterAssignments": t["spec"].get("parameterAssignments") or [],
                                               "startTime": (t.get("status") or {}).get("startTime")}
                       for t in active})
        counts = {"maxTrialCount": done, "parallelTrialCount": min(int(spec.get("parallelTrialCount") or 3), done)}
        if spec.get("maxFailedTrialCount") is not None:
            counts["maxFailedTrialCount"] = min(int(spec["maxFailedTrialCount"]), done)
        patch = {"metadata": {"annotations": {CANCEL_ANNOTATION: when, CANCELLED_TRIALS: json.dumps(
            record, sort_keys=True, separators=(",", ":"))}}, "spec": counts}
        obj = await kube.request("PATCH", katib_path("experiments", project, name), patch, content_type=MERGE_PATCH)
        sweeps.experiments.put(obj)
        for t in active:
            try:
                await kube.request("DELETE", katib_path("trials", project, t["metadata"]["name"]),
                                   {"propagationPolicy": "Background"})
            except NotFound:
                pass  # ended and removed meanwhile
    except NotFound:
        sweeps.experiments.remove(project, name)
        raise JobNotFound(project, job_id) from None
    except KubeError as e:
        log.warning("sweep %s in %s: cancel failed: %s", job_id, project, reason(e))
        raise UpstreamError(f"cancel job {job_id}", reason(e)) from None
    log.info("sweep %s in %s: cancel requested; %d running trial(s) stopped, %d completed kept", job_id, project,
             len(active), done)
    return sweeps.json_of(obj)


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
