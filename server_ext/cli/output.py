"""What `kubectl ai-platform` prints, in gcloud's shapes. Pure: strings in, strings out; the caller
chooses stdout (results) or stderr (status messages). Times are shown in `tz` (None: this machine's
local zone, as gcloud's ``date(tz=LOCAL)``).

- `submitted(job_id, follow_up, scope)`: gcloud's "Job [X] submitted successfully." block (stderr);
  `job_status(job)`: what ``jobs submit training`` prints on stdout, gcloud's
  ``yaml(jobId,state,startTime,endTime)`` (keys sorted, absent ones left out).
- `describe(job, fmt)`: the whole Job, YAML (default, keys sorted, lists unindented as gcloud's YAML
  printer) or JSON (2-space indent, keys sorted); `summary(job)`: gcloud's ``--summarize`` box tables.
- `jobs_listing(jobs, fmt)`: ``table`` (gcloud's JOB_ID/STATUS/CREATED columns: two spaces
  between columns, no trailing spaces), ``json``, ``yaml`` (one document per job), or projections
  ``value(f1,f2)`` (tab-separated) and ``table(f1,f2:label=X)``. An unknown format raises
  `UserInputError("--format", …)`. `sort_jobs(jobs, keys)` applies ``--sort-by`` (``~`` descending).
- `log_record(...)`: one log line as gcloud's ``value(severity, timestamp, task_name, trial_id,
  message)``: tab-separated, time as gcloud's ``timestamp.date("%Y-%m-%d %H:%M:%S %z", tz=LOCAL)``
  (``2026-12-04 02:48:40 +0000`` where local time is UTC: an offset, not ``Z``; no fraction); an
  empty field for a line the runtime gave no time (as gcloud prints a record without one).
- `input_error(e)`: a refused input as gcloud words it, ``Invalid value for [FLAG]: message``
  (``PERMISSION_DENIED: message`` for a 403): the first mistake on the first line (the caller
  puts ``ERROR: (command)`` before it), then one line for each further mistake of a
  `UserInputErrors`, so every mistake of one command line is told at once.
- Times: `describe` prints the API's values unchanged (RFC 3339, UTC with ``Z``); the tables,
  `job_status` and `summary` show them as gcloud's ``date(tz=LOCAL)``: ``%Y-%m-%dT%H:%M:%S`` in
  `tz` (this machine's local zone by default), no offset.
"""

from __future__ import annotations

import datetime
import json
import re
from typing import Any, Iterable, Sequence

import yaml

from hub_ext.core.errors import UserInputError, errors_of
from server_ext.jobs.backend import FINAL

PROG = "kubectl ai-platform"
LIST_COLUMNS = (("jobId", "JOB_ID"), ("state", "STATUS"), ("createTime", "CREATED"))
EMPTY_LIST = "Listed 0 items."
_TIME_FIELDS = ("createTime", "startTime", "endTime")
_PROJECTION = re.compile(r"(?P<kind>value|table)\((?P<fields>.*)\)")


def input_error(e: UserInputError) -> str:
    return "\n".join(f"PERMISSION_DENIED: {one.message}" if one.status == 403 else
                     f"Invalid value for [{one.field}]: {one.message}" for one in errors_of(e))


def local_time(text: str | None, tz: datetime.tzinfo | None = None, fmt: str = "%Y-%m-%dT%H:%M:%S") -> str:
    """An RFC 3339 time as gcloud's ``date()`` shows it (unchanged when it is not a time)."""
    if not text:
        return ""
    try:
        when = datetime.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return str(text)
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)
    return when.astimezone(tz).strftime(fmt)


def label(field: str) -> str:
    """gcloud's column heading of a field: ``trainingInput.scaleTier`` → ``SCALE_TIER``."""
    last = field.split(".")[-1]
    return re.sub(r"(?<!^)(?=[A-Z])", "_", last).upper()


