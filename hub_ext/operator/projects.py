"""Which namespaces are projects (the project selector, `OperatorSettings.project_selector`), as
the webhooks and the dataset controller both ask: one listing kept `TTL_S`, listed again at most
every `UNKNOWN_S` for a namespace it does not know (a project the hub has just made)."""

from __future__ import annotations

import time

from ..kube import Kube

TTL_S = 30.0
UNKNOWN_S = 2.0


class ProjectNamespaces:
    def __init__(self, kube: Kube, selector: str):
        self.kube, self.selector = kube, selector
        self._read_at, self._names = 0.0, frozenset()

    async def contains(self, namespace: str) -> bool:
        age = time.monotonic() - self._read_at
        if age > TTL_S or (namespace not in self._names and age > UNKNOWN_S):
            listing = await self.kube.list("/api/v1/namespaces", labelSelector=self.selector)
            self._names = frozenset(n["metadata"]["name"] for n in listing.get("items") or [])
            self._read_at = time.monotonic()
        return namespace in self._names
