"""Sweeps whose trials are TrainJobs (issue 31.3): real Katib v0.19 (its own TrainJob trial kind)
on real Kubeflow Trainer v2.3.0 and JobSet, the platform's runtime, the process kubelet. Katib's
controller is started after Trainer's CRDs exist (`katib_on_trainer`): a Katib started before
does not watch TrainJobs. An AI Platform hptuning job with ``training_api: auto`` and a user's own
Experiment whose trialSpec is a TrainJob both run to completion with every trial's metric
collected by Katib, best first."""

from __future__ import annotations

from dataclasses import replace

import pytest

from server_ext.runtimes.kube.backend import KubeBackend
from tests.kube.job_env import NODES, SETTINGS, state
from tests.kube.test_job_packages import TRAINER, USER, service, shipped
from tests.kube.test_katib_real import INJECTION, ROOT, condition, sweep_body, trials_of

pytestmark = pytest.mark.kube
TRAINER_API = "trainer.kubeflow.org", "v1alpha1", "trainjobs"


@pytest.fixture(scope="module")
def katib_on_trainer(platform_runtime, request):
    """Real Katib, its controller started once Trainer v2 (and the platform's runtime) is there."""
    return request.getfixturevalue("real_katib")


@pytest.fixture
async def v2_sweeps(katib_on_trainer, kube, kube_target, runner, kube_cluster, _operator_log):
    """(backend with ``training_api: auto``, namespace labelled for Katib's collector injection)."""
    ns = kube_target.namespace
    await kube.request("PATCH", f"/api/v1/namespaces/{ns}", {"metadata": {"labels": INJECTION}},
                       content_type="application/merge-patch+json")
    kube_cluster.kubelet(mode="process", nodes=NODES)
    b = KubeBackend(kube, replace(SETTINGS, training_api="auto"), poll_interval=0.1)
    yield b, ns
    await b.close()


async def test_an_ai_platform_sweep_runs_trainjob_trials_on_real_katib(v2_sweeps, kube_cluster):
    backend, ns = v2_sweeps
    jobs = service(backend, ns)
    await jobs.create(USER, ns, shipped(sweep_body("tune_v2", trials=2, parallel=2, sleep=0.2), TRAINER))
    job = await state(backend, ns, "tune_v2", "SUCCEEDED", timeout=240)
    experiment = next(iter(kube_cluster.items("kubeflow.org", "v1beta1", "experiments", ns)))
    assert experiment["spec"]["trialTemplate"]["trialSpec"]["kind"] == "TrainJob"
    trials = trials_of(kube_cluster, ns, experiment["metadata"]["name"])
    made = {t["metadata"]["name"] for t in kube_cluster.items(*TRAINER_API, ns)}
    assert made == {t["metadata"]["name"] for t in trials}  # each trial's job is a TrainJob (retained)
    assert not kube_cluster.items("kubeflow.org", "v1", "pytorchjobs", ns)
    out = job["trainingOutput"]
    assert [t["state"] for t in out["trials"]] == ["SUCCEEDED"] * 2 and out["completedTrialCount"] == "2"
    observed = {t["spec"]["parameterAssignments"][0]["value"]:
                float(next(m for m in t["status"]["observation"]["metrics"] if m["name"] == "rmse")["latest"])
                for t in trials}  # what Katib's collector, injected into node 0's pod, stored
    for t in out["trials"]:
        assert t["finalMetric"]["objectiveValue"] == observed[str(t["hyperparameters"]["learning_rate"])], (t, observed)
    values = [t["finalMetric"]["objectiveValue"] for t in out["trials"]]
    assert values == sorted(values)  # best first (MINIMIZE)
    lines = [x.text async for x in backend.logs(ns, "tune_v2", f"trial-{out['trials'][0]['trialId']}")]
    assert any(line.startswith("epoch 3/3 ") for line in lines), lines


async def test_a_native_experiment_with_a_trainjob_trial_runs_to_succeeded(v2_sweeps, kube_cluster):
    backend, ns = v2_sweeps
    trial = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "spec": {
        "runtimeRef": {"name": "mlplatform-torch"},
        "trainer": {"image": "python:3.11-slim", "numNodes": 1,
                    "env": [{"name": "PYTHONPATH", "value": str(ROOT / "examples" / "trainer")}],
                    "command": ["python", "-m", "trainer.task", "--epochs=3", "--sleep=0.2",
                                "--learning_rate=${trialParameters.learningRate}"]}}}
    doc = {"apiVersion": "kubeflow.org/v1beta1", "kind": "Experiment", "metadata": {"name": "own-v2"},
           "spec": {"objective": {"type": "minimize", "objectiveMetricName": "rmse"},
                    "algorithm": {"algorithmName": "random"},
                    "parallelTrialCount": 2, "maxTrialCount": 2, "maxFailedTrialCount": 1,
                    "metricsCollectorSpec": {"collector": {"kind": "StdOut"}},
                    "parameters": [{"name": "lr", "parameterType": "double",
                                    "feasibleSpace": {"min": "0.01", "max": "0.2"}}],
                    "trialTemplate": {"primaryContainerName": "node",
                                      "trialParameters": [{"name": "learningRate", "reference": "lr"}],
                                      "trialSpec": trial}}}
    await backend.submit_experiment(ns, USER, doc)
    job = await state(backend, ns, "own_v2", "SUCCEEDED", timeout=240)
    (experiment,) = kube_cluster.items("kubeflow.org", "v1beta1", "experiments", ns)
    assert condition(experiment, "Succeeded")
    out = job["trainingOutput"]
    assert [t["state"] for t in out["trials"]] == ["SUCCEEDED"] * 2
    assert all(t["finalMetric"]["objectiveValue"] > 0 for t in out["trials"])
    assert len(kube_cluster.items(*TRAINER_API, ns)) == 2