def lookup(doc: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(doc, dict) or part not in doc:
            return None
        doc = doc[part]
    return doc


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return str(value)


def to_yaml(doc: Any) -> str:
    return yaml.safe_dump(doc, default_flow_style=False, sort_keys=True, allow_unicode=True)


def to_json(doc: Any) -> str:
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


# ---------------------------------------------------------------- submit

def submitted(job_id: str, follow_up: bool = True, scope: str = "") -> str:
    """gcloud's status block after a submit; `scope` (e.g. ``" -n team"``) is added to the commands."""
    text = f"Job [{job_id}] submitted successfully.\n"
    if follow_up:
        text += ("Your job is still active. You may view the status of your job with the command\n\n"
                 f"  $ {PROG} jobs describe {job_id}{scope}\n\n"
                 "or continue streaming the logs with the command\n\n"
                 f"  $ {PROG} jobs stream-logs {job_id}{scope}\n")
    return text


def job_status(job: dict, tz: datetime.tzinfo | None = None) -> str:
    out: dict[str, str] = {}
    for key in ("jobId", "state", "startTime", "endTime"):
        if job.get(key):
            out[key] = local_time(job[key], tz) if key.endswith("Time") else job[key]
    return to_yaml(out)


# ---------------------------------------------------------------- describe

def describe(job: dict, fmt: str | None = None) -> str:
    fmt = (fmt or "yaml").strip().lower()
    if fmt == "yaml":
        return to_yaml(job)
    if fmt == "json":
        return to_json(job)
    raise UserInputError("--format", f"must be yaml or json, not {fmt!r}")


def box(title: str, columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A titled table drawn with box characters, as gcloud's ``table[box,title=…]``."""
    widths = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c) for i, c in enumerate(columns)]
    inner = sum(widths) + 3 * len(widths) - 1
    inner = max(inner, len(title) + 2)
    widths[-1] += inner - (sum(widths) + 3 * len(widths) - 1)

    def line(left: str, mid: str, right: str) -> str:
        return left + mid.join("─" * (w + 2) for w in widths) + right

    def row(cells: Sequence[str]) -> str:
        return "│" + "│".join(f" {c.ljust(w)} " for c, w in zip(cells, widths)) + "│"

    out = ["┌" + "─" * inner + "┐", "│" + title.center(inner) + "│", line("├", "┬", "┤"), row(columns)]
    out.append(line("├", "┼", "┤"))
    out += [row(r) for r in rows]
    out.append(line("└", "┴", "┘"))
    return "\n".join(out) + "\n"


def _table_of(doc: dict, title: str, fields: Sequence[tuple[str, bool]], tz: datetime.tzinfo | None) -> str:
    cols, cells = [], []
    for field, optional in fields:
        value = lookup(doc, field)
        if optional and value in (None, "", [], {}):
            continue
        cols.append(label(field))
        cells.append(local_time(value, tz) if field in _TIME_FIELDS else _text(value))
    return box(title, cols, [cells])


def completed_trials(job: dict) -> str | None:
    """A sweep's COMPLETED_TRIALS cell: ``"<completedTrialCount> of <maxTrials>"`` (finished trials
    of those the spec allows; the count alone when the spec names no maximum); None for a job
    that is not a sweep and has no count."""
    out = job.get("trainingOutput") or {}
    spec = lookup(job, "trainingInput.hyperparameters")
    sweep = isinstance(spec, dict) or bool(out.get("isHyperparameterTuningJob"))
    count = out.get("completedTrialCount")
    if not sweep and count in (None, ""):
        return None
    done = _text(count if count not in (None, "") else 0)
    most = spec.get("maxTrials") if isinstance(spec, dict) else None
    return f"{done} of {_text(most)}" if most not in (None, "") else done


def progress_cells(reported: dict | None, ended: bool) -> list[tuple[str, str]]:
    """The Training Output Summary's PROGRESS, REMAINING (not once the job ended) and METRICS cells
    of a job's ``trainingOutput.progress`` (`server_ext.jobs.progress`); none without one."""
    if not isinstance(reported, dict):
        return []
    out = []
    if reported.get("progressPercentage") is not None:
        out.append(("PROGRESS", f"{reported['progressPercentage']}%"))
    if reported.get("estimatedRemainingSeconds") is not None and not ended:
        out.append(("REMAINING", f"{reported['estimatedRemainingSeconds']}s"))
    if reported.get("metrics"):
        out.append(("METRICS", " ".join(f"{m['name']}={m['value']}" for m in reported["metrics"])))
    return out


def summary(job: dict, tz: datetime.tzinfo | None = None) -> str:
    """``describe --summarize``: Job Overview, Training Input Summary and (once there is one) Training
    Output Summary; a sweep's trials follow as gcloud's Training Output Trials table (TRIAL,
    OBJECTIVE_VALUE, STEP, HYPERPARAMETERS: one ``name=value`` line each, sorted by name), best
    first by the spec's goal; trials without a final metric last, in trialId order.

    gcloud labels ``completedTrialCount`` TRIALS, which reads as the number of trials while a sweep
    runs (``TRIALS 0`` above a table of 2 running trials); here it is COMPLETED_TRIALS, as
    `completed_trials` shows it (``0 of 4``)."""
    parts = [_table_of(job, "Job Overview", [("jobId", False), ("createTime", False), ("startTime", False),
                                             ("endTime", False), ("state", False)], tz)]
    t = {"trainingInput": job.get("trainingInput") or {}}
    parts.append(_table_of(t, "Training Input Summary", [
        ("trainingInput.runtimeVersion", True), ("trainingInput.region", False),
        ("trainingInput.scaleTier", True), ("trainingInput.pythonModule", False),
        ("trainingInput.parameterServerType", True), ("trainingInput.parameterServerCount", True),
        ("trainingInput.masterType", True), ("trainingInput.workerType", True),
        ("trainingInput.workerCount", True), ("trainingInput.jobDir", True)], tz))
    if job.get("trainingOutput"):
        out = job["trainingOutput"]
        cols, cells = [], []
        completed = completed_trials(job)
        if completed is not None:
            cols.append("COMPLETED_TRIALS")
            cells.append(completed)
        cols.append("ML_UNITS")
        cells.append(_text(out.get("consumedMLUnits")))
        for col, cell in progress_cells(out.get("progress"), job.get("state") in FINAL):
            cols.append(col)
            cells.append(cell)
        parts.append(box("Training Output Summary", cols, [cells]))
        trials = [t for t in out.get("trials") or [] if isinstance(t, dict)]
        if trials:
            goal = lookup(job, "trainingInput.hyperparameters.goal")
            sign = 1 if goal == "MINIMIZE" else -1

            def rank(trial: dict) -> tuple:
                value = lookup(trial, "finalMetric.objectiveValue")
                tid = str(trial.get("trialId", ""))
                order = (0, int(tid), "") if tid.isdigit() else (1, 0, tid)
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    return (0, sign * value, order)
                return (1, 0, order)

            rows = []
            for trial in sorted(trials, key=rank):
                hps = trial.get("hyperparameters") or {}
                lines = [f"{k}={_text(v)}" for k, v in sorted(hps.items())] or [""]
                first = [_text(trial.get("trialId")), _text(lookup(trial, "finalMetric.objectiveValue")),
                         _text(lookup(trial, "finalMetric.trainingStep"))]
                rows.append(first + [lines[0]])
                rows += [["", "", "", line] for line in lines[1:]]
            parts.append(box("Training Output Trials", ["TRIAL", "OBJECTIVE_VALUE", "STEP", "HYPERPARAMETERS"], rows))
    return "".join(parts)


