"""The notebook widgets' models as plain data (see ``protocol.md``). Pure: no I/O, no widgets, no
clock (callers pass ``now``); every function returns new values and never mutates its input
(except `LogBuffer`, a small stateful container documented below).

Guarantees:

- `job_row(job)` is a function of the job JSON alone: rows change only when the job changes, never
  because time passes (ages and durations are computed where they are shown: `age`, `duration`).
- `diff(old, new)` is minimal and exact: `apply(old, diff(old, new)) == new`; a row present in both
  with equal fields is not mentioned; a changed row lists only its changed fields (a field that
  disappeared is sent as ``None``); ``None`` means "no change" (nothing to send).
- `LogBuffer` keeps at most ``cap`` lines (the newest) and a watermark (`sent`) of the last line
  the view has; `LogBuffer.take` says what to send next so that the view always holds a contiguous
  tail of the log ending at the newest line it was sent, within ``max_bytes`` per message.
- `trial_rows` flags exactly one trial ``best`` (the best objective for the sweep's goal, ties to
  the lowest trial number) or none when no trial has an objective; `sorted_trials` puts it first
  and trials without an objective last.
- `hp_axes(job)` gives one axis per hyperparameter of the sweep's spec, in the spec's order, for
  the plots of the objective against each hyperparameter: the searched range (so an axis shows
  where a trial lies in the whole space, not only among the trials so far), on a log scale where
  the spec searches on one (``UNIT_LOG_SCALE`` with a positive range), the categories of a
  ``CATEGORICAL`` one in the spec's order; a malformed parameter is left out, never guessed. A
  hyperparameter the trials have and the spec lacks (a native Katib Experiment's, a malformed
  one) follows, inferred from the values seen: numbers on a linear scale over them, anything else
  as sorted categories.
"""

from __future__ import annotations

import datetime
from collections import deque
from typing import Any, Iterable, Mapping

FINAL = ("SUCCEEDED", "FAILED", "CANCELLED")
LOG_CAP = 10_000
LOG_MAX_BYTES = 256 * 1024
MAX_LINE_CHARS = 4096  # longer lines are cut for display (the download has them whole)
ERROR_CHARS = 300
_MISSING = object()

Rows = dict[str, dict]


def epoch(text: Any) -> float | None:
    """An RFC 3339 time (``2026-01-01T12:00:00.5Z``) as epoch seconds; None for anything else."""
    if not isinstance(text, str) or not text:
        return None
    try:
        when = datetime.datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)
    return when.timestamp()


def accelerator(training_input: Mapping) -> str:
    """The master's accelerators as ``"TYPE xCOUNT"`` (``""`` for none)."""
    acc = (training_input.get("masterConfig") or {}).get("acceleratorConfig") or {}
    kind = acc.get("type")
    if not kind:
        return ""
    return f"{kind} x{acc.get('count', 1)}"


def machine(training_input: Mapping) -> str:
    tier = training_input.get("scaleTier") or "BASIC"
    return (training_input.get("masterType") or tier) if tier == "CUSTOM" else tier


def is_sweep(job: Mapping) -> bool:
    """Whether the job is a hyperparameter sweep (its ``trainingInput`` has ``hyperparameters``)."""
    return (job.get("trainingInput") or {}).get("hyperparameters") is not None


def job_row(job: Mapping) -> dict:
    """A JobsTable row (`protocol.md`, "Row") of an ml.v1 Job JSON."""
    ti = job.get("trainingInput") or {}
    hp = ti.get("hyperparameters")
    trials = None
    if hp is not None:
        out = job.get("trainingOutput") or {}
        trials = f"{int(out.get('completedTrialCount') or 0)}/{hp.get('maxTrials') or 1}"  # AI Platform's default
    return {"jobId": job.get("jobId", ""), "state": job.get("state", "STATE_UNSPECIFIED"),
            "kind": "job" if hp is None else "sweep", "labels": dict(job.get("labels") or {}),
            "createTime": epoch(job.get("createTime")), "startTime": epoch(job.get("startTime")),
            "endTime": epoch(job.get("endTime")), "accelerator": accelerator(ti), "machine": machine(ti),
            "trials": trials, "error": (job.get("errorMessage") or "")[:ERROR_CHARS],
            "waiting": (job.get("statusMessage") or "")[:ERROR_CHARS],
            "progress": (job.get("trainingOutput") or {}).get("progress")}


