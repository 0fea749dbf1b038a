"""AI Platform's HyperparameterSpec, checked and defaulted by `hptuning.parse_spec`: good specs as
whole `Spec` objects, bad ones refused with the field's path (parametrized tables)."""

import pytest

from hub_ext.core.errors import UserInputError
from server_ext.jobs.hptuning import MAX_VALUES, Param, Spec, parse_spec, trial_args

pytestmark = pytest.mark.unit

F = "trainingInput.hyperparameters"
LR = {"parameterName": "lr", "type": "DOUBLE", "minValue": 0.001, "maxValue": 0.1}
BASE = {"goal": "MAXIMIZE", "hyperparameterMetricTag": "accuracy", "params": [LR]}


def test_defaults_are_ai_platforms():
    assert parse_spec(BASE) == Spec(goal="MAXIMIZE", metric="accuracy", params=(Param("lr", "DOUBLE", 0.001, 0.1),),
                                    max_trials=1, max_parallel=1, max_failed=0, algorithm="ALGORITHM_UNSPECIFIED",
                                    early_stopping=False, resume_from=None)


@pytest.mark.parametrize("extra, expected", [
    ({"maxTrials": 10, "maxParallelTrials": 4, "maxFailedTrials": 3},
     {"max_trials": 10, "max_parallel": 4, "max_failed": 3}),
    ({"maxTrials": 2, "maxParallelTrials": 5}, {"max_trials": 2, "max_parallel": 2}),  # at most maxTrials
    ({"algorithm": "GRID_SEARCH", "params": [{"parameterName": "n", "type": "INTEGER", "minValue": 1,
                                              "maxValue": 3}]},
     {"algorithm": "GRID_SEARCH", "params": (Param("n", "INTEGER", 1.0, 3.0),)}),
    ({"algorithm": "RANDOM_SEARCH", "enableTrialEarlyStopping": True, "resumePreviousJobId": "old_sweep"},
     {"algorithm": "RANDOM_SEARCH", "early_stopping": True, "resume_from": "old_sweep"}),
    ({"params": [{**LR, "scaleType": "NONE"}]}, {"params": (Param("lr", "DOUBLE", 0.001, 0.1),)}),
    ({"params": [{**LR, "scaleType": "UNIT_REVERSE_LOG_SCALE"}]},
     {"params": (Param("lr", "DOUBLE", 0.001, 0.1, (), "UNIT_REVERSE_LOG_SCALE"),)}),
    ({"params": [{"parameterName": "b", "type": "DISCRETE", "discreteValues": [16, 32.5, 64]},
                 {"parameterName": "o.p-t_1", "type": "CATEGORICAL", "categoricalValues": ["adam", "sgd"]}]},
     {"params": (Param("b", "DISCRETE", values=(16.0, 32.5, 64.0)),
                 Param("o.p-t_1", "CATEGORICAL", values=("adam", "sgd")))}),
    ({"params": [{"parameterName": "b", "type": "DISCRETE", "discreteValues": list(range(MAX_VALUES))}]},
     {"params": (Param("b", "DISCRETE", values=tuple(float(v) for v in range(MAX_VALUES))),)}),
    ({"goal": "MINIMIZE", "hyperparameterMetricTag": "val/loss"}, {"goal": "MINIMIZE", "metric": "val/loss"}),
])
def test_good_specs(extra, expected):
    spec = parse_spec({**BASE, **extra})
    assert {k: getattr(spec, k) for k in expected} == expected


def _param(**fields):
    return {**BASE, "params": [{**LR, **fields}]}