# ---------------------------------------------------------------- list

def sort_jobs(jobs: Iterable[dict], keys: Sequence[str] | None) -> list[dict]:
    """``--sort-by``: fields in order of importance, ``~`` before a field sorts it descending;
    jobs without the field sort first (ascending)."""
    out = list(jobs)
    for key in reversed(list(keys or ())):
        descending = key.startswith("~")
        path = key.lstrip("~")
        out.sort(key=lambda j: (lookup(j, path) is not None, _text(lookup(j, path))), reverse=descending)
    return out


def table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """gcloud's plain table: headings, columns two spaces apart, no trailing spaces."""
    widths = [max([len(c), *(len(r[i]) for r in rows)]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip() for cells in [list(columns), *rows]]
    return "\n".join(lines) + "\n"


def _projection(spec: str) -> list[tuple[str, str]]:
    fields = []
    for item in filter(None, (part.strip() for part in spec.split(","))):
        path, _, rest = item.partition(":")
        m = re.fullmatch(r"label=(.+)", rest.strip()) if rest else None
        if rest and not m:
            raise UserInputError("--format", f"cannot read {item!r}: only FIELD or FIELD:label=HEADING")
        fields.append((path.strip(), m.group(1).strip("'\"") if m else label(path.strip())))
    if not fields:
        raise UserInputError("--format", "names no fields")
    return fields


def _cell(job: dict, path: str, tz: datetime.tzinfo | None) -> str:
    value = lookup(job, path)
    return local_time(value, tz) if path in _TIME_FIELDS else _text(value)


def jobs_listing(jobs: Sequence[dict], fmt: str | None = None, tz: datetime.tzinfo | None = None) -> str:
    """The jobs in `fmt`; empty text for no jobs in ``table``/``value`` form (the caller says
    `EMPTY_LIST` on stderr, as gcloud does)."""
    fmt = (fmt or "table").strip()
    if fmt.lower() == "json":
        return to_json(list(jobs))
    if fmt.lower() == "yaml":
        return "---\n".join(to_yaml(j) for j in jobs)
    if fmt.lower() == "table":
        fields = [(path, heading) for path, heading in LIST_COLUMNS]
        kind = "table"
    else:
        m = _PROJECTION.fullmatch(fmt)
        if not m:
            raise UserInputError("--format", f"must be table, json, yaml, value(FIELD,…) or table(FIELD,…), "
                                             f"not {fmt!r}")
        kind, fields = m["kind"], _projection(m["fields"])
    if not jobs:
        return ""
    rows = [[_cell(j, path, tz) for path, _ in fields] for j in jobs]
    if kind == "value":
        return "".join("\t".join(r).rstrip("\t") + "\n" for r in rows)
    return table([heading for _, heading in fields], rows)


# ---------------------------------------------------------------- logs

def log_record(task: str, text: str, when: datetime.datetime | None, severity: str = "INFO", trial: str = "",
               tz: datetime.tzinfo | None = None) -> str:
    """One line as gcloud's stream-logs prints it (no newline); `when` None: the line has no time."""
    stamp = when.astimezone(tz).strftime("%Y-%m-%d %H:%M:%S %z") if when is not None else ""
    return "\t".join((severity, stamp, task, trial, text))


def split_multiline(text: str, allow_multiline: bool = False) -> list[str]:
    """gcloud prints each line of a multi-line message as its own record unless
    ``--allow-multiline-logs``."""
    return [text] if allow_multiline else (text.splitlines() or [""])
