"""The metric reports a sweep trial's trainer makes, read from its pod's log: pure (the log's text
in, a series out); `kube_sweeps.trial_metrics` reads the log.

A log read with ``timestamps=true`` gives, oldest first, the reports of ``hyperparameterMetricTag``
(the Experiment's ``objectiveMetricName``) in either form a trial's log carries them:

- a hypertune JSON line (``{"<tag>": "0.91", "global_step": "10", "timestamp": 1767...}``): what
  ``cloudml-hypertune`` writes to ``CLOUD_ML_HP_METRIC_FILE``, which the trial program
  (`katib_trial.WATCH_PY`) echoes to stdout line by line, or a trainer printed itself; ``trainingStep`` is
  its ``global_step`` (``step``, ``epoch``), else the report's ordinal (also when every report's
  step is ``0``: hypertune writes ``"0"`` for a trainer that gives none). The same line twice (a
  trainer that prints what it reports, echoed again) is one report (lines with a ``timestamp``);
- Katib's StdOut collector form ``<tag>=<number>`` (several per line allowed; ``global_step=``/
  ``step=``/``epoch=`` on the same line is the ``trainingStep``, else the report's ordinal). The
  tag is matched as the trial program (`katib_trial.WATCH_PY`) matches it: whole (a tag with spaces,
  ``Taxi Model Accuracy=0.9``, included), not as the end of a longer name (``val_auc``,
  ``my.auc`` are not ``auc``).

When the log has JSON reports of the tag, they are the series and ``<tag>=<number>`` lines are not
counted: the JSON lines are what Katib's File collector reads, and a trainer that both prints its
metric and reports it through hypertune would otherwise show every point twice.

``time`` is the JSON's timestamp, else the line's log timestamp (RFC 3339, nanoseconds allowed,
answered in UTC with ``Z``); a line without a log timestamp is read whole, without a ``time``.
"""

from __future__ import annotations

import datetime as dt
import json
import re

_NUMBER = r"([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[Ee][+-]?\d+)?)"
_STDOUT = re.compile(r"([\w|-]+)\s*=\s*" + _NUMBER)
_STEP_KEYS = ("global_step", "step", "epoch")
_STAMP = re.compile(r"(?P<time>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?P<fraction>\.\d+)?(?P<zone>Z|[+-]\d\d:\d\d)")


def series(text: str, tag: str) -> list[dict]:
    """The reports of `tag` in a log read with ``timestamps=true``, oldest first, as
    ``[{"trainingStep", "objectiveValue", "time"?}]`` (see the module docstring)."""
    reports: list[dict] = []  # JSON reports
    printed: list[dict] = []  # <tag>=<number> reports
    seen: set[str] = set()
    printed_tag = re.compile(r"(?<![\w./-])" + re.escape(tag) + r"\s*=\s*" + _NUMBER)
    for raw in text.splitlines():
        stamp, _, line = raw.partition(" ")
        when = _rfc3339(stamp)
        if when is None:
            when, line = None, raw
        body = line.strip()
        if body.startswith("{"):
            doc = _json(body)
            if doc is not None and tag in doc:
                key = json.dumps(doc, sort_keys=True) if "timestamp" in doc else None
                if key in seen:
                    continue
                if key:
                    seen.add(key)
                try:
                    value = float(doc[tag])
                except (TypeError, ValueError):
                    continue
                step = next((doc[k] for k in _STEP_KEYS if k in doc), len(reports) + 1)
                when = _epoch(doc.get("timestamp")) or when
                reports.append(_point(step, value, when))
                continue
        if reports:  # JSON reports win (module docstring): no need to parse the rest as StdOut
            continue
        values = [float(v) for v in printed_tag.findall(body)]
        if not values:
            continue
        pairs = _STDOUT.findall(body)
        step = next((v for k in _STEP_KEYS for key, v in pairs if key == k), None)
        for value in values:
            printed.append(_point(step if step is not None else len(printed) + 1, value, when))
    if len(reports) > 1 and all(r["trainingStep"] == "0" for r in reports):
        # cloudml-hypertune writes global_step "0" when the trainer gave none: the reports' ordinals
        reports = [{**r, "trainingStep": str(i)} for i, r in enumerate(reports, 1)]
    return reports or printed


def _json(body: str) -> dict | None:
    try:
        doc = json.loads(body)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def _epoch(ts) -> str | None:
    """A hypertune ``timestamp`` (seconds since the epoch) in RFC 3339, UTC with ``Z``; None if it is not one."""
    if not isinstance(ts, (int, float)) or isinstance(ts, bool):
        return None
    try:
        return dt.datetime.fromtimestamp(ts, dt.timezone.utc).isoformat().replace("+00:00", "Z")
    except (OverflowError, OSError, ValueError):
        return None


def _point(step, value: float, when: str | None) -> dict:
    step = str(int(float(step))) if isinstance(step, (int, float, str)) and _is_number(step) else str(step)
    point = {"trainingStep": step, "objectiveValue": value}
    if when:
        point["time"] = when
    return point


def _is_number(v) -> bool:
    try:
        float(v)
        return True
    except (TypeError, ValueError):
        return False


def _rfc3339(text: str) -> str | None:
    """A log line's timestamp (RFC 3339, nanoseconds allowed) in UTC with ``Z``; None if it is not one."""
    m = _STAMP.fullmatch(text)
    if not m:
        return None
    fraction = (m["fraction"] or "")[:7]
    when = dt.datetime.fromisoformat(m["time"] + fraction + ("+00:00" if m["zone"] == "Z" else m["zone"]))
    return when.astimezone(dt.timezone.utc).isoformat().replace("+00:00", "Z")
