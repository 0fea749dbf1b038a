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

Progress: `dataset_progress` (a task per running load, stopped before its outcome is written, under
the dataset's lock). Reads and writes: `dataset_api` (the condition before the annotations). A
reconcile that fails on the API (after `hub_ext.kube.client`'s retries) is tried again after 1 s,
doubling to 5 min.

Logs: one line per decision with the dataset (``namespace/name``) and the load id; never a value
of a credential (none is ever read). ``mlplatform_operator_dataset_loads_total{result=…}`` counts
started, loaded and failed loads.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Mapping

import kopf

from hub_ext.core.errors import UserInputError
from hub_ext.kube.client import KubeError
from hub_ext.manifests.datasets import dataset_label, is_dataset
from hub_ext.manifests.mounts import LOADED_LOAD, dataset_state
from hub_ext.operator.context import OperatorContext
from hub_ext.operator.dataset_api import DatasetApi, Key, key_of
from hub_ext.operator.dataset_progress import ProgressFollowers
from hub_ext.operator.gate_keeper import GateKeeper
from hub_ext.operator.rules import datasets as ds
from hub_ext.operator.rules import volumes
from hub_ext.operator.snapshots import Snapshots

log = logging.getLogger("mlplatform.operator.datasets")
MAX_BACKOFF_S = 300.0
CREDENTIAL_RETRY_S = 10.0
READERS_GRACE_S = 2.0  # a pod admitted as a load in place begins is stored within this (the webhook's copy lags)


def dataset_label_filter(selector: str) -> dict:
    """kopf's label filter for the dataset label selector (``key``: any value; ``key=value``)."""
    key, value = dataset_label(selector)
    return {key: value if "=" in selector else kopf.PRESENT}


class DatasetController:
    def __init__(self, ctx: OperatorContext, gates: GateKeeper | None = None):
        self.ctx, self.settings, self.kube, self.gates = ctx, ctx.settings, ctx.kube, gates
        self.snapshots = Snapshots(ctx.kube)
        self.api = DatasetApi(ctx)  # its reads and writes (and what it last wrote on each claim)
        self._locks: dict[Key, asyncio.Lock] = {}
        self.progress = ProgressFollowers(ctx, self.api, self._lock)
        self._retries: dict[Key, asyncio.Task] = {}
        self._backoff: dict[Key, float] = {}
        self._resync: asyncio.Task | None = None
        self._background: set[asyncio.Task] = set()
        if gates:
            gates.lock_for = self._lock  # it lets a held pod go under the lock of each dataset it mounts

    # -- entry points ---------------------------------------------------------------------------

    async def on_claim(self, event_type: str | None, pvc: dict) -> None:
        if event_type == "DELETED":
            self.forget(key_of(pvc))
            return
        await self.reconcile(pvc, job_changed=False)

    async def on_job(self, event_type: str | None, job: dict) -> None:
        meta = job.get("metadata") or {}
        claim = (meta.get("labels") or {}).get(ds.LOADER_LABEL)
        if claim:
            await self.reconcile_key((meta["namespace"], claim), job_changed=True)

    async def reconcile_key(self, key: Key, job_changed: bool = False) -> None:
        try:
            pvc = await self.kube.get(self.api.claim_path(*key))
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
        key = key_of(pvc)
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
        self.progress.stop_all()
        for task in list(self._retries.values()) + list(self._background) + ([self._resync] if self._resync else []):
            task.cancel()
        self._retries.clear()
        self._backoff.clear()
        self.api.written.clear()

    def forget(self, key: Key) -> None:
        self.progress.stop(key)
        retry = self._retries.pop(key, None)
        if retry:
            retry.cancel()
        self._backoff.pop(key, None)
        self.api.written.pop(key, None)
        lock = self._locks.get(key)
        if lock is not None and not lock.locked():
            del self._locks[key]

    # -- one reconcile ----------------------------------------------------------------------------

    async def _reconcile(self, pvc: dict, job_changed: bool) -> float | None:
        """Act on `pvc`; None when the next change will bring it back, else the first delay of
        the backoff after which to look again."""
        meta = pvc["metadata"]
        key = key_of(pvc)
        ns, name, uid = meta["namespace"], meta["name"], meta["uid"]
        if meta.get("deletionTimestamp"):
            self.progress.stop(key)
            await self.api.delete_jobs(await self.api.jobs(ns, name, uid), "its claim is being deleted")
            return None
        if not await self.api.in_project(ns):
            return None
        try:
            spec = ds.read_dataset(pvc, self.settings.mounts)
        except UserInputError as e:
            self.progress.stop(key)
            if await self.api.set_condition(pvc, None, False, ds.FAILED, str(e), None):
                log.info("dataset %s/%s: not loaded: %s", ns, name, e.field)
            return None
        if spec is None:
            self.progress.stop(key)
            return None
        if (meta.get("annotations") or {}).get(ds.LOAD_ID_ANNOTATION) != spec.load_id:
            # a new load, or an event's copy older than our own write of its start: read afresh
            pvc = await self.kube.get(self.api.claim_path(ns, name))
            if pvc is None or pvc["metadata"]["uid"] != uid or self._spec(pvc) != spec:
                return None  # gone, or changed again: its own event follows
            meta = pvc["metadata"]
            if (meta.get("annotations") or {}).get(ds.LOAD_ID_ANNOTATION) != spec.load_id:
                self.progress.stop(key)
                return await self._begin(pvc, spec)  # its volume chosen and named first; its event brings us back
        cond = ds.condition_of(pvc)
        if cond and cond.get("status") == "True" and \
                (meta.get("annotations") or {}).get(LOADED_LOAD) in (None, spec.load_id):
            self.progress.stop(key)
            return await self.snapshots.ensure(pvc, spec)  # the source of writable copies, where possible
        if not job_changed and self.progress.following(key, spec.load_id):
            return None  # its Job runs and is followed; the Job's own events bring what changes
        jobs = await self.api.jobs(ns, name, uid)
        older = [j for j in jobs if (j["metadata"].get("labels") or {}).get(ds.LOAD_LABEL) != spec.load_id]
        if older:
            self.progress.stop(key)
            await self.api.delete_jobs(older, f"the load {spec.load_id} replaces it")
            await self.api.set_condition(pvc, spec.load_id, False, ds.LOADING, "stopping the previous load", {})
            return None  # the old Jobs' deletion brings us back
        # the Job of this load's own name; a loader-labelled Job is the operator's alone (the
        # ValidatingAdmissionPolicy mlplatform-dataset-loaders in helm-values/operator.yaml)
        job = next((j for j in jobs if j["metadata"]["name"] == spec.job_name), None)
        if cond and cond.get("reason") == ds.FAILED and job is not None and \
                ds.job_state(job) == "failed":
            self.progress.stop(key)
            return None  # settled until the source, credential or refresh changes
        credential = None
        if spec.credential:
            secret = await self.api.credential_secret(ns, spec.credential)
            try:
                credential = ds.credential_for(spec, secret, self.settings.mounts)
            except UserInputError as e:
                self.progress.stop(key)
                if await self.api.set_condition(pvc, spec.load_id, False, ds.FAILED, str(e), {}):
                    log.info("dataset %s/%s: load %s waits for its credential", ns, name, spec.load_id)
                return CREDENTIAL_RETRY_S
        if job is None:
            job = await self.api.create_job(spec, credential, volumes.current(pvc))
            if job is None:
                await self.api.set_condition(pvc, spec.load_id, False, ds.FAILED,
                                             f"a Job named {spec.job_name} that is not this dataset's loader is in "
                                             "the way; delete it", {})
                return None
        elif not ds.is_loader_of(job, spec):
            await self.api.set_condition(pvc, spec.load_id, False, ds.FAILED, f"the Job {job['metadata']['name']} "
                                         "is not this dataset's loader; delete it", {})
            return None
        state = ds.job_state(job)
        if state != "running":
            self.progress.stop(key)
            pvc = await self.kube.get(self.api.claim_path(ns, name))  # the event's copy may predate our outcome
            if pvc is None or pvc["metadata"]["uid"] != uid or ds.decided(pvc, spec.load_id, state == "complete"):
                return None
            pod, progress = await self.api.last_words(spec)
            if state == "complete":
                await self.api.set_condition(pvc, spec.load_id, True, ds.LOADED_REASON,
                                             ds.loaded_message(progress, spec.source.uri), progress)
            else:
                await self.api.set_condition(pvc, spec.load_id, False, ds.FAILED,
                                             ds.failed_message(progress, pod, job), progress)
            self.ctx.metrics.inc("mlplatform_operator_dataset_loads_total", result="loaded" if state == "complete"
                                 else "failed")
            log.info("dataset %s/%s: load %s %s", ns, name, spec.load_id, "loaded" if state == "complete" else "failed")
            if self.gates:
                self.spawn(self.gates.settled(ns), f"dataset-gates-{ns}")  # it takes our lock
            if state == "complete":
                await self.api.drop_stale_volumes(pvc)
            return None
        if (cond is None or cond.get("reason") != ds.LOADING) and \
                self.api.written.get(key) != (uid, spec.load_id, ds.LOADING):
            await self.api.set_condition(pvc, spec.load_id, False, ds.LOADING, "waiting for the loader to start", {})
        self.progress.start(key, spec)
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
            target = volumes.choose(name, now, await self.api.readers(ns, name))
            if target is None:
                target, later = await self.api.new_volume(pvc, spec)
                if later is not None:
                    return later
        loaded = annotations.get(LOADED_LOAD)
        if loaded is None and (cond or {}).get("status") == "True":
            loaded = annotations.get(ds.LOAD_ID_ANNOTATION, "")  # loaded before the operator wrote which load
        changes = {ds.LOAD_ID_ANNOTATION: spec.load_id, volumes.VOLUME_ANNOTATION: None if target == name else target}
        if loaded is not None:
            changes[LOADED_LOAD] = loaded
        pvc = await self.api.annotate(pvc, changes)
        log.info("dataset %s/%s: the load %s begins on the volume %s%s", ns, name, spec.load_id, target,
                 "" if target == now else f" (pods read {now}, which they keep)")
        await self.api.set_condition(pvc, spec.load_id, False, ds.LOADING, "waiting for the loader to start", {})
        if served and cond is not None and target == now:  # loaded data, reloaded in place
            await asyncio.sleep(READERS_GRACE_S)
            if now in await self.api.readers(ns, name):
                moved, later = await self.api.new_volume(pvc, spec)
                if later is not None:
                    return later
                await self.api.annotate(pvc, {volumes.VOLUME_ANNOTATION: moved})
                log.warning("dataset %s/%s: a pod began reading %s as its load %s began; the load moves to %s (pods "
                            "held for it meanwhile stay held: DatasetMoved)", ns, name, now, spec.load_id, moved)
        return None

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

