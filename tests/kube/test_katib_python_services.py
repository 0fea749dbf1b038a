"""Sweeps on Katib's own Python suggestion services, as Katib v0.19.0's released katib-config routes
them (`real_katib`): ``bayesianoptimization`` on skopt (AI Platform's default algorithm),
``grid`` on optuna, ``random`` and ``tpe`` on hyperopt. Each service is Katib's own main.py in a
virtual environment built from its own requirements.txt (`make controllers`:
tests/controllers/build_python.sh), run by the process kubelet as its image
(tests/controllers/katib/serve_python.py). Nothing of Katib is played here.

Through the platform's jobs API as a member, with the example trainer as PyTorchJob trials: the
default algorithm and GRID_SEARCH over DISCRETE and INTEGER grids as AI Platform defines them;
natively, an Experiment with ``grid`` submitted through the platform (taken as written, monitored
as a sweep) and one with ``tpe``."""

from __future__ import annotations

import asyncio

import pytest

from server_ext.errors import JobExists
from server_ext.jobs.kube import katib_params
from tests.kube.job_env import plan, pytorch_doc, state, until
from tests.kube.test_job_packages import TRAINER, USER, service, shipped
from tests.kube.test_katib_real import native_experiment, sweep_body, sweeps_ns, trials_of  # noqa: F401 (fixture)
from tests.kube.test_kube_sweeps import validate_swagger

pytestmark = pytest.mark.kube


def experiment_of(kube_cluster, ns: str) -> dict:
    (experiment,) = kube_cluster.items("kubeflow.org", "v1beta1", "experiments", ns)
    return experiment


class SuggestionImages:
    """The images of the Deployments Katib makes in `ns` for its services, looked at every 0.2 s
    until `stop` (Katib deletes them when the Experiment ends)."""

    def __init__(self, kube_cluster, ns: str):
        self.seen: set[str] = set()
        self.task = asyncio.ensure_future(self._run(kube_cluster, ns))

    async def _run(self, kube_cluster, ns: str):
        while True:
            self.seen |= {c["image"] for d in kube_cluster.items("apps", "v1", "deployments", ns)
                          for c in d["spec"]["template"]["spec"]["containers"]}
            await asyncio.sleep(0.2)

    def stop(self) -> set[str]:
        self.task.cancel()
        return self.seen


async def test_the_default_algorithm_is_bayesian_optimisation_on_katibs_skopt_service(backend, kube_cluster,
                                                                                      sweeps_ns):
    """``algorithm`` left out (ALGORITHM_UNSPECIFIED): Katib's ``bayesianoptimization``, skopt's
    service; 4 trials 2 at a time, every suggestion inside the range, the sweep SUCCEEDED with
    Katib's observations."""
    ns = sweeps_ns
    body = sweep_body("tune_default", trials=4, parallel=2, epochs=2, sleep=0.2)
    del body["trainingInput"]["hyperparameters"]["algorithm"]
    images = SuggestionImages(kube_cluster, ns)
    await service(backend, ns).create(USER, ns, shipped(body, TRAINER))
    job = await state(backend, ns, "tune_default", "SUCCEEDED", timeout=300)
    experiment = experiment_of(kube_cluster, ns)
    assert experiment["spec"]["algorithm"]["algorithmName"] == "bayesianoptimization"
    assert images.stop() == {"ghcr.io/kubeflow/katib/suggestion-skopt:v0.19.0"}, images.seen
    trials = trials_of(kube_cluster, ns, experiment["metadata"]["name"])
    rates = [float(katib_params.assignments(t)["learning_rate"]) for t in trials]
    assert len(trials) == 4 and all(0.01 <= r <= 0.2 for r in rates) and len(set(rates)) == 4, rates
    out = job["trainingOutput"]
    assert [t["state"] for t in out["trials"]] == ["SUCCEEDED"] * 4 and out["completedTrialCount"] == "4"
    assert all("objectiveValue" in t["finalMetric"] for t in out["trials"]), out


