"""The dataset loader controller: keeps each dataset PVC's loader Job and its ``Loaded`` condition
in step (what a dataset is and what is written: `datasets`, pure; this module does the I/O).

Level-triggered: `DatasetController.reconcile(pvc)` reads the PVC, its loader Jobs and their pods
and does what is missing, the same whatever happened before; it runs on

- every event of a PVC carrying the dataset label (kopf ``on.event``, filtered by the label),
- every event of a Job carrying ``mlplatform.io/dataset-loader`` (its PVC is read again),
- every dataset PVC when this replica becomes leader (`Leader.on_elected`: one cluster-wide
  listing, in a task of its own so the Lease's renewal is never held up),

and only while this replica leads (kopf's ``when``). No kopf timers, daemons or change-detecting
handlers: kopf adds no finalizer and keeps no state of its own on the PVCs or Jobs.

What one reconcile does, for a PVC in a project namespace (`OperatorSettings.project_selector`;
others are ignored):

1. a PVC being deleted: its loader Jobs are deleted (its pod would otherwise keep the PVC, which
   the pvc-protection finalizer holds while a pod uses it); a PVC that is gone takes its Jobs with
   it anyway (owner references, the garbage collector);
2. a bad annotation: ``Failed`` naming it; no source: nothing (an admin's dataset);
3. a new load (another `DatasetSpec.load_id`: the source, credential or refresh changed; the
   claim is read afresh first): the volume it goes to is chosen (`volumes`: in place unless pods
   read there; a new volume claim of the dataset's otherwise) and named with the load id in one
   request, then ``Loading`` (`_begin`); Jobs of an older load are deleted in the foreground, and
   the new Job waits until their pods are gone, so two loaders never write one volume;
4. the credential Secret is read as metadata only (never its data), and a missing or wrong one is
   ``Failed`` naming ``mlplatform.io/credential``; it is looked for again after 10 s, doubling to
   5 min (Secrets are not watched), so creating it starts the load;
5. the loader Job (`datasets.loader_job`) is created under its deterministic name; one already
   there (a restarted operator, another replica before) is adopted when it is the loader of this
   load (`datasets.is_loader_of`), else ``Failed`` says what is in the way. A failed Job is not
   run again for the same load: changing ``mlplatform.io/refresh`` (or deleting the Job) retries;
6. the Job's end: ``Loaded`` True with the loader's totals, or ``Failed`` with the loader's own
   error line (`datasets.failed_message`), decided once: the claim is read again first, as the
   event that brought it may predate the outcome already written (`datasets.decided`); once
   loaded, the dataset's other volumes are deleted (pvc-protection keeps each while pods use it); then the
   pods of its namespace held for datasets are looked at (`gate_keeper.GateKeeper.settled`); while
   it runs, ``Loading``, and a progress task;
7. a loaded dataset: its load's VolumeSnapshot, where the storage allows (`snapshots`: the source
   of users' writable copies), followed until ready.

Progress: while a loader Job runs, one asyncio task per dataset reads the newest loader pod's last
log lines every `OperatorSettings.progress_interval` seconds (``pods/<pod>/log?tailLines=3``) and
writes the ``Loading`` message and ``mlplatform.io/progress`` when they change. All the tasks share
one budget of `OperatorSettings.progress_reads` reads a second (aiolimiter's leaky bucket), so a
thousand loads at once cost the API server what twenty do, each read less often. The task ends
when the Job ends (the reconcile that sees it cancels it before writing the outcome, under the
dataset's lock, so a late progress write never follows the outcome), when the PVC goes, and when
this replica stops leading (`Leader.on_stopped`).

Writes: the condition through the status subresource as a strategic merge patch (conditions merge
by ``type``: another controller's conditions are kept), then the annotations as a merge patch. The
condition first, so an ``mlplatform.io/load-id`` naming a load never vouches for a condition
written for an older one. A reconcile that fails on the API (after `hub_ext.kube.client`'s retries) is
tried again after 1 s, doubling to 5 min.

Logs: one line per decision with the dataset (``namespace/name``) and the load id; never a value
of a credential (none is ever read). ``mlplatform_operator_dataset_loads_total{result=…}`` counts
started, loaded and failed loads.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Mapping

import aiohttp
import kopf
from aiolimiter import AsyncLimiter

from hub_ext.manifests.datasets import dataset_label, is_dataset
from hub_ext.core.errors import UserInputError
from hub_ext.kube.client import (
    MERGE_PATCH,
    METADATA_ONLY,
    STRATEGIC_MERGE,
    Conflict,
    Forbidden,
    KubeError,
    NotFound,
    timestamp,
)
from hub_ext.manifests.mounts import LOADED_LOAD, dataset_state
from hub_ext.operator.context import OperatorContext
from hub_ext.operator.gate_keeper import GateKeeper
from hub_ext.operator.rules import datasets as ds
from hub_ext.operator.rules import volumes
from hub_ext.operator.snapshots import Snapshots

log = logging.getLogger("mlplatform.operator.datasets")
TAIL_LINES = 3
MAX_BACKOFF_S = 300.0
CREDENTIAL_RETRY_S = 10.0
RELOAD_RETRY_S = 30.0  # a new volume for a reload the quota refused (then less often, as any retry)
READERS_GRACE_S = 2.0  # a pod admitted as a load in place begins is stored within this (the webhook's copy lags)
Key = tuple[str, str]


def dataset_label_filter(selector: str) -> dict:
    """kopf's label filter for the dataset label selector (``key``: any value; ``key=value``)."""
    key, value = dataset_label(selector)
    return {key: value if "=" in selector else kopf.PRESENT}



