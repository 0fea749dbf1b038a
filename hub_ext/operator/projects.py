"""Which namespaces are projects (the project selector, `OperatorSettings.project_selector`), as
the webhooks, the dataset controller and the gate keeper ask: one listing of them kept `TTL_S`,
and a namespace it does not know asked about at once (a listing of that name with the selector),
so a project the hub has just made counts from its first pod; a namespace that is not one is
remembered as such for `NOT_PROJECT_S` (the webhook configuration's namespaceSelector sends none).
`is_team` says whether a project is a team's (its owner annotation, ``group:<group>``, which the hub
writes and members cannot change), from the same listings."""

from __future__ import annotations

import time

from hub_ext.kube.client import Kube
from hub_ext.manifests.tenancy import OWNER_ANNOTATION

TTL_S = 30.0
NOT_PROJECT_S = 2.0


class ProjectNamespaces:
    def __init__(self, kube: Kube, selector: str):
        self.kube, self.selector = kube, selector
        self._read_at, self._names = 0.0, frozenset()
        self._owners: dict[str, str] = {}
        self._not: dict[str, float] = {}

    async def contains(self, namespace: str) -> bool:
        now = time.monotonic()
        if now - self._read_at > TTL_S:
            listing = await self.kube.list("/api/v1/namespaces", labelSelector=self.selector)
            self._names = frozenset(n["metadata"]["name"] for n in listing.get("items") or [])
            self._owners = {n["metadata"]["name"]: _owner(n) for n in listing.get("items") or []}
            self._read_at, self._not = now, {}
        if namespace in self._names:
            return True
        if now - self._not.get(namespace, -NOT_PROJECT_S) < NOT_PROJECT_S:
            return False
        listing = await self.kube.list("/api/v1/namespaces", labelSelector=self.selector,
                                       fieldSelector=f"metadata.name={namespace}")
        if listing.get("items"):
            self._names |= {namespace}
            self._owners[namespace] = _owner(listing["items"][0])
            return True
        self._not[namespace] = now
        return False

    async def is_team(self, namespace: str) -> bool:
        """Whether `namespace` is a team's project (owned by ``group:<group>``)."""
        return await self.contains(namespace) and self._owners.get(namespace, "").startswith("group:")


def _owner(namespace: dict) -> str:
    return ((namespace.get("metadata") or {}).get("annotations") or {}).get(OWNER_ANNOTATION, "")
