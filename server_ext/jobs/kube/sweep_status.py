"""A sweep's Katib ``Experiment`` and its ``Trial``s (as `server_ext.jobs.kube.katib.experiment_manifest`
made it and Katib updated them) back to the ``ml.v1`` Job JSON. Pure: `sweep_json(experiment,
trials)` reads the objects alone and never changes them.

Guarantees of `sweep_json`:

- ``jobId``, ``labels`` and ``trainingInput`` are those submitted (`status.submitted`); times are
  RFC 3339 UTC: ``createTime`` (creationTimestamp), ``startTime`` (``status.startTime``),
  ``endTime`` (``status.completionTime``, else the final condition's time) once the sweep ended;
  ``etag`` is the base64 of the resourceVersion;
- ``state`` from the Experiment's conditions with status ``"True"`` (`STATE_RULES` order):

  ========================================================  ==========
  ``Succeeded`` (ExperimentMaxTrialsReached, ExperimentGoal  SUCCEEDED
  Reached, …) before any cancel request
  ``Succeeded`` or ``Failed`` after a cancel request          CANCELLED
  ``Failed`` (max failed count reached: ExperimentFailed)    FAILED, ``errorMessage`` = its message
  deletionTimestamp set                                       CANCELLING
  cancel requested, no trial still active                     CANCELLED
  cancel requested                                            CANCELLING
  ``Running`` or ``Restarting``                               RUNNING
  ``Created``                                                 PREPARING
  nothing                                                     QUEUED
  ========================================================  ==========

- ``trainingOutput``: ``isHyperparameterTuningJob`` true, ``hyperparameterMetricTag`` (the user's
  tag as submitted, also where Katib collects it under another name: `katib_trial.metric_name`),
  ``completedTrialCount`` (trials that SUCCEEDED, early-stopped ones included, as AI Platform
  counted them), and ``trials[]`` ordered by creation (creationTimestamp, then name) with
  ``trialId`` "1", "2", … in that order; each with ``hyperparameters`` (strings, as the trainer got
  them: `katib_params.trial_hyperparameters`), ``state`` (`trial_state`), ``isTrialStoppedEarly`` when
  Katib stopped it early, ``startTime``/``endTime``, and ``finalMetric`` once the objective has a
  numeric value: ``objectiveValue`` = the ``latest`` of the Experiment's ``objectiveMetricName`` in
  ``status.observation.metrics``,
  ``trainingStep`` when the caller knows it (`final_steps`, by trial name);
- `trial_ids(trials)` gives the same trial name → trialId mapping the backend uses for task names
  (``trial-<id>``);
- the output validates against ``GoogleCloudMlV1__Job`` of Google's discovery document.
"""

from __future__ import annotations

import base64
import datetime
import math
from typing import Any, Mapping, Sequence

from server_ext.jobs.hptuning import Spec
from server_ext.jobs.kube import katib as katib
from server_ext.jobs.kube import katib_params, katib_trial
from server_ext.jobs.kube.kubeflow import CANCEL_ANNOTATION
from server_ext.jobs.kube.status import FINAL, rfc3339, submitted, true_conditions

# Katib Trial condition → AI Platform trial state, first match wins.
TRIAL_STATES = (("EarlyStopped", "SUCCEEDED"), ("Succeeded", "SUCCEEDED"), ("MetricsUnavailable", "FAILED"),
                ("Failed", "FAILED"), ("Killed", "CANCELLED"), ("Running", "RUNNING"), ("Created", "PREPARING"))
_TRIAL_FINAL = ("EarlyStopped", "Succeeded", "MetricsUnavailable", "Failed", "Killed")


def _when(text: str | None) -> datetime.datetime | None:
    if not text:
        return None
    try:
        when = datetime.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=datetime.timezone.utc)


def _order(trial: Mapping) -> tuple[str, str]:
    meta = trial.get("metadata") or {}
    created = _when(meta.get("creationTimestamp"))
    return (created.isoformat() if created else "", str(meta.get("name", "")))


def ordered(trials: Sequence[Mapping]) -> list[Mapping]:
    """Trials in creation order (creationTimestamp, then name)."""
    return sorted(trials, key=_order)


def trial_ids(trials: Sequence[Mapping]) -> dict[str, str]:
    """Trial name → AI Platform trialId ("1", "2", … in creation order)."""
    return {str((t.get("metadata") or {}).get("name", "")): str(i) for i, t in enumerate(ordered(trials), 1)}


def trial_state(trial: Mapping, sweep_state: str = "RUNNING") -> str:
    """A trial's AI Platform state; a trial not yet ended is CANCELLING/CANCELLED with its sweep."""
    conds = true_conditions(dict(trial))
    for condition, state in TRIAL_STATES:
        if condition in conds:
            if condition in _TRIAL_FINAL:
                return state
            break
    else:
        state = "QUEUED"
    if sweep_state in ("CANCELLING", "CANCELLED"):
        return sweep_state
    return state


