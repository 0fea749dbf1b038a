"""A test helper, not product code: what the controller helpers (`tests.kube.training_operator`,
`tests.kube.katib_controller`, which play the real Training Operator and Katib until those run on
the test control plane, issue 15) share. They are ordinary API clients (`hub_ext.kube.client.Kube`). A
`Controller` watches one namespace through watch caches that wake it on any change; each time it
wakes, it makes one pass over what it controls (`reconcile_all`): a pass reads the caches and
writes only what differs, so waking it once too often changes nothing. Objects it creates are
owned by their controller (`controller_ref`)."""

from __future__ import annotations

import asyncio
from typing import Self

from hub_ext.kube.client import Kube
from hub_ext.kube.watchcache import WatchCache


def controller_ref(obj: dict) -> dict:
    """The ownerReference a controller puts on what it creates for `obj`."""
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": obj["metadata"]["name"],
            "uid": obj["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}


class Controller:
    """Subclasses make their caches with `watch` and override `caches` and `reconcile_all`."""

    def __init__(self, kube: Kube, namespace: str):
        self.kube, self.ns = kube, namespace
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None

    def watch(self, path: str, kind: str | None = None) -> WatchCache:
        """A cache of the collection `path` that wakes the controller. With `kind`, items are typed
        (list items of built-in kinds come without kind/apiVersion; the path names the API version)."""
        transform = None
        if kind is not None:
            api_version = path.split("/namespaces/")[0].removeprefix("/apis/")
            transform = lambda obj: {**obj, "kind": obj.get("kind") or kind,  # noqa: E731
                                     "apiVersion": obj.get("apiVersion") or api_version}
        return WatchCache(self.kube, path, on_change=self._kick, retry_delay=0.1, transform=transform)

    def caches(self) -> list[WatchCache]:
        raise NotImplementedError

    async def reconcile_all(self) -> None:
        """One pass over everything controlled; a failure on one object must not end it."""
        raise NotImplementedError

    async def start(self) -> Self:
        for cache in self.caches():
            assert await cache.wait_loaded(), cache.error
        self._task = asyncio.ensure_future(self._loop())
        return self

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        for cache in self.caches():
            await cache.stop()

    def _kick(self) -> None:
        self._wake.set()

    async def _loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            await self.reconcile_all()
