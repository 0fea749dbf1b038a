"""The platform's mapping of AI Platform sweeps (server_ext/jobs/kube/katib.py) checked on real Katib
v0.19.0 (`real_katib`, goptuna, the real Training Operator, Katib's File collector): issue 15 item 4.

- ``UNIT_REVERSE_LOG_SCALE`` is searched as ``z = ln y`` uniformly (goptuna ignores ``logUniform``),
  the trial passing ``min + max − exp(z)``: shown with sobol's first points;
- ``maxFailedTrials``: a trainer that fails → trials ``Failed`` (the PyTorchJob trial's failure
  condition on the real operator's status; a batch Job trial's on the Job controller's) →
  Experiment ``Failed`` → the platform's job FAILED with Katib's reason in ``errorMessage``;
- names: a sweep with the longest jobId the platform takes (`katib.MAX_NAME`) runs on the real
  controllers, and every name and label value they make from it stays a DNS label (≤ 63);
- early stopping asked of a Katib that has no early-stopping service (this one: medianstop is
  Python-only; `katib_system` does not offer it) is refused at submit with Katib's reason, not
  ignored.
"""

from __future__ import annotations

import asyncio

import math

import pytest

from server_ext.jobs.kube import katib as mapping
from tests.controllers.katib_system import katib_config_changed
from tests.kube.job_env import SETTINGS, plan, state, until
from tests.kube.test_job_packages import TRAINER, USER, service, shipped
from tests.kube.test_katib_real import ROOT, sweep_body, sweeps_ns, trials_of  # noqa: F401 (fixture)

pytestmark = pytest.mark.kube


def custom_body(job_id: str, params: list[dict], args: list[str], trials: int = 3, parallel: int = 2,
                **hyper) -> dict:
    """A sweep of the example trainer as a custom container (a batch Job per trial)."""
    return {"jobId": job_id, "trainingInput": {
        "scaleTier": "CUSTOM", "masterType": "n1-standard-4", "args": args,
        "masterConfig": {"imageUri": "python:3.11-slim", "containerCommand": [
            "env", f"PYTHONPATH={ROOT / 'examples' / 'trainer'}", "python", "-m", "trainer.task"]},
        "hyperparameters": {"goal": "MINIMIZE", "hyperparameterMetricTag": "rmse", "maxTrials": trials,
                            "maxParallelTrials": parallel, "algorithm": "RANDOM_SEARCH", "params": params, **hyper}}}


async def test_a_reverse_log_scale_is_sampled_in_log_space_by_goptuna(kube, backend, kube_cluster, sweeps_ns):
    """sobol's first three points are the 1/4, 1/2, 3/4 points of the searched interval
    ``[ln min, ln max]``; the trainer gets ``min + max − exp(z)`` for each (a linear search of ``y``
    would give 0.8675, 0.745, 0.6225 over [0.5, 0.99])."""
    ns = sweeps_ns
    low, high = 0.5, 0.99
    doc = custom_body("reverse_sobol", [{"parameterName": "learning_rate", "type": "DOUBLE", "minValue": low,
                                         "maxValue": high, "scaleType": "UNIT_REVERSE_LOG_SCALE"}],
                      ["--epochs=1", "--sleep=0.5"])
    manifest = mapping.experiment_manifest(plan(doc, ns), SETTINGS)
    assert manifest["spec"]["trialTemplate"]["trialSpec"]["kind"] == "Job"
    assert manifest["spec"]["parameters"] == [{"name": "learning_rate-reversed-log", "parameterType": "double",
                                               "feasibleSpace": {"min": repr(math.log(low)),
                                                                 "max": repr(math.log(high))}}]
    manifest["spec"]["algorithm"] = {"algorithmName": "sobol"}
    await kube.request("POST", f"/apis/kubeflow.org/v1beta1/namespaces/{ns}/experiments", manifest)
    job = await state(backend, ns, "reverse_sobol", "SUCCEEDED", timeout=150)  # the Job trials' success condition
    given = sorted(float(t["hyperparameters"]["learning_rate"]) for t in job["trainingOutput"]["trials"])
    want = sorted(low + high - math.exp(math.log(low) + u * (math.log(high) - math.log(low)))
                  for u in (0.25, 0.5, 0.75))
    assert given == pytest.approx(want, rel=1e-9), given
    for t in job["trainingOutput"]["trials"]:  # what the trainer itself was given
        lines = [x.text async for x in backend.logs(ns, "reverse_sobol", f"trial-{t['trialId']}")]
        assert any(line.startswith(f"hyperparameters: learning_rate={t['hyperparameters']['learning_rate']} ")
                   for line in lines), lines


def _dns_labels(kube_cluster, ns: str) -> list[tuple[str, str]]:
    """(what, value) of every name and label value of the namespace's sweep objects longer than 63."""
    too_long = []
    for group, version, plural in (("kubeflow.org", "v1beta1", "trials"), ("kubeflow.org", "v1", "pytorchjobs"),
                                   ("", "v1", "pods"), ("", "v1", "services"), ("apps", "v1", "deployments")):
        for obj in kube_cluster.items(group, version, plural, ns):
            meta = obj["metadata"]
            too_long += [(f"{plural}/{meta['name']}", meta["name"])] if len(meta["name"]) > 63 else []
            too_long += [(f"{plural}/{meta['name']} label {k}", v) for k, v in (meta.get("labels") or {}).items()
                         if len(v) > 63]
    return too_long


