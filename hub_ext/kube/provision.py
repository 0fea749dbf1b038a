"""Applying a project's objects (`hub_ext.manifests.tenancy`) to the cluster, idempotently, all or nothing.

`Provisioner.ensure(key, build)` reads each object and creates what is missing or replaces what
differs from the wanted fields (labels and annotations are merged: others' are never dropped; of
annotations in the platform's own domain, ``mlplatform.io/…`` and ``*.mlplatform.io/…``, exactly
the wanted ones are kept, so an entitlement taken away does not linger); an object created by
someone else meanwhile (409) is read and compared instead. A set already applied by this hub
process (named by the caller's key) is neither built nor requested again (later spawns make no
API request for provisioning).

The hub never adopts a namespace it did not make for that project and owner: when the Namespace
(the first object of a project) exists already, it must carry the platform's managed-by label
and the wanted project label, and an owner annotation (``mlplatform.io/owner``), if it has one,
must be the wanted one. Otherwise `ForeignNamespace` (409) says so in words, a warning names the
namespace and the owner found, and nothing is changed in it or created. A namespace the hub
made before owners were recorded (both labels, no owner annotation) is adopted: it gets the
annotation.

The hub's rights in a project come from a RoleBinding it makes there (`hub_ext.manifests.tenancy`); a 403
right after this call made one is retried for up to `GRANT_WAIT` seconds (the API server's
authorizer learns of a binding a moment after it is created). If any step still fails after the
Kubernetes client's retries, every object this call created is deleted again (a namespace it
created takes its contents with it) and an `UpstreamError` says what failed; nothing half-made
stays behind.

`remove(paths)` deletes objects that should no longer exist (a former member's RoleBinding);
a path known to be absent is not requested again.
"""

from __future__ import annotations

import asyncio
import logging

from jupyterhub.utils import exponential_backoff

from hub_ext.core.credentials import MANAGED_BY
from hub_ext.core.errors import UpstreamError
from hub_ext.kube.client import Conflict, Forbidden, Kube, KubeError, obj_path, reason
from hub_ext.manifests.tenancy import OWNER_ANNOTATION, PROJECT_LABEL

log = logging.getLogger("mlplatform.provision")
_OWNERSHIP_LABELS = (*MANAGED_BY, PROJECT_LABEL)
GRANT_WAIT = 5.0  # seconds a 403 is retried right after the hub bound its rights in a new namespace


class ForeignNamespace(UpstreamError):
    """A project's namespace exists and was not made by the platform for that project and owner."""

    status = 409


def _platform_key(key: str) -> bool:
    domain = key.split("/", 1)[0] if "/" in key else ""
    return domain == "mlplatform.io" or domain.endswith(".mlplatform.io")


def _meta(obj: dict, field: str) -> dict:
    return (obj.get("metadata") or {}).get(field) or {}


def _merged_annotations(current: dict, wanted: dict) -> dict:
    kept = {k: v for k, v in _meta(current, "annotations").items() if not _platform_key(k)}
    return {**kept, **_meta(wanted, "annotations")}


def _wanted_differs(current: dict, wanted: dict) -> bool:
    labels = _meta(current, "labels")
    if any(labels.get(k) != v for k, v in _meta(wanted, "labels").items()):
        return True
    if _merged_annotations(current, wanted) != _meta(current, "annotations"):
        return True
    return any(current.get(k) != v for k, v in wanted.items() if k not in ("apiVersion", "kind", "metadata"))


def _updated(current: dict, wanted: dict) -> dict:
    out = {**current, **{k: v for k, v in wanted.items() if k != "metadata"}}
    meta = dict(current["metadata"])
    meta["labels"] = {**(meta.get("labels") or {}), **_meta(wanted, "labels")}
    annotations = _merged_annotations(current, wanted)
    if annotations or "annotations" in meta:
        meta["annotations"] = annotations
    out["metadata"] = meta
    return out