def tasks(job: Mapping) -> list[str]:
    """The names of the job's tasks whose logs can be read: a sweep's ``trial-N``; else
    ``master-replica-0`` then the workers, parameter servers and evaluators."""
    ti = job.get("trainingInput") or {}
    if ti.get("hyperparameters") is not None:
        return [f"trial-{t.get('trialId')}" for t in (job.get("trainingOutput") or {}).get("trials") or []]
    out = ["master-replica-0"]
    for role, count in (("worker", "workerCount"), ("ps", "parameterServerCount"), ("evaluator", "evaluatorCount")):
        out += [f"{role}-replica-{i}" for i in range(_step(ti.get(count)) or 0)]
    return out


def detail(job: Mapping) -> dict:
    """JobDetail's ``job`` trait: the row, the trainer's module and args, the tasks."""
    ti = job.get("trainingInput") or {}
    return {**job_row(job), "module": ti.get("pythonModule", ""), "args": list(ti.get("args") or []),
            "tasks": tasks(job)}


def rows(jobs: Iterable[Mapping]) -> Rows:
    return {r["jobId"]: r for r in map(job_row, jobs)}


def age(row: Mapping, now: float) -> float | None:
    created = row.get("createTime")
    return None if created is None else max(now - created, 0.0)


def duration(row: Mapping, now: float) -> float | None:
    started = row.get("startTime")
    if started is None:
        return None
    end = row.get("endTime")
    return max((end if end is not None else now) - started, 0.0)


def diff(old: Mapping[str, Mapping], new: Mapping[str, Mapping]) -> dict | None:
    """``{"added", "changed", "removed"}`` from `old` to `new` (keyed rows), or None when equal."""
    added = {k: dict(v) for k, v in new.items() if k not in old}
    removed = sorted(k for k in old if k not in new)
    changed: dict[str, dict] = {}
    for key, row in new.items():
        before = old.get(key)
        if before is None or before == row:
            continue
        fields = {f: v for f, v in row.items() if before.get(f, _MISSING) != v}
        fields.update({f: None for f in before if f not in row})
        if fields:
            changed[key] = fields
    if not (added or removed or changed):
        return None
    return {"added": added, "changed": changed, "removed": removed}


def apply(old: Mapping[str, Mapping], delta: Mapping | None) -> Rows:
    """`old` with `delta` applied (what the JS view does with a ``delta`` message)."""
    out = {k: dict(v) for k, v in old.items()}
    if not delta:
        return out
    for key in delta.get("removed", ()):
        out.pop(key, None)
    for key, fields in delta.get("changed", {}).items():
        row = out.setdefault(key, {})
        for f, v in fields.items():
            if v is None and f not in row:
                continue
            row[f] = v
    out.update({k: dict(v) for k, v in delta.get("added", {}).items()})
    return out


def visible(rows_: Mapping[str, Mapping], states: Iterable[str] = (), label: str = "") -> list[dict]:
    """The rows a JobsTable shows with the given filters (as JS filters them), newest first."""
    wanted = set(states)
    key, eq, value = label.partition("=")
    out = [r for r in rows_.values()
           if (not wanted or r["state"] in wanted)
           and (not key or (key in r["labels"] and (not eq or r["labels"][key] == value)))]
    return sorted(out, key=lambda r: (r.get("createTime") or 0.0, r["jobId"]), reverse=True)


