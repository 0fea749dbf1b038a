"""A sweep's decisions on the local runtime, from the checked `hptuning.Spec` alone: the Optuna
search space, sampler and pruner, what a trial is told, what it reported, and the trial entries of
``trainingOutput``. Pure (no I/O; Optuna objects are only built, never run).

Guarantees:
- `distributions(spec)`: one Optuna distribution per parameter, in the spec's order —
  DOUBLE → ``FloatDistribution``, INTEGER → ``IntDistribution`` (``log=True`` for
  UNIT_LOG_SCALE), DISCRETE → ``CategoricalDistribution`` of its numbers (whole numbers as ``int``,
  so ``--batch_size=16``, not ``16.0``), CATEGORICAL → ``CategoricalDistribution`` of its strings.
  With GRID_SEARCH every parameter is categorical over `grid_values`, the points GridSampler walks.
- UNIT_REVERSE_LOG_SCALE (dense near ``maxValue``; Optuna has no such scale): the study searches
  ``y`` on a log scale over ``[min, max]`` and the trial gets ``min + max - y`` (`from_study`), which
  is dense where ``y`` is dense near ``min``, i.e. near ``max``. The study therefore stores ``y``,
  and every value shown or passed (``hyperparameters``, ``--name=value``) is the converted one.
- `sampler(spec, seed)`: ALGORITHM_UNSPECIFIED → TPE (``constant_liar`` when trials run in
  parallel), RANDOM_SEARCH → random, both seeded by the job identity (`seed_of`), so one job
  always proposes the same sequence; GRID_SEARCH → GridSampler over `grid_space`, its order seeded
  by the grid itself (`grid_seed`: Optuna numbers grid points in that order, and a sweep resuming
  another over the same grid must read the previous trials' points the same way). A grid has at most `MAX_GRID`
  points (`check_grid`).
- `pruner(spec)`: with ``enableTrialEarlyStopping``, Optuna's MedianPruner with no warm-up and
  ``n_startup_trials`` = ``maxTrials // 4`` clamped to 1…5 (Optuna's default of 5 would never prune
  a small sweep); otherwise none.
- `read_reports(text, tag)`: a hypertune metrics file (JSON lines, ``cloudml-hypertune``'s format:
  ``global_step`` and the tag as strings, ``timestamp`` in seconds) → `Report`s oldest first; lines
  that are not JSON objects, lack the tag or hold no number are skipped (a file being rewritten).
- `template_json(plan, package_uris)` / `template_of(text)`: the plan each trial runs, stored as
  JSON with the sweep's study so a restarted server can start new trials (the local runtime ignores
  accelerators, so they are not kept); `trial_plan(template, spec, job_id, trial_id, values)`: a
  trial's own job, ``<jobId>/trial-<id>`` (a "/" no user's jobId has), without the
  hyperparameters, its ``--name=value`` flags appended to the args as AI Platform appended them.
- `copied_trial(trial, previous_job)`: a previous sweep's study trial as a resuming sweep copies it.
- `failure_limit(spec)`: how many failed trials fail the sweep — ``maxFailedTrials`` when set;
  unset (AI Platform: "the service decides"), the first ``min(maxTrials, 3)`` trials failing with
  none succeeded — a trainer that cannot run fails fast, a sweep with a few bad corners does not.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Mapping

from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.pruners import BasePruner, MedianPruner, NopPruner
from optuna.samplers import BaseSampler, GridSampler, RandomSampler, TPESampler
from optuna.trial import FrozenTrial, TrialState, create_trial

from hub_ext.core.errors import UserInputError
from hub_ext.core.mounts import Credential, Dataset
from server_ext.jobs.hptuning import FIELD, Param, Spec, grid_points, trial_args
from server_ext.jobs.model import Job
from server_ext.jobs.plan import JobPlan, Replica

MAX_GRID = 100_000
LOG_SCALES = ("UNIT_LOG_SCALE", "UNIT_REVERSE_LOG_SCALE")


@dataclass(frozen=True)
class Report:
    step: int  # global_step
    value: float  # the metric tag's value
    time: float  # seconds since the epoch


def seed_of(project: str, job_id: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{project}/{job_id}".encode()).digest()[:4], "big")


def _number(v: float) -> int | float:
    return int(v) if float(v).is_integer() else float(v)


def grid_values(p: Param) -> list:
    if p.type == "INTEGER":
        return list(range(int(p.min), int(p.max) + 1))
    if p.type == "DISCRETE":
        return [_number(v) for v in p.values]
    if p.type == "CATEGORICAL":
        return list(p.values)
    raise ValueError(f"{p.name}: a DOUBLE parameter has no grid")


def grid_size(spec: Spec) -> int:
    return grid_points(spec)


def check_grid(spec: Spec) -> None:
    if spec.algorithm == "GRID_SEARCH" and grid_size(spec) > MAX_GRID:
        raise UserInputError(f"{FIELD}.algorithm", f"the grid has {grid_size(spec)} points; GRID_SEARCH takes at "
                                                   f"most {MAX_GRID} (narrow the INTEGER ranges)")


def grid_space(spec: Spec) -> dict[str, list]:
    return {p.name: grid_values(p) for p in spec.params}


def grid_seed(spec: Spec) -> int:
    """The grid's (shuffled) order depends on the grid only, so a resumed sweep's points are its own."""
    return int.from_bytes(hashlib.sha256(json.dumps(grid_space(spec)).encode()).digest()[:4], "big")


def distributions(spec: Spec) -> dict[str, BaseDistribution]:
    if spec.algorithm == "GRID_SEARCH":
        return {name: CategoricalDistribution(values) for name, values in grid_space(spec).items()}
    out: dict[str, BaseDistribution] = {}
    for p in spec.params:
        log = p.scale in LOG_SCALES
        if p.type == "DOUBLE":
            out[p.name] = FloatDistribution(p.min, p.max, log=log)
        elif p.type == "INTEGER":
            out[p.name] = IntDistribution(int(p.min), int(p.max), log=log)
        else:
            out[p.name] = CategoricalDistribution(grid_values(p))
    return out


def from_study(spec: Spec, params: Mapping[str, Any]) -> dict[str, Any]:
    """The trial's values (the spec's order) from the study's parameters (see the module docstring)."""
    out = {}
    for p in spec.params:
        v = params[p.name]
        if spec.algorithm != "GRID_SEARCH" and p.scale == "UNIT_REVERSE_LOG_SCALE" and p.type in ("DOUBLE", "INTEGER"):
            v = p.min + p.max - v
            v = int(round(v)) if p.type == "INTEGER" else min(max(v, p.min), p.max)
        out[p.name] = v
    return out


