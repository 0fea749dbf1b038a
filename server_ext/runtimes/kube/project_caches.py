"""A project's jobs as the Kubernetes backend reads them: watch caches, never a request per read.

Guarantees:

- `open_project` starts one `WatchCache` per kind (``Job``; ``PyTorchJob`` and ``TFJob`` where the
  cluster serves the Training Operator v1, `V1_KINDS`; ``TrainJob`` where it serves Trainer v2: jobs
  made on v1 stay listed after a switch, and a cluster of Trainer v2 alone works) in the
  project's namespace, limited to the platform's objects (`SELECTOR`:
  ``app.kubernetes.io/managed-by=jupyterhub-mlplatform``): one list each, then watches with bookmarks
  resumed from the last resourceVersion (a re-list only after 410 Gone); two more label-filtered
  watches (the project's pods held for datasets, its dataset PVCs) give `Project.waiting`; and the
  project's sweeps where the cluster serves Katib (`kube_sweeps.open_sweeps`), and its Kueue
  Workloads where the cluster serves Kueue (`required_caches` leaves them out: a listing never
  waits or fails for them). Nothing blocks: the caller waits for them to load.
- A job is found by its jobId annotation (`model.JOB_ID_ANNOTATION`, `Project.find`), never by name
  alone; a sweep trial's job (owned by a ``Trial``) is never a job of its own.
- `Project.jobs` gives every job's JSON (and every sweep's); an object's JSON is computed again only
  when its resourceVersion changed, with ``statusMessage`` (`waiting`) for jobs whose pods are held
  for datasets or that Kueue holds in the queue (`server_ext.jobs.kube.queued`).
- `Project.changed` is set (and replaced) on every change of a job, and of a dataset while a job of
  the project is held: what log followers wait on.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from hub_ext.core.credentials import MANAGED_BY
from hub_ext.kube.client import KUEUE_API, Kube, KubeError, path_of, serves
from hub_ext.kube.watchcache import WatchCache
from hub_ext.operator.rules.gates import GATED_LABEL
from server_ext.jobs.kube import queued, waiting
from server_ext.jobs.kube.kubeflow import KubeSettings, api_version, resource_path
from server_ext.jobs.kube.status import job_json
from server_ext.jobs.kube.trainjob import TASKS_ANNOTATION
from server_ext.jobs.model import JOB_ID_ANNOTATION
from server_ext.runtimes.kube import sweeps as kube_sweeps

log = logging.getLogger("mlplatform.jobs.kube")

V1_KINDS = ("PyTorchJob", "TFJob")  # the Training Operator v1's (kubeflow.org/v1)
KINDS = (*V1_KINDS, "Job")  # what a cluster with the Training Operator and without Trainer v2 is watched for
TRAINER_API = "/apis/trainer.kubeflow.org/v1alpha1"
TRAINING_OPERATOR_API = "kubeflow.org/v1"
SELECTOR = ",".join(f"{k}={v}" for k, v in MANAGED_BY.items())
_REPLICA_SPECS = {"PyTorchJob": "pytorchReplicaSpecs", "TFJob": "tfReplicaSpecs"}
_ROLE_OF_TYPE = {"master": "master", "chief": "master", "worker": "worker", "ps": "ps",
                 "evaluator": "evaluator"}


@dataclass
class Project:
    caches: dict[str, WatchCache]  # kind → cache
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    views: dict[str, tuple[str, dict]] = field(default_factory=dict)  # uid → (resourceVersion, job JSON)
    sweeps: kube_sweeps.Sweeps | None = None  # None: the cluster does not serve Katib
    held: WatchCache | None = None  # the project's pods held for datasets (`waiting`)
    datasets: WatchCache | None = None  # the project's dataset PVCs
    source_annotation: str = ""
    name: str = ""
    workloads: WatchCache | None = None  # Kueue's Workloads of the project, where the cluster serves Kueue

    def all_caches(self) -> list[WatchCache]:
        extra = [c for c in (self.held, self.datasets, self.workloads) if c is not None]
        return [*self.caches.values(), *extra, *(self.sweeps.caches() if self.sweeps else [])]

    def required_caches(self) -> list[WatchCache]:
        """Those a listing waits for: not the Workloads (a project Role from before Kueue may not
        grant them; the jobs then say less, nothing fails)."""
        return [c for c in self.all_caches() if c is not self.workloads]

    def waiting(self) -> dict[str, str]:
        """Job object name → its words: `waiting.status_message` for the jobs with pods held for
        datasets, else `queued.queue_messages` for the jobs Kueue holds."""
        found = {}
        if self.workloads is not None and self.workloads.state == "ready":
            objects = [o for c in self.caches.values() for o in c.items()]
            found = queued.queue_messages(objects, self.workloads.items(), self.name)
        if self.held is not None and self.datasets is not None:
            found.update(waiting.messages(self.held.items(), self.datasets.items(), self.source_annotation))
        return found

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
                if not job_id_of(obj):
                    continue
                meta = obj["metadata"]
                uid, rv = meta.get("uid") or f"{meta.get('namespace')}/{meta['name']}", meta.get("resourceVersion", "")
                hit = self.views.get(uid)
                fresh[uid] = hit if hit is not None and hit[0] == rv else (rv, job_json(obj))
                out.append(waiting.with_message(fresh[uid][1], obj, messages))
        self.views = fresh
        return out + (self.sweeps.sweeps() if self.sweeps else [])

    def find(self, job_id: str) -> tuple[str, dict] | None:
        """(kind, object) of the job `job_id`, None if the caches hold none."""
        for kind, cache in self.caches.items():
            for obj in cache.items():
                if job_id_of(obj) == job_id:
                    return kind, obj
        return None

    def pulse(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()


def typed(kind: str):
    """List items may come without kind/apiVersion (built-in kinds do): the cache keeps them typed."""
    version = api_version(kind)
    return lambda obj: obj if obj.get("kind") else {**obj, "kind": kind, "apiVersion": version}


def job_id_of(obj: dict) -> str | None:
    meta = obj.get("metadata") or {}
    if any(o.get("kind") == "Trial" for o in meta.get("ownerReferences") or []):
        return None  # a sweep trial's job
    return (meta.get("annotations") or {}).get(JOB_ID_ANNOTATION)


def tasks_of(kind: str, obj: dict) -> list[str]:
    """The task names (``worker-replica-1``) of a job object, from its replica specs."""
    if kind == "Job":
        return ["master-replica-0"]
    if kind == "TrainJob":  # in node order (`trainjob.TASKS_ANNOTATION`); else node 0 the master, the others workers
        written = ((obj.get("metadata") or {}).get("annotations") or {}).get(TASKS_ANNOTATION)
        if written:
            return written.split(",")
        nodes = int(((obj.get("spec") or {}).get("trainer") or {}).get("numNodes") or 1)
        return ["master-replica-0", *(f"worker-replica-{k}" for k in range(nodes - 1))]
    specs = (obj.get("spec") or {}).get(_REPLICA_SPECS[kind]) or {}
    return [f"{_ROLE_OF_TYPE.get(rtype.lower(), rtype.lower())}-replica-{i}"
            for rtype, spec in specs.items() for i in range(int(spec.get("replicas", 1)))]


async def kueue_served(kube: Kube) -> bool:
    """Whether the cluster serves Kueue (kueue.x-k8s.io/v1beta2); False where it cannot tell."""
    return await _served(kube, KUEUE_API)


async def trainer_served(kube: Kube) -> bool:
    """Whether the cluster serves Kubeflow Trainer v2 (trainer.kubeflow.org/v1alpha1)."""
    return await _served(kube, TRAINER_API)


async def training_operator_served(kube: Kube) -> bool:
    """Whether the cluster serves the Training Operator v1's PyTorchJobs and TFJobs (discovery of
    kubeflow.org/v1, which Kubeflow Notebooks share); `UpstreamError` if it cannot tell (its jobs
    would go unlisted)."""
    return await serves(kube, TRAINING_OPERATOR_API, {"pytorchjobs", "tfjobs"}, "the Training Operator")


async def _served(kube: Kube, api: str) -> bool:
    try:
        return await kube.get(api) is not None
    except KubeError:
        return False


def open_project(kube: Kube, settings: KubeSettings, project: str, katib: bool, watch_timeout: int,
                 kueue: bool = False, trainer: bool = False, v1: bool = True) -> Project:
    """The caches of `project`, started (loading: see `WatchCache.wait_loaded`): batch Jobs; PyTorchJobs
    and TFJobs where the cluster serves the Training Operator (`v1`); TrainJobs where it serves
    Trainer v2 (`trainer`)."""
    caches: dict[str, WatchCache] = {}
    p = Project(caches, name=project)
    for kind in (*(V1_KINDS if v1 else ()), "Job", *(("TrainJob",) if trainer else ())):
        caches[kind] = WatchCache(kube, resource_path(kind, project), label_selector=SELECTOR,
                                  watch_timeout=watch_timeout, on_change=p.pulse, transform=typed(kind)).start()
    mounts = settings.mounts
    p.source_annotation = mounts.source_annotation
    p.held = WatchCache(kube, f"/api/v1/namespaces/{project}/pods", label_selector=f"{GATED_LABEL}=true",
                        watch_timeout=watch_timeout, on_change=p.pulse, transform=waiting.slim_pod).start()
    p.datasets = WatchCache(kube, f"/api/v1/namespaces/{project}/persistentvolumeclaims",
                            label_selector=mounts.dataset_label, watch_timeout=watch_timeout,
                            on_change=p.dataset_changed).start()
    if kueue:
        p.workloads = WatchCache(kube, path_of("Workload", project), watch_timeout=watch_timeout,
                                 on_change=p.pulse).start()
    if katib:
        p.sweeps = kube_sweeps.open_sweeps(kube, project, SELECTOR, watch_timeout, p.pulse)
    log.info("project %s: watching its jobs%s", project, " and sweeps" if katib else "")
    return p