def _key(pvc: Mapping) -> Key:
    return pvc["metadata"]["namespace"], pvc["metadata"]["name"]


class DatasetController:
    def __init__(self, ctx: OperatorContext, gates: GateKeeper | None = None):
        self.ctx, self.settings, self.kube, self.gates = ctx, ctx.settings, ctx.kube, gates
        self.snapshots = Snapshots(ctx.kube)
        self._locks: dict[Key, asyncio.Lock] = {}
        self._watchers: dict[Key, tuple[str, asyncio.Task]] = {}  # the load id it follows, the task
        self._retries: dict[Key, asyncio.Task] = {}
        self._backoff: dict[Key, float] = {}
        self._resync: asyncio.Task | None = None
        self._progress_budget = AsyncLimiter(self.settings.progress_reads, 1.0)
        # (claim uid, load id, reason) of the condition this leader last wrote on each claim: an event
        # whose copy of the claim predates that write does not make it write the same again
        self._written: dict[Key, tuple[str, str | None, str]] = {}
        self._background: set[asyncio.Task] = set()
        if gates:
            gates.lock_for = self._lock  # it lets a held pod go under the lock of each dataset it mounts

    # -- entry points ---------------------------------------------------------------------------

    async def on_claim(self, event_type: str | None, pvc: dict) -> None:
        if event_type == "DELETED":
            self.forget(_key(pvc))
            return
        await self.reconcile(pvc, job_changed=False)

    async def on_job(self, event_type: str | None, job: dict) -> None:
        meta = job.get("metadata") or {}
        claim = (meta.get("labels") or {}).get(ds.LOADER_LABEL)
        if claim:
            await self.reconcile_key((meta["namespace"], claim), job_changed=True)

    async def reconcile_key(self, key: Key, job_changed: bool = False) -> None:
        try:
            pvc = await self.kube.get(self._claim_path(*key))
        except KubeError as e:
            log.warning("dataset %s/%s: could not read the claim: %s", *key, e.reason)
            self._schedule(key, self._next_backoff(key, 1.0))
            return
        if pvc is None or not is_dataset(pvc, self.settings.mounts.dataset_label):
            self.forget(key)
            return
        await self.reconcile(pvc, job_changed)

    async def reconcile(self, pvc: dict, job_changed: bool = True) -> None:
        """Act on `pvc` (see the module docstring). `job_changed`: False for an event of the PVC
        itself, which a load followed by its progress task does not need to look at (its Job's
        events do)."""
        key = _key(pvc)
        async with self._lock(key):
            if not self.ctx.leader.leading:
                return
            try:
                again = await self._reconcile(pvc, job_changed)
            except KubeError as e:
                log.warning("dataset %s/%s: %s; trying again", *key, e.reason)
                again = 1.0
            if again is None:
                self._backoff.pop(key, None)
                self._schedule(key, None)
            elif key not in self._retries:  # one retry at a time; an event meanwhile does not hasten it
                self._schedule(key, self._next_backoff(key, again))

    def elected(self) -> None:
        """Reconcile every dataset PVC of the cluster, in a task (the caller is the leader loop)."""
        if self._resync is None or self._resync.done():
            self._resync = asyncio.create_task(self.resync(), name="datasets-resync")

    async def resync(self) -> None:
        try:
            listing = await self.kube.list("/api/v1/persistentvolumeclaims",
                                           labelSelector=self.settings.mounts.dataset_label)
        except KubeError as e:
            log.warning("could not list the dataset claims: %s; trying again", e.reason)
            await asyncio.sleep(5)
            self._resync = asyncio.create_task(self.resync(), name="datasets-resync")
            return
        items = listing.get("items") or []
        log.info("leader: reconciling %s dataset claims", len(items))
        for pvc in items:
            if not self.ctx.leader.leading:
                return
            await self.reconcile(pvc)

    async def stopped(self) -> None:
        """Leadership lost: every task of this controller ends."""
        for task in [t for _, t in self._watchers.values()] + list(self._retries.values()) + \
                list(self._background) + ([self._resync] if self._resync else []):
            task.cancel()
        self._watchers.clear()
        self._retries.clear()
        self._backoff.clear()
        self._written.clear()

    def forget(self, key: Key) -> None:
        self._stop_watch(key)
        retry = self._retries.pop(key, None)
        if retry:
            retry.cancel()
        self._backoff.pop(key, None)
        self._written.pop(key, None)
        lock = self._locks.get(key)
        if lock is not None and not lock.locked():
            del self._locks[key]

    # -- one reconcile ----------------------------------------------------------------------------

    async def _reconcile(self, pvc: dict, job_changed: bool) -> float | None:
        """Act on `pvc`; None when the next change will bring it back, else the first delay of
        the backoff after which to look again."""
        meta = pvc["metadata"]
        key = _key(pvc)
        ns, name, uid = meta["namespace"], meta["name"], meta["uid"]
        if meta.get("deletionTimestamp"):
            self._stop_watch(key)
            await self._delete_jobs(await self._jobs(ns, name, uid), "its claim is being deleted")
            return None
        if not await self._in_project(ns):
            return None
        try:
            spec = ds.read_dataset(pvc, self.settings.mounts)
        except UserInputError as e:
            self._stop_watch(key)
            if await self._set(pvc, None, False, ds.FAILED, str(e), None):
                log.info("dataset %s/%s: not loaded: %s", ns, name, e.field)
            return None
        if spec is None:
            self._stop_watch(key)
            return None
        if (meta.get("annotations") or {}).get(ds.LOAD_ID_ANNOTATION) != spec.load_id:
            # a new load, or an event's copy older than our own write of its start: read afresh
            pvc = await self.kube.get(self._claim_path(ns, name))
            if pvc is None or pvc["metadata"]["uid"] != uid or self._spec(pvc) != spec:
                return None  # gone, or changed again: its own event follows
            meta = pvc["metadata"]
            if (meta.get("annotations") or {}).get(ds.LOAD_ID_ANNOTATION) != spec.load_id:
                self._stop_watch(key)
                return await self._begin(pvc, spec)  # its volume chosen and named first; its event brings us back
        cond = ds.condition_of(pvc)
        if cond and cond.get("status") == "True" and \
                (meta.get("annotations") or {}).get(LOADED_LOAD) in (None, spec.load_id):
            self._stop_watch(key)
            return await self.snapshots.ensure(pvc, spec)  # the source of writable copies, where possible
        watching = self._watchers.get(key)
        if not job_changed and watching and watching[0] == spec.load_id and not watching[1].done():
            return None  # its Job runs and is followed; the Job's own events bring what changes
        jobs = await self._jobs(ns, name, uid)
        older = [j for j in jobs if (j["metadata"].get("labels") or {}).get(ds.LOAD_LABEL) != spec.load_id]
        if older:
            self._stop_watch(key)
            await self._delete_jobs(older, f"the load {spec.load_id} replaces it")
            await self._set(pvc, spec.load_id, False, ds.LOADING, "stopping the previous load", {})
            return None  # the old Jobs' deletion brings us back
        # the Job of this load's own name; a loader-labelled Job is the operator's alone (the
        # ValidatingAdmissionPolicy mlplatform-dataset-loaders in helm-values/operator.yaml)
        job = next((j for j in jobs if j["metadata"]["name"] == spec.job_name), None)
        if cond and cond.get("reason") == ds.FAILED and job is not None and \
                ds.job_state(job) == "failed":
            self._stop_watch(key)
            return None  # settled until the source, credential or refresh changes
        credential = None
        if spec.credential:
            try:
                secret = await self.kube.request("GET", f"/api/v1/namespaces/{ns}/secrets/{spec.credential}",
                                                 accept=METADATA_ONLY)
            except NotFound:
                secret = None
            try:
                credential = ds.credential_for(spec, secret, self.settings.mounts)
            except UserInputError as e:
                self._stop_watch(key)
                if await self._set(pvc, spec.load_id, False, ds.FAILED, str(e), {}):
                    log.info("dataset %s/%s: load %s waits for its credential", ns, name, spec.load_id)
                return CREDENTIAL_RETRY_S
        if job is None:
            job = await self._create_job(spec, credential, volumes.current(pvc))
            if job is None:
                await self._set(pvc, spec.load_id, False, ds.FAILED,
                                f"a Job named {spec.job_name} that is not this dataset's loader is in the way; "
                                "delete it", {})
                return None
        elif not ds.is_loader_of(job, spec):
            await self._set(pvc, spec.load_id, False, ds.FAILED,
                            f"the Job {job['metadata']['name']} is not this dataset's loader; delete it", {})
            return None
        state = ds.job_state(job)
        if state != "running":
            self._stop_watch(key)
            pvc = await self.kube.get(self._claim_path(ns, name))  # the event's copy may predate our outcome
            if pvc is None or pvc["metadata"]["uid"] != uid or ds.decided(pvc, spec.load_id, state == "complete"):
                return None
            pod, progress = await self._last_words(spec)
            if state == "complete":
                await self._set(pvc, spec.load_id, True, ds.LOADED_REASON,
                                ds.loaded_message(progress, spec.source.uri), progress)
            else:
                await self._set(pvc, spec.load_id, False, ds.FAILED, ds.failed_message(progress, pod, job), progress)
            self.ctx.metrics.inc("mlplatform_operator_dataset_loads_total", result="loaded" if state == "complete"
                                 else "failed")
            log.info("dataset %s/%s: load %s %s", ns, name, spec.load_id, "loaded" if state == "complete" else "failed")
            if self.gates:
                self.spawn(self.gates.settled(ns), f"dataset-gates-{ns}")  # it takes our lock
            if state == "complete":
                await self._drop_stale_volumes(pvc)
            return None
        if (cond is None or cond.get("reason") != ds.LOADING) and \
                self._written.get(key) != (uid, spec.load_id, ds.LOADING):
            await self._set(pvc, spec.load_id, False, ds.LOADING, "waiting for the loader to start", {})
        self._start_watch(key, spec)
        return None

    def _spec(self, pvc: dict) -> ds.DatasetSpec | None:
        try:
            return ds.read_dataset(pvc, self.settings.mounts)
        except UserInputError:
            return None

    async def _begin(self, pvc: dict, spec: ds.DatasetSpec) -> float | None:
        """A new load begins: the volume it is written to is chosen (`volumes.choose`; a new claim
        made when pods read the current one) and named with the load's id and the load whose data is
        there in one request, then ``Loading``; a new volume the project cannot hold now (its quota)
        leaves everything as it is, with an Event on the dataset, and is tried again. A load in place
        of loaded data looks for readers once more after `READERS_GRACE_S` (a pod the
        webhook admitted from a copy of the claim older than the new volume's name) and moves to a
        new volume if one came."""
        meta = pvc["metadata"]
        ns, name = meta["namespace"], meta["name"]
        annotations = meta.get("annotations") or {}
        now = target = volumes.current(pvc)
        cond = ds.condition_of(pvc)
        # data that was never served has no readers (every pod made for a volume being loaded is held):
        # a load after a Loading or Failed one goes in place unasked; a claim with no condition may be
        # an admin's dataset given a source, served until now
        served = cond is None or dataset_state(pvc, self.settings.mounts.source_annotation)[0] == "ready"
        if served:
            target = volumes.choose(name, now, await self._readers(ns, name))
            if target is None:
                target, later = await self._new_volume(pvc, spec)
                if later is not None:
                    return later
        loaded = annotations.get(LOADED_LOAD)
        if loaded is None and (cond or {}).get("status") == "True":
            loaded = annotations.get(ds.LOAD_ID_ANNOTATION, "")  # loaded before the operator wrote which load
        changes = {ds.LOAD_ID_ANNOTATION: spec.load_id, volumes.VOLUME_ANNOTATION: None if target == name else target}
        if loaded is not None:
            changes[LOADED_LOAD] = loaded
        pvc = await self._annotate(pvc, changes)
        log.info("dataset %s/%s: the load %s begins on the volume %s%s", ns, name, spec.load_id, target,
                 "" if target == now else f" (pods read {now}, which they keep)")
        await self._set(pvc, spec.load_id, False, ds.LOADING, "waiting for the loader to start", {})
        if served and cond is not None and target == now:  # loaded data, reloaded in place
            await asyncio.sleep(READERS_GRACE_S)
            if now in await self._readers(ns, name):
                moved, later = await self._new_volume(pvc, spec)
                if later is not None:
                    return later
                await self._annotate(pvc, {volumes.VOLUME_ANNOTATION: moved})
                log.warning("dataset %s/%s: a pod began reading %s as its load %s began; the load moves to %s (pods "
                            "held for it meanwhile stay held: DatasetMoved)", ns, name, now, spec.load_id, moved)
        return None

    async def _readers(self, ns: str, name: str) -> set[str]:
        """The claims the namespace's pods read (`volumes.in_use`)."""
        listing = await self.kube.list(f"/api/v1/namespaces/{ns}/pods",
                                       fieldSelector="status.phase!=Succeeded,status.phase!=Failed")
        return volumes.in_use(listing.get("items") or [], ds.LOADER_LABEL, name)

    async def _volumes_of(self, ns: str, name: str) -> list[dict]:
        """The claims made as volumes of the dataset `name` (`volumes.VOLUME_OF_LABEL`)."""
        listing = await self.kube.list(f"/api/v1/namespaces/{ns}/persistentvolumeclaims",
                                       labelSelector=f"{volumes.VOLUME_OF_LABEL}={name}")
        return listing.get("items") or []

    async def _annotate(self, pvc: dict, changes: dict) -> dict:
        return await self.kube.request("PATCH", self._claim_path(*_key(pvc)), {"metadata": {"annotations": changes}},
                                       content_type=MERGE_PATCH)

    async def _new_volume(self, pvc: dict, spec: ds.DatasetSpec) -> tuple[str, float | None]:
        """(a new volume claim for the load, one made for it before (a restart) or made now; None, or
        when to try again if the project cannot hold it now)."""
        ns, name = _key(pvc)
        made = volumes.adoptable(await self._volumes_of(ns, name), pvc, spec.load_id)
        if made:
            return made, None
        claim = volumes.volume_claim(pvc, spec.load_id)
        try:
            await self.kube.request("POST", f"/api/v1/namespaces/{ns}/persistentvolumeclaims", claim)
            log.info("dataset %s/%s: made the volume %s for the load %s", ns, name, claim["metadata"]["name"],
                     spec.load_id)
            return claim["metadata"]["name"], None
        except (Forbidden, Conflict) as e:
            why = e.reason
        log.warning("dataset %s/%s: the load %s waits: its new volume was refused: %s", ns, name, spec.load_id, why)
        await self._tell(pvc, spec, f"Pods read this dataset's data, so its new load {spec.load_id} goes to a new "
                                    f"volume, which was refused ({why}); the pods keep the current data, and it is "
                                    "tried again")
        return "", RELOAD_RETRY_S

    async def _tell(self, pvc: dict, spec: ds.DatasetSpec, message: str) -> None:
        """A Warning Event on the dataset claim (once per load)."""
        meta = pvc["metadata"]
        event = {"apiVersion": "v1", "kind": "Event",
                 "metadata": {"name": f"{meta['name']}.reload-{spec.load_id}", "namespace": meta["namespace"]},
                 "involvedObject": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": meta["namespace"],
                                    "name": meta["name"], "uid": meta["uid"]},
                 "type": "Warning", "reason": "ReloadWaiting", "message": message[:1024],
                 "source": {"component": "mlplatform-operator"}, "reportingComponent": "mlplatform-operator",
                 "firstTimestamp": timestamp(), "lastTimestamp": timestamp(), "count": 1}
        try:
            await self.kube.request("POST", f"/api/v1/namespaces/{meta['namespace']}/events", event)
        except Conflict:
            pass

    async def _drop_stale_volumes(self, pvc: dict) -> None:
        """A load has ended: the dataset's volume claims other than the current one are deleted (each
        stays until no pod uses it: Kubernetes' pvc-protection)."""
        ns, name = _key(pvc)
        for old in volumes.stale(await self._volumes_of(ns, name), pvc):
            try:
                await self.kube.delete(self._claim_path(ns, old))
                log.info("dataset %s/%s: deleted its older volume %s (kept while pods use it)", ns, name, old)
            except KubeError as e:  # the next load that ends deletes it
                log.warning("dataset %s/%s: could not delete its older volume %s: %s", ns, name, old, e.reason)

    async def _create_job(self, spec: ds.DatasetSpec, credential: Any, volume: str) -> dict | None:
        """The loader Job of `spec` (writing `volume`), made now or found (adopted) under its name;
        None if a Job of that name is something else."""
        manifest = ds.loader_job(spec, credential, self.settings, volume)
        try:
            job = await self.kube.request("POST", self._jobs_path(spec.namespace), manifest)
        except Conflict:
            job = await self.kube.get(f"{self._jobs_path(spec.namespace)}/{spec.job_name}")
            if job is None or not ds.is_loader_of(job, spec):
                return None
            log.info("dataset %s/%s: adopted the loader Job %s", spec.namespace, spec.name, spec.job_name)
            return job
        self.ctx.metrics.inc("mlplatform_operator_dataset_loads_total", result="started")
        log.info("dataset %s/%s: load %s of %s started (Job %s)", spec.namespace, spec.name, spec.load_id,
                 spec.source.uri, spec.job_name)
        return job

    # -- reads ------------------------------------------------------------------------------------

    @staticmethod
    def _claim_path(ns: str, name: str) -> str:
        return f"/api/v1/namespaces/{ns}/persistentvolumeclaims/{name}"

    @staticmethod
    def _jobs_path(ns: str) -> str:
        return f"/apis/batch/v1/namespaces/{ns}/jobs"

    async def _jobs(self, ns: str, name: str, uid: str) -> list[dict]:
        """The claim's loader Jobs (owned by it: a Job with the label made by anyone else is not)."""
        listing = await self.kube.list(self._jobs_path(ns), labelSelector=f"{ds.LOADER_LABEL}={name}")
        return [j for j in listing.get("items") or [] if ds.owned_by(j, uid)]

    async def _delete_jobs(self, jobs: list[dict], why: str) -> None:
        for job in jobs:
            if job["metadata"].get("deletionTimestamp"):
                continue
            meta = job["metadata"]
            try:
                await self.kube.request("DELETE", f"{self._jobs_path(meta['namespace'])}/{meta['name']}",
                                        {"propagationPolicy": "Foreground"})
                log.info("dataset %s/%s: deleted the loader Job %s: %s", meta["namespace"],
                         (meta.get("labels") or {}).get(ds.LOADER_LABEL), meta["name"], why)
            except NotFound:
                pass

    async def _in_project(self, ns: str) -> bool:
        return await self.ctx.projects.contains(ns)

    async def _last_words(self, spec: ds.DatasetSpec) -> tuple[dict | None, dict | None]:
        """(the newest loader pod of the load, its last progress line or None)."""
        selector = ",".join(f"{k}={v}" for k, v in ds.loader_labels(spec).items())
        listing = await self.kube.list(f"/api/v1/namespaces/{spec.namespace}/pods", labelSelector=selector)
        pods = sorted(listing.get("items") or [], key=lambda p: (p["metadata"].get("creationTimestamp") or "",
                                                                 p["metadata"]["name"]))
        if not pods:
            return None, None
        pod = pods[-1]
        if (pod.get("status") or {}).get("phase") not in ("Running", "Succeeded", "Failed"):
            return pod, None
        path = f"/api/v1/namespaces/{spec.namespace}/pods/{pod['metadata']['name']}/log"
        lines: list[str] = []
        try:
            async for raw in self.kube.stream(path, [("container", ds.CONTAINER), ("tailLines", str(TAIL_LINES))],
                                              "*/*", aiohttp.ClientTimeout(total=10)):
                lines.append(raw.decode(errors="replace"))
        except KubeError as e:  # a pod whose log is gone (its node, its container): say what Kubernetes says
            log.debug("dataset %s/%s: no log from %s: %s", spec.namespace, spec.name, pod["metadata"]["name"],
                      e.reason)
        return pod, ds.parse_progress(lines)

    # -- writes -----------------------------------------------------------------------------------

    async def _set(self, pvc: dict, load_id: str | None, status: bool, reason: str, message: str,
                   progress: Mapping | None) -> bool:
        """The `Loaded` condition (if it changes), then the load id and progress annotations (if
        they change); whether the condition changed."""
        ns, name = _key(pvc)
        previous = ds.condition_of(pvc)
        cond = ds.loaded_condition(status, reason, message, timestamp(), previous)
        changed = not ds.same_condition(previous, cond)
        if changed:
            await self.kube.request("PATCH", f"{self._claim_path(ns, name)}/status",
                                    {"status": {"conditions": [cond]}}, content_type=STRATEGIC_MERGE)
        annotations = pvc["metadata"].get("annotations") or {}
        changes = {}
        if load_id is not None and annotations.get(ds.LOAD_ID_ANNOTATION) != load_id:
            changes[ds.LOAD_ID_ANNOTATION] = load_id
        if status and load_id is not None and annotations.get(LOADED_LOAD) != load_id:
            changes[LOADED_LOAD] = load_id  # after the condition: until then the load reads as under way
        if progress is not None and annotations.get(ds.PROGRESS_ANNOTATION) != ds.progress_annotation(progress):
            changes[ds.PROGRESS_ANNOTATION] = ds.progress_annotation(progress)
        if changes:
            await self.kube.request("PATCH", self._claim_path(ns, name), {"metadata": {"annotations": changes}},
                                    content_type=MERGE_PATCH)
        self._written[(ns, name)] = (pvc["metadata"]["uid"], load_id, reason)
        return changed

    async def _write_progress(self, spec: ds.DatasetSpec, message: str, progress: Mapping | None) -> None:
        """A running load's message and progress (the condition's status and transition time stay:
        the strategic merge keeps the fields not named)."""
        path = self._claim_path(spec.namespace, spec.name)
        cond = {"type": ds.LOADED, "status": "False", "reason": ds.LOADING, "message": message}
        await self.kube.request("PATCH", f"{path}/status", {"status": {"conditions": [cond]}}, content_type=STRATEGIC_MERGE)
        if progress is not None:
            await self.kube.request("PATCH", path, {"metadata": {"annotations": {
                ds.PROGRESS_ANNOTATION: ds.progress_annotation(progress)}}}, content_type=MERGE_PATCH)

    # -- tasks ------------------------------------------------------------------------------------

    def spawn(self, coro, name: str) -> None:
        """Run `coro` in a task of this controller's (cancelled when it stops leading)."""
        task = asyncio.create_task(coro, name=name)
        self._background.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("%s failed", task.get_name(), exc_info=task.exception())

    def _lock(self, key: Key) -> asyncio.Lock:
        return self._locks.setdefault(key, asyncio.Lock())

    def _start_watch(self, key: Key, spec: ds.DatasetSpec) -> None:
        running = self._watchers.get(key)
        if running and running[0] == spec.load_id and not running[1].done():
            return
        self._stop_watch(key)
        task = asyncio.create_task(self._follow(key, spec), name=f"dataset-progress-{key[0]}/{key[1]}")
        self._watchers[key] = (spec.load_id, task)

    def _stop_watch(self, key: Key) -> None:
        running = self._watchers.pop(key, None)
        if running and running[1] is not asyncio.current_task():
            running[1].cancel()

    async def _follow(self, key: Key, spec: ds.DatasetSpec) -> None:
        """Every `progress_interval` s while this replica leads: the loader's progress onto the PVC."""
        written: tuple[str, str] | None = None
        while self.ctx.leader.leading:
            await asyncio.sleep(self.settings.progress_interval)
            try:
                async with self._progress_budget:
                    pod, progress = await self._last_words(spec)
                message = (ds.waiting_message(pod) if progress is None else None) or \
                    ds.progress_message(progress, spec.source.uri)
                if (message, ds.progress_annotation(progress)) != written:
                    async with self._lock(key):
                        if self._watchers.get(key, ("", None))[1] is not asyncio.current_task():
                            return  # replaced or stopped while waiting for the lock
                        await self._write_progress(spec, message, progress)
                    written = (message, ds.progress_annotation(progress))
            except KubeError as e:
                log.warning("dataset %s/%s: progress not read or written: %s", *key, e.reason)

    def _next_backoff(self, key: Key, first: float) -> float:
        delay = min(self._backoff.get(key, first / 2) * 2, MAX_BACKOFF_S)
        self._backoff[key] = delay
        return delay

    def _schedule(self, key: Key, delay: float | None) -> None:
        retry = self._retries.pop(key, None)
        if retry is not None and retry is not asyncio.current_task():
            retry.cancel()
        if delay is not None:
            self._retries[key] = asyncio.create_task(self._later(key, delay), name=f"dataset-retry-{key[0]}/{key[1]}")

    async def _later(self, key: Key, delay: float) -> None:
        await asyncio.sleep(delay)
        if self._retries.get(key) is asyncio.current_task():
            del self._retries[key]
        await self.reconcile_key(key, job_changed=True)


