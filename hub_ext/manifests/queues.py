"""What a project's share of the accelerators is under Kueue (kueue.x-k8s.io/v1beta2). Pure.

Where Kueue is installed (the hub discovers it), every accelerator is held by queues rather than
by a ResourceQuota that refuses:

- `resource_flavors`: a cluster-wide ResourceFlavor per accelerator of the catalogue, named
  ``mlp-<accelerator>`` (`flavor_name`), whose node labels are the accelerator's node selector. An A100 and an
  H100 are two flavors even where both are ``nvidia.com/gpu`` (and a MIG slice of the single
  strategy, ``nvidia.com/gpu`` on ``<product>-MIG-<profile>`` nodes, a third), so the counts per
  type are held by the cluster whatever door a workload comes through.
- `project_cohort`: the project's Cohort ``mlp-<project>``, a child of the cohort
  `QueueSettings.cohort` (where projects lend and borrow); it limits how much the project borrows
  beyond its entitlement (`QueueSettings.borrowing_limit` per flavor; None: whatever is idle).
- `servers_queue`: the project's ClusterQueue for notebook servers, ``mlp-<project>-servers``,
  holding the project's limits as nominal quota (one resource group per accelerator resource, the
  flavors the project is entitled to; a flavor it is not entitled to is not listed: never
  admitted). It never borrows (``borrowingLimit: 0``), so a server runs on its project's own share
  and no reclaim ever preempts it; and it preempts nothing: a server that does not fit waits until
  the project's share has room (a job on it ends; Kueue then admits waiting servers, which do not
  borrow, before jobs that would). What it leaves idle it lends to the project's jobs and, through
  the cohorts, to other projects. (Kueue cannot tell a server's reclaim to spare its own project's
  jobs while preempting another's: both would be candidates, so servers reclaim nothing.)
- `cluster_queue`: the project's ClusterQueue for jobs, sweeps' trials and loaders, ``mlp-<project>``:
  nominal quota 0 of the same flavors, so everything it runs is the project's own share lent by the
  servers' queue or another project's idle one (Kueue's hierarchical cohorts: a job within its
  project's share takes it back from a borrower of another project, ``reclaimWithinCohort: Any``;
  within the project a higher priority preempts a lower one).
  Both queues serve the project's own namespace alone (``namespaceSelector``), so a LocalQueue made
  elsewhere cannot point at them. A project without limits (an administrator's personal one) has
  one queue with room for anything, in no cohort: it neither lends nor borrows.
- `local_queues`: the LocalQueue ``default`` in the project's namespace, pointing at the jobs'
  ClusterQueue (Kueue queues a workload of that namespace without a queue name there), and
  ``servers``, pointing at the servers' (the spawner labels a notebook pod with it).

CPU, memory, storage and object counts stay with the project's ResourceQuota
(`hub_ext.manifests.tenancy`); the ResourceQuota no longer counts accelerators where Kueue holds
them (the Kueue configuration of ``helm-values/kueue.yaml`` leaves CPU and memory out of
workloads' resources), so the two never count the same thing.
"""

from __future__ import annotations

import re

from dataclasses import dataclass
from typing import Mapping

from hub_ext.core.catalog import Accelerator
from hub_ext.core.credentials import MANAGED_BY
from hub_ext.core.entitlements import Project
from hub_ext.core.slugs import safe_slug

API_VERSION = "kueue.x-k8s.io/v1beta2"
LOCAL_QUEUE = "default"  # Kueue's LocalQueue defaulting: a workload without a queue name goes here
SERVERS_QUEUE = "servers"  # the LocalQueue of notebook servers
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PREFIX = "mlp-"
UNLIMITED = "1000000"


@dataclass(frozen=True)
class QueueSettings:
    """How projects share accelerators under Kueue (PlatformSpawner traits ``queue_*``)."""
    cohort: str = "mlplatform"
    borrowing_limit: int | None = None  # per flavor beyond the project's limits; None: whatever is idle
    fair_sharing_weight: str = "1"  # each project Cohort's; Kueue reads it only with fairSharing enabled in its
    # configuration, which helm-values/kueue.yaml leaves off (classical preemption: see docs/queueing.md)


_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def flavor_name(acc: Accelerator) -> str:
    """``mlp-<accelerator>`` (``mlp-1g.5gb``); a name that is no DNS subdomain is slugged with a hash."""
    return PREFIX + (acc.name if _SUBDOMAIN.fullmatch(acc.name) and len(acc.name) < 240
                     else safe_slug(acc.name, max_length=60))


