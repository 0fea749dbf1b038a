"""A sweep's Experiment + Trials back to the ml.v1 Job JSON (state table, trial order and ids,
hyperparameters as the trainer got them, finalMetric), validated against Google's Job schema."""

import copy

import pytest

from server_ext.jobs.kube import katib
from server_ext.jobs.kube.kubeflow import CANCEL_ANNOTATION
from server_ext.jobs.kube.sweep_status import objective_value, sweep_json, sweep_state, trial_ids, trial_state
from tests.unit.test_job_kubeflow import SETTINGS
from tests.unit.test_job_model import PLATFORM_JOB_SCHEMA
from tests.unit.test_katib import HYPER, _custom

pytestmark = pytest.mark.unit


@pytest.fixture
def experiment(tmp_path):
    plan = _custom(tmp_path, HYPER)
    exp = katib.experiment_manifest(plan, SETTINGS)
    exp["metadata"].update({"creationTimestamp": "2026-02-01T10:00:00Z", "resourceVersion": "42"})
    exp["status"] = {"startTime": "2026-02-01T10:00:01Z", "conditions": [
        {"type": "Created", "status": "True", "lastTransitionTime": "2026-02-01T10:00:01Z"},
        {"type": "Running", "status": "True", "lastTransitionTime": "2026-02-01T10:00:02Z"}]}
    return exp


def trial(name, created, conditions=(), metric=None, momentum="0.75", hidden="100", opt="adam"):
    t = {"apiVersion": "kubeflow.org/v1beta1", "kind": "Trial",
         "metadata": {"name": name, "creationTimestamp": created, "labels": {katib.EXPERIMENT_LABEL: "census-grid"}},
         "spec": {"parameterAssignments": [{"name": "momentum-reversed", "value": momentum},
                                           {"name": "hidden-reversed", "value": hidden},
                                           {"name": "opt", "value": opt}]},
         "status": {"startTime": created,
                    "conditions": [{"type": c, "status": "True", "lastTransitionTime": "2026-02-01T11:00:00Z"}
                                   for c in conditions]}}
    if metric is not None:
        t["status"]["observation"] = {"metrics": [{"name": "loss", "latest": "9"},
                                                  {"name": "auc", "latest": metric, "min": "0.1", "max": "0.99"}]}
    if set(conditions) & {"Succeeded", "Failed", "EarlyStopped", "Killed", "MetricsUnavailable"}:
        t["status"]["completionTime"] = "2026-02-01T11:00:00Z"
    return t


TRIALS = [
    # given out of order: ids follow creation (then name)
    trial("census-grid-zzzz", "2026-02-01T10:05:00Z", ["Created", "Running"], "0.7"),
    trial("census-grid-bbbb", "2026-02-01T10:01:00Z", ["Created", "Succeeded"], "0.91", momentum="0.5"),
    trial("census-grid-aaaa", "2026-02-01T10:01:00Z", ["Created", "EarlyStopped"], "0.6", hidden="16"),
    trial("census-grid-cccc", "2026-02-01T10:02:00Z", ["Created", "Failed"]),
    trial("census-grid-dddd", "2026-02-01T10:03:00Z", ["Created", "MetricsUnavailable"], "unavailable"),
    trial("census-grid-eeee", "2026-02-01T10:04:00Z", ["Created"]),
    trial("census-grid-ffff", "2026-02-01T10:04:30Z", []),
]


def test_a_running_sweep(experiment):
    job = sweep_json(experiment, TRIALS, final_steps={"census-grid-bbbb": 40})
    assert PLATFORM_JOB_SCHEMA.is_valid(job), [e.message for e in PLATFORM_JOB_SCHEMA.iter_errors(job)]
    assert job["jobId"] == "census_grid" and job["state"] == "RUNNING" and job["etag"] == "NDI="
    assert job["createTime"] == "2026-02-01T10:00:00Z" and "endTime" not in job
    assert job["trainingInput"]["hyperparameters"] == HYPER
    out = job["trainingOutput"]
    assert out["isHyperparameterTuningJob"] is True and out["hyperparameterMetricTag"] == "auc"
    assert out["completedTrialCount"] == "2"
    rows = out["trials"]
    assert [(r["trialId"], r["state"]) for r in rows] == [
        ("1", "SUCCEEDED"), ("2", "SUCCEEDED"), ("3", "FAILED"), ("4", "FAILED"), ("5", "PREPARING"),
        ("6", "QUEUED"), ("7", "RUNNING")]
    assert rows[0] == {"trialId": "1", "state": "SUCCEEDED", "isTrialStoppedEarly": True,
                       "hyperparameters": {"momentum": repr(0.5 + (0.999 - 0.75)), "hidden": "1024", "opt": "adam"},
                       "startTime": "2026-02-01T10:01:00Z", "endTime": "2026-02-01T11:00:00Z",
                       "finalMetric": {"objectiveValue": 0.6}}
    assert rows[1]["hyperparameters"]["momentum"] == "0.999"
    assert rows[1]["finalMetric"] == {"objectiveValue": 0.91, "trainingStep": "40"}
    assert "finalMetric" not in rows[2] and "finalMetric" not in rows[3]
    assert rows[6]["finalMetric"] == {"objectiveValue": 0.7} and "endTime" not in rows[6]
    assert trial_ids(TRIALS) == {"census-grid-aaaa": "1", "census-grid-bbbb": "2", "census-grid-cccc": "3",
                                 "census-grid-dddd": "4", "census-grid-eeee": "5", "census-grid-ffff": "6",
                                 "census-grid-zzzz": "7"}


