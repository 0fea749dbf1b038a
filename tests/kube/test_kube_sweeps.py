"""Sweeps on the Kubernetes backend on the real control plane (Katib's CRDs installed): Katib played
by the labelled helper `tests.kube.katib_controller` (these tests script each trial's pod by hand,
with made-up metric lines, which Katib's real collector cannot read; real Katib runs the sweeps of
tests/kube/test_katib_real.py), PyTorchJobs by the real Training Operator, batch Job trials by the
control plane's Job controller,
pods bound by the real scheduler and run by the test kubelet on the test's command (run, log,
finish). A sweep of 4 trials, 2 in parallel: parallelism, each trial's ``--name=value`` args,
states, ``trainingOutput``, trial logs and metrics, cancel, a native Experiment, and the created
Experiment against Katib's swagger; and a trial whose container command really runs a trainer
that reports only through cloudml-hypertune's file."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pathlib
import signal
import sys

import jsonschema
import pytest

from hub_ext.errors import UserInputError
from server_ext.errors import JobExists, JobFinished, JobNotFound
from server_ext.jobs.kube import katib as katib_mapping
from server_ext.jobs.kube.native_experiment import native_experiment
from tests.kube.job_env import plan, pods, pytorch_doc, state, until
from tests.kube.katib_controller import EXPERIMENT_LABEL, KatibController, completed
from tests.unit.test_job_kubeflow import kubernetes_expand

pytestmark = pytest.mark.kube
SWAGGER = pathlib.Path(__file__).parents[1] / "cluster" / "crds" / "katib-v1beta1-swagger.json"
JOB_LABEL = "training.kubeflow.org/job-name"
# what the trial containers print (Katib's StdOut form) per trial, in creation order
REPORTS = {1: [0.50, 0.61], 2: [0.40, 0.72, 0.70], 3: [0.55, 0.58], 4: [0.30, 0.35]}


def sweep_doc(job_id: str, trials: int = 4, parallel: int = 2) -> dict:
    doc = pytorch_doc(job_id)
    for key in ("workerType", "workerCount"):  # a master only
        doc["trainingInput"].pop(key)
    doc["trainingInput"]["hyperparameters"] = {
        "goal": "MAXIMIZE", "hyperparameterMetricTag": "accuracy", "maxTrials": trials, "maxParallelTrials": parallel,
        "algorithm": "RANDOM_SEARCH",
        "params": [{"parameterName": "lr", "type": "DOUBLE", "minValue": 0.001, "maxValue": 0.1},
                   {"parameterName": "batch", "type": "DISCRETE", "discreteValues": [32, 64, 128]}]}
    return doc


def native_doc(name: str) -> dict:
    """A Katib Experiment as a user writes it (batch Job trials, grid search)."""
    return {"apiVersion": "kubeflow.org/v1beta1", "kind": "Experiment", "metadata": {"name": name},
            "spec": {"objective": {"type": "minimize", "objectiveMetricName": "loss"},
                     "algorithm": {"algorithmName": "grid"}, "parallelTrialCount": 1, "maxTrialCount": 2,
                     "parameters": [{"name": "units", "parameterType": "int",
                                     "feasibleSpace": {"min": "16", "max": "32", "step": "16"}}],
                     "trialTemplate": {
                         "primaryContainerName": "training-container",
                         "trialParameters": [{"name": "units", "reference": "units"}],
                         "trialSpec": {"apiVersion": "batch/v1", "kind": "Job", "spec": {"template": {"spec": {
                             "restartPolicy": "Never",
                             "containers": [{"name": "training-container", "image": "python:3.11-slim",
                                             "command": ["python", "train.py", "--units=${trialParameters.units}"],
                                             "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}}}}}}}


@pytest.fixture
async def katib(cluster, kube_target, kube):
    """The Katib helper on the `cluster` (kubelet: pods run when told; Training Operator)."""
    controller = await KatibController(kube, kube_target.namespace, seed=3).start()
    controller.kubelet = cluster
    yield controller
    await controller.stop()


def items(kube_cluster, ns: str, plural: str, group: str = "kubeflow.org", version: str = "v1beta1") -> list[dict]:
    return kube_cluster.items(group, version, plural, ns)


def trials_of(kube_cluster, ns: str, experiment: str) -> list[dict]:
    """The experiment's Trials in trial-id order (creationTimestamp, then name)."""
    found = kube_cluster.items("kubeflow.org", "v1beta1", "trials", ns,
                               labelSelector=f"{EXPERIMENT_LABEL}={experiment}")
    return sorted(found, key=lambda t: (t["metadata"]["creationTimestamp"], t["metadata"]["name"]))


