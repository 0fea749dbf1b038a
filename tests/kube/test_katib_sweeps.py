"""AI Platform sweeps through the platform's jobs API on real Katib v0.19.0 (`real_katib`: goptuna's
``random``, Katib's own File metrics collector, the real Training Operator for PyTorchJob trials),
run by the process kubelet: real trainers report through cloudml-hypertune's file and stdout and
Katib's collector reads what the platform's trial program hands it. These replace the tests of
test_kube_sweeps.py that scripted each trial pod by hand with made-up metric lines on the labelled
helper (issue 15 step 4): a sweep of four trials two at a time; trial metrics read from
cloudml-hypertune's JSON lines; a hypertune-only trainer; a metric tag Katib cannot collect as it is;
cancel after a trial finished (the Experiment ended through its status: Katib has no stop).
"""

from __future__ import annotations

import asyncio
import json
import math

import pytest

from server_ext.errors import JobFinished, JobNotFound
from server_ext.jobs.kube import katib as mapping
from server_ext.jobs.kube import katib_params, katib_trial
from server_ext.runtimes.kube import sweeps as mapping_sweeps
from tests.kube.job_env import state
from tests.kube.test_job_packages import TRAINER, USER, service, shipped
from tests.kube.test_katib_real import sweep_body, sweeps_ns, trials_of  # noqa: F401 (fixture)

pytestmark = pytest.mark.kube


def _overlap(trials: list[dict]) -> int:
    """The most trials that ran at once, from Katib's startTime/completionTime of each."""
    edges = sorted([(t["status"]["startTime"], 1) for t in trials] +
                   [(t["status"]["completionTime"], -1) for t in trials], key=lambda e: (e[0], e[1]))
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


async def test_a_sweep_of_four_trials_two_at_a_time(backend, kube_cluster, sweeps_ns):
    """RANDOM_SEARCH over a DOUBLE and a DISCRETE parameter, 4 trials, 2 in parallel (PyTorchJob
    masters of the example trainer): each trainer gets its trial's ``--name=value``; the platform's
    trainingOutput shows Katib's observation per trial, best first by Katib's optimal trial; trial
    logs and metric series; the trial jobs are not jobs of their own."""
    ns = sweeps_ns
    body = sweep_body("tune_four", trials=4, parallel=2, epochs=3, sleep=0.3)
    body["trainingInput"]["hyperparameters"]["params"].append(
        {"parameterName": "batch_size", "type": "DISCRETE", "discreteValues": [8, 16, 32]})
    jobs = service(backend, ns)
    await jobs.create(USER, ns, shipped(body, TRAINER))
    seen = ["QUEUED"]
    job = await state(backend, ns, "tune_four", "SUCCEEDED", seen, timeout=300)
    assert seen in (["QUEUED", "RUNNING", "SUCCEEDED"], ["QUEUED", "PREPARING", "RUNNING", "SUCCEEDED"]), seen
    experiment = next(iter(kube_cluster.items("kubeflow.org", "v1beta1", "experiments", ns)))
    trials = trials_of(kube_cluster, ns, experiment["metadata"]["name"])
    assert len(trials) == 4 and 1 <= _overlap(trials) <= 2
    out = job["trainingOutput"]
    assert sorted(t["trialId"] for t in out["trials"]) == ["1", "2", "3", "4"]
    assert {t["state"] for t in out["trials"]} == {"SUCCEEDED"} and out["completedTrialCount"] == "4"
    by_value = {}  # what Katib's collector stored, by the trial's assignments
    for t in trials:
        assigned = katib_params.assignments(t)
        metric = next(m for m in t["status"]["observation"]["metrics"] if m["name"] == "rmse")
        by_value[(assigned["learning_rate"], assigned["batch_size"])] = float(metric["latest"])
    for t in out["trials"]:
        hp = t["hyperparameters"]
        assert str(hp["batch_size"]) in ("8", "16", "32") and 0.01 <= float(hp["learning_rate"]) <= 0.2
        assert t["finalMetric"]["objectiveValue"] == by_value[(str(hp["learning_rate"]), str(hp["batch_size"]))]
        lines = [x.text async for x in backend.logs(ns, "tune_four", f"trial-{t['trialId']}")]
        # the trainer itself got the trial's values (--learning_rate, --batch_size)
        assert any(line.startswith(f"hyperparameters: learning_rate={hp['learning_rate']} ") and
                   f"batch_size={hp['batch_size']}" in line for line in lines), lines
        series = await backend.trial_metrics(ns, "tune_four", t["trialId"])
        steps = [int(x["trainingStep"]) for x in series]  # cloudml-hypertune's global_step, one report an epoch
        assert len(steps) == 3 and steps == sorted(set(steps)) and all(x["time"].endswith("Z") for x in series)
        assert series[-1]["objectiveValue"] == pytest.approx(t["finalMetric"]["objectiveValue"], rel=1e-5)
    best = min(out["trials"], key=lambda t: t["finalMetric"]["objectiveValue"])
    optimal = {a["name"]: a["value"] for a in experiment["status"]["currentOptimalTrial"]["parameterAssignments"]}
    assert optimal["learning_rate"] == str(best["hyperparameters"]["learning_rate"])
    with pytest.raises(JobNotFound):
        await backend.trial_metrics(ns, "tune_four", "5")
    assert [j["jobId"] for j in await backend.list(ns)] == ["tune_four"]  # the trial jobs are not jobs of their own
    with pytest.raises(JobFinished):
        await backend.cancel(ns, "tune_four")