@pytest.mark.parametrize("doc, field, message", [
    ({**BASE, "goal": None}, f"{F}.goal", "MAXIMIZE or MINIMIZE"),
    ({**BASE, "goal": "maximize"}, f"{F}.goal", "MAXIMIZE or MINIMIZE"),
    ({**BASE, "hyperparameterMetricTag": ""}, f"{F}.hyperparameterMetricTag", "is required"),
    ({k: v for k, v in BASE.items() if k != "hyperparameterMetricTag"}, f"{F}.hyperparameterMetricTag", "required"),
    ({**BASE, "params": []}, f"{F}.params", "at least one parameter"),
    ({**BASE, "maxTrials": -1}, f"{F}.maxTrials", "1 or more"),
    ({**BASE, "maxParallelTrials": -2}, f"{F}.maxParallelTrials", "1 or more"),
    ({**BASE, "maxFailedTrials": -1}, f"{F}.maxFailedTrials", "0 or more"),
    ({**BASE, "algorithm": "HYPERBAND"}, f"{F}.algorithm", "must be one of"),
    ({**BASE, "algorithm": "GRID_SEARCH"}, f"{F}.params[0].type", "a DOUBLE has no grid"),
    (_param(parameterName="--lr"), f"{F}.params[0].parameterName", "usable as a --name=value flag"),
    (_param(parameterName=""), f"{F}.params[0].parameterName", "is required"),
    ({**BASE, "params": [LR, LR]}, f"{F}.params[1].parameterName", "'lr' is already a parameter"),
    (_param(type="FLOAT"), f"{F}.params[0].type", "DOUBLE, INTEGER, CATEGORICAL or DISCRETE"),
    ({**BASE, "params": [{"parameterName": "lr", "type": "DOUBLE", "maxValue": 1}]},
     f"{F}.params[0].minValue", "is required for a DOUBLE"),
    (_param(minValue=0.1, maxValue=0.1), f"{F}.params[0].maxValue", "greater than minValue"),
    (_param(minValue=0.2, maxValue=0.1), f"{F}.params[0].maxValue", "greater than minValue"),
    (_param(minValue=-1e308, maxValue=1e308), f"{F}.params[0].maxValue", "the range is not a finite number"),
    (_param(type="INTEGER", minValue=-1e308, maxValue=1e308), f"{F}.params[0].minValue", "within ±2147483647"),
    (_param(type="INTEGER", minValue=0, maxValue=2**31), f"{F}.params[0].maxValue", "within ±2147483647"),
    (_param(minValue="0.1"), f"{F}.params[0].minValue", "must be a number"),
    (_param(minValue=True), f"{F}.params[0].minValue", "must be a number"),
    (_param(type="INTEGER", minValue=1.5, maxValue=3), f"{F}.params[0].minValue", "whole numbers"),
    (_param(minValue=0, scaleType="UNIT_LOG_SCALE"), f"{F}.params[0].minValue", "greater than 0"),
    (_param(minValue=-1, scaleType="UNIT_REVERSE_LOG_SCALE"), f"{F}.params[0].minValue", "greater than 0"),
    ({**BASE, "params": [{"parameterName": "b", "type": "DISCRETE", "discreteValues": [1, 3, 2]}]},
     f"{F}.params[0].discreteValues[2]", "strictly increasing"),
    ({**BASE, "params": [{"parameterName": "b", "type": "DISCRETE", "discreteValues": [1, 1]}]},
     f"{F}.params[0].discreteValues[1]", "strictly increasing"),
    ({**BASE, "params": [{"parameterName": "b", "type": "DISCRETE", "discreteValues": []}]},
     f"{F}.params[0].discreteValues", "is required"),
    ({**BASE, "params": [{"parameterName": "b", "type": "DISCRETE", "discreteValues": list(range(MAX_VALUES + 1))}]},
     f"{F}.params[0].discreteValues", "at most 1000 values"),
    ({**BASE, "params": [{"parameterName": "b", "type": "DISCRETE", "discreteValues": [0, 1],
                          "scaleType": "UNIT_LOG_SCALE"}]}, f"{F}.params[0].discreteValues[0]", "greater than 0"),
    ({**BASE, "params": [{"parameterName": "c", "type": "CATEGORICAL",
                          "categoricalValues": [str(i) for i in range(MAX_VALUES + 1)]}]},
     f"{F}.params[0].categoricalValues", "at most 1000 values"),
    ({**BASE, "params": [{"parameterName": "c", "type": "CATEGORICAL", "categoricalValues": ["a", "a"]}]},
     f"{F}.params[0].categoricalValues", "unique, non-empty"),
    ({**BASE, "params": [{"parameterName": "c", "type": "CATEGORICAL", "categoricalValues": ["a", ""]}]},
     f"{F}.params[0].categoricalValues", "unique, non-empty"),
    ({**BASE, "params": [{"parameterName": "c", "type": "CATEGORICAL"}]},
     f"{F}.params[0].categoricalValues", "is required"),
    (_param(minValue=float("nan")), f"{F}.params[0].minValue", "finite"),
    (_param(maxValue=float("inf")), f"{F}.params[0].maxValue", "finite"),
    (_param(minValue=float("-inf")), f"{F}.params[0].minValue", "finite"),
    (_param(type="INTEGER", minValue=0, maxValue=10**400), f"{F}.params[0].maxValue", "finite"),
    ({**BASE, "params": [{"parameterName": "b", "type": "DISCRETE", "discreteValues": [1, float("inf")]}]},
     f"{F}.params[0].discreteValues[1]", "finite"),
    ({**BASE, "maxTrials": 2**31}, f"{F}.maxTrials", "at most 2147483647"),
    ({**BASE, "maxParallelTrials": 2**31}, f"{F}.maxParallelTrials", "at most 2147483647"),
    ({**BASE, "maxFailedTrials": 10**30}, f"{F}.maxFailedTrials", "at most 2147483647"),
])
def test_bad_specs_are_refused_with_the_field(doc, field, message):
    with pytest.raises(UserInputError) as e:
        parse_spec(doc)
    assert e.value.field == field and message in e.value.message


