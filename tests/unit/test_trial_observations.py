"""hub_ext.operator.rules.observations: which Trials the operator fills in, and the observation it
writes, as Katib v0.19.0's trial controller computes one (getMetrics). The write itself, from the
real Katib DB manager, is proven in tests/kube/test_katib_python_services.py."""

import pytest

from hub_ext.operator.rules.observations import UNAVAILABLE, lacks_observation, metric_names, observation

pytestmark = pytest.mark.unit


def trial(conditions=(), observed=None, additional=(), strategies=(("rmse", "min"),), deleting=False):
    t = {"metadata": {"name": "t", "namespace": "p"},
         "spec": {"objective": {"objectiveMetricName": "rmse", "additionalMetricNames": list(additional),
                                "metricStrategies": [{"name": n, "value": v} for n, v in strategies]}},
         "status": {"conditions": [{"type": c, "status": s} for c, s in conditions]}}
    if observed is not None:
        t["status"]["observation"] = observed
    if deleting:
        t["metadata"]["deletionTimestamp"] = "2026-12-08T00:00:00Z"
    return t


STOPPED = (("Created", "True"), ("Running", "True"), ("EarlyStopped", "True"))


def test_only_an_early_stopped_trial_without_its_objectives_value_lacks_one():
    assert lacks_observation(trial(STOPPED))
    assert lacks_observation(trial(STOPPED, {"metrics": [{"name": "rmse", "latest": UNAVAILABLE}]}))
    assert lacks_observation(trial(STOPPED, {"metrics": [{"name": "loss", "latest": "1"}]}))
    assert not lacks_observation(trial(STOPPED, {"metrics": [{"name": "rmse", "min": "1", "max": "2", "latest": "2"}]}))
    assert not lacks_observation(trial((("Running", "True"),)))  # Katib writes a running trial's itself
    assert not lacks_observation(trial((("Succeeded", "True"),)))
    assert not lacks_observation(trial((("EarlyStopped", "False"),)))
    assert not lacks_observation(trial(STOPPED, deleting=True))


def test_the_metrics_read_are_the_objectives_then_the_additional_ones_once_each():
    assert metric_names(trial(additional=("accuracy", "rmse", "loss"))) == ["rmse", "accuracy", "loss"]


def test_min_max_and_the_latest_by_time_stamp_per_strategy():
    logs = [("2026-12-08T01:00:02Z", "rmse", "5.0"), ("2026-12-08T01:00:01Z", "rmse", "7.5"),
            ("2026-12-08T01:00:03.5Z", "rmse", "6.0"), ("2026-12-08T01:00:03.5Z", "rmse", "6.5"),
            ("2026-12-08T01:00:04Z", "accuracy", "n/a"), ("2026-12-08T01:00:01Z", "other", "1")]
    got = observation(logs, trial(strategies=(("rmse", "min"), ("accuracy", "max"), ("loss", "latest"))))
    assert got == {"metrics": [
        {"name": "rmse", "min": "5.0", "max": "7.5", "latest": "6.5"},  # the later log of one stamp wins
        {"name": "accuracy", "min": UNAVAILABLE, "max": UNAVAILABLE, "latest": "n/a"},  # not a number
        {"name": "loss", "min": UNAVAILABLE, "max": UNAVAILABLE, "latest": UNAVAILABLE}]}


def test_a_time_stamp_that_is_not_rfc3339_is_refused():
    with pytest.raises(ValueError):
        observation([("yesterday", "rmse", "1")], trial())
