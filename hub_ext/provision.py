"""Applying a project's objects (`hub_ext.tenancy`) to the cluster, idempotently, all or nothing.

`Provisioner.ensure(key, build)` reads each object and creates what is missing or replaces what
differs from the wanted fields (labels are merged, never dropped); an object created by someone
else meanwhile (409) is read and compared instead. A set already applied by this hub process
(named by the caller's key) is neither built nor requested again (later spawns make no API
request for provisioning). If any step
still fails after the Kubernetes client's retries, every object this call created is deleted
again (a namespace it created takes its contents with it) and an `UpstreamError` says what
failed; nothing half-made stays behind.

`remove(paths)` deletes objects that should no longer exist (a former member's RoleBinding);
a path known to be absent is not requested again.
"""

from __future__ import annotations

import asyncio
import logging

import aiohttp
from kubernetes_asyncio.client.exceptions import ApiException

from .errors import UpstreamError
from .kube import Kube, obj_path, reason

log = logging.getLogger("mlplatform.provision")
_FAILURES = (ApiException, asyncio.TimeoutError, aiohttp.ClientError)


def _wanted_differs(current: dict, wanted: dict) -> bool:
    labels = (current.get("metadata") or {}).get("labels") or {}
    if any(labels.get(k) != v for k, v in (wanted["metadata"].get("labels") or {}).items()):
        return True
    return any(current.get(k) != v for k, v in wanted.items() if k not in ("apiVersion", "kind", "metadata"))


def _updated(current: dict, wanted: dict) -> dict:
    out = {**current, **{k: v for k, v in wanted.items() if k != "metadata"}}
    meta = dict(current["metadata"])
    meta["labels"] = {**(meta.get("labels") or {}), **(wanted["metadata"].get("labels") or {})}
    out["metadata"] = meta
    return out


class Provisioner:
    def __init__(self, kube: Kube):
        self.kube = kube
        self._applied: set = set()  # callers' keys of the sets applied by this process
        self._absent: set[str] = set()
        self._locks: dict[str, asyncio.Lock] = {}

    def forget(self) -> None:
        """Re-check everything on next use (e.g. after objects were changed outside the hub)."""
        self._applied.clear()
        self._absent.clear()

    async def ensure(self, key, build, what: str) -> None:
        """Apply the objects `build()` returns, unless the set named `key` (hashable; it must change
        whenever the objects would) was applied already: then nothing is built or requested."""
        if key in self._applied:
            return
        objects = build()
        lock = self._locks.setdefault(objects[0]["metadata"]["name"], asyncio.Lock())
        async with lock:
            if key in self._applied:
                return
            created: list[dict] = []
            try:
                for obj in objects:
                    if await self._ensure_one(obj):
                        created.append(obj)
            except _FAILURES as e:
                await self._undo(created)
                log.warning("could not %s: %s (undid %d created objects)", what, reason(e), len(created))
                raise UpstreamError(what, reason(e) + "; nothing was left half-made, try again") from None
            self._applied.add(key)
            self._absent.difference_update(obj_path(o) for o in objects)
            if created:
                log.info("%s: created %s", what, ", ".join(f"{o['kind']}/{o['metadata']['name']}" for o in created))

    async def _ensure_one(self, wanted: dict) -> bool:
        """True when this call created the object."""
        path = obj_path(wanted)
        for _ in range(3):
            current = await self.kube.get(path)
            if current is None:
                try:
                    await self.kube.create(wanted)
                    return True
                except ApiException as e:
                    if e.status != 409:
                        raise
                    continue  # someone else created it: compare with theirs
            if not _wanted_differs(current, wanted):
                return False
            try:
                await self.kube.replace(_updated(current, wanted))
                return False
            except ApiException as e:
                if e.status != 409:
                    raise  # 409: changed meanwhile, read again
        raise ApiException(status=409, reason="Conflict: the object kept changing while the hub updated it")

    async def _undo(self, created: list[dict]) -> None:
        namespace_created = any(o["kind"] == "Namespace" for o in created)
        for obj in reversed(created):
            if namespace_created and obj["kind"] != "Namespace":
                continue  # deleting the namespace removes everything in it
            try:
                await self.kube.delete(obj_path(obj))
            except _FAILURES as e:
                log.error("could not undo %s/%s: %s", obj["kind"], obj["metadata"]["name"], reason(e))

    async def remove(self, paths: list[str], what: str) -> None:
        for path in paths:
            if path in self._absent:
                continue
            try:
                if await self.kube.delete(path):
                    self._applied.clear()  # a set that held this object must be checked again
            except ApiException as e:
                if e.status == 403:  # the hub may not manage that namespace (yet): nothing to remove
                    continue
                raise UpstreamError(what, reason(e)) from None
            except _FAILURES as e:
                raise UpstreamError(what, reason(e)) from None
            self._absent.add(path)