def cluster_queue_name(project: Project) -> str:
    """The jobs' ClusterQueue (and the project's Cohort: another kind, the same name)."""
    return PREFIX + project.name


def servers_queue_name(project: Project) -> str:
    return f"{PREFIX}{project.name}-servers"


def resource_flavors(accelerators: Mapping[str, Accelerator]) -> list[dict]:
    return [{"apiVersion": API_VERSION, "kind": "ResourceFlavor",
             "metadata": {"name": flavor_name(acc), "labels": dict(MANAGED_BY)},
             "spec": {"nodeLabels": acc.node_selector_dict()}}
            for _, acc in sorted(accelerators.items())]


def _resource_groups(project: Project, accelerators: Mapping[str, Accelerator], quota) -> list[dict]:
    """A resource group per accelerator resource, the flavors the project is entitled to;
    `quota(limit)`: the resource's quota fields for the project's limit of that flavor."""
    by_resource: dict[str, list[dict]] = {}
    for name, acc in sorted(accelerators.items()):
        limit = None if project.limits is None else project.limits.get(name, 0)
        if limit is not None and limit <= 0:
            continue
        by_resource.setdefault(acc.resource, []).append(
            {"name": flavor_name(acc), "resources": [{"name": acc.resource, **quota(limit)}]})
    return [{"coveredResources": [resource], "flavors": flavors} for resource, flavors in sorted(by_resource.items())]


def _queue(name: str, project: Project, groups: list[dict], preemption: dict, labels: Mapping[str, str]) -> dict:
    spec: dict = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": project.name}},
                  "resourceGroups": groups, "queueingStrategy": "BestEffortFIFO",
                  "preemption": {**preemption, "borrowWithinCohort": {"policy": "Never"}}}
    if project.limits is not None:
        spec["cohortName"] = cluster_queue_name(project)
    return {"apiVersion": API_VERSION, "kind": "ClusterQueue", "metadata": {"name": name, "labels": dict(labels)},
            "spec": spec}


def project_cohort(project: Project, accelerators: Mapping[str, Accelerator], settings: QueueSettings,
                   labels: Mapping[str, str]) -> dict:
    spec: dict = {"parentName": settings.cohort, "fairSharing": {"weight": settings.fair_sharing_weight}}
    if settings.borrowing_limit is not None:
        spec["resourceGroups"] = _resource_groups(project, accelerators, lambda _: {
            "nominalQuota": "0", "borrowingLimit": str(settings.borrowing_limit)})
    return {"apiVersion": API_VERSION, "kind": "Cohort",
            "metadata": {"name": cluster_queue_name(project), "labels": dict(labels)}, "spec": spec}


def servers_queue(project: Project, accelerators: Mapping[str, Accelerator], labels: Mapping[str, str]) -> dict:
    groups = _resource_groups(project, accelerators, lambda limit: {"nominalQuota": str(limit), "borrowingLimit": "0"})
    return _queue(servers_queue_name(project), project, groups,
                  {"withinClusterQueue": "Never", "reclaimWithinCohort": "Never"}, labels)


def cluster_queue(project: Project, accelerators: Mapping[str, Accelerator], labels: Mapping[str, str]) -> dict:
    groups = _resource_groups(project, accelerators,
                              lambda limit: {"nominalQuota": UNLIMITED if limit is None else "0"})
    return _queue(cluster_queue_name(project), project, groups,
                  {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}, labels)


def local_queues(project: Project, labels: Mapping[str, str]) -> list[dict]:
    servers = cluster_queue_name(project) if project.limits is None else servers_queue_name(project)
    return [{"apiVersion": API_VERSION, "kind": "LocalQueue",
             "metadata": {"name": name, "namespace": project.name, "labels": dict(labels)},
             "spec": {"clusterQueue": target}}
            for name, target in ((LOCAL_QUEUE, cluster_queue_name(project)), (SERVERS_QUEUE, servers))]


def queue_objects(project: Project, accelerators: Mapping[str, Accelerator], settings: QueueSettings,
                  labels: Mapping[str, str]) -> list[dict]:
    """The flavors, the project's Cohort and ClusterQueues and its LocalQueues, in the order they must exist."""
    if project.limits is None:
        return [*resource_flavors(accelerators), cluster_queue(project, accelerators, labels),
                *local_queues(project, labels)]
    return [*resource_flavors(accelerators), project_cohort(project, accelerators, settings, labels),
            servers_queue(project, accelerators, labels), cluster_queue(project, accelerators, labels),
            *local_queues(project, labels)]
