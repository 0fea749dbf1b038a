"""A running job's training progress, as the job's ``trainingOutput.progress`` (the platform's
extension of ``ml.v1``; `docs/jobs.md`, "Progress"). Pure.

Where it comes from: the trainer reports it (the example trainer's ``ProgressReporter``, or any
program that does the same):

- on Kubeflow Trainer v2, to Trainer's status server (the ``TrainJobStatus`` feature: the pod's
  ``KUBEFLOW_TRAINER_SERVER_URL``), which writes the TrainJob's ``status.trainerStatus``
  (read by `server_ext.jobs.kube.status`);
- everywhere, as one line of the primary replica's log: `PREFIX` and a JSON object with Trainer's
  field names, ``progressPercentage``, ``estimatedRemainingSeconds`` and ``metrics`` (a list of
  ``{"name", "value"}``, values as strings) — `from_log_line`. The line's metric values are JSON
  (``"rmse": "0.11"``), not ``name=value``, so Katib's stdout collector does not read them twice.

What `progress` (either source) guarantees: ``progressPercentage`` an int from 0 to 100 and
``estimatedRemainingSeconds`` an int ≥ 0, each left out when unknown or not a number; ``metrics``
at most `MAX_METRICS` of ``{"name": str, "value": str}`` (names of 1 to 64 characters, values of
at most 64, as Trainer's API allows), in the reporter's order; ``updateTime`` RFC 3339 UTC when
known. Anything else is dropped; a report with none of the three fields is no progress (None).
"""

from __future__ import annotations

import json
import math
from typing import Any, Iterable, Mapping

PREFIX = "mlplatform progress: "
MAX_METRICS = 16
_MAX_TEXT = 64


def _whole(value: Any, high: int | None = None) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    if not math.isfinite(number) or number < 0:
        return None
    whole = int(number)
    return min(whole, high) if high is not None else whole


def _metrics(items: Any) -> list[dict]:
    out = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, Mapping):
            continue
        name, value = item.get("name"), item.get("value")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = repr(value) if isinstance(value, float) else str(value)
        if isinstance(name, str) and 0 < len(name) <= _MAX_TEXT and isinstance(value, str) \
                and 0 < len(value) <= _MAX_TEXT:
            out.append({"name": name, "value": value})
    return out[:MAX_METRICS]


def progress(report: Any, update_time: str | None = None) -> dict | None:
    """The ``trainingOutput.progress`` of one report in Trainer's shape (see the module docstring)."""
    if not isinstance(report, Mapping):
        return None
    out: dict[str, Any] = {}
    percent = _whole(report.get("progressPercentage"), 100)
    if percent is not None:
        out["progressPercentage"] = percent
    remaining = _whole(report.get("estimatedRemainingSeconds"))
    if remaining is not None:
        out["estimatedRemainingSeconds"] = remaining
    metrics = _metrics(report.get("metrics"))
    if metrics:
        out["metrics"] = metrics
    if not out:
        return None
    if update_time:
        out["updateTime"] = update_time
    return out


def from_log_line(text: str, time: str | None = None) -> dict | None:
    """The progress a log line reports (`PREFIX` and a JSON object), or None; `time` is the line's."""
    at = text.find(PREFIX)
    if at < 0:
        return None
    try:
        report = json.loads(text[at + len(PREFIX):])
    except ValueError:
        return None
    return progress(report, time)


def latest(lines: Iterable[tuple[str, str | None]]) -> dict | None:
    """The last progress among (text, time) log lines, or None."""
    found = None
    for text, time in lines:
        found = from_log_line(text, time) or found
    return found
