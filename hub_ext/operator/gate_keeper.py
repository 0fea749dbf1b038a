"""The leader's gate keeper: lets pods held for their datasets go when the datasets are loaded
(what a held pod is and when it goes: `gates`, pure; the webhook holds them: `webhooks`).

Level-triggered, on the leader only, like the dataset controller:

- every event of a held pod (kopf ``on.event`` for pods labelled ``mlplatform.io/dataset-gated``;
  the API server filters the watch by that label, so the operator never receives other pods): a pod
  made after its datasets finished loading goes at once;
- a dataset whose load ended (`DatasetController` calls `settled`): the held pods of its
  namespace, listed by the label;
- every held pod of the cluster when this replica becomes leader (one listing).

The pods of a listing are checked `CONCURRENCY` at a time.

`check` reads each dataset PVC the pod mounts (`hub_ext.manifests.mounts.dataset_state`; a mount of one
of a dataset's volumes, `volumes`, counts as the dataset's), removes the gate when all are ready and
each is mounted on its dataset's current volume, and otherwise posts a Warning Event on the pod for each dataset whose load
failed (`gates.failed_event`: once per dataset and failure; a 409 means it is there). A pod being
deleted or no longer held is left alone. A Kubernetes error is logged and the next event or load
end tries again; the election's listing catches what was missed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any, Callable, Mapping

import kopf

from hub_ext.manifests.datasets import is_dataset
from hub_ext.kube.client import STRATEGIC_MERGE, Conflict, KubeError, NotFound, timestamp
from hub_ext.manifests.mounts import dataset_state
from hub_ext.operator.context import OperatorContext
from hub_ext.operator.rules import admission, gates, volumes

log = logging.getLogger("mlplatform.operator.gates")
CONCURRENCY = 8  # held pods checked (PVCs read, gate removed) at once


class GateKeeper:
    def __init__(self, ctx: OperatorContext):
        self.ctx, self.settings, self.kube = ctx, ctx.settings, ctx.kube
        self._resync: asyncio.Task | None = None
        # the dataset controller's lock of a dataset (set by it; one of our own without it)
        self.lock_for: Callable[[tuple[str, str]], asyncio.Lock] = lambda key: self._locks.setdefault(key, asyncio.Lock())
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}

    async def settled(self, namespace: str) -> None:
        """A dataset of `namespace` finished loading (or failed): its held pods are looked at."""
        await self._check_many(await self._held(f"/api/v1/namespaces/{namespace}/pods"))

    async def _check_many(self, pods: list[dict]) -> None:
        """`check` each pod, `CONCURRENCY` at a time (20 pods one after another took 1.4 s to let go)."""
        limit = asyncio.Semaphore(CONCURRENCY)

        async def one(pod: dict) -> None:
            async with limit:
                await self.check(pod)

        await asyncio.gather(*(one(p) for p in pods))

    def elected(self) -> None:
        if self._resync is None or self._resync.done():
            self._resync = asyncio.create_task(self._check_all(), name="dataset-gates-resync")

    async def stopped(self) -> None:
        if self._resync:
            self._resync.cancel()

    async def _check_all(self) -> None:
        await self._check_many(await self._held("/api/v1/pods"))  # `check` stops when no longer leading

    async def _held(self, path: str) -> list[dict]:
        try:
            return (await self.kube.list(path, labelSelector=gates.GATED_LABEL)).get("items") or []
        except KubeError as e:
            log.warning("could not list the pods held for datasets (%s): %s", path, e.reason)
            return []

    async def check(self, pod: Mapping) -> None:
        """Let `pod` go if its datasets are loaded; else say which failed (see the module docstring)."""
        meta = pod.get("metadata") or {}
        ns, name = meta.get("namespace", ""), meta.get("name", "")
        if not self.ctx.leader.leading or meta.get("deletionTimestamp") or not gates.is_held(pod):
            return
        try:
            if not await self.ctx.projects.contains(ns):
                return
            datasets, _ = await self._datasets(ns, pod)
            async with contextlib.AsyncExitStack() as locked:
                # no load of theirs begins while the pod is looked at and let go (a load beginning
                # in place counts the pods that read there, and a held pod is not one yet)
                for d in sorted(datasets):
                    await locked.enter_async_context(self.lock_for((ns, d)))
                datasets, mounted = await self._datasets(ns, pod)
                states = {d: dataset_state(pvc, self.settings.mounts.source_annotation) for d, pvc in datasets.items()}
                for d, claim in mounted:
                    if volumes.current(datasets[d]) != claim:
                        states[d] = (gates.MOVED, gates.MOVED_MESSAGE)
                action, failed = gates.verdict(states)
                if action == "release":
                    await self.kube.request("PATCH", f"/api/v1/namespaces/{ns}/pods/{name}", gates.release_patch(),
                                            content_type=STRATEGIC_MERGE)
            if action == "release":
                log.info("pod %s/%s: its datasets are loaded (%s); let go", ns, name, ", ".join(states) or "none left")
                self.ctx.metrics.inc("mlplatform_operator_dataset_gates_total", result="released")
                return
            for claim in failed:
                event = gates.failed_event(pod, claim, states[claim][1], timestamp(), states[claim][0] == gates.MOVED)
                try:
                    await self.kube.request("POST", f"/api/v1/namespaces/{ns}/events", event)
                    log.info("pod %s/%s: held; the dataset %s %s", ns, name, claim,
                             "moved" if states[claim][0] == gates.MOVED else "failed to load")
                except Conflict:
                    pass  # said already
        except NotFound:
            return  # the pod went meanwhile
        except KubeError as e:
            log.warning("pod %s/%s: could not check its datasets: %s", ns, name, e.reason)

    async def _datasets(self, ns: str, pod: Mapping) -> tuple[dict[str, dict], list[tuple[str, str]]]:
        """(the datasets the pod mounts by name, read now; (dataset, claim) for each claim of theirs it
        mounts: the dataset's own or one of its volumes)."""
        label = self.settings.mounts.dataset_label
        datasets: dict[str, dict] = {}
        mounted = []
        for claim in sorted(admission.claims(pod)):
            pvc = await self._claim(ns, claim)
            if pvc and is_dataset(pvc, label):
                datasets.setdefault(claim, pvc)
                mounted.append((claim, claim))
                continue
            owner = volumes.dataset_of(pvc or {})
            dataset = (datasets.get(owner) or await self._claim(ns, owner)) if owner else None
            if dataset and is_dataset(dataset, label) and volumes.is_volume_of(pvc, dataset):
                datasets[owner] = dataset
                mounted.append((owner, claim))
        return datasets, mounted

    async def _claim(self, ns: str, name: str) -> dict | None:
        return await self.kube.get(f"/api/v1/namespaces/{ns}/persistentvolumeclaims/{name}")


def register(registry: kopf.OperatorRegistry, ctx: OperatorContext) -> GateKeeper:
    keeper = GateKeeper(ctx)

    def leading(**_: Any) -> bool:
        return ctx.leader.leading

    @kopf.on.event("v1", "pods", id="dataset-held-pods", registry=registry, when=leading,
                   labels={gates.GATED_LABEL: kopf.PRESENT})
    async def held_pods(event: Mapping, **_: Any) -> None:
        if event.get("type") != "DELETED":
            await keeper.check(event["object"])

    async def elected() -> None:
        keeper.elected()

    ctx.leader.on_elected(elected)
    ctx.leader.on_stopped(keeper.stopped)
    return keeper
