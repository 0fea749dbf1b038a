"""The newest copy of each object one of the operator's watches delivers, by namespace and name.

Every replica keeps one for the dataset PVCs and one for the loader Jobs (kopf ``on.event``
handlers without a leader condition, on the watches the dataset controller already has, filtered
by label by the API server), so the pod webhook answers from memory instead of reading them while
the API server waits (`webhooks`). What a watch has not delivered yet (an object made a moment ago,
or one the watch does not carry, such as a PVC that is no dataset) is absent, and the webhook reads
it. A copy may lag the API server by a watch event: the gate keeper reads the claims afresh before
it lets a pod go (`gate_keeper`)."""

from __future__ import annotations

from typing import Mapping


class Watched:
    def __init__(self) -> None:
        self._items: dict[tuple[str, str], dict] = {}

    def event(self, event_type: str | None, obj: Mapping) -> None:
        meta = obj.get("metadata") or {}
        key = (meta.get("namespace") or "", meta.get("name") or "")
        if event_type == "DELETED":
            self._items.pop(key, None)
        else:
            self._items[key] = dict(obj)

    def get(self, namespace: str, name: str) -> dict | None:
        return self._items.get((namespace, name))

    def __len__(self) -> int:
        return len(self._items)