def master(kube_cluster, ns: str, trial: str) -> dict | None:
    found = [p for p in pods(kube_cluster, ns, **{JOB_LABEL: trial}) if not p["metadata"].get("deletionTimestamp")]
    return found[0] if found else None


def validate_swagger(obj: dict, definition: str) -> None:
    """`obj` against a definition of Katib's v1beta1 swagger (Kubernetes' own types taken as objects)."""
    doc = json.loads(SWAGGER.read_text())
    defs = {**doc["definitions"], "v1.ObjectMeta": {"type": "object"}, "v1.Time": {"type": "string"},
            "v1.unstructured.Unstructured": {"type": "object"}}
    schema = {"$ref": f"#/definitions/{definition}", "definitions": defs}
    jsonschema.Draft4Validator(schema).validate(obj)


async def test_a_sweep_of_four_trials_two_at_a_time(backend, katib, kube_cluster, kube_target):
    ns = kube_target.namespace
    p = plan(sweep_doc("tune_lr"), ns)
    job = await backend.submit(p)
    assert job["jobId"] == "tune_lr" and job["state"] == "QUEUED"
    created = kube_cluster.get("kubeflow.org", "v1beta1", "experiments", ns, p.name)
    validate_swagger(created, "v1beta1.Experiment")
    seen, names, at_once = ["QUEUED"], [], 0
    for n in range(1, 5):  # run the trials one by one, REPORTS[n] printed by the n-th
        names.append(await until(lambda: next((t["metadata"]["name"] for t in trials_of(kube_cluster, ns, p.name)
                                               if t["metadata"]["name"] not in names), None)))
        pod = await until(lambda: master(kube_cluster, ns, names[-1]))
        katib.kubelet.run(ns, pod["metadata"]["name"])
        await state(backend, ns, "tune_lr", "RUNNING", seen)
        lines = [f"epoch={i} accuracy={v} loss={1 - v}" for i, v in enumerate(REPORTS[n], 1)]
        katib.kubelet.log(ns, pod["metadata"]["name"], "\n".join(["starting", *lines]))
        at_once = max(at_once, sum(1 for t in trials_of(kube_cluster, ns, p.name) if not completed(t)))
        katib.kubelet.finish(ns, pod["metadata"]["name"])
    job = await state(backend, ns, "tune_lr", "SUCCEEDED", seen)
    assert seen in (["QUEUED", "RUNNING", "SUCCEEDED"], ["QUEUED", "PREPARING", "RUNNING", "SUCCEEDED"])
    assert at_once <= 2 and katib.max_running == 2
    trials = trials_of(kube_cluster, ns, p.name)  # in trial-id order
    assert sorted(t["metadata"]["name"] for t in trials) == sorted(names)
    reports = {name: REPORTS[n] for n, name in enumerate(names, 1)}
    for t in trials:  # each trial's job runs with its own --name=value args (katib.trial_command)
        assigned = {a["name"]: a["value"] for a in t["spec"]["parameterAssignments"]}
        stored = kube_cluster.get("kubeflow.org", "v1", "pytorchjobs", ns, t["metadata"]["name"])
        container = stored["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert (env["MLPLATFORM_HP_0"], env["MLPLATFORM_HP_1"]) == (assigned["lr"], assigned["batch"])
        assert 'set -- "$$@" --lr="$$MLPLATFORM_HP_0" --batch="$$MLPLATFORM_HP_1"' in container["command"][-1]
        assert assigned["batch"] in ("32", "64", "128") and 0.001 <= float(assigned["lr"]) <= 0.1
    out = job["trainingOutput"]
    assert out["isHyperparameterTuningJob"] and out["hyperparameterMetricTag"] == "accuracy"
    by_id = {t["trialId"]: t for t in out["trials"]}
    assert sorted(by_id) == ["1", "2", "3", "4"]
    for n, t in enumerate(trials, 1):  # finalMetric: the last report (katib.py's metric strategy "latest")
        assert by_id[str(n)]["finalMetric"]["objectiveValue"] == reports[t["metadata"]["name"]][-1]
        assert by_id[str(n)]["state"] == "SUCCEEDED"
        assert {k: str(v) for k, v in by_id[str(n)]["hyperparameters"].items()} == {
            a["name"]: a["value"] for a in t["spec"]["parameterAssignments"]}
    second = str(1 + [t["metadata"]["name"] for t in trials].index(names[1]))  # the best: REPORTS[2]
    best = sorted(out["trials"], key=lambda t: -t["finalMetric"]["objectiveValue"])
    assert best[0]["trialId"] == second and best[0]["finalMetric"]["objectiveValue"] == 0.70
    experiment = kube_cluster.get("kubeflow.org", "v1beta1", "experiments", ns, p.name)
    assert experiment["status"]["currentOptimalTrial"]["bestTrialName"] == names[1]
    assert any(c["reason"] == "ExperimentMaxTrialsReached" for c in experiment["status"]["conditions"])

    logs = [(x.seq, x.task, x.text) async for x in backend.logs(ns, "tune_lr", "trial-2")]
    name2 = trials[1]["metadata"]["name"]
    assert logs == [(i, "trial-2", text) for i, text in enumerate(
        ["starting", *[f"epoch={i} accuracy={v} loss={1 - v}" for i, v in enumerate(reports[name2], 1)]], 1)]
    series = await backend.trial_metrics(ns, "tune_lr", second)
    assert [(x["trainingStep"], x["objectiveValue"]) for x in series] == [("1", 0.40), ("2", 0.72), ("3", 0.70)]
    assert all(x["time"].endswith("Z") for x in series)
    with pytest.raises(JobNotFound):
        await backend.trial_metrics(ns, "tune_lr", "5")
    with pytest.raises(JobNotFound):
        await collect(backend.logs(ns, "tune_lr", "trial-9"))
    with pytest.raises(UserInputError):
        await collect(backend.logs(ns, "tune_lr", "master-replica-0"))
    assert [j["jobId"] for j in await backend.list(ns)] == ["tune_lr"]  # the trial jobs are not jobs of their own
    with pytest.raises(JobFinished):
        await backend.cancel(ns, "tune_lr")


async def collect(stream) -> list:
    return [x async for x in stream]


async def test_trial_metrics_read_hypertune_json_lines(backend, katib, kube_cluster, kube_target):
    ns = kube_target.namespace
    p = plan(sweep_doc("hypertuned", trials=1, parallel=1), ns)
    await backend.submit(p)
    trial = (await until(lambda: trials_of(kube_cluster, ns, p.name)))[0]["metadata"]["name"]
    pod = await until(lambda: master(kube_cluster, ns, trial))
    katib.kubelet.run(ns, pod["metadata"]["name"])
    assert await backend.trial_metrics(ns, "hypertuned", "1") == []
    katib.kubelet.log(ns, pod["metadata"]["name"], "\n".join(
        json.dumps({"timestamp": 1767225600.5 + i, "trial": "1", "accuracy": v, "global_step": str(10 * i)})
        for i, v in enumerate((0.2, 0.4), 1)))
    series = await backend.trial_metrics(ns, "hypertuned", "1")
    assert series == [{"trainingStep": "10", "objectiveValue": 0.2, "time": "2026-01-01T00:00:01.500000Z"},
                      {"trainingStep": "20", "objectiveValue": 0.4, "time": "2026-01-01T00:00:02.500000Z"}]


# cloudml-hypertune's reporting as it does it (the metrics file rewritten whole, its last 100 reports
# kept); nothing metric-like on stdout. The third report waits for a "release" file next to it.
HYPERTUNE_TRAINER = """\
import collections, json, os, pathlib, sys, time
path = pathlib.Path(os.environ["CLOUD_ML_HP_METRIC_FILE"])
kept = collections.deque(maxlen=100)
def report(value, step):
    kept.append({"timestamp": time.time(), "trial": "0", "accuracy": str(value), "global_step": str(step)})
    path.write_text("".join(json.dumps(m, sort_keys=True) + "\\n" for m in kept))
print("training with", *sys.argv[1:], flush=True)
report(0.2, 10)
report(0.4, 20)
while not path.with_name("release").exists():
    time.sleep(0.05)
report(0.7, 30)
"""


async def run_container(pod: dict, container: str, volume: pathlib.Path) -> asyncio.subprocess.Process:
    """Start a pod's container as a kubelet would (Kubernetes' ``$(VAR)``/``$$`` expansion of its
    command and env), with Katib's metrics volume (``/var/log/katib``, which Katib's webhook adds)
    at `volume`; `pump` puts its output into the pod's log. (Without Katib's webhook the pod has no
    such volume for the process-mode kubelet to give it: the test plays the kubelet here.)"""
    c = next(x for x in pod["spec"]["containers"] if x["name"] == container)
    env = {e["name"]: e["value"] for e in c.get("env") or [] if "value" in e}
    katib_dir = str(pathlib.PurePath(katib_mapping.METRICS_FILE).parent)
    env = {**{k: kubernetes_expand(v, env).replace(katib_dir, str(volume)) for k, v in env.items()},
           "PATH": os.environ["PATH"]}
    argv = [kubernetes_expand(w, env) for w in [*c["command"], *(c.get("args") or [])]]
    return await asyncio.create_subprocess_exec(*argv, env=env, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.STDOUT, start_new_session=True)


async def pump(kubelet, ns: str, pod: str, proc: asyncio.subprocess.Process) -> int:
    async for line in proc.stdout:
        kubelet.log(ns, pod, line.decode().rstrip("\n"))
    return await proc.wait()


async def test_a_hypertune_only_trainer_has_a_metric_series(backend, katib, kube_cluster, kube_target, tmp_path):
    """A trainer that reports only through cloudml-hypertune's file, run for real in the trial's
    container command: the trial program echoes the file's lines to the log, so `trial_metrics` has
    the series while the trial runs and after it ended, and Katib (the helper, reading the log the
    way a File collector reads the file) records the last value."""
    ns = kube_target.namespace
    (tmp_path / "train.py").write_text(HYPERTUNE_TRAINER)
    command = [sys.executable, str(tmp_path / "train.py")]
    doc = {"jobId": "hypertune_only", "trainingInput": {
        "scaleTier": "CUSTOM", "masterType": "n1-standard-4",
        "masterConfig": {"imageUri": "python:3.11-slim", "containerCommand": command},
        "hyperparameters": {"goal": "MAXIMIZE", "hyperparameterMetricTag": "accuracy", "maxTrials": 1,
                            "params": [{"parameterName": "lr", "type": "DOUBLE", "minValue": 0.01, "maxValue": 0.1}]}}}
    p = plan(doc, ns)
    await backend.submit(p)
    trial = (await until(lambda: trials_of(kube_cluster, ns, p.name)))[0]
    job_name = {"batch.kubernetes.io/job-name": trial["metadata"]["name"]}
    pod = await until(lambda: next(iter(pods(kube_cluster, ns, **job_name)), None))
    name = pod["metadata"]["name"]
    katib.kubelet.run(ns, name)
    volume = tmp_path / "katib"
    volume.mkdir()
    proc = await run_container(pod, "trainer", volume)
    exited = asyncio.ensure_future(pump(katib.kubelet, ns, name, proc))
    try:
        async def reported(n: int) -> list[dict]:
            for _ in range(200):
                series = await backend.trial_metrics(ns, "hypertune_only", "1")
                if len(series) >= n:
                    return series
                await asyncio.sleep(0.05)
            raise AssertionError(f"fewer than {n} reports: {series}")

        assert [(x["trainingStep"], x["objectiveValue"]) for x in await reported(2)] == [("10", 0.2), ("20", 0.4)]
        (volume / "release").touch()
        assert await asyncio.wait_for(exited, 20) == 0
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # the trainer too, should the test have failed
        await asyncio.gather(exited, return_exceptions=True)
    katib.kubelet.finish(ns, name)
    job = await state(backend, ns, "hypertune_only", "SUCCEEDED")
    series = await backend.trial_metrics(ns, "hypertune_only", "1")
    assert [(x["trainingStep"], x["objectiveValue"]) for x in series] == [("10", 0.2), ("20", 0.4), ("30", 0.7)]
    assert all(x["time"].endswith("Z") for x in series)
    lines = [x.text async for x in backend.logs(ns, "hypertune_only", "trial-1")]
    assert lines[0].startswith("training with --lr=") and not any("accuracy=" in x for x in lines)
    assert [json.loads(x)["global_step"] for x in lines[1:]] == ["10", "20", "30"]  # each report once
    assert job["trainingOutput"]["trials"][0]["finalMetric"]["objectiveValue"] == 0.7


SPACED_TRAINER = """\
import json, os, pathlib, sys, time
path = pathlib.Path(os.environ["CLOUD_ML_HP_METRIC_FILE"])
kept = []
def report(value, step):  # cloudml-hypertune's report_hyperparameter_tuning_metric("Taxi Model Accuracy", ...)
    kept.append({"timestamp": time.time(), "trial": "0", "Taxi Model Accuracy": str(value), "global_step": str(step)})
    path.write_text("".join(json.dumps(m, sort_keys=True) + "\\n" for m in kept))
print("training with", *sys.argv[1:], flush=True)
report(0.3, 10)
while not path.with_name("release").exists():
    time.sleep(0.05)
report(0.8, 20)
"""


async def test_a_spaced_metric_tag_runs_and_shows_the_users_tag(backend, katib, kube_cluster, kube_target, tmp_path):
    """``hyperparameterMetricTag: Taxi Model Accuracy``: the Experiment on the API server names Katib's
    mapped metric, the real trial program copies the trainer's reports (cloudml-hypertune's file,
    keyed by the user's tag) to Katib's file under that name, and the platform answers with the
    user's tag throughout."""
    ns, tag = kube_target.namespace, "Taxi Model Accuracy"
    (tmp_path / "train.py").write_text(SPACED_TRAINER)
    command = [sys.executable, str(tmp_path / "train.py")]
    doc = {"jobId": "taxi_tuning", "trainingInput": {
        "scaleTier": "CUSTOM", "masterType": "n1-standard-4",
        "masterConfig": {"imageUri": "python:3.11-slim", "containerCommand": command},
        "hyperparameters": {"goal": "MAXIMIZE", "hyperparameterMetricTag": tag, "maxTrials": 1,
                            "params": [{"parameterName": "lr", "type": "DOUBLE", "minValue": 0.01, "maxValue": 0.1}]}}}
    p = plan(doc, ns)
    assert (await backend.submit(p))["trainingOutput"]["hyperparameterMetricTag"] == tag
    name = katib_mapping.metric_name(tag)
    stored = kube_cluster.get("kubeflow.org", "v1beta1", "experiments", ns, p.name)
    validate_swagger(stored, "v1beta1.Experiment")
    assert stored["spec"]["objective"]["objectiveMetricName"] == name != tag
    trial = (await until(lambda: trials_of(kube_cluster, ns, p.name)))[0]
    pod = await until(lambda: next(iter(pods(kube_cluster, ns, **{"batch.kubernetes.io/job-name":
                                                                   trial["metadata"]["name"]})), None))
    pod_name = pod["metadata"]["name"]
    katib.kubelet.run(ns, pod_name)
    volume = tmp_path / "katib"
    volume.mkdir()
    proc = await run_container(pod, "trainer", volume)
    exited = asyncio.ensure_future(pump(katib.kubelet, ns, pod_name, proc))
    try:
        for _ in range(200):
            series = await backend.trial_metrics(ns, "taxi_tuning", "1")
            if series:
                break
            await asyncio.sleep(0.05)
        assert [(x["trainingStep"], x["objectiveValue"]) for x in series] == [("10", 0.3)]
        (volume / "release").touch()
        assert await asyncio.wait_for(exited, 20) == 0
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        await asyncio.gather(exited, return_exceptions=True)
    collected = [json.loads(x) for x in (volume / "metrics.json").read_text().splitlines()]
    assert [m[name] for m in collected] == ["0.3", "0.8"] and all(tag not in m for m in collected)
    # the helper Katib collects from the pod log; a real File collector reads Katib's file: hand it that
    katib.kubelet.log(ns, pod_name, (volume / "metrics.json").read_text().rstrip("\n"))
    katib.kubelet.finish(ns, pod_name)
    job = await state(backend, ns, "taxi_tuning", "SUCCEEDED")
    assert job["trainingOutput"]["hyperparameterMetricTag"] == tag
    assert job["trainingOutput"]["trials"][0]["finalMetric"]["objectiveValue"] == 0.8
    series = await backend.trial_metrics(ns, "taxi_tuning", "1")
    assert [(x["trainingStep"], x["objectiveValue"]) for x in series] == [("10", 0.3), ("20", 0.8)]


async def test_cancel_deletes_running_trials_and_starts_no_new_one(backend, katib, kube_cluster, kube_target):
    ns = kube_target.namespace
    p = plan(sweep_doc("to_stop", trials=4, parallel=2), ns)
    await backend.submit(p)
    two = await until(lambda: len(trials_of(kube_cluster, ns, p.name)) == 2 and trials_of(kube_cluster, ns, p.name))
    first = two[0]
    pod = await until(lambda: master(kube_cluster, ns, first["metadata"]["name"]))
    katib.kubelet.run(ns, pod["metadata"]["name"])
    katib.kubelet.log(ns, pod["metadata"]["name"], "accuracy=0.9")
    katib.kubelet.finish(ns, pod["metadata"]["name"])
    running = await until(lambda: len(trials_of(kube_cluster, ns, p.name)) == 3 and [
        t["metadata"]["name"] for t in trials_of(kube_cluster, ns, p.name) if not completed(t)])
    for name in running:
        katib.kubelet.run(ns, (await until(lambda: master(kube_cluster, ns, name)))["metadata"]["name"])
    await state(backend, ns, "to_stop", "RUNNING")
    assert (await backend.cancel(ns, "to_stop"))["state"] in ("CANCELLING", "CANCELLED")
    job = await state(backend, ns, "to_stop", "CANCELLED")
    await until(lambda: all(master(kube_cluster, ns, n) is None for n in running), timeout=30)  # GC is asynchronous
    for name in running:
        assert kube_cluster.get("kubeflow.org", "v1", "pytorchjobs", ns, name) is None
    await asyncio.sleep(0.5)  # Katib had every chance to start another trial
    assert [t["metadata"]["name"] for t in trials_of(kube_cluster, ns, p.name)] == [first["metadata"]["name"]]
    experiment = kube_cluster.get("kubeflow.org", "v1beta1", "experiments", ns, p.name)
    assert experiment["spec"]["maxTrialCount"] == 1 and experiment["spec"]["parallelTrialCount"] == 1
    states = {t["trialId"]: t["state"] for t in job["trainingOutput"]["trials"]}
    assert states == {"1": "SUCCEEDED", "2": "CANCELLED", "3": "CANCELLED"} or sorted(states.values()) == [
        "CANCELLED", "CANCELLED", "SUCCEEDED"]
    with pytest.raises(JobFinished):
        await backend.cancel(ns, "to_stop")


async def test_cancel_before_any_trial_completed_deletes_the_experiment(backend, katib, kube_cluster, kube_target):
    ns = kube_target.namespace
    p = plan(sweep_doc("too_soon"), ns)
    await backend.submit(p)
    await until(lambda: len(trials_of(kube_cluster, ns, p.name)) == 2)
    assert (await backend.cancel(ns, "too_soon"))["state"] == "CANCELLED"
    await until(lambda: not trials_of(kube_cluster, ns, p.name) and
                not items(kube_cluster, ns, "pytorchjobs", version="v1"))
    assert kube_cluster.get("kubeflow.org", "v1beta1", "experiments", ns, p.name) is None
    with pytest.raises(JobNotFound):
        await backend.get(ns, "too_soon")


async def test_a_native_experiment_is_accepted_and_monitored_the_same_way(backend, katib, kube_cluster, kube_target):
    ns = kube_target.namespace
    doc = native_doc("mnist-units")
    job = await backend.submit_experiment(ns, "alice@example.com", doc)
    assert job["jobId"] == "mnist_units" and job["state"] == "QUEUED"
    stored = kube_cluster.get("kubeflow.org", "v1beta1", "experiments", ns, "mnist-units")
    assert stored["spec"] == doc["spec"]  # taken as it is
    assert stored["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "jupyterhub-mlplatform"
    validate_swagger(stored, "v1beta1.Experiment")
    with pytest.raises(JobExists):
        await backend.submit_experiment(ns, "alice@example.com", doc)
    with pytest.raises(JobExists):  # one jobId for jobs and sweeps
        await backend.submit(plan(pytorch_doc("mnist_units"), ns))
    seen = ["QUEUED"]
    for n, units in ((1, "16"), (2, "32")):
        trial = await until(lambda: len(trials_of(kube_cluster, ns, "mnist-units")) == n and
                            trials_of(kube_cluster, ns, "mnist-units")[-1]["metadata"]["name"])
        pod = await until(lambda: next(iter(pods(kube_cluster, ns, **{"batch.kubernetes.io/job-name": trial})), None))
        assert pod["spec"]["containers"][0]["command"][-1] == f"--units={units}"
        katib.kubelet.run(ns, pod["metadata"]["name"])
        await state(backend, ns, "mnist_units", "RUNNING", seen)
        katib.kubelet.log(ns, pod["metadata"]["name"], f"step=1 loss={1 / n}\nstep=2 loss={0.5 / n}")
        trial_id = str(1 + [t["metadata"]["name"] for t in trials_of(kube_cluster, ns, "mnist-units")].index(trial))
        # no trialTemplate.retain: Katib deletes each trial's job when it ends, so read while it runs
        assert [x.text async for x in backend.logs(ns, "mnist_units", f"trial-{trial_id}")] == [
            f"step=1 loss={1 / n}", f"step=2 loss={0.5 / n}"]
        assert [(x["trainingStep"], x["objectiveValue"]) for x in await backend.trial_metrics(
            ns, "mnist_units", trial_id)] == [("1", 1 / n), ("2", 0.5 / n)]
        katib.kubelet.finish(ns, pod["metadata"]["name"])
    job = await state(backend, ns, "mnist_units", "SUCCEEDED", seen)
    assert seen in (["QUEUED", "RUNNING", "SUCCEEDED"], ["QUEUED", "PREPARING", "RUNNING", "SUCCEEDED"])
    assert sorted(t["trialId"] for t in job["trainingOutput"]["trials"]) == ["1", "2"]
    assert {t["state"] for t in job["trainingOutput"]["trials"]} == {"SUCCEEDED"}

def test_native_experiments_are_checked():
    ok = native_experiment(native_doc("exp-1"), "team", "bob@example.com")
    assert ok["metadata"]["namespace"] == "team" and ok["metadata"]["annotations"]["mlplatform.io/job-id"] == "exp_1"
    validate_swagger(ok, "v1beta1.Experiment")
    cases = [
        (lambda d: d["metadata"].update(name="Bad_Name"), "metadata.name"),
        (lambda d: d["metadata"].update(namespace="other"), "metadata.namespace"),
        (lambda d: d["spec"].update(parallelTrialCount=3), "spec.parallelTrialCount"),
        (lambda d: d["spec"].update(maxTrialCount=0), "spec.maxTrialCount"),
        (lambda d: d["spec"].update(paralelTrialCount=1), "spec.paralelTrialCount"),
        (lambda d: d["spec"]["objective"].update(type="up"), "spec.objective.type"),
        (lambda d: d["spec"]["parameters"][0]["feasibleSpace"].update(min=16), "spec.parameters[0].feasibleSpace.min"),
        (lambda d: d["spec"]["trialTemplate"]["trialSpec"].update(kind="MPIJob"), "spec.trialTemplate.trialSpec.kind"),
        (lambda d: d["spec"]["trialTemplate"].update(trialParameters=[]), "spec.trialTemplate.trialParameters"),
        (lambda d: d["metadata"].update(labels={"mlplatform.io/job": "x"}), "metadata.labels.mlplatform.io/job"),
    ]
    for change, field in cases:
        doc = native_doc("exp-1")
        change(doc)
        with pytest.raises(UserInputError) as e:
            native_experiment(doc, "team", "bob@example.com")
        assert e.value.field == field, (field, e.value)


async def test_the_service_routes_an_experiment_to_submit_experiment():
    from server_ext.jobs.service import JobService
    from tests.kube.job_env import PLAN_SETTINGS

    class Cluster:
        async def submit_experiment(self, project, owner, doc):
            return {"routed": (project, owner, doc["metadata"]["name"])}

    async def projects(user):
        return ["team"]

    doc = native_doc("exp-2")
    assert await JobService(Cluster(), PLAN_SETTINGS, projects).create("bob", "team", doc) == {
        "routed": ("team", "bob", "exp-2")}
    with pytest.raises(UserInputError) as e:  # a backend without Katib (the local one)
        await JobService(object(), PLAN_SETTINGS, projects).create("bob", "team", doc)
    assert e.value.field == "kind"