def hyperparameters(spec: Spec, values: Mapping[str, Any]) -> dict[str, str]:
    """``trainingOutput.trials[].hyperparameters``: each value as the trial's ``--name=value`` has it."""
    return {p.name: str(int(values[p.name]) if p.type == "INTEGER" else values[p.name]) for p in spec.params}


class AskTellGrid(GridSampler):
    """GridSampler for ask-and-tell: its ``after_trial`` calls ``study.stop()``, which only works inside
    ``Study.optimize``; the sweep stops by itself once the grid is used up (`grid_size`)."""

    def after_trial(self, study, trial, state, values) -> None:
        pass


def sampler(spec: Spec, seed: int) -> BaseSampler:
    if spec.algorithm == "GRID_SEARCH":
        return AskTellGrid(grid_space(spec), seed=grid_seed(spec))
    if spec.algorithm == "RANDOM_SEARCH":
        return RandomSampler(seed=seed)
    return TPESampler(seed=seed, constant_liar=spec.max_parallel > 1)


def pruner(spec: Spec) -> BasePruner:
    if not spec.early_stopping:
        return NopPruner()
    return MedianPruner(n_startup_trials=max(1, min(5, spec.max_trials // 4)), n_warmup_steps=0, interval_steps=1)


def direction(spec: Spec) -> str:
    return "maximize" if spec.goal == "MAXIMIZE" else "minimize"


def failure_limit(spec: Spec) -> int:
    return spec.max_failed or min(spec.max_trials, 3)


def sweep_failed(spec: Spec, failed: int, succeeded: int) -> bool:
    """Whether `failed` trials fail the sweep (see `failure_limit`)."""
    if spec.max_failed:
        return failed >= spec.max_failed
    return succeeded == 0 and failed >= failure_limit(spec)


def read_reports(text: str, tag: str) -> list[Report]:
    out = []
    for line in text.splitlines():
        try:
            entry = json.loads(line)
            value = float(entry[tag])
            step = int(float(entry.get("global_step", len(out))))
            when = float(entry.get("timestamp", 0.0))
        except (ValueError, TypeError, KeyError, AttributeError):
            continue
        out.append(Report(step, value, when))
    if len(out) > 1 and all(r.step == 0 for r in out):  # hypertune's "0" for a trainer that gave no step
        out = [Report(i, r.value, r.time) for i, r in enumerate(out)]
    return out


def rfc3339(seconds: float) -> str:
    stamp = datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec="microseconds")
    return stamp.replace("+00:00", "Z")


def series(reports: list[Report]) -> list[dict]:
    """`JobBackend.trial_metrics`'s answer."""
    return [{"trainingStep": str(r.step), "objectiveValue": r.value, "time": rfc3339(r.time)} for r in reports]


def final_metric(reports: list[Report]) -> dict | None:
    """The last report, as ``finalMetric``; None when there is none or it is not a finite number."""
    if not reports or not math.isfinite(reports[-1].value):
        return None
    return {"trainingStep": str(reports[-1].step), "objectiveValue": reports[-1].value}


def initial_output(spec: Spec) -> dict:
    """A new sweep's ``trainingOutput`` (``trials`` appears with the first trial)."""
    return {"isHyperparameterTuningJob": True, "hyperparameterMetricTag": spec.metric, "completedTrialCount": "0"}


def counts(trials: list[Mapping]) -> tuple[int, int]:
    """(failed, succeeded) among ``trainingOutput.trials``."""
    states = [t.get("state") for t in trials]
    return states.count("FAILED"), states.count("SUCCEEDED")


def copied_trial(t: FrozenTrial, previous_job: str) -> FrozenTrial:
    """A previous sweep's study trial for a sweep that resumes it: finished ones as they are, others as
    failed (they never reported); ``resumedFrom`` names it, and it has no ``trialId`` (not the new job's)."""
    state = t.state if t.state.is_finished() else TrialState.FAIL
    return create_trial(state=state, value=t.value if state == TrialState.COMPLETE else None, params=t.params,
                        distributions=t.distributions, system_attrs=t.system_attrs,
                        intermediate_values=t.intermediate_values,
                        user_attrs={"resumedFrom": f"{previous_job}/{t.user_attrs.get('trialId', t.number)}"})


_REPLICA_FIELDS = ("role", "count", "image", "cpu", "memory_gib", "accelerator_count", "command", "args")


def template_json(plan: JobPlan, package_uris: tuple[str, ...]) -> str:
    return json.dumps({
        "job": plan.job.doc, "project": plan.project, "owner": plan.owner, "name": plan.name,
        "framework": plan.framework, "python_module": plan.python_module, "args": list(plan.args),
        "package_uris": list(package_uris), "runtime_version": plan.runtime_version,
        "python_version": plan.python_version,
        "replicas": [{k: getattr(r, k) for k in _REPLICA_FIELDS} for r in plan.replicas],
        "credentials": [dataclasses.asdict(c) for c in plan.credentials],
        "datasets": [dataclasses.asdict(d) for d in plan.datasets]}, sort_keys=True)


def template_of(text: str) -> JobPlan:
    d = json.loads(text)
    replicas = tuple(Replica(**{**r, "command": tuple(r["command"]), "args": tuple(r["args"])}) for r in d["replicas"])
    return JobPlan(job=Job(d["job"]), project=d["project"], owner=d["owner"], name=d["name"], framework=d["framework"],
                   replicas=replicas, python_module=d["python_module"], args=tuple(d["args"]),
                   package_uris=tuple(d["package_uris"]), runtime_version=d["runtime_version"],
                   python_version=d["python_version"], credentials=tuple(Credential(**c) for c in d["credentials"]),
                   datasets=tuple(Dataset(**x) for x in d["datasets"]))


def trial_job_id(job_id: str, trial_id: str) -> str:
    return f"{job_id}/trial-{trial_id}"


def trial_plan(template: JobPlan, spec: Spec, job_id: str, trial_id: str, values: Mapping[str, Any]) -> JobPlan:
    training = {k: v for k, v in template.job.doc["trainingInput"].items() if k != "hyperparameters"}
    job = Job({**template.job.doc, "jobId": trial_job_id(job_id, trial_id), "trainingInput": training})
    return dataclasses.replace(template, job=job, args=(*template.args, *trial_args(spec, values)), sweep=None,
                               package=None)