async def test_grid_search_runs_every_point_of_the_grid_on_katibs_optuna_service(backend, kube_cluster, sweeps_ns):
    """GRID_SEARCH over a DISCRETE and an INTEGER parameter (AI Platform: grids of those types only):
    Katib's ``grid`` on optuna's service; maxTrials the grid's size, every point run once."""
    ns = sweeps_ns
    body = sweep_body("tune_grid", trials=4, parallel=2, epochs=2, sleep=0.2, algorithm="GRID_SEARCH")
    body["trainingInput"]["hyperparameters"]["params"] = [
        {"parameterName": "batch_size", "type": "DISCRETE", "discreteValues": [8, 32]},
        {"parameterName": "epochs", "type": "INTEGER", "minValue": 2, "maxValue": 3}]
    body["trainingInput"]["args"] = ["--sleep=0.2"]
    await service(backend, ns).create(USER, ns, shipped(body, TRAINER))
    job = await state(backend, ns, "tune_grid", "SUCCEEDED", timeout=300)
    experiment = experiment_of(kube_cluster, ns)
    assert experiment["spec"]["algorithm"]["algorithmName"] == "grid"
    points = sorted((int(float(h["batch_size"])), int(float(h["epochs"])))
                    for h in (t["hyperparameters"] for t in job["trainingOutput"]["trials"]))
    assert points == [(8, 2), (8, 3), (32, 2), (32, 3)], job["trainingOutput"]
    assert {t["state"] for t in job["trainingOutput"]["trials"]} == {"SUCCEEDED"}


async def test_a_native_grid_experiment_is_taken_as_written_and_monitored_as_a_sweep(backend, kube_cluster,
                                                                                     sweeps_ns):
    """A user's own Experiment (``grid`` over a stepped double) through the platform: stored as
    written (and valid against Katib's swagger), one jobId with jobs, monitored to SUCCEEDED with
    Katib's observation of each trial."""
    ns = sweeps_ns
    doc = native_experiment("native-grid", algorithm="grid", trials=2, parallel=1)
    doc["spec"]["parameters"][0]["feasibleSpace"] = {"min": "0.05", "max": "0.1", "step": "0.05"}
    job = await backend.submit_experiment(ns, USER, doc)
    assert job["jobId"] == "native_grid" and job["state"] == "QUEUED"
    stored = kube_cluster.get("kubeflow.org", "v1beta1", "experiments", ns, "native-grid")
    assert stored["spec"]["algorithm"] == {"algorithmName": "grid"}
    assert stored["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "jupyterhub-mlplatform"
    # (Katib's own status may already be there, with "completionTime": null, which its swagger does not allow)
    validate_swagger({k: v for k, v in stored.items() if k != "status"}, "v1beta1.Experiment")
    with pytest.raises(JobExists):
        await backend.submit_experiment(ns, USER, doc)
    with pytest.raises(JobExists):  # one jobId for jobs and sweeps
        await backend.submit(plan(pytorch_doc("native_grid"), ns))
    seen = ["QUEUED"]
    job = await state(backend, ns, "native_grid", "SUCCEEDED", seen, timeout=300)
    assert seen[-1] == "SUCCEEDED" and "FAILED" not in seen, seen
    trials = job["trainingOutput"]["trials"]
    assert sorted(float(t["hyperparameters"]["lr"]) for t in trials) == [0.05, 0.1], trials
    observed = {}  # what Katib's StdOut collector stored, by the trial's lr
    for trial in trials_of(kube_cluster, ns, "native-grid"):
        metric = next(m for m in trial["status"]["observation"]["metrics"] if m["name"] == "rmse")
        observed[float(katib_params.assignments(trial)["lr"])] = float(metric["latest"])
    assert {float(t["hyperparameters"]["lr"]): t["finalMetric"]["objectiveValue"] for t in trials} == observed


async def test_a_native_tpe_experiment_runs_on_katibs_hyperopt_service(kube, kube_cluster, sweeps_ns):
    ns = sweeps_ns
    doc = native_experiment("native-tpe", algorithm="tpe", trials=3, parallel=2)
    images = SuggestionImages(kube_cluster, ns)
    await kube.request("POST", f"/apis/kubeflow.org/v1beta1/namespaces/{ns}/experiments", doc)

    def succeeded():
        got = kube_cluster.get("kubeflow.org", "v1beta1", "experiments", ns, "native-tpe")
        return any(c["type"] == "Succeeded" and c["status"] == "True"
                   for c in (got.get("status") or {}).get("conditions") or []) and got

    got = await until(succeeded, timeout=300, what="the tpe Experiment succeeded")
    assert images.stop() == {"ghcr.io/kubeflow/katib/suggestion-hyperopt:v0.19.0"}, images.seen
    assert got["status"]["trialsSucceeded"] == 3, got["status"]
