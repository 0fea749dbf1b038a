"""The object store: one global resourceVersion, objects by kind, a bounded event history, watchers,
finalizers, namespace lifecycle and ownerReference garbage collection.

Everything here runs on the server's event loop thread; nothing awaits, so every write is atomic
with respect to watches (a watch replays history and registers in one step, and no event is missed
or duplicated). Controllers (the emulated kubelet, quota status) subscribe with `on_change`.
"""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import json
import random
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from . import errors, schema, validation
from .patch import STRATEGIC, PatchError, apply_patch
from .lifecycle import Lifecycle
from .resources import Registry, ResourceType, types_from_crd

_GEN_CHARS = "bcdfghjklmnpqrstvwxz2456789"
_CLOSE = object()


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Event:
    rv: int
    rt: ResourceType
    type: str
    obj: dict
    old: dict | None
    _payload: dict = field(default_factory=dict)

    def payload(self, etype: str) -> bytes:
        data = self._payload.get(etype)
        if data is None:
            data = self._payload[etype] = (json.dumps({"type": etype, "object": self.obj}) + "\n").encode()
        return data


@dataclass(eq=False)
class Watcher:
    rt: ResourceType
    namespace: str | None
    label: Callable | None
    field: Callable | None
    queue: asyncio.Queue = field(default_factory=asyncio.Queue)

    def matches(self, obj: dict | None) -> bool:
        if obj is None:
            return False
        if self.namespace and obj["metadata"].get("namespace") != self.namespace:
            return False
        return (self.label is None or self.label(obj)) and (self.field is None or self.field(obj))

    def translate(self, ev: Event) -> str | None:
        """The event type this watcher sees (selector transitions become ADDED/DELETED), or None."""
        if ev.rt.key != self.rt.key and (ev.rt.group, ev.rt.plural) != (self.rt.group, self.rt.plural):
            return None
        new_ok = self.matches(ev.obj)
        if ev.type == "MODIFIED":
            old_ok = self.matches(ev.old)
            if new_ok and not old_ok:
                return "ADDED"
            if old_ok and not new_ok:
                return "DELETED"
            return "MODIFIED" if new_ok else None
        return ev.type if new_ok else None

    def offer(self, ev: Event) -> None:
        etype = self.translate(ev)
        if etype:
            self.queue.put_nowait(ev.payload(etype))

    def close(self) -> None:
        self.queue.put_nowait(_CLOSE)


CLOSE = _CLOSE


