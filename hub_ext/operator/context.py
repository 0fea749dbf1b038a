"""What the operator's handlers share: its settings, its Kubernetes client, the leader elector and
the metrics counters (`health.Metrics.inc`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..kube import Kube
from .health import Metrics
from .leader import Leader
from .settings import OperatorSettings


@dataclass(frozen=True)
class OperatorContext:
    settings: OperatorSettings
    kube: Kube
    leader: Leader
    metrics: Metrics = field(default_factory=Metrics)
