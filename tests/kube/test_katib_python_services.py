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
import contextlib
import math
import pathlib

import pytest
import yaml

from hub_ext.core.credentials import MANAGED_BY
from server_ext.errors import JobExists
from server_ext.jobs.kube import katib_params
from tests.cluster.identities import install_platform
from tests.controllers.katib_system import katib_config_changed
from tests.kube.job_env import plan, pytorch_doc, state, until
from tests.kube.operator_env import operator_binding, running_operator
from tests.kube.test_job_packages import TRAINER, USER, service, shipped
from tests.kube.test_katib_real import ROOT, native_experiment, sweep_body, sweeps_ns, trials_of  # noqa: F401 (fixture)
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
    # skopt searched w = exp(u) in [1, e] (it samples doubles log-uniformly); the trainer got 0.01 + u * 0.19
    searched = [float(katib_params.assignments(t)["learning_rate-unit"]) for t in trials]
    assert len(trials) == 4 and all(1 <= w <= math.e for w in searched), searched
    out = job["trainingOutput"]
    rates = sorted(float(t["hyperparameters"]["learning_rate"]) for t in out["trials"])
    assert rates == pytest.approx(sorted(0.01 + math.log(w) * 0.19 for w in searched)) and len(set(rates)) == 4
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


@contextlib.asynccontextmanager
async def observing_operator(kube, kube_cluster, ns: str, katib, workdir: pathlib.Path):
    """The platform's operator, with `ns` a project (the platform's label, the operator's
    RoleBinding), writing early-stopped trials' observations from `katib`'s DB manager."""
    kube_cluster.patch("", "v1", "namespaces", None, ns, {"metadata": {"labels": dict(MANAGED_BY)}})
    await operator_binding(kube, ns)
    workdir.mkdir()
    async with running_operator(kube_cluster, workdir, [f"--katib-db-manager={katib.db_address}"]) as op:
        yield op


async def test_the_example_trainers_own_config_runs_unchanged_with_medianstop_early_stopping(
        backend, kube, kube_cluster, sweeps_ns, katib_log, tmp_path):
    """examples/trainer/hptuning_config.yaml as it ships (the default algorithm, 6 trials 2 at a time,
    ``enableTrialEarlyStopping: true``) through the jobs API: Katib's skopt suggests, Katib's
    medianstop service (beside it in the suggestion pod, as its own ServiceAccount) gives the trials'
    collectors their stop rules, the platform's operator writes the observations of the trials it
    stops (so Katib goes on making trials), and the sweep SUCCEEDS; a trial medianstop stopped reads
    SUCCEEDED with ``isTrialStoppedEarly``, as on AI Platform."""
    ns = sweeps_ns
    config = yaml.safe_load((ROOT / "examples" / "trainer" / "hptuning_config.yaml").read_text())
    body = sweep_body("tune_example")
    body["trainingInput"].update(config["trainingInput"])
    images = SuggestionImages(kube_cluster, ns)
    async with observing_operator(kube, kube_cluster, ns, katib_log, tmp_path / "operator"):
        await service(backend, ns).create(USER, ns, shipped(body, TRAINER))
        job = await state(backend, ns, "tune_example", "SUCCEEDED", timeout=400)
    experiment = experiment_of(kube_cluster, ns)
    assert experiment["spec"]["algorithm"]["algorithmName"] == "bayesianoptimization"
    assert experiment["spec"]["earlyStopping"]["algorithmName"] == "medianstop"
    assert images.stop() == {"ghcr.io/kubeflow/katib/suggestion-skopt:v0.19.0",
                             "ghcr.io/kubeflow/katib/earlystopping-medianstop:v0.19.0"}, images.seen
    trials = job["trainingOutput"]["trials"]
    print("\ntrials:", [(t["hyperparameters"], t.get("isTrialStoppedEarly"), t.get("finalMetric")) for t in trials])
    assert len(trials) == 6 and {t["state"] for t in trials} == {"SUCCEEDED"}, trials
    for t in trials:  # skopt's suggestions on the config's own scales, each trial's rmse a number
        hp = t["hyperparameters"]
        assert 0.001 <= float(hp["learning_rate"]) <= 0.3 and hp["batch_size"] in ("8", "16", "32"), t
        # (a trial medianstop stopped before Katib's collector reported has no finalMetric)
        assert t.get("isTrialStoppedEarly") or math.isfinite(t["finalMetric"]["objectiveValue"]), t


# a trial program whose first run reports a good rmse and every later run a bad one, whatever its
# parameter: the first trial sets the bar, the second is worse from its first report on
ORDERED_TRIAL = """import os, sys, time
mark = sys.argv[1]
first = not os.path.exists(mark)
open(mark, "a").close()
for step in range(30):
    print(f"rmse={1.0 if first else 5.0}", flush=True)
    time.sleep(0.3)
"""