# cloudml-hypertune's reporting as it does it (the metrics file rewritten whole, its last 100 reports
# kept), under a tag Katib cannot collect as it is; nothing metric-like on stdout
HYPERTUNE_TRAINER = """\
import collections, json, os, pathlib, sys, time
path = pathlib.Path(os.environ["CLOUD_ML_HP_METRIC_FILE"])
path.parent.mkdir(parents=True, exist_ok=True)
kept = collections.deque(maxlen=100)
lr = float(next(a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--lr=")))
print("training with", *sys.argv[1:], flush=True)
for step in (10, 20, 30):
    time.sleep(0.4)
    kept.append({"timestamp": time.time(), "trial": "0", "Taxi Model Accuracy": str(round(lr * step, 6)),
                 "global_step": str(step)})
    path.write_text("".join(json.dumps(m, sort_keys=True) + "\\n" for m in kept))
"""


async def test_a_hypertune_only_trainer_with_a_tag_katib_cannot_collect(backend, kube_cluster, sweeps_ns, tmp_path):
    """A trainer that reports only through cloudml-hypertune's file, under ``Taxi Model Accuracy``:
    the Experiment names Katib's mapped metric, the trial program copies each report into Katib's
    file under that name (Katib's File collector reads it: the observation) and echoes the file's
    lines to the log (the platform's series, while the trial runs and after), and the platform
    answers with the user's tag throughout."""
    ns, tag = sweeps_ns, "Taxi Model Accuracy"
    (tmp_path / "train.py").write_text(HYPERTUNE_TRAINER)
    doc = {"jobId": "taxi_tuning", "trainingInput": {
        "scaleTier": "CUSTOM", "masterType": "n1-standard-4",
        "masterConfig": {"imageUri": "python:3.11-slim", "containerCommand": ["python", str(tmp_path / "train.py")]},
        "hyperparameters": {"goal": "MAXIMIZE", "hyperparameterMetricTag": tag, "maxTrials": 2,
                            "maxParallelTrials": 2, "algorithm": "RANDOM_SEARCH",
                            "params": [{"parameterName": "lr", "type": "DOUBLE", "minValue": 0.01, "maxValue": 0.1}]}}}
    jobs = service(backend, ns)
    assert (await jobs.create(USER, ns, doc))["trainingOutput"]["hyperparameterMetricTag"] == tag
    name = katib_trial.metric_name(tag)
    stored = kube_cluster.get("kubeflow.org", "v1beta1", "experiments", ns, "taxi-tuning")
    assert stored["spec"]["objective"]["objectiveMetricName"] == name != tag
    job = await state(backend, ns, "taxi_tuning", "SUCCEEDED", timeout=240)
    out = job["trainingOutput"]
    assert out["hyperparameterMetricTag"] == tag and len(out["trials"]) == 2
    observed = {}
    for t in trials_of(kube_cluster, ns, "taxi-tuning"):  # Katib's own collector read the mapped name
        (metric,) = [m for m in t["status"]["observation"]["metrics"] if m["name"] == name]
        observed[katib_params.assignments(t)["lr"]] = float(metric["latest"])
    for t in out["trials"]:
        lr = float(t["hyperparameters"]["lr"])
        assert t["finalMetric"]["objectiveValue"] == observed[str(t["hyperparameters"]["lr"])] == pytest.approx(
            round(lr * 30, 6))
        series = await backend.trial_metrics(ns, "taxi_tuning", t["trialId"])
        assert [(x["trainingStep"], x["objectiveValue"]) for x in series] == [
            (str(s), pytest.approx(round(lr * s, 6))) for s in (10, 20, 30)]
        lines = [x.text async for x in backend.logs(ns, "taxi_tuning", f"trial-{t['trialId']}")]
        assert lines[0].startswith("training with --lr=") and not any(f"{tag}=" in x for x in lines)
        assert [json.loads(x)["global_step"] for x in lines[1:] if x.startswith("{")] == ["10", "20", "30"]
    best = max(out["trials"], key=lambda t: t["finalMetric"]["objectiveValue"])
    assert math.isclose(float(best["hyperparameters"]["lr"]), max(float(v) for v in observed))