def test_trial_args_are_flags_in_the_specs_order():
    spec = parse_spec({**BASE, "params": [{"parameterName": "n", "type": "INTEGER", "minValue": 1, "maxValue": 9},
                                          LR, {"parameterName": "o", "type": "CATEGORICAL",
                                               "categoricalValues": ["a b"]}]})
    assert trial_args(spec, {"lr": 0.01, "o": "a b", "n": 3.0}) == ["--n=3", "--lr=0.01", "--o=a b"]


@pytest.mark.parametrize("doc, field, message", [
    ({}, F, "is empty"),
    ({**BASE, "hyperparameterMetricTag": "a\nb"}, f"{F}.hyperparameterMetricTag", "control, format or line"),
    ({**BASE, "hyperparameterMetricTag": "acc\turacy"}, f"{F}.hyperparameterMetricTag", "control, format or line"),
    ({**BASE, "hyperparameterMetricTag": "acc\u200buracy"}, f"{F}.hyperparameterMetricTag", "control, format"),
    ({**BASE, "hyperparameterMetricTag": "acc\u2028"}, f"{F}.hyperparameterMetricTag", "line-separator"),
    ({**BASE, "hyperparameterMetricTag": "   "}, f"{F}.hyperparameterMetricTag", "not only spaces"),
    ({**BASE, "hyperparameterMetricTag": "a" * 257}, f"{F}.hyperparameterMetricTag", "at most 256"),
])
def test_an_empty_spec_and_a_tag_that_is_not_one_token_are_refused(doc, field, message):
    with pytest.raises(UserInputError) as e:
        parse_spec(doc)
    assert e.value.field == field and message in e.value.message, str(e.value)


@pytest.mark.parametrize("tag", ["accuracy", "training/hptuning/metric", "val_loss", "top-5.acc", "précision",
                                 "Taxi Model Accuracy", " accuracy", "mean average precision (mAP@0.5)",
                                 "eval/Loss: cross entropy", "精度", "a" * 256])
def test_metric_tags_as_trainers_report_them(tag):
    assert parse_spec({**BASE, "hyperparameterMetricTag": tag}).metric == tag


def test_every_independent_mistake_of_a_sweep_is_told_at_once():
    """As a job spec's: a sweep with four mistakes is refused once, naming each field."""
    doc = {"goal": "UP", "hyperparameterMetricTag": "acc", "maxTrials": -1, "algorithm": "GRID_SEARCH",
           "params": [{"parameterName": "lr", "type": "DOUBLE", "minValue": 0.1, "maxValue": 0.01},
                      {"parameterName": "lr2", "type": "DOUBLE", "minValue": 0.01, "maxValue": 0.1}]}
    with pytest.raises(UserInputError) as e:
        parse_spec(doc)
    fields = [field for field, _ in e.value.violations]
    assert fields == [f"trainingInput.hyperparameters.{f}" for f in
                      ("goal", "params[0].maxValue", "maxTrials", "params[1].type")], fields
    assert "must be greater than minValue" in str(e.value) and "GRID_SEARCH needs" in str(e.value)
