"""The observation of a Katib Trial that early stopping ended (pure): which Trials lack one, and the
observation Katib's trial controller would have written from the metrics its collector stored.

Katib v0.19.0 writes a Trial's ``status.observation`` only while the Trial's job exists, and deletes
the job once the Trial is complete, ``EarlyStopped`` included (kubeflow/katib#1377, open), so an
early-stopped Trial keeps no observation; its Experiment then asks the suggestion service for one
trial fewer for each such Trial (``ReconcileSuggestions``), and a sweep whose running trials are all
stopped early makes no trial again (docs/sweeps.md, "Early stopping"). The operator's
`hub_ext.operator.early_stopped` fills it in, from the metric logs of Katib's own DB manager,
computed as Katib's ``getMetrics`` computes it: per metric of the objective's ``metricStrategies``
the least and the greatest value that parse as numbers and the value of the latest time stamp (a
later log of the same time stamp wins), each ``"unavailable"`` where none was logged.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Iterable, Mapping

UNAVAILABLE = "unavailable"  # Katib's consts.UnavailableMetricValue
EARLY_STOPPED = "EarlyStopped"


def _condition(trial: Mapping, kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True"
               for c in ((trial.get("status") or {}).get("conditions") or []))


def objective(trial: Mapping) -> Mapping:
    return (trial.get("spec") or {}).get("objective") or {}


def lacks_observation(trial: Mapping) -> bool:
    """An early-stopped Trial whose objective metric has no value in its observation (Katib's
    ``IsObservationAvailable`` false), not being deleted."""
    if (trial.get("metadata") or {}).get("deletionTimestamp") or not _condition(trial, EARLY_STOPPED):
        return False
    name = objective(trial).get("objectiveMetricName")
    metrics = ((trial.get("status") or {}).get("observation") or {}).get("metrics") or []
    return not any(m.get("name") == name and m.get("latest", UNAVAILABLE) != UNAVAILABLE for m in metrics)


def metric_names(trial: Mapping) -> list[str]:
    """The metrics Katib reads a Trial's logs of: the objective's, then the additional ones."""
    spec = objective(trial)
    names = [spec.get("objectiveMetricName") or ""] + list(spec.get("additionalMetricNames") or [])
    return [n for i, n in enumerate(names) if n and n not in names[:i]]


def _number(value: str) -> float | None:
    try:
        number = float(value)
    except ValueError:
        return None
    return None if math.isnan(number) else number


def _time(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def observation(logs: Iterable[tuple[str, str, str]], trial: Mapping) -> dict:
    """``{"metrics": [{name, min, max, latest}]}`` from ``(time stamp, metric, value)`` logs, one entry
    per metric strategy of the Trial's objective (in their order). A time stamp that is not RFC 3339
    raises ValueError, as Katib's controller fails on one."""
    names = [s.get("name") for s in objective(trial).get("metricStrategies") or [] if s.get("name")]
    found: dict[str, dict] = {n: {"name": n, "min": UNAVAILABLE, "max": UNAVAILABLE, "latest": UNAVAILABLE}
                              for n in names}
    latest_at: dict[str, datetime] = {}
    for stamp, name, value in logs:
        metric = found.get(name)
        if metric is None:
            continue
        number = _number(value)
        if number is not None:
            if metric["min"] == UNAVAILABLE or number < float(metric["min"]):
                metric["min"] = value
            if metric["max"] == UNAVAILABLE or number > float(metric["max"]):
                metric["max"] = value
        at = _time(stamp)
        if name not in latest_at or at >= latest_at[name]:
            latest_at[name], metric["latest"] = at, value
    return {"metrics": [found[n] for n in names]}
