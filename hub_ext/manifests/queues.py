"""What a project's share of the accelerators is under Kueue (kueue.x-k8s.io/v1beta2). Pure.

Where Kueue is installed (the hub discovers it), every accelerator is held by queues rather than
by a ResourceQuota that refuses:

- `resource_flavors`: a cluster-wide ResourceFlavor per accelerator of the catalogue, named
  ``mlp-<accelerator>`` (`flavor_name`), whose node labels are the accelerator's node selector. An A100 and an
  H100 are two flavors even where both are ``nvidia.com/gpu`` (and a MIG slice of the single
  strategy, ``nvidia.com/gpu`` on ``<product>-MIG-<profile>`` nodes, a third), so the counts per
  type are held by the cluster whatever door a workload comes through.
- `cluster_queue`: the project's ClusterQueue ``mlp-<project>``, one resource group per accelerator
  resource whose flavors are the accelerators of that resource the project is entitled to, each
  with the project's limit as nominal quota (a flavor the project is not entitled to is not listed:
  a workload asking for it is never admitted). Only the project's own namespace may use it
  (``namespaceSelector``), so a LocalQueue made elsewhere cannot point at it. Team and personal
  projects with limits share the cohort `QueueSettings.cohort`: what one leaves idle another
  borrows (up to `QueueSettings.borrowing_limit` per flavor beyond its nominal quota; None: all
  that is idle) and reclaims by preempting borrowers (``reclaimWithinCohort: Any``); within a
  project a higher priority preempts a lower one. A project without limits (an administrator's
  personal one) is in no cohort: nothing caps it, and it neither lends nor borrows.
- `local_queue`: the LocalQueue ``default`` in the project's namespace, pointing at its
  ClusterQueue: Kueue queues a workload of that namespace without a queue name there.

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
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PREFIX = "mlp-"


@dataclass(frozen=True)
class QueueSettings:
    """How projects share accelerators under Kueue (PlatformSpawner traits ``queue_*``)."""
    cohort: str = "mlplatform"
    borrowing_limit: int | None = None  # per flavor beyond the nominal quota; None: whatever is idle
    fair_sharing_weight: str = "1"


_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def flavor_name(acc: Accelerator) -> str:
    """``mlp-<accelerator>`` (``mlp-1g.5gb``); a name that is no DNS subdomain is slugged with a hash."""
    return PREFIX + (acc.name if _SUBDOMAIN.fullmatch(acc.name) and len(acc.name) < 240
                     else safe_slug(acc.name, max_length=60))


def cluster_queue_name(project: Project) -> str:
    return PREFIX + project.name


def resource_flavors(accelerators: Mapping[str, Accelerator]) -> list[dict]:
    return [{"apiVersion": API_VERSION, "kind": "ResourceFlavor",
             "metadata": {"name": flavor_name(acc), "labels": dict(MANAGED_BY)},
             "spec": {"nodeLabels": acc.node_selector_dict()}}
            for _, acc in sorted(accelerators.items())]


def _resource_groups(project: Project, accelerators: Mapping[str, Accelerator],
                     settings: QueueSettings) -> list[dict]:
    by_resource: dict[str, list[dict]] = {}
    for name, acc in sorted(accelerators.items()):
        limit = 0 if project.limits is None else project.limits.get(name, 0)
        if project.limits is not None and limit <= 0:
            continue
        quota: dict = {"name": acc.resource, "nominalQuota": str(limit) if project.limits is not None else "1000000"}
        if project.limits is not None and settings.borrowing_limit is not None:
            quota["borrowingLimit"] = str(settings.borrowing_limit)
        by_resource.setdefault(acc.resource, []).append({"name": flavor_name(acc), "resources": [quota]})
    return [{"coveredResources": [resource], "flavors": flavors} for resource, flavors in sorted(by_resource.items())]


def cluster_queue(project: Project, accelerators: Mapping[str, Accelerator], settings: QueueSettings,
                  labels: Mapping[str, str]) -> dict:
    spec: dict = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": project.name}},
        "resourceGroups": _resource_groups(project, accelerators, settings),
        "queueingStrategy": "BestEffortFIFO",
        "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any",
                       "borrowWithinCohort": {"policy": "Never"}},
    }
    if project.limits is not None:
        spec["cohortName"] = settings.cohort
        spec["fairSharing"] = {"weight": settings.fair_sharing_weight}
    return {"apiVersion": API_VERSION, "kind": "ClusterQueue",
            "metadata": {"name": cluster_queue_name(project), "labels": dict(labels)}, "spec": spec}


def local_queue(project: Project, labels: Mapping[str, str]) -> dict:
    return {"apiVersion": API_VERSION, "kind": "LocalQueue",
            "metadata": {"name": LOCAL_QUEUE, "namespace": project.name, "labels": dict(labels)},
            "spec": {"clusterQueue": cluster_queue_name(project)}}


def queue_objects(project: Project, accelerators: Mapping[str, Accelerator], settings: QueueSettings,
                  labels: Mapping[str, str]) -> list[dict]:
    """The flavors, the project's ClusterQueue and its LocalQueue, in the order they must exist."""
    return [*resource_flavors(accelerators), cluster_queue(project, accelerators, settings, labels),
            local_queue(project, labels)]
