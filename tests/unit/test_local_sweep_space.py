"""The local runtime's sweep decisions (local_sweep_space): search space, samplers, reports, trial plans."""

import json
import math

import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.pruners import MedianPruner, NopPruner
from optuna.samplers import GridSampler, RandomSampler, TPESampler
from optuna.trial import TrialState, create_trial

from hub_ext.core.errors import UserInputError
from server_ext.jobs.hptuning import parse_spec
from server_ext.runtimes.local import sweep_space as space
from server_ext.jobs.machines import Machines
from server_ext.jobs.model import parse_job
from server_ext.jobs.plan import PlanSettings, plan_job

pytestmark = pytest.mark.unit

LR = {"parameterName": "learning_rate", "type": "DOUBLE", "minValue": 0.001, "maxValue": 0.1,
      "scaleType": "UNIT_LOG_SCALE"}
EPOCHS = {"parameterName": "epochs", "type": "INTEGER", "minValue": 2, "maxValue": 4}
BATCH = {"parameterName": "batch_size", "type": "DISCRETE", "discreteValues": [16, 32, 0.5]}
OPT = {"parameterName": "optimizer", "type": "CATEGORICAL", "categoricalValues": ["sgd", "adam"]}


def spec(*params, **extra):
    return parse_spec({"goal": "MINIMIZE", "hyperparameterMetricTag": "rmse", "params": list(params), **extra})


def test_distributions_per_type_and_scale():
    batch = {**BATCH, "discreteValues": [0.5, 16, 32]}
    assert space.distributions(spec(LR, EPOCHS, batch, OPT)) == {
        "learning_rate": FloatDistribution(0.001, 0.1, log=True),
        "epochs": IntDistribution(2, 4),
        "batch_size": CategoricalDistribution([0.5, 16, 32]),
        "optimizer": CategoricalDistribution(["sgd", "adam"])}


@pytest.mark.parametrize("values, expected", [
    ([16, 32], [16, 32]),  # whole numbers as int: --batch_size=16, not 16.0
    ([0.25, 1, 2.5], [0.25, 1, 2.5]),
])
def test_discrete_values_keep_numbers_as_numbers(values, expected):
    out = space.grid_values(spec({**BATCH, "discreteValues": values}).params[0])
    assert out == expected and [type(v) for v in out] == [type(v) for v in expected]


def test_reverse_log_scale_searches_the_mirrored_log_space():
    s = spec({**LR, "scaleType": "UNIT_REVERSE_LOG_SCALE"},
             {**EPOCHS, "minValue": 1, "maxValue": 100, "scaleType": "UNIT_REVERSE_LOG_SCALE"})
    assert space.distributions(s)["learning_rate"] == FloatDistribution(0.001, 0.1, log=True)
    assert space.from_study(s, {"learning_rate": 0.001, "epochs": 1}) == {"learning_rate": 0.1, "epochs": 100}
    assert space.from_study(s, {"learning_rate": 0.1, "epochs": 100}) == pytest.approx({"learning_rate": 0.001,
                                                                                        "epochs": 1})
    # dense near max: the log-median of y maps to a value above the linear midpoint
    y = math.sqrt(0.001 * 0.1)
    assert space.from_study(s, {"learning_rate": y, "epochs": 10})["learning_rate"] > (0.001 + 0.1) / 2


def test_hyperparameters_are_the_strings_the_trial_was_given():
    s = spec(LR, EPOCHS, {**BATCH, "discreteValues": [16, 32]}, OPT)
    values = {"learning_rate": 0.01, "epochs": 3, "batch_size": 32, "optimizer": "adam"}
    assert space.hyperparameters(s, values) == {"learning_rate": "0.01", "epochs": "3", "batch_size": "32",
                                                "optimizer": "adam"}


@pytest.mark.parametrize("algorithm, kind", [
    ("ALGORITHM_UNSPECIFIED", TPESampler), ("RANDOM_SEARCH", RandomSampler), ("GRID_SEARCH", GridSampler)])
def test_sampler_per_algorithm(algorithm, kind):
    s = spec(EPOCHS, OPT, algorithm=algorithm)
    assert isinstance(space.sampler(s, 7), kind)


def test_grid_space_size_and_limit():
    s = spec(EPOCHS, OPT, {**BATCH, "discreteValues": [16, 32]}, algorithm="GRID_SEARCH")
    assert space.grid_space(s) == {"epochs": [2, 3, 4], "optimizer": ["sgd", "adam"], "batch_size": [16, 32]}
    assert space.grid_size(s) == 12
    assert all(isinstance(d, CategoricalDistribution) for d in space.distributions(s).values())
    space.check_grid(s)
    huge = spec({**EPOCHS, "maxValue": 1_000_000}, algorithm="GRID_SEARCH")
    with pytest.raises(UserInputError) as e:
        space.check_grid(huge)
    assert e.value.field == "trainingInput.hyperparameters.algorithm"


@pytest.mark.parametrize("extra, kind, startup", [
    ({}, NopPruner, None),
    ({"enableTrialEarlyStopping": True, "maxTrials": 6}, MedianPruner, 1),
    ({"enableTrialEarlyStopping": True, "maxTrials": 12}, MedianPruner, 3),
    ({"enableTrialEarlyStopping": True, "maxTrials": 100}, MedianPruner, 5),
])
def test_pruner(extra, kind, startup):
    p = space.pruner(spec(EPOCHS, **extra))
    assert isinstance(p, kind)
    if startup is not None:
        assert p._n_startup_trials == startup