def foreign_owner(current: dict, wanted: dict) -> str | None:
    """None when the existing Namespace `current` is the platform's for the project and owner of
    `wanted` (or a legacy one of the hub's without an owner annotation); otherwise the owner it
    records, in words, for the log."""
    labels, annotations = _meta(current, "labels"), _meta(current, "annotations")
    want_labels = _meta(wanted, "labels")
    found = annotations.get(OWNER_ANNOTATION)
    if all(labels.get(k) == want_labels.get(k) for k in _OWNERSHIP_LABELS) and \
            (found is None or found == _meta(wanted, "annotations").get(OWNER_ANNOTATION)):
        return None
    if found is not None:
        return repr(found)
    marks = ", ".join(f"{k}={labels[k]!r}" for k in _OWNERSHIP_LABELS if k in labels)
    return f"none recorded ({marks or 'no platform labels'})"


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
                    bound = any(o["kind"] == "RoleBinding" for o in created)
                    if await self._ensure_granted(obj, what, bound):
                        created.append(obj)
            except ForeignNamespace:
                await self._undo(created)
                raise
            except KubeError as e:
                await self._undo(created)
                log.warning("could not %s: %s (undid %d created objects)", what, reason(e), len(created))
                raise UpstreamError(what, reason(e) + "; nothing was left half-made, try again") from None
            self._applied.add(key)
            self._absent.difference_update(obj_path(o) for o in objects)
            if created:
                log.info("%s: created %s", what, ", ".join(f"{o['kind']}/{o['metadata']['name']}" for o in created))

    async def _ensure_granted(self, wanted: dict, what: str, bound: bool) -> bool:
        """`_ensure_one`; when this call has just bound the hub's rights in the namespace (`bound`),
        a 403 is retried for a few seconds: the API server's authorizer learns of a new binding
        from a watch, a moment after the binding was created."""
        if not bound:
            return await self._ensure_one(wanted, what)
        refused: list[Forbidden] = []

        async def attempt() -> tuple[bool] | None:
            try:
                return (await self._ensure_one(wanted, what),)
            except Forbidden as e:
                refused.append(e)
                return None

        try:
            (created,) = await exponential_backoff(attempt, what, start_wait=0.05, max_wait=0.5, timeout=GRANT_WAIT)
        except asyncio.TimeoutError:
            raise refused[-1] from None
        return created

    async def _ensure_one(self, wanted: dict, what: str) -> bool:
        """True when this call created the object."""
        path = obj_path(wanted)
        for _ in range(3):
            current = await self.kube.get(path)
            if current is None:
                try:
                    await self.kube.create(wanted)
                    return True
                except Conflict:
                    continue  # someone else created it: compare with theirs
            if wanted["kind"] == "Namespace":
                self._check_owner(current, wanted, what)
            if not _wanted_differs(current, wanted):
                return False
            try:
                await self.kube.replace(_updated(current, wanted))
                return False
            except Conflict:
                pass  # changed meanwhile, read again
        raise Conflict(409, "Kubernetes answered 409 Conflict: the object kept changing while the hub updated it",
                       action=f"replace {path}")

    @staticmethod
    def _check_owner(current: dict, wanted: dict, what: str) -> None:
        name = wanted["metadata"]["name"]
        found = foreign_owner(current, wanted)
        if found is not None:
            log.warning("%s: refused: the namespace %s exists and was not made by the platform for %s (found "
                        "owner: %s); nothing in it was changed", what, name,
                        _meta(wanted, "annotations").get(OWNER_ANNOTATION) or "this project", found)
            raise ForeignNamespace(what, f"its namespace {name!r} exists and was not made by the platform for this "
                                         "project's owner; nothing in it was changed: ask an administrator")
        wanted_owner = _meta(wanted, "annotations").get(OWNER_ANNOTATION)
        if wanted_owner and OWNER_ANNOTATION not in _meta(current, "annotations"):
            log.info("%s: adopting the namespace %s, made by the hub before owners were recorded, for %s",
                     what, name, wanted_owner)

    async def _undo(self, created: list[dict]) -> None:
        namespace_created = any(o["kind"] == "Namespace" for o in created)
        for obj in reversed(created):
            if namespace_created and obj["metadata"].get("namespace"):
                continue  # deleting the namespace removes everything in it (not the cluster's queues)
            try:
                await self.kube.delete(obj_path(obj))
            except KubeError as e:
                log.error("could not undo %s/%s: %s", obj["kind"], obj["metadata"]["name"], reason(e))

    async def remove(self, paths: list[str], what: str) -> None:
        for path in paths:
            if path in self._absent:
                continue
            try:
                if await self.kube.delete(path):
                    self._applied.clear()  # a set that held this object must be checked again
            except Forbidden:  # the hub may not manage that namespace (yet): nothing to remove
                continue
            except KubeError as e:
                raise UpstreamError(what, reason(e)) from None
            self._absent.add(path)