async def test_failing_trials_fail_the_sweep_with_the_longest_job_id(backend, kube_cluster, sweeps_ns):
    """``maxFailedTrials: 2`` of PyTorchJob trials whose trainer exits 1 at its second epoch: the
    real operator marks each PyTorchJob Failed, Katib's failure condition fails the Trial, two
    failures fail the Experiment, and the platform says FAILED with Katib's reason. The jobId has
    `katib.MAX_NAME` characters: trials, PyTorchJobs, pods, Services and the suggestion's Deployment
    are made, and every name and label value stays ≤ 63."""
    ns = sweeps_ns
    job_id = "failing_" + "x" * (mapping.MAX_NAME - len("failing_"))
    body = sweep_body(job_id, trials=3, parallel=2, epochs=3, sleep=0.5)
    body["trainingInput"]["args"].append("--fail_at_epoch=2")
    body["trainingInput"]["hyperparameters"]["maxFailedTrials"] = 2
    jobs = service(backend, ns)
    await jobs.create(USER, ns, shipped(body, TRAINER))
    job = await state(backend, ns, job_id, "FAILED", timeout=240)
    name = job_id.replace("_", "-")
    assert len(name) == mapping.MAX_NAME
    experiment = kube_cluster.get("kubeflow.org", "v1beta1", "experiments", ns, name)
    failed = next(c for c in experiment["status"]["conditions"] if c["type"] == "Failed")
    # Katib's words (reason ExperimentFailed; no ExperimentMaxFailedTrialsReached in v0.19.0)
    assert failed["message"] == "Experiment has failed because max failed count has reached", failed
    assert failed["message"] in job["errorMessage"], job["errorMessage"]
    trials = trials_of(kube_cluster, ns, name)
    failed_trials = [t for t in trials if any(c["type"] == "Failed" and c["status"] == "True"
                                              for c in t["status"]["conditions"])]
    assert len(failed_trials) >= 2  # (Katib may have started a third after the first failure)
    assert [t["state"] for t in job["trainingOutput"]["trials"]].count("FAILED") >= 2
    for t in failed_trials:  # the trial's PyTorchJob failed by the real operator (not only its pod)
        pytorchjob = kube_cluster.get("kubeflow.org", "v1", "pytorchjobs", ns, t["metadata"]["name"])
        assert any(c["type"] == "Failed" and c["status"] == "True" for c in pytorchjob["status"]["conditions"])
    # the names real Katib and the operator made from the longest jobId
    assert all(len(t["metadata"]["name"]) <= 63 for t in trials)
    pods = kube_cluster.items("", "v1", "pods", ns, labelSelector="training.kubeflow.org/job-name")
    assert pods and all(p["metadata"]["labels"][mapping.TRIAL_LABEL] == p["metadata"]["labels"][
        "training.kubeflow.org/job-name"] for p in pods if mapping.TRIAL_LABEL in p["metadata"]["labels"])
    assert _dns_labels(kube_cluster, ns) == []


async def test_a_failing_batch_job_trial_fails_the_sweep(backend, kube_cluster, sweeps_ns):
    """The batch Job trial's failure condition (the Job controller's ``Failed``) with one trial:
    ``maxFailedTrials`` unset is the platform's default (one wave: 1 here)."""
    ns = sweeps_ns
    doc = custom_body("failing_job", [{"parameterName": "learning_rate", "type": "DOUBLE", "minValue": 0.01,
                                       "maxValue": 0.1}], ["--epochs=2", "--sleep=0.5", "--fail_at_epoch=2"],
                      trials=1, parallel=1)
    jobs = service(backend, ns)
    await jobs.create(USER, ns, doc)
    job = await state(backend, ns, "failing_job", "FAILED", timeout=150)
    experiment = kube_cluster.get("kubeflow.org", "v1beta1", "experiments", ns, "failing-job")
    assert experiment["spec"]["maxFailedTrialCount"] == 1
    assert experiment["spec"]["trialTemplate"]["trialSpec"]["kind"] == "Job"
    assert "max failed count has reached" in job["errorMessage"], job["errorMessage"]
    assert [t["state"] for t in job["trainingOutput"]["trials"]] == ["FAILED"]
    (trial,) = trials_of(kube_cluster, ns, "failing-job")
    batch = kube_cluster.get("batch", "v1", "jobs", ns, trial["metadata"]["name"])
    assert any(c["type"] == "Failed" and c["status"] == "True" for c in batch["status"]["conditions"])


async def test_early_stopping_is_refused_where_katib_has_no_early_stopping_service(backend, kube_cluster,
                                                                                   sweeps_ns):
    """``enableTrialEarlyStopping`` maps to Katib's ``medianstop``; a Katib whose katib-config has no
    early-stopping service (this one's, with ``runtime.earlyStoppings`` taken out for the test)
    refuses the Experiment in its webhook, and the platform tells the user so at submit: not a sweep
    that runs without early stopping, nor one that waits for a service that is not there."""
    from hub_ext.core.errors import UserInputError

    ns = sweeps_ns
    with katib_config_changed(kube_cluster, lambda config: config["runtime"].pop("earlyStoppings")):
        doc = custom_body("early_stop", [{"parameterName": "learning_rate", "type": "DOUBLE", "minValue": 0.01,
                                          "maxValue": 0.1}], ["--epochs=1"], enableTrialEarlyStopping=True)
        await asyncio.sleep(1)  # Katib's webhook reads the ConfigMap from its informer's cache
        with pytest.raises(UserInputError) as e:
            await service(backend, ns).create(USER, ns, doc)
        refused = e.value
        assert refused.field == "trainingInput", refused
        assert "admission control refused" in refused.message
        assert "unable to get EarlyStopping config data for algorithm medianstop" in refused.message
        await until(lambda: not kube_cluster.items("kubeflow.org", "v1beta1", "experiments", ns), timeout=5)
