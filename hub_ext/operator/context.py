"""What the operator's handlers share: its settings, its Kubernetes client, the leader elector,
which namespaces are projects, the metrics counters (`health.Metrics.inc`), and the dataset PVCs
and loader Jobs its watches delivered (`watched.Watched`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from hub_ext.kube.client import Kube
from hub_ext.operator.health import Metrics
from hub_ext.operator.leader import Leader
from hub_ext.operator.projects import ProjectNamespaces
from hub_ext.operator.rules.settings import OperatorSettings
from hub_ext.operator.watched import Watched, claim_part, job_part


@dataclass(frozen=True)
class OperatorContext:
    settings: OperatorSettings
    kube: Kube
    leader: Leader
    projects: ProjectNamespaces
    metrics: Metrics = field(default_factory=Metrics)
    claims: Watched = field(default_factory=lambda: Watched(claim_part))  # dataset PVCs
    loaders: Watched = field(default_factory=lambda: Watched(job_part))  # loader Jobs