class Store(Lifecycle):
    def __init__(self, history: int = 20000):
        self.registry = Registry()
        self.rv = 0
        self.objects: dict[tuple, dict[tuple[str, str], dict]] = {}
        self.history: deque[Event] = deque()
        self.history_limit = history
        self.compacted_rv = 0
        self.watchers: set[Watcher] = set()
        self.listeners: list[Callable[[Event], None]] = []
        self.admission: list[Callable[[ResourceType, str, dict, dict | None], None]] = []
        # set by the kubelet: pods it runs are deleted gracefully (deletionTimestamp, then removal)
        self.graceful_pod: Callable[[dict], bool] = lambda pod: False
        self._draining: set[str] = set()
        for ns in ("default", "kube-system", "kube-public", "kube-node-lease"):
            self.create(self.rt("", "v1", "namespaces"), None, {"metadata": {"name": ns}})

    # ---- helpers -------------------------------------------------------------------------------
    def rt(self, group: str, version: str, plural: str) -> ResourceType:
        found = self.registry.get(group, version, plural)
        if not found:
            raise errors.ApiError(404, "NotFound", "the server could not find the requested resource")
        return found

    def _bucket(self, rt: ResourceType) -> dict:
        # all versions of one group/plural share storage (one storage version, as in Kubernetes)
        return self.objects.setdefault((rt.group, rt.plural), {})

    def _next_rv(self) -> str:
        self.rv += 1
        return str(self.rv)

    def _emit(self, rt: ResourceType, etype: str, obj: dict, old: dict | None) -> None:
        ev = Event(int(obj["metadata"]["resourceVersion"]), rt, etype, obj, old)
        self.history.append(ev)
        while len(self.history) > self.history_limit:
            self.compacted_rv = self.history.popleft().rv
        for w in list(self.watchers):
            w.offer(ev)
        for listener in list(self.listeners):
            listener(ev)

    def compact(self) -> None:
        """Forget all history (as etcd compaction does): older resourceVersions now answer 410."""
        if self.history:
            self.compacted_rv = self.history[-1].rv
        self.history.clear()

    def _key(self, rt: ResourceType, ns: str | None, name: str) -> tuple[str, str]:
        return ((ns or "") if rt.namespaced else "", name)

    def get(self, rt: ResourceType, ns: str | None, name: str) -> dict:
        obj = self._bucket(rt).get(self._key(rt, ns, name))
        if obj is None:
            raise errors.not_found(rt, name)
        return obj

    def find(self, rt: ResourceType, ns: str | None, name: str) -> dict | None:
        return self._bucket(rt).get(self._key(rt, ns, name))

    def items(self, rt: ResourceType, ns: str | None = None, label=None, field=None) -> list[dict]:
        out = []
        for (ons, _), obj in sorted(self._bucket(rt).items()):
            if ns and ons != ns:
                continue
            if (label is None or label(obj)) and (field is None or field(obj)):
                out.append(obj)
        return out

    # ---- watch -----------------------------------------------------------------------------------
    def watch(self, rt: ResourceType, ns: str | None, label, field, since: str | None) -> Watcher:
        w = Watcher(rt, ns if rt.namespaced else None, label, field)
        if since in (None, "", "0"):
            for obj in self.items(rt, w.namespace, label, field):
                w.queue.put_nowait(Event(0, rt, "ADDED", obj, None).payload("ADDED"))
        else:
            try:
                start = int(since)
            except ValueError:
                raise errors.bad_request(f"invalid resource version: {since!r}") from None
            if start < self.compacted_rv:
                raise errors.gone(f"too old resource version: {start} ({self.compacted_rv + 1})")
            for ev in self.history:
                if ev.rv > start:
                    w.offer(ev)
        self.watchers.add(w)
        return w

    def unwatch(self, w: Watcher) -> None:
        self.watchers.discard(w)

    def cut_watches(self) -> int:
        n = len(self.watchers)
        for w in list(self.watchers):
            w.close()
        self.watchers.clear()
        return n

    # ---- writes ----------------------------------------------------------------------------------
    def _prepare(self, rt: ResourceType, obj: dict, strict: bool) -> list[str]:
        """Kind/apiVersion, pruning, validation. Returns warnings; raises 400/422."""
        kind = obj.get("kind")
        if kind and kind != rt.kind:
            raise errors.bad_request(f"the kind of the object {kind!r} does not match the resource {rt.kind!r}")
        obj["kind"], obj["apiVersion"] = rt.kind, rt.api_version
        name = obj["metadata"].get("name") or obj["metadata"].get("generateName") or ""
        warnings = []
        if rt.is_custom:
            dropped = schema.prune(obj, rt.schema)
            if dropped and strict:
                raise errors.bad_request("strict decoding error: " +
                                         ", ".join(f'unknown field "{p}"' for p in dropped))
            warnings = [f'unknown field "{p}"' for p in dropped]
        causes = validation.check_metadata(obj["metadata"], rt.label_name)
        if rt.is_custom:
            causes += schema.validate(obj, rt.schema)
        else:
            causes += validation.check_object(rt.kind, obj)
        if causes:
            raise errors.invalid(rt, rt.kind, name, causes)
        return warnings

    def create(self, rt: ResourceType, ns: str | None, body: dict, *, dry_run: bool = False,
               strict: bool = False) -> tuple[dict, list[str]]:
        if not isinstance(body, dict) or not isinstance(body.get("metadata", {}), dict):
            raise errors.bad_request("the body of the request was in an unknown format")
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        if rt.namespaced:
            if meta.get("namespace") and ns and meta["namespace"] != ns:
                raise errors.bad_request("the namespace of the provided object does not match the namespace "
                                         "sent on the request")
            ns = ns or meta.get("namespace") or "default"
            meta["namespace"] = ns
            nso = self.find(self.rt("", "v1", "namespaces"), None, ns)
            if nso is None:
                raise errors.not_found(self.rt("", "v1", "namespaces"), ns)
            if nso["metadata"].get("deletionTimestamp"):
                raise errors.forbidden(rt, meta.get("name") or "",
                                       f"unable to create new content in namespace {ns} because it is being "
                                       "terminated")
        else:
            meta.pop("namespace", None)
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + "".join(random.choice(_GEN_CHARS) for _ in range(5))
        if "status" in rt.subresources:
            obj.pop("status", None)
        validation.apply_defaults(rt.kind, obj)
        warnings = self._prepare(rt, obj, strict)
        bucket = self._bucket(rt)
        key = self._key(rt, ns, meta["name"])
        if key in bucket:
            raise errors.already_exists(rt, meta["name"])
        for check in self.admission:
            check(rt, ns, obj, None)
        for k in ("deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
            meta.pop(k, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_iso()
        meta["generation"] = 1
        self._default_status(rt, obj)
        if dry_run:
            meta["resourceVersion"] = str(self.rv)
            return obj, warnings
        meta["resourceVersion"] = self._next_rv()
        bucket[key] = obj
        self._emit(rt, "ADDED", obj, None)
        self._after_create(rt, obj)
        return obj, warnings

    def _default_status(self, rt: ResourceType, obj: dict) -> None:
        if rt.kind == "Pod":
            obj["status"] = {"phase": "Pending", "qosClass": _qos_class(obj["spec"])}
        elif rt.kind == "Namespace":
            obj["status"] = {"phase": "Active"}
        elif rt.kind == "PersistentVolumeClaim":
            obj["status"] = {"phase": "Pending"}
        elif rt.kind == "CustomResourceDefinition":
            obj["status"] = {"conditions": [{"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                                             "lastTransitionTime": now_iso()}], "acceptedNames": obj["spec"]["names"]}

    def _after_create(self, rt: ResourceType, obj: dict) -> None:
        name = obj["metadata"]["name"]
        if rt.kind == "Namespace":
            self.create(self.rt("", "v1", "serviceaccounts"), name, {"metadata": {"name": "default"}})
            self.create(self.rt("", "v1", "configmaps"), name,
                        {"metadata": {"name": "kube-root-ca.crt"}, "data": {"ca.crt": "stand-in"}})
        elif rt.kind == "CustomResourceDefinition":
            for new in types_from_crd(obj):
                self.registry.add(new)
        self._collect_if_dangling(rt, obj)

    def replace(self, rt: ResourceType, ns: str | None, name: str, body: dict, *, subresource: str | None = None,
                strict: bool = False, dry_run: bool = False) -> tuple[dict, list[str]]:
        current = self.get(rt, ns, name)
        if not isinstance(body, dict):
            raise errors.bad_request("the body of the request was in an unknown format")
        given_rv = (body.get("metadata") or {}).get("resourceVersion")
        if given_rv and given_rv != current["metadata"]["resourceVersion"]:
            raise errors.conflict(rt, name)
        if (body.get("metadata") or {}).get("name") not in (None, name):
            raise errors.bad_request("the name of the object does not match the name on the URL")
        return self._write(rt, current, copy.deepcopy(body), subresource, strict, dry_run)

    def _write(self, rt, current: dict, new: dict, subresource: str | None, strict: bool,
               dry_run: bool = False) -> tuple[dict, list[str]]:
        meta = new.setdefault("metadata", {})
        cmeta = current["metadata"]
        if subresource == "status":
            merged = copy.deepcopy(current)
            merged["status"] = new.get("status")
            if merged["status"] is None:
                merged.pop("status")
            new = merged
            meta = new["metadata"]
        else:
            if "status" in rt.subresources:
                if "status" in current:
                    new["status"] = copy.deepcopy(current["status"])
                else:
                    new.pop("status", None)
            for k in ("uid", "creationTimestamp", "namespace", "name", "deletionTimestamp",
                      "deletionGracePeriodSeconds", "generation"):
                if k in cmeta:
                    meta[k] = cmeta[k]
                else:
                    meta.pop(k, None)
            if cmeta.get("deletionTimestamp"):
                added = set(meta.get("finalizers") or []) - set(cmeta.get("finalizers") or [])
                if added:
                    raise errors.forbidden(rt, cmeta["name"], "no new finalizers can be added if the object is "
                                           "being deleted")
        warnings = self._prepare(rt, new, strict)
        if subresource != "status" and _spec_of(new) != _spec_of(current):
            meta["generation"] = cmeta.get("generation", 1) + 1
        for check in self.admission:
            check(rt, cmeta.get("namespace"), new, current)
        if _same(new, current):
            return current, warnings  # no-op writes do not bump the resourceVersion
        if dry_run:
            return new, warnings
        meta["resourceVersion"] = self._next_rv()
        bucket = self._bucket(rt)
        key = self._key(rt, cmeta.get("namespace"), cmeta["name"])
        bucket[key] = new
        self._emit(rt, "MODIFIED", new, current)
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self._remove(rt, new)
        return new, warnings

    def patch(self, rt: ResourceType, ns: str | None, name: str, body, content_type: str, *,
              subresource: str | None = None, strict: bool = False, dry_run: bool = False) -> tuple[dict, list[str]]:
        current = self.get(rt, ns, name)
        if content_type == STRATEGIC and rt.is_custom:
            raise errors.unsupported_media("strategic merge patch is not supported for custom resources; use "
                                           "application/merge-patch+json or application/json-patch+json")
        try:
            new = apply_patch(copy.deepcopy(current), body, content_type)
        except PatchError as e:
            raise errors.ApiError(422, "Invalid", str(e)) from None
        if not isinstance(new, dict):
            raise errors.ApiError(422, "Invalid", "the patch produced something that is not an object")
        given_rv = (new.get("metadata") or {}).get("resourceVersion")
        if given_rv and given_rv != current["metadata"]["resourceVersion"]:
            raise errors.conflict(rt, name)
        return self._write(rt, current, new, subresource, strict, dry_run)

    def delete(self, rt: ResourceType, ns: str | None, name: str, *, grace: int | None = None,
               propagation: str | None = None, preconditions: dict | None = None, dry_run: bool = False) -> dict:
        obj = self.get(rt, ns, name)
        meta = obj["metadata"]
        pre = preconditions or {}
        if (pre.get("uid") and pre["uid"] != meta["uid"]) or (
                pre.get("resourceVersion") and pre["resourceVersion"] != meta["resourceVersion"]):
            raise errors.conflict(rt, name)
        if dry_run:
            return obj
        # batch/v1 Jobs orphan their pods unless told otherwise, as the real API does
        propagation = propagation or ("Orphan" if rt.kind == "Job" else "Background")
        graceful = rt.kind == "Pod" and grace != 0 and self.graceful_pod(obj)
        finalizers = list(meta.get("finalizers") or [])
        if propagation == "Orphan":
            self._orphan_dependents(obj)
        elif propagation == "Foreground":
            self._delete_dependents(obj, "Foreground")
        if finalizers or graceful or rt.kind == "Namespace":
            if meta.get("deletionTimestamp"):
                return obj
            new = copy.deepcopy(obj)
            new["metadata"]["deletionTimestamp"] = now_iso()
            new["metadata"]["deletionGracePeriodSeconds"] = (
                grace if grace is not None else (obj.get("spec") or {}).get("terminationGracePeriodSeconds", 0)
                if rt.kind == "Pod" else 0)
            if rt.kind == "Namespace":
                new["status"] = {"phase": "Terminating"}
            new["metadata"]["resourceVersion"] = self._next_rv()
            self._bucket(rt)[self._key(rt, meta.get("namespace"), name)] = new
            self._emit(rt, "MODIFIED", new, obj)
            if rt.kind == "Namespace":
                self._drain_namespace(name)
            return new
        self._remove(rt, obj, propagation)
        return obj

    def remove_now(self, rt: ResourceType, ns: str | None, name: str) -> None:
        """Final removal of an object whose deletion was pending (kubelet after pod termination)."""
        obj = self.find(rt, ns, name)
        if obj is not None:
            self._remove(rt, obj)

    def _remove(self, rt: ResourceType, obj: dict, propagation: str = "Background") -> None:
        meta = obj["metadata"]
        bucket = self._bucket(rt)
        key = self._key(rt, meta.get("namespace"), meta["name"])
        if bucket.get(key) is not obj and key in bucket:
            obj = bucket[key]
        if bucket.pop(key, None) is None:
            return
        gone = copy.deepcopy(obj)
        gone["metadata"]["resourceVersion"] = self._next_rv()
        self._emit(rt, "DELETED", gone, obj)
        if propagation != "Orphan":
            self._delete_dependents(obj, "Background")
        if rt.kind == "CustomResourceDefinition":
            self._unregister_crd(obj)
        ns = meta.get("namespace")
        if ns:
            nso = self.find(self.rt("", "v1", "namespaces"), None, ns)
            if nso and nso["metadata"].get("deletionTimestamp"):
                self._drain_namespace(ns)


def _spec_of(obj: dict) -> dict:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


def _same(a: dict, b: dict) -> bool:
    ma = {k: v for k, v in a["metadata"].items() if k != "resourceVersion"}
    mb = {k: v for k, v in b["metadata"].items() if k != "resourceVersion"}
    return ma == mb and _spec_of(a) == _spec_of(b) and a.get("status") == b.get("status")


def _qos_class(spec: dict) -> str:
    containers = spec.get("containers") or []
    reqs = [((c.get("resources") or {}).get("requests") or {}) for c in containers]
    lims = [((c.get("resources") or {}).get("limits") or {}) for c in containers]
    if not any(reqs) and not any(lims):
        return "BestEffort"
    if all(l.get("cpu") and l.get("memory") and r.get("cpu") == l.get("cpu") and r.get("memory") == l.get("memory")
           for r, l in zip(reqs, lims)):
        return "Guaranteed"
    return "Burstable"
