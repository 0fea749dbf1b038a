"""What the API server's controllers do on deletion, as a mixin of `Store`: ownerReference garbage
collection (dependents whose every owner is gone are deleted, also when created after their owner
went; `Orphan` strips the reference),
the namespace controller (a terminating namespace is drained, then removed), and unregistering a
CRD's kinds (and its objects) when the CRD goes. Runs synchronously inside the store's writes."""

from __future__ import annotations

from .patch import MERGE
from .resources import ResourceType, types_from_crd


class Lifecycle:
    def _dependents(self, owner: dict) -> list[tuple[ResourceType, dict]]:
        uid = owner["metadata"]["uid"]
        ns = owner["metadata"].get("namespace")
        out = []
        for rt in self._storage_types():
            for (ons, _), obj in list(self._bucket(rt).items()):
                if ns and ons != ns:
                    continue
                if any(ref.get("uid") == uid for ref in obj["metadata"].get("ownerReferences") or []):
                    out.append((rt, obj))
        return out

    def _storage_types(self) -> list[ResourceType]:
        seen, out = set(), []
        for rt in self.registry.all():
            if (rt.group, rt.plural) not in seen:
                seen.add((rt.group, rt.plural))
                out.append(rt)
        return out

    def _owner_exists(self, ref: dict, ns: str | None) -> bool:
        for rt in self._storage_types():
            if rt.kind != ref.get("kind"):
                continue
            found = self.find(rt, ns, ref.get("name", ""))
            if found and found["metadata"]["uid"] == ref.get("uid"):
                return True
        return False

    def _collect_if_dangling(self, rt: ResourceType, obj: dict) -> None:
        """An object created with owner references none of whose owners exists (its owner was
        deleted while a controller was still making it) is garbage: Kubernetes' collector deletes
        it. References to kinds this stand-in does not know are taken as live owners."""
        refs = obj["metadata"].get("ownerReferences") or []
        ns = obj["metadata"].get("namespace")
        known = {t.kind for t in self._storage_types()}
        if refs and all(r.get("kind") in known and not self._owner_exists(r, ns) for r in refs):
            self.delete(rt, ns, obj["metadata"]["name"], propagation="Background")

    def _delete_dependents(self, owner: dict, propagation: str) -> None:
        for rt, dep in self._dependents(owner):
            refs = [r for r in dep["metadata"].get("ownerReferences") or []
                    if r.get("uid") != owner["metadata"]["uid"]]
            if any(self._owner_exists(r, dep["metadata"].get("namespace")) for r in refs):
                continue
            if self.find(rt, dep["metadata"].get("namespace"), dep["metadata"]["name"]) is not None:
                self.delete(rt, dep["metadata"].get("namespace"), dep["metadata"]["name"], propagation=propagation)

    def _orphan_dependents(self, owner: dict) -> None:
        uid = owner["metadata"]["uid"]
        for rt, dep in self._dependents(owner):
            refs = [r for r in dep["metadata"]["ownerReferences"] if r.get("uid") != uid]
            body = {"metadata": {"ownerReferences": refs or None}}
            self.patch(rt, dep["metadata"].get("namespace"), dep["metadata"]["name"], body, MERGE)

    def _drain_namespace(self, ns: str) -> None:
        """The namespace controller: delete everything in a terminating namespace, then the namespace."""
        if ns in self._draining:
            return
        self._draining.add(ns)
        try:
            for rt in self._storage_types():
                if not rt.namespaced:
                    continue
                for obj in self.items(rt, ns):
                    name = obj["metadata"]["name"]
                    current = self.find(rt, ns, name)
                    if current is not None and not current["metadata"].get("deletionTimestamp"):
                        self.delete(rt, ns, name)
        finally:
            self._draining.discard(ns)
        if not any(self.items(rt, ns) for rt in self._storage_types() if rt.namespaced):
            nso = self.find(self.rt("", "v1", "namespaces"), None, ns)
            if nso is not None:
                self._remove(self.rt("", "v1", "namespaces"), nso)

    def _unregister_crd(self, crd: dict) -> None:
        spec = crd["spec"]
        for rt in types_from_crd(crd):
            for obj in list(self._bucket(rt).values()):
                self._remove(rt, obj)
            break
        self.registry.remove_group_plural(spec["group"], spec["names"]["plural"])