def timeline(previous: list[dict], job: Mapping, seen_at: float) -> list[dict]:
    """`previous` (``[{"state", "time"}]``, oldest first) with the job's current state appended when
    it differs from the last one. Its time is the job's own (createTime for QUEUED, startTime for
    RUNNING, endTime for a final state) where known, else `seen_at`; a job first seen past QUEUED
    or RUNNING gets those entries from its times."""
    out = [dict(e) for e in previous]
    created, started, ended = (epoch(job.get(k)) for k in ("createTime", "startTime", "endTime"))
    state = job.get("state", "STATE_UNSPECIFIED")

    def add(name: str, when: float | None) -> None:
        if not out or out[-1]["state"] != name:
            out.append({"state": name, "time": when if when is not None else seen_at})

    if not out and created is not None and state != "QUEUED":
        add("QUEUED", created)
    if (state in FINAL or state == "CANCELLING") and started is not None \
            and all(e["state"] != "RUNNING" for e in out):
        add("RUNNING", started)
    own = {"QUEUED": created, "RUNNING": started}.get(state, ended if state in FINAL else None)
    add(state, own)
    return out


class LogBuffer:
    """The newest `cap` lines of one task's log, numbered as the server numbers them (``seq`` from 1),
    and `sent`: the number of the last line the view holds (0: the view holds nothing)."""

    def __init__(self, cap: int = LOG_CAP):
        self.cap = cap
        self._lines: deque[str] = deque(maxlen=cap)
        self.last = 0  # number of the newest line received
        self.sent = 0
        self._reset = True  # the view must be replaced (new view, new task, or a gap)

    def __len__(self) -> int:
        return len(self._lines)

    @property
    def first(self) -> int:
        """Number of the oldest line held (``last + 1`` when empty)."""
        return self.last - len(self._lines) + 1

    def lines(self) -> list[tuple[int, str]]:
        return [(self.first + i, t) for i, t in enumerate(self._lines)]

    def add(self, seq: int, text: str) -> None:
        """Line `seq`; one already held is ignored; after a gap only the lines from `seq` on are held."""
        if seq <= self.last:
            return
        if seq != self.last + 1:
            self._lines.clear()
            self._reset = True
        self._lines.append(text if len(text) <= MAX_LINE_CHARS else text[:MAX_LINE_CHARS] + " …")
        self.last = seq

    def view_lost(self) -> None:
        """The view must be replaced whole at the next `take` (it asked with ``ready``)."""
        self._reset = True

    def take(self, task: str, max_bytes: int = LOG_MAX_BYTES) -> dict | None:
        """The next message for the view (``log_append`` or ``log_reset``, `protocol.md`), or None when
        it is up to date; marks its lines as sent."""
        pending = self.last - self.sent
        if not self._reset and pending <= 0:
            return None
        if not self._reset and pending <= len(self._lines):
            texts = list(self._lines)[len(self._lines) - pending:]
            if sum(len(t) + 4 for t in texts) <= max_bytes:
                self.sent = self.last
                return {"type": "log_append", "task": task, "seq": self.last - pending + 1, "lines": texts,
                        "total": self.last}
        texts, size = [], 0
        for text in reversed(self._lines):
            size += len(text) + 4
            if size > max_bytes and texts:
                break
            texts.append(text)
        texts.reverse()
        self.sent, self._reset = self.last, False
        return {"type": "log_reset", "task": task, "seq": self.last - len(texts) + 1, "lines": texts,
                "total": self.last, "truncated": len(self._lines) - len(texts)}


# ---------------------------------------------------------------------------------------- sweeps

def goal(job: Mapping) -> str:
    hp = (job.get("trainingInput") or {}).get("hyperparameters") or {}
    return "MINIMIZE" if hp.get("goal") == "MINIMIZE" else "MAXIMIZE"


def metric_tag(job: Mapping) -> str:
    hp = (job.get("trainingInput") or {}).get("hyperparameters") or {}
    out = job.get("trainingOutput") or {}
    return out.get("hyperparameterMetricTag") or hp.get("hyperparameterMetricTag") or "objective"


