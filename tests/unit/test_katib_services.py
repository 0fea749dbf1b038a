"""`server_ext.jobs.kube.katib_services`: a sweep whose Katib service cannot start, in words."""

from __future__ import annotations

import pytest

from server_ext.jobs.kube import katib_services

pytestmark = pytest.mark.unit


def experiment(name="tune", algorithm="bayesianoptimization", early=None) -> dict:
    spec = {"algorithm": {"algorithmName": algorithm}}
    if early:
        spec["earlyStopping"] = {"algorithmName": early}
    return {"metadata": {"name": name}, "spec": spec}


def pod(experiment_name: str, **states) -> dict:
    return {"metadata": {"name": f"{experiment_name}-x", "resourceVersion": "7",
                         "labels": {katib_services.EXPERIMENT_LABEL: experiment_name,
                                    katib_services.SERVICE_LABEL: experiment_name}},
            "spec": {"containers": []},
            "status": {"phase": "Pending", "containerStatuses": [
                {"name": name.replace("_", "-"), "state": state, "image": "x"} for name, state in states.items()]}}


PULL = {"waiting": {"reason": "ImagePullBackOff", "message": 'Back-off pulling image "ghcr.io/x:1"'}}


@pytest.mark.parametrize("exp, states, words", [
    (experiment(), {"suggestion": PULL},
     "the sweep's Katib service (bayesianoptimization, for the default algorithm) cannot start in this cluster "
     "(ImagePullBackOff: Back-off pulling image \"ghcr.io/x:1\"); ask your platform team to install it, or "
     "cancel this sweep and submit it with another algorithm"),
    (experiment(algorithm="grid"), {"suggestion": {"waiting": {"reason": "CrashLoopBackOff"}}},
     "the sweep's Katib service (grid, for GRID_SEARCH) cannot start in this cluster (CrashLoopBackOff); ask your "
     "platform team to install it, or cancel this sweep and submit it with another algorithm"),
    (experiment(algorithm="cmaes", early="medianstop"),
     {"suggestion": {"running": {}}, "early_stopping": {"waiting": {"reason": "ErrImagePull"}}},
     "the sweep's Katib service (medianstop, for enableTrialEarlyStopping) cannot start in this cluster "
     "(ErrImagePull); ask your platform team to install it, or cancel this sweep and submit it without early "
     "stopping"),
    (experiment(algorithm="cmaes"), {"suggestion": {"waiting": {"reason": "ErrImagePull"}}},
     "the sweep's Katib service (cmaes) cannot start in this cluster (ErrImagePull); ask your platform team to "
     "install it, or cancel this sweep and submit it with another algorithm"),
    (experiment(), {"suggestion": {"waiting": {"reason": "ContainerCreating"}}}, ""),  # starting: nothing wrong
    (experiment(), {"suggestion": {"running": {}}}, ""),
])
def test_a_service_that_cannot_start_is_said_with_the_algorithm_as_asked_and_what_to_do(exp, states, words):
    pods = [katib_services.slim_pod(pod("tune", **states))]
    assert katib_services.trouble(exp, pods) == words


def test_only_the_experiments_own_service_pods_count():
    other = katib_services.slim_pod(pod("other", suggestion=PULL))
    assert katib_services.trouble(experiment("tune"), [other]) == ""
    assert katib_services.pods_of(experiment("other"), [other]) == [other]
    assert set(other) == {"metadata", "status"} and "spec" not in other  # what the cache keeps
