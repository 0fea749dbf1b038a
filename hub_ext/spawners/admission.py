"""A notebook pod's accelerator on the cluster, checked before anything is made (part `Admission`
of `PlatformSpawner`, one per start).

Guarantees, from the hub's watch caches (no API request but the quota's, when the quota refused):
- `check` refuses (`UserInputError`) a start whose project would exceed its accelerator limit
  (403), counting its pods and the starts in progress, or that cannot get its accelerator now
  (409) with ``when_full = "refuse"`` (or where the cluster has fewer than asked); with
  ``"wait"`` it sets `wait`, the progress sentence of what the pod waits for. A refusal names the
  user's own servers that hold the accelerator, if any. Where Kueue holds the accelerators
  (`queued`), nothing is refused but a count the whole cluster lacks: the pod waits in the
  project's queue and `wait` says so.
- Until the pod shows in the caches, the start's claim is in the hub's table
  (`KubeParts.claims`), so two starts never both count the same free slice; `release` takes it
  out (the start ended, either way), and a claim is never counted twice: a project's usage counts
  a pod once it exists, the free capacity once it is bound to a node.
- `quota_lags`: whether the project's pods, as the hub sees them, leave room under the
  ResourceQuota's limit (a quota refusal is then its accounting catching up: retried);
  `holders_note` names the user's servers that hold the accelerator for a real one.
"""

from __future__ import annotations

from typing import Mapping

from hub_ext.core.catalog import Accelerator
from hub_ext.core.errors import UserInputError
from hub_ext.kube.client import KubeError, path_of
from hub_ext.manifests.capacity import own_servers_note, quota_has_room, servers_holding
from hub_ext.manifests.progress_text import free_text, wanting
from hub_ext.manifests.tenancy import QUOTA
from hub_ext.spawners.kube_shared import KubeParts
from hub_ext.spawners.runtime import Plan


class Admission:
    """One start of `username`'s server whose pod is `pod_name`."""

    def __init__(self, shared: KubeParts, accelerators: Mapping[str, Accelerator], username: str, pod_name: str):
        self.shared, self.accelerators, self.username, self.pod_name = shared, accelerators, username, pod_name
        self.claim: tuple[str, str] | None = None  # this start's key in `shared.claims`
        self.wait: str | None = None  # "waiting for …" when the pod is to wait for a free accelerator

    async def check(self, plan: Plan, when_full: str, queued: bool = False) -> None:
        acc, count = plan.accelerator, plan.count
        if acc is None:
            return
        view = self.shared.view
        await view.start()
        limits = plan.project.limits
        used = view.usage(self.accelerators, plan.project.name)
        if queued:  # Kueue admits the pod when the project's queue has room: nothing is refused for want of it
            capacity = view.capacity(self.accelerators)
            if acc.name in capacity and capacity[acc.name][1] < count:
                raise UserInputError("profile", f"the cluster has {capacity[acc.name][1]} {acc.display_name} in all, "
                                                f"fewer than the {count} asked", 409)
            self.wait = f"queued for {wanting(acc, count)} in the project {plan.project.name!r}"
            return
        if limits is not None and used is not None:
            limit = limits.get(acc.name, 0)
            in_use = used.get(acc.name, 0) + self.claimed(acc.name, plan.project.name)
            if in_use + count > limit:
                note = own_servers_note(self.holders(acc, plan.project.name), in_use)
                raise UserInputError("profile", f"the project {plan.project.name!r} may use {limit} {acc.name} at "
                                                f"once and {in_use} are in use" + (f"; {note}" if note else ""), 403)
        capacity = view.capacity(self.accelerators)
        if acc.name in capacity:
            free, total = capacity[acc.name]
            free = max(free - self.claimed(acc.name), 0)
            if free < count and (when_full == "refuse" or total < count):
                note = own_servers_note(self.holders(acc), total) or "try again later or pick another profile"
                raise UserInputError("profile", f"no {acc.display_name} is free now ({free} of {total} free); {note}",
                                     409)
            if free < count:
                self.wait = f"waiting for {wanting(acc, count)}{free_text(acc, capacity)}"
        # until the pod shows in the caches, two spawns must not both count the same free slice
        self.claim = (plan.project.name, self.pod_name)
        self.shared.claims[self.claim] = (plan.project.name, acc.name, count)

    def release(self) -> None:
        if self.claim is not None:
            self.shared.claims.pop(self.claim, None)
        self.claim = None

    def holders(self, acc: Accelerator, project: str | None = None) -> dict[str, int]:
        """The user's other servers → how many of `acc` each holds (in `project`, if given)."""
        return servers_holding(self.shared.view.pods.items(), self.accelerators, self.username, acc, project,
                               but=self.pod_name)

    def claimed(self, accelerator: str, project: str | None = None) -> int:
        """What starts in progress claim of `accelerator` (in `project`, or anywhere) and the view
        does not count yet."""
        pods = {(p["metadata"].get("namespace"), p["metadata"].get("name")): p for p in self.shared.view.pods.items()}
        n = 0
        for key, (claim_project, name, count) in self.shared.claims.items():
            if name != accelerator or project not in (None, claim_project):
                continue
            pod = pods.get(key)
            if pod is None or (project is None and not (pod.get("spec") or {}).get("nodeName")):
                n += count
        return n

    async def quota_lags(self, plan: Plan | None, namespace: str) -> bool:
        """Whether the project's pods, as the hub sees them, leave room for the pod of `plan` under
        the ResourceQuota's limit (so a quota refusal is its accounting catching up)."""
        acc = plan.accelerator if plan is not None else None
        used = self.shared.view.usage(self.accelerators, namespace) if acc is not None else None
        if used is None:
            return False
        try:
            quota = await self.shared.kube.get(path_of("ResourceQuota", namespace, QUOTA))
        except KubeError:
            return False
        return quota_has_room(quota, used, self.accelerators, acc, plan.count)

    def holders_note(self, plan: Plan | None, namespace: str) -> str:
        """What the user's own servers in `namespace` hold of the accelerator of `plan`, in words
        (for a refusal by the quota); "" when nothing."""
        acc = plan.accelerator if plan is not None else None
        used = (self.shared.view.usage(self.accelerators, namespace) or {}) if acc else {}
        return own_servers_note(self.holders(acc, namespace), used.get(acc.name, 0)) if acc else ""

    def quota_refusal(self, plan: Plan | None, namespace: str) -> str:
        """What a user is told when the ResourceQuota refused the server's pod."""
        note = self.holders_note(plan, namespace)
        return (f"the project {namespace!r} has no accelerator quota left for this profile (its jobs and servers "
                f"use it all); {note or 'stop something or pick another profile'}")