def _active(trials: Sequence[Mapping]) -> bool:
    return any(not (set(true_conditions(dict(t))) & set(_TRIAL_FINAL)) for t in trials)


def sweep_state(experiment: Mapping, trials: Sequence[Mapping] = ()) -> tuple[str, str]:
    """(state, errorMessage) of a sweep; see the table in the module docstring."""
    conds = true_conditions(dict(experiment))
    meta = experiment.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    cancel = CANCEL_ANNOTATION in annotations
    cancel_at = _when(annotations.get(CANCEL_ANNOTATION))
    if "Succeeded" in conds:
        done_at = _when(conds["Succeeded"].get("lastTransitionTime"))
        if not cancel or (done_at and cancel_at and done_at < cancel_at):
            return "SUCCEEDED", ""
        return "CANCELLED", ""
    if "Failed" in conds:
        if cancel:
            return "CANCELLED", ""
        failed = conds["Failed"]
        return "FAILED", failed.get("message") or failed.get("reason") or "the sweep failed"
    if meta.get("deletionTimestamp"):
        return "CANCELLING", ""
    if cancel:
        return ("CANCELLING" if _active(trials) else "CANCELLED"), ""
    if "Running" in conds or "Restarting" in conds:
        return "RUNNING", ""
    if "Created" in conds:
        return "PREPARING", ""
    return "QUEUED", ""


def _end_time(obj: Mapping, final: bool) -> str | None:
    if not final:
        return None
    status = obj.get("status") or {}
    if status.get("completionTime"):
        return rfc3339(status["completionTime"])
    conds = true_conditions(dict(obj))
    for kind in ("Succeeded", "Failed", *_TRIAL_FINAL):
        if kind in conds and conds[kind].get("lastTransitionTime"):
            return rfc3339(conds[kind]["lastTransitionTime"])
    return None


def objective_value(trial: Mapping, metric: str) -> float | None:
    """The objective's latest value in the Trial's observation (None when absent or not a number,
    e.g. Katib's ``unavailable``)."""
    metrics = (((trial.get("status") or {}).get("observation") or {}).get("metrics")) or []
    for m in metrics:
        if isinstance(m, dict) and m.get("name") == metric:
            try:
                value = float(m.get("latest"))
            except (TypeError, ValueError):
                return None
            return value if math.isfinite(value) else None
    return None


def _trial_json(trial: Mapping, trial_id: str, spec: Spec | None, objective: str, state_of_sweep: str,
                step: int | None) -> dict[str, Any]:
    meta = trial.get("metadata") or {}
    status = trial.get("status") or {}
    state = trial_state(trial, state_of_sweep)
    out: dict[str, Any] = {"trialId": trial_id, "hyperparameters": katib_params.trial_hyperparameters(spec, trial),
                           "state": state}
    start = rfc3339(status.get("startTime") or meta.get("creationTimestamp"))
    end = _end_time(trial, state in FINAL)
    out.update({k: v for k, v in (("startTime", start), ("endTime", end)) if v})
    if "EarlyStopped" in true_conditions(dict(trial)):
        out["isTrialStoppedEarly"] = True
    value = objective_value(trial, objective)
    if value is not None:
        final: dict[str, Any] = {"objectiveValue": value}
        if step is not None:
            final["trainingStep"] = str(int(step))
        out["finalMetric"] = final
    return out


def sweep_json(experiment: Mapping, trials: Sequence[Mapping],
               final_steps: Mapping[str, int] | None = None) -> dict:
    """The ``ml.v1`` Job JSON of a sweep (see the module docstring)."""
    meta = experiment.get("metadata") or {}
    status = experiment.get("status") or {}
    spec = katib.spec_of(experiment)
    objective = str(((experiment.get("spec") or {}).get("objective") or {}).get("objectiveMetricName", ""))
    metric = spec.metric if spec else objective  # the user's tag; Katib's name for it is the objective's
    state, error = sweep_state(experiment, trials)
    out = submitted(dict(experiment))
    times = {"createTime": rfc3339(meta.get("creationTimestamp")), "startTime": rfc3339(status.get("startTime")),
             "endTime": _end_time(experiment, state in FINAL)}
    out.update({k: v for k, v in times.items() if v})
    out["state"] = state
    if error:
        out["errorMessage"] = error
    steps = final_steps or {}
    rows = [_trial_json(t, str(i), spec, objective, state, steps.get(str((t.get("metadata") or {}).get("name"))))
            for i, t in enumerate(ordered(trials), 1)]
    output: dict[str, Any] = {"isHyperparameterTuningJob": True,
                              "completedTrialCount": str(sum(r["state"] == "SUCCEEDED" for r in rows))}
    if metric:
        output["hyperparameterMetricTag"] = metric
    if rows:
        output["trials"] = rows
    out["trainingOutput"] = output
    if meta.get("resourceVersion"):
        out["etag"] = base64.b64encode(str(meta["resourceVersion"]).encode()).decode()
    return out
