"""What every `PlatformSpawner` of one hub shares, per API server and mount settings (`KubeParts`,
kept by the hub's `PlatformService`).

Guarantees: one API client, one set of watch caches (nodes and pods: capacity and usage; the
projects' Secrets and claims: their files), one `Provisioner` (its cache of projects made) and one
table of the accelerators that starts in progress claim, whatever number of spawners ask; `stop`
stops the caches (the service makes the parts afresh on next use). `provision` makes a user's
projects as they should be (`hub_ext.manifests.tenancy.project_objects`, applied by the
`Provisioner`: all or nothing, and once per hub for one configuration, project, members and
tenancy settings: later calls make no request) and takes a former member's RoleBinding and
ServiceAccount out of the team projects they left. `queueing` says whether Kueue holds the
accelerators (`TenancySettings.queueing`: "auto" asks the API server whether it serves
``kueue.x-k8s.io/v1beta2``; found is kept, not found asked again after `KUEUE_RECHECK` seconds);
`queue_ahead` counts the projects' waiting Workloads per accelerator where it does (None where it
does not, or is required and missing: the start says so). With a callable ``profile_list``, a team
project's published catalogue (ConfigMap ``mlplatform-catalog``) has the accelerators and limits the
jobs API plans with, no profiles: members' lists differ, and whoever provisions first must not decide
(each member's own are in the platform API's). A personal project's has its owner's latest result.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time

from hub_ext.core.catalog import Accelerator
from hub_ext.core.entitlements import Project
from hub_ext.core.errors import UpstreamError
from hub_ext.kube.client import KUEUE_API, Kube, path_of
from hub_ext.kube.cluster import ClusterView, ProjectResources
from hub_ext.kube.provision import Provisioner
from hub_ext.manifests.mounts import MountSettings
from hub_ext.manifests.tenancy import TenancySettings, member_binding_name, project_objects
from hub_ext.spawners.queue_watch import waiting_counts
from hub_ext.spawners.runtime import Runtime

KUEUE_RECHECK = 60.0


class KubeParts:
    """The API client, the watch caches, the provisioner, the projects' Secrets and claims, and
    the accelerators claimed by starts in progress (`hub_ext.spawners.admission`)."""

    def __init__(self, kube: Kube, settings: MountSettings):
        self.kube = kube
        self.provisioner = Provisioner(kube)
        self.view = ClusterView(kube)
        self.resources = ProjectResources(kube, settings)
        # (namespace, pod) of each start in progress → (project, accelerator, count) it claims
        self.claims: dict[tuple[str, str], tuple[str, str, int]] = {}
        self._kueue_checked: tuple[bool, float] | None = None  # (found, when)

    async def stop(self) -> None:
        await asyncio.gather(self.view.stop(), self.resources.stop())

    async def kueue_found(self) -> bool:
        if self._kueue_checked and (self._kueue_checked[0] or time.monotonic() - self._kueue_checked[1] < KUEUE_RECHECK):
            return self._kueue_checked[0]
        found = await self.kube.get(KUEUE_API) is not None
        self._kueue_checked = (found, time.monotonic())
        return found

    async def queueing(self, tenancy: TenancySettings) -> TenancySettings:
        """`tenancy` with `kueue` set where Kueue holds the accelerators."""
        if tenancy.queueing == "off":
            return tenancy
        found = await self.kueue_found()
        if not found and tenancy.queueing == "kueue":
            raise UpstreamError("queue the server", "Kueue (kueue.x-k8s.io/v1beta2) is not installed in the cluster, "
                                "and the platform is configured to queue every workload with it: ask an administrator")
        return dataclasses.replace(tenancy, kueue=found)

    async def queue_ahead(self, tenancy: TenancySettings, projects: list[str],
                          accelerators: dict[str, Accelerator]) -> dict[tuple[str, str], int] | None:
        """(project, accelerator) → the project's workloads waiting for it (`queue_watch.waiting_counts`)."""
        try:
            if not (await self.queueing(tenancy)).kueue:
                return None
        except UpstreamError:
            return None
        return await waiting_counts(self.kube, projects, accelerators)

    async def provision(self, rt: Runtime, projects: list[Project], username: str, members: list[tuple[str, str]],
                        tenancy: TenancySettings) -> None:
        """`username`'s `projects` as they should be, with `members` (hub user, Kubernetes identity or
        "") bound; the user's RoleBinding and ServiceAccount out of every other team project (`tenancy`: as `queueing` returns it)."""
        for p in projects:
            shown = rt.profiles if rt.dynamic is None or p.personal else ()
            config = id(rt) if rt.dynamic is None else (id(rt.dynamic), repr(rt.accelerators), repr(shown))
            key = (config, repr(p), tuple(members), repr(tenancy))
            await self.provisioner.ensure(
                key, lambda p=p, shown=shown: project_objects(p, rt.accelerators, shown, members, tenancy),
                f"prepare the project {p.name!r}")
        mine = {p.name for p in projects}
        gone = [path_of(kind, team, member_binding_name(username)) for team in rt.entitlements.teams
                if team not in mine for kind in ("RoleBinding", "ServiceAccount")]
        await self.provisioner.remove(gone, f"remove {username}'s access to former team projects")