def _with(exp, conditions=(), annotations=None, **meta):
    exp = copy.deepcopy(exp)
    exp["status"]["conditions"] += conditions
    exp["metadata"]["annotations"].update(annotations or {})
    exp["metadata"].update(meta)
    return exp


SUCCEEDED = {"type": "Succeeded", "status": "True", "reason": "ExperimentMaxTrialsReached",
             "lastTransitionTime": "2026-02-01T12:00:00Z"}
FAILED = {"type": "Failed", "status": "True", "reason": "ExperimentFailed",
          "message": "Experiment has failed because max failed count has reached",
          "lastTransitionTime": "2026-02-01T12:00:00Z"}
ENDED = [t for t in TRIALS if t["metadata"]["name"] in ("census-grid-aaaa", "census-grid-bbbb")]


@pytest.mark.parametrize("conditions, annotations, meta, trials, state, error", [
    ([], None, {}, TRIALS, "RUNNING", ""),
    ([SUCCEEDED], None, {}, ENDED, "SUCCEEDED", ""),
    ([{**SUCCEEDED, "reason": "ExperimentGoalReached"}], None, {}, ENDED, "SUCCEEDED", ""),
    ([SUCCEEDED], {CANCEL_ANNOTATION: "2026-02-01T13:00:00Z"}, {}, ENDED, "SUCCEEDED", ""),  # ended before
    ([SUCCEEDED], {CANCEL_ANNOTATION: "2026-02-01T11:30:00Z"}, {}, ENDED, "CANCELLED", ""),
    ([FAILED], None, {}, ENDED, "FAILED", "Experiment has failed because max failed count has reached"),
    ([FAILED], {CANCEL_ANNOTATION: "2026-02-01T11:30:00Z"}, {}, ENDED, "CANCELLED", ""),
    ([], None, {"deletionTimestamp": "2026-02-01T11:30:00Z"}, TRIALS, "CANCELLING", ""),
    ([], {CANCEL_ANNOTATION: "2026-02-01T11:30:00Z"}, {}, TRIALS, "CANCELLING", ""),
    ([], {CANCEL_ANNOTATION: "2026-02-01T11:30:00Z"}, {}, ENDED, "CANCELLED", ""),
])
def test_sweep_states(experiment, conditions, annotations, meta, trials, state, error):
    exp = _with(experiment, conditions, annotations, **meta)
    assert sweep_state(exp, trials) == (state, error)
    job = sweep_json(exp, trials)
    assert PLATFORM_JOB_SCHEMA.is_valid(job)
    assert job["state"] == state and job.get("errorMessage", "") == error
    assert ("endTime" in job) == (state in ("SUCCEEDED", "FAILED", "CANCELLED") and bool(conditions))


@pytest.mark.parametrize("status, state", [
    ({}, "QUEUED"), ({"conditions": [{"type": "Created", "status": "True"}]}, "PREPARING"),
    ({"conditions": [{"type": "Running", "status": "True"}]}, "RUNNING"),
    ({"conditions": [{"type": "Restarting", "status": "True"}]}, "RUNNING"),
    ({"conditions": [{"type": "Running", "status": "False"}, {"type": "Created", "status": "True"}]}, "PREPARING"),
])
def test_early_sweep_states(experiment, status, state):
    exp = copy.deepcopy(experiment)
    exp["status"] = status
    assert sweep_state(exp, []) == (state, "")
    job = sweep_json(exp, [])
    assert "trials" not in job["trainingOutput"] and job["trainingOutput"]["completedTrialCount"] == "0"
    assert PLATFORM_JOB_SCHEMA.is_valid(job)


@pytest.mark.parametrize("conditions, sweep, state", [
    (["Created", "Running"], "CANCELLING", "CANCELLING"), (["Created"], "CANCELLED", "CANCELLED"),
    (["Succeeded"], "CANCELLED", "SUCCEEDED"), (["Killed"], "RUNNING", "CANCELLED"),
    (["Running", "Failed"], "RUNNING", "FAILED"), (["MetricsUnavailable"], "SUCCEEDED", "FAILED"),
])
def test_trial_states(conditions, sweep, state):
    assert trial_state(trial("t", "2026-02-01T10:00:00Z", conditions), sweep) == state


def test_objective_values():
    t = trial("t", "2026-02-01T10:00:00Z", ["Succeeded"], "1e-3")
    assert objective_value(t, "auc") == 0.001 and objective_value(t, "loss") == 9.0
    assert objective_value(t, "nope") is None
    assert objective_value(trial("t", "x", [], "nan"), "auc") is None


def test_an_experiment_without_the_platforms_annotation(experiment):
    exp = copy.deepcopy(experiment)
    exp["metadata"]["annotations"] = {}
    exp["metadata"]["name"] = "mine"
    job = sweep_json(exp, [TRIALS[1]])
    assert job["jobId"] == "mine" and job["trainingOutput"]["hyperparameterMetricTag"] == "auc"
    assert job["trainingOutput"]["trials"][0]["hyperparameters"] == {
        "momentum-reversed": "0.5", "hidden-reversed": "100", "opt": "adam"}
    assert PLATFORM_JOB_SCHEMA.is_valid(job)


def test_nothing_is_changed(experiment):
    before, trials = copy.deepcopy(experiment), copy.deepcopy(TRIALS)
    assert sweep_json(experiment, TRIALS) == sweep_json(experiment, TRIALS)
    assert experiment == before and TRIALS == trials