async def test_cancel_after_a_trial_finished_stops_the_running_ones_and_starts_no_new_one(
        kube, backend, kube_cluster, sweeps_ns):
    """Cancel while one trial has finished and another runs: the Experiment is ended through its
    status (Failed, reason ExperimentCancelled; Katib's validator refuses a maxTrialCount not above
    the trials made, which is how the platform first tried, found here), the running trial is
    ended Killed and its job, pod and processes are gone, Katib makes no trial afterwards and
    removes its suggestion service, and the platform shows the finished ones SUCCEEDED and the stopped one
    CANCELLED. Trials of different lengths by design: ``epochs`` on a log scale searched by goptuna's
    deterministic ``sobol`` (the platform's Experiment, its algorithm swapped): the first point is
    100 epochs (~5 s), the second 1000 (~50 s); a third, 10 epochs, may start and end meanwhile."""
    from tests.kube.job_env import SETTINGS, plan, until
    from tests.kube.test_katib_real import ROOT, processes

    ns = sweeps_ns
    doc = {"jobId": "stop_mid", "trainingInput": {
        "scaleTier": "CUSTOM", "masterType": "n1-standard-4", "args": ["--sleep=0.05"],
        "masterConfig": {"imageUri": "python:3.11-slim", "containerCommand": [
            "env", f"PYTHONPATH={ROOT / 'examples' / 'trainer'}", "python", "-m", "trainer.task"]},
        "hyperparameters": {"goal": "MINIMIZE", "hyperparameterMetricTag": "rmse", "maxTrials": 4,
                            "maxParallelTrials": 2, "algorithm": "RANDOM_SEARCH", "params": [
                                {"parameterName": "epochs", "type": "INTEGER", "minValue": 1, "maxValue": 10000,
                                 "scaleType": "UNIT_LOG_SCALE"}]}}}
    manifest = mapping.experiment_manifest(plan(doc, ns), SETTINGS)
    manifest["spec"]["algorithm"] = {"algorithmName": "sobol"}
    await kube.request("POST", f"/apis/kubeflow.org/v1beta1/namespaces/{ns}/experiments", manifest)

    def epochs(t):
        return katib_params.trial_hyperparameters(mapping.spec_of(manifest), t)["epochs"]

    def finished_and_long_running():
        trials = trials_of(kube_cluster, ns, "stop-mid")
        ok = [t for t in trials if any(c["type"] == "Succeeded" and c["status"] == "True"
                                       for c in (t.get("status") or {}).get("conditions") or [])]
        long = [t for t in trials if epochs(t) == "1000" and (t.get("status") or {}).get("startTime")]
        return ok and long and (ok, long[0])
    done, long = await until(finished_and_long_running, timeout=120, what="one trial done, the long one running")
    await until(lambda: processes("--epochs=1000"), timeout=30, what="the long trial's trainer running")
    assert (await backend.cancel(ns, "stop_mid"))["state"] in ("CANCELLING", "CANCELLED")
    job = await state(backend, ns, "stop_mid", "CANCELLED", timeout=60)
    experiment = kube_cluster.get("kubeflow.org", "v1beta1", "experiments", ns, "stop-mid")
    assert experiment["spec"]["maxTrialCount"] == 4  # as submitted: Katib would refuse it lowered
    ended = {c["type"]: c for c in experiment["status"]["conditions"] if c["status"] == "True"}
    assert ended["Failed"]["reason"] == mapping_sweeps.CANCELLED_REASON and "Running" not in ended
    states = {t["trialId"]: t["state"] for t in job["trainingOutput"]["trials"]}
    succeeded = sum(1 for v in states.values() if v == "SUCCEEDED")
    assert succeeded >= len(done) and set(states.values()) == {"CANCELLED", "SUCCEEDED"}, states
    assert [t["state"] for t in job["trainingOutput"]["trials"] if t["hyperparameters"]["epochs"] == "1000"] == [
        "CANCELLED"]
    await until(lambda: kube_cluster.get("batch", "v1", "jobs", ns, long["metadata"]["name"]) is None
                and not processes("--epochs=1000"), timeout=60, what="the long trial's job and trainer gone")
    stopped = kube_cluster.get("kubeflow.org", "v1beta1", "trials", ns, long["metadata"]["name"])
    assert {c["type"]: c["reason"] for c in stopped["status"]["conditions"] if c["status"] == "True"} == {
        "Created": "TrialCreated", "Killed": mapping_sweeps.KILLED_REASON}  # kept, Katib's own Killed: never re-run
    await until(lambda: not kube_cluster.items("apps", "v1", "deployments", ns), timeout=60,
                what="Katib removed the ended Experiment's suggestion service")
    names = {t["metadata"]["name"] for t in trials_of(kube_cluster, ns, "stop-mid")}
    await asyncio.sleep(3)  # Katib had every chance to start another trial, or to take the Experiment up again
    assert {t["metadata"]["name"] for t in trials_of(kube_cluster, ns, "stop-mid")} == names
    assert len(names) == len(states)
    again = kube_cluster.get("kubeflow.org", "v1beta1", "experiments", ns, "stop-mid")
    assert {c["type"] for c in again["status"]["conditions"] if c["status"] == "True"} >= {"Failed"}
    assert (await backend.get(ns, "stop_mid"))["state"] == "CANCELLED"