async def test_medianstop_stops_trials_worse_than_the_median_and_the_sweep_goes_on_to_its_end(
        kube, kube_cluster, sweeps_ns, katib_log, runner, tmp_path):
    """A native Experiment with Katib's medianstop (one completed trial needed, from the 2nd report),
    3 trials one at a time: the first runs to the end with rmse 1; the second reports rmse 5, so
    Katib's collector in its pod stops the trainer and asks the medianstop service (through the
    Service's name) to mark the Trial; medianstop, as its own ServiceAccount, writes ``EarlyStopped``
    to the Trial's status (the platform's policies let it, and only that). Katib leaves that Trial
    without an observation (kubeflow/katib#1377) and then asks for no third trial; the platform's
    operator writes the observation from Katib's DB manager, so the third trial is made, stopped
    early too, and the Experiment succeeds."""
    ns = sweeps_ns
    # a project as the platform's admission policies see it (installed here): its pods run as the
    # runner; Katib's suggestion pod runs as the account Katib made for it, and writes a Trial's status
    install_platform(kube_cluster)
    kube_cluster.patch("", "v1", "namespaces", None, ns, {"metadata": {
        "annotations": {"mlplatform.io/accelerators": "all"}}})
    (tmp_path / "trial.py").write_text(ORDERED_TRIAL)
    tmp_path.chmod(0o755)
    doc = native_experiment("stop-early", algorithm="random", trials=3, parallel=1)
    doc["spec"]["earlyStopping"] = {"algorithmName": "medianstop", "algorithmSettings": [
        {"name": "min_trials_required", "value": "1"}, {"name": "start_step", "value": "2"}]}
    (container,) = doc["spec"]["trialTemplate"]["trialSpec"]["spec"]["template"]["spec"]["containers"]
    doc["spec"]["trialTemplate"]["trialSpec"]["spec"]["template"]["spec"]["serviceAccountName"] = runner
    container["command"] = ["python", str(tmp_path / "trial.py"), str(tmp_path / "first-ran"),
                            "--learning_rate=${trialParameters.learningRate}"]
    async with observing_operator(kube, kube_cluster, ns, katib_log, tmp_path / "operator") as op:
        await kube.request("POST", f"/apis/kubeflow.org/v1beta1/namespaces/{ns}/experiments", doc)

        def ended():
            got = kube_cluster.get("kubeflow.org", "v1beta1", "experiments", ns, "stop-early")
            return any(c["type"] in ("Succeeded", "Failed") and c["status"] == "True"
                       for c in (got.get("status") or {}).get("conditions") or []) and got

        got = await until(ended, timeout=300, what="the medianstop Experiment ended")

        def observed():  # the last trial's too: Katib ends the Experiment once it is stopped
            found = trials_of(kube_cluster, ns, "stop-early")
            return all((t.get("status") or {}).get("observation") for t in found) and found

        trials = await until(observed, timeout=30, what="every trial's observation written")
        said = op.log()
    states = [{c["type"] for c in t["status"]["conditions"] if c["status"] == "True"} for t in trials]
    assert got["status"].get("trialsSucceeded") == 1 and got["status"].get("trialsEarlyStopped") == 2, (
        got["status"], states)
    assert "Succeeded" in states[0] and "EarlyStopped" in states[1] and "EarlyStopped" in states[2], states
    for stopped in trials[1:]:
        condition = {c["type"]: c for c in stopped["status"]["conditions"]}["EarlyStopped"]
        assert condition["reason"] == "TrialEarlyStopped", condition
        # the operator's observation: what Katib's collector stored before the trainer was stopped
        metrics = {m["name"]: m for m in stopped["status"]["observation"]["metrics"]}
        assert {k: float(metrics["rmse"][k]) for k in ("min", "max", "latest")} == {"min": 5, "max": 5,
                                                                                      "latest": 5}, metrics
        assert metrics["loss"]["latest"] == "unavailable", metrics  # the trainer printed no loss
        assert f"trial {ns}/{stopped['metadata']['name']} (early stopped): observation written" in said, said
    assert float(next(m for m in trials[0]["status"]["observation"]["metrics"] if m["name"] == "rmse")["latest"]) == 1


async def test_a_sweep_whose_katib_service_cannot_start_says_why_and_what_to_do(backend, kube_cluster, sweeps_ns):
    """A cluster whose Katib names an image it cannot pull for ``random`` (this one's katib-config,
    changed for the test): the service's pod waits in ErrImagePull / ImagePullBackOff (the kubelet
    retries with back-off; no new pods), Katib's Experiment waits with no trial, and the platform's
    sweep says why in ``statusMessage``, naming the algorithm as asked and what to do; cancelled,
    it ends CANCELLED and the message goes."""
    ns = sweeps_ns

    def unpullable_random(config: dict) -> None:
        for s in config["runtime"]["suggestions"]:
            if s["algorithmName"] == "random":
                s["image"] = "registry.example.com/katib/suggestion-random:missing"

    with katib_config_changed(kube_cluster, unpullable_random):
        await asyncio.sleep(1)  # Katib reads the ConfigMap from its informer's cache
        await service(backend, ns).create(USER, ns, shipped(sweep_body("tune_stuck"), TRAINER))

        async def said():
            job = await backend.get(ns, "tune_stuck")
            return job if "cannot start" in job.get("statusMessage", "") else None

        job = None
        for _ in range(300):
            job = await said()
            if job:
                break
            await asyncio.sleep(0.1)
        assert job, await backend.get(ns, "tune_stuck")
        assert job["state"] in ("QUEUED", "PREPARING", "RUNNING") and not job["trainingOutput"].get("trials"), job
        assert job["statusMessage"].startswith(
            "the sweep's Katib service (random, for RANDOM_SEARCH) cannot start in this cluster (ErrImagePull: "
            'test kubelet: no program for image "registry.example.com/katib/suggestion-random:missing"') or \
            job["statusMessage"].startswith(
            "the sweep's Katib service (random, for RANDOM_SEARCH) cannot start in this cluster (ImagePullBackOff: "
            'Back-off pulling image "registry.example.com/katib/suggestion-random:missing")'), job
        assert job["statusMessage"].endswith("or cancel this sweep and submit it with another algorithm"), job
        service_pods = kube_cluster.items("", "v1", "pods", ns, labelSelector="katib.kubeflow.org/suggestion")
        assert len(service_pods) == 1 and service_pods[0]["status"]["phase"] == "Pending", service_pods
        assert (await backend.cancel(ns, "tune_stuck"))["state"] in ("CANCELLING", "CANCELLED")
        job = await state(backend, ns, "tune_stuck", "CANCELLED", timeout=60)
        assert "statusMessage" not in job, job