def register(registry: kopf.OperatorRegistry, ctx: OperatorContext, gates: GateKeeper | None = None) -> DatasetController:
    """The controller's kopf handlers and leader callbacks (see the module docstring); `gates` is
    told when a load ends."""
    controller = DatasetController(ctx, gates)

    def leading(**_: Any) -> bool:
        return ctx.leader.leading

    @kopf.on.event("v1", "persistentvolumeclaims", id="dataset-claims", registry=registry, when=leading,
                   labels=dataset_label_filter(ctx.settings.mounts.dataset_label))
    async def dataset_claims(event: Mapping, **_: Any) -> None:
        # in a task: kopf hands one object's events to its handlers one after another, so a reconcile
        # run here would hold back the webhook's copy of the claim (`webhooks`, the same watch) while
        # it writes; the tasks keep their order (each waits for the dataset's lock, first come first)
        controller.spawn(controller.on_claim(event.get("type"), event["object"]), "dataset-claim")

    @kopf.on.event("batch", "v1", "jobs", id="dataset-loader-jobs", registry=registry, when=leading,
                   labels={ds.LOADER_LABEL: kopf.PRESENT})
    async def dataset_loader_jobs(event: Mapping, **_: Any) -> None:
        controller.spawn(controller.on_job(event.get("type"), event["object"]), "dataset-loader-job")

    async def elected() -> None:
        controller.elected()

    ctx.leader.on_elected(elected)
    ctx.leader.on_stopped(controller.stopped)
    return controller