def _number(value: Any) -> float | None:
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _step(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _trial_key(trial_id: str) -> tuple[int, str]:
    return (int(trial_id), "") if trial_id.isdigit() else (1 << 62, trial_id)


def trial_row(trial: Mapping) -> dict:
    final = trial.get("finalMetric") or {}
    return {"trialId": str(trial.get("trialId", "")), "state": trial.get("state", "STATE_UNSPECIFIED"),
            "hyperparameters": dict(trial.get("hyperparameters") or {}),
            "objective": _number(final.get("objectiveValue")), "step": _step(final.get("trainingStep")),
            "startTime": epoch(trial.get("startTime")), "endTime": epoch(trial.get("endTime")),
            "stoppedEarly": bool(trial.get("isTrialStoppedEarly")), "best": False}


def best_trial(trials: Mapping[str, Mapping], goal_: str) -> str:
    """The trialId with the best objective for `goal_` (ties: the lowest number), ``""`` if none."""
    scored = [(t["objective"], _trial_key(k), k) for k, t in trials.items() if t.get("objective") is not None]
    if not scored:
        return ""
    sign = -1.0 if goal_ == "MAXIMIZE" else 1.0
    return min(scored, key=lambda s: (sign * s[0], s[1]))[2]


def trial_rows(job: Mapping) -> Rows:
    """The sweep's trials, keyed by trialId, the best one flagged."""
    out = {r["trialId"]: r for r in map(trial_row, (job.get("trainingOutput") or {}).get("trials") or [])}
    best = best_trial(out, goal(job))
    if best:
        out[best]["best"] = True
    return out


def sorted_trials(trials: Mapping[str, Mapping], goal_: str) -> list[dict]:
    """Best objective first for `goal_`; trials without one last, by trial number."""
    sign = -1.0 if goal_ == "MAXIMIZE" else 1.0
    return sorted(trials.values(), key=lambda t: (t.get("objective") is None,
                                                  sign * (t.get("objective") or 0.0), _trial_key(t["trialId"])))


def series(metrics: Iterable[Mapping]) -> list[list]:
    """A trial's metric reports (`trial_metrics`) as ``[[step, value], …]``; a report without a step
    takes its 1-based position; reports without a value are skipped."""
    out = []
    for i, m in enumerate(metrics, 1):
        value = _number(m.get("objectiveValue"))
        if value is not None:
            step = _step(m.get("trainingStep"))
            out.append([step if step is not None else i, value])
    return out


def _axis(param: Any) -> dict | None:
    if not isinstance(param, Mapping) or not isinstance(param.get("parameterName"), str):
        return None
    name, kind = param["parameterName"], param.get("type")
    if kind == "CATEGORICAL":
        values = param.get("categoricalValues")
        if not isinstance(values, list) or not values:
            return None
        return {"name": name, "scale": "category", "categories": [str(v) for v in values]}
    if kind in ("DOUBLE", "INTEGER"):
        low, high = _number(param.get("minValue")), _number(param.get("maxValue"))
    elif kind == "DISCRETE":
        values = [v for v in map(_number, param.get("discreteValues") or []) if v is not None]
        low, high = (min(values), max(values)) if values else (None, None)
    else:
        return None
    if low is None or high is None or low > high:
        return None
    log = param.get("scaleType") == "UNIT_LOG_SCALE" and low > 0
    return {"name": name, "scale": "log" if log else "linear", "min": low, "max": high}


def _inferred(name: str, values: list[Any]) -> dict:
    numbers = [_number(v) for v in values]
    if values and all(n is not None for n in numbers):
        return {"name": name, "scale": "linear", "min": min(numbers), "max": max(numbers)}
    return {"name": name, "scale": "category", "categories": sorted({str(v) for v in values})}


def hp_axes(job: Mapping, trials: Mapping[str, Mapping] | None = None) -> list[dict]:
    """The plot axes of the sweep's hyperparameters: ``{"name", "scale": "linear" | "log", "min",
    "max"}`` or ``{"name", "scale": "category", "categories": [...]}``, the spec's in its order,
    then those only `trials` (`trial_rows`) have, by name."""
    hp = (job.get("trainingInput") or {}).get("hyperparameters") or {}
    params = hp.get("params") if isinstance(hp, Mapping) else None
    out: list[dict] = []
    for axis in filter(None, map(_axis, params if isinstance(params, list) else [])):
        if all(a["name"] != axis["name"] for a in out):
            out.append(axis)
    values: dict[str, list] = {}
    for row in (trials or {}).values():
        for name, value in (row.get("hyperparameters") or {}).items():
            if value is not None and value != "":
                values.setdefault(str(name), []).append(value)
    known = {a["name"] for a in out}
    return out + [_inferred(name, values[name]) for name in sorted(values) if name not in known]