@pytest.mark.parametrize("extra, failed, succeeded, fails", [
    ({"maxTrials": 10}, 2, 0, False),
    ({"maxTrials": 10}, 3, 0, True),  # unset: the first 3 all failing
    ({"maxTrials": 10}, 5, 1, False),  # unset: once one succeeded, failures are the sweep's corners
    ({"maxTrials": 2}, 2, 0, True),
    ({"maxTrials": 10, "maxFailedTrials": 2}, 2, 5, True),
    ({"maxTrials": 10, "maxFailedTrials": 2}, 1, 0, False),
])
def test_when_failures_fail_the_sweep(extra, failed, succeeded, fails):
    assert space.sweep_failed(spec(EPOCHS, **extra), failed, succeeded) is fails


def test_hypertunes_step_zero_on_every_report_becomes_the_ordinal():
    """cloudml-hypertune writes global_step "0" when the trainer gives none; MedianPruner needs steps."""
    lines = [json.dumps({"timestamp": t, "rmse": str(v), "global_step": "0"}) for t, v in ((1.0, 0.5), (2.0, 0.4))]
    assert space.read_reports("\n".join(lines), "rmse") == [space.Report(0, 0.5, 1.0), space.Report(1, 0.4, 2.0)]
    assert space.read_reports(lines[0], "rmse") == [space.Report(0, 0.5, 1.0)]


def test_read_reports_skips_what_is_not_a_report():
    lines = [json.dumps({"timestamp": 1.5, "trial": "1", "rmse": "0.5", "global_step": "10"}),
             "not json", json.dumps({"timestamp": 2.0, "loss": "1"}), '{"rmse": "x"}', "[1]",
             json.dumps({"timestamp": 3.0, "trial": "1", "rmse": "0.25", "global_step": "20"}), '{"rmse": "0.3", "glo']
    reports = space.read_reports("\n".join(lines), "rmse")
    assert reports == [space.Report(10, 0.5, 1.5), space.Report(20, 0.25, 3.0)]
    assert space.series(reports) == [
        {"trainingStep": "10", "objectiveValue": 0.5, "time": "1970-01-01T00:00:01.500000Z"},
        {"trainingStep": "20", "objectiveValue": 0.25, "time": "1970-01-01T00:00:03.000000Z"}]
    assert space.final_metric(reports) == {"trainingStep": "20", "objectiveValue": 0.25}
    assert space.final_metric([]) is None and space.final_metric([space.Report(1, math.nan, 0)]) is None


def test_counts_and_initial_output():
    states = ["FAILED", "SUCCEEDED", "RUNNING", "FAILED"]
    assert space.counts([{"state": x} for x in states]) == (2, 1)
    assert space.initial_output(spec(EPOCHS)) == {"isHyperparameterTuningJob": True, "hyperparameterMetricTag": "rmse",
                                                  "completedTrialCount": "0"}


@pytest.mark.parametrize("state, value, copied_state, copied_value", [
    (TrialState.COMPLETE, 0.5, TrialState.COMPLETE, 0.5),
    (TrialState.PRUNED, None, TrialState.PRUNED, None),
    (TrialState.RUNNING, None, TrialState.FAIL, None),  # it never reported: failed, as its grid point is used
])
def test_a_resumed_sweep_copies_the_previous_trials(state, value, copied_state, copied_value):
    t = create_trial(state=state, value=value, params={"epochs": 3}, distributions={"epochs": IntDistribution(2, 4)},
                     user_attrs={"trialId": "2"}, system_attrs={"grid_id": 1}, intermediate_values={10: 0.7})
    c = space.copied_trial(t, "first")
    assert (c.state, c.value, c.params, c.system_attrs) == (copied_state, copied_value, {"epochs": 3}, {"grid_id": 1})
    assert c.user_attrs == {"resumedFrom": "first/2"} and c.intermediate_values == {10: 0.7}


def test_seed_is_per_job_identity():
    assert space.seed_of("alice", "sweep") == space.seed_of("alice", "sweep") != space.seed_of("bob", "sweep")


def test_a_trial_plan_is_the_template_with_its_flags():
    doc = {"jobId": "sweep", "trainingInput": {
        "pythonModule": "trainer.task", "packageUris": ["/pkg/trainer"], "args": ["--sleep=0"], "jobDir": "/out",
        "hyperparameters": {"goal": "MINIMIZE", "hyperparameterMetricTag": "rmse", "params": [LR, EPOCHS]}}}
    plan = plan_job(parse_job(doc), PlanSettings(Machines(accelerators={})), project="alice", owner="alice")
    template = space.template_of(space.template_json(plan, ("/kept/trainer-0.1.tar.gz",)))
    assert template.replicas == plan.replicas and template.args == plan.args
    assert template.package_uris == ("/kept/trainer-0.1.tar.gz",)
    trial = space.trial_plan(template, plan.sweep, "sweep", "3", {"learning_rate": 0.01, "epochs": 3})
    assert trial.job.job_id == "sweep/trial-3" and "hyperparameters" not in trial.job.training
    assert trial.args == ("--sleep=0", "--job-dir=/out", "--learning_rate=0.01", "--epochs=3")
    assert trial.sweep is None and trial.package is None and trial.task_names() == ["master-replica-0"]
