"""The newest copy of each object one of the operator's watches delivers, by namespace and name.

Every replica keeps one for the dataset PVCs and one for the loader Jobs (kopf ``on.event``
handlers without a leader condition, on the watches the dataset controller already has, filtered
by label by the API server), so the pod webhook answers from memory instead of reading them while
the API server waits (`webhooks`). What a watch has not delivered yet (an object made a moment ago,
or one the watch does not carry, such as a PVC that is no dataset) is absent, and the webhook reads
it. A copy may lag the API server by a watch event: the gate keeper reads the claims afresh before
it lets a pod go (`gate_keeper`). Only what the webhook reads is kept (`claim_part`, `job_part`): a
thousand Jobs' pod templates are not held twice."""

from __future__ import annotations

from typing import Callable, Mapping

_META = ("namespace", "name", "uid", "labels", "annotations", "ownerReferences")


def _meta(obj: Mapping) -> dict:
    meta = obj.get("metadata") or {}
    return {k: meta[k] for k in _META if k in meta}


def claim_part(pvc: Mapping) -> dict:
    """What the pod webhook reads of a dataset PVC: its metadata and its conditions."""
    return {"metadata": _meta(pvc), "status": {"conditions": (pvc.get("status") or {}).get("conditions") or []}}


def job_part(job: Mapping) -> dict:
    """What the pod webhook reads of a loader Job: its metadata (uid, labels, owner)."""
    return {"metadata": _meta(job)}


class Watched:
    def __init__(self, keep: Callable[[Mapping], dict] = dict) -> None:
        self._items: dict[tuple[str, str], dict] = {}
        self._keep = keep

    def event(self, event_type: str | None, obj: Mapping) -> None:
        meta = obj.get("metadata") or {}
        key = (meta.get("namespace") or "", meta.get("name") or "")
        if event_type == "DELETED":
            self._items.pop(key, None)
        else:
            self._items[key] = self._keep(obj)

    def get(self, namespace: str, name: str) -> dict | None:
        return self._items.get((namespace, name))

    def __len__(self) -> int:
        return len(self._items)
