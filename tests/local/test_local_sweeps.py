"""Sweeps on the local backend with real processes: the example trainer (examples/trainer, its package
directory run in place) as the trials of an Optuna study."""

from __future__ import annotations

import asyncio
import json
import pathlib
import time
import uuid

import optuna
import pytest

from hub_ext.core.errors import UserInputError
from server_ext.errors import JobNotFound
from server_ext.jobs.backend import FINAL
from server_ext.jobs.machines import Machines
from server_ext.jobs.model import parse_job
from server_ext.jobs.plan import PlanSettings, plan_job
from server_ext.runtimes.local.backend import LocalBackend
from tests.local.test_local_backend import job_pids
from tests.unit.test_job_model import PLATFORM_JOB_SCHEMA

pytestmark = pytest.mark.local

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "trainer"
PACKAGE_URI = (EXAMPLE / "trainer").as_uri()
SETTINGS = PlanSettings(Machines(accelerators={}))
LR = {"parameterName": "learning_rate", "type": "DOUBLE", "minValue": 0.001, "maxValue": 0.3,
      "scaleType": "UNIT_LOG_SCALE"}
EPOCHS = {"parameterName": "epochs", "type": "INTEGER", "minValue": 2, "maxValue": 4}
BATCH = {"parameterName": "batch_size", "type": "DISCRETE", "discreteValues": [16, 32]}
SLOW_LR = {"parameterName": "learning_rate", "type": "CATEGORICAL",
           "categoricalValues": ["0.00001", "0.1", "0.00002", "0.00003"]}


def uid(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def sweep_plan(job_id: str, params: list, args: list[str], **hyper):
    spec = {"goal": "MINIMIZE", "hyperparameterMetricTag": "rmse", "params": params, **hyper}
    doc = {"jobId": job_id, "trainingInput": {"pythonModule": "trainer.task", "packageUris": [PACKAGE_URI],
                                              "args": args, "region": "local", "hyperparameters": spec}}
    return plan_job(parse_job(doc), SETTINGS, project="alice", owner="alice")


async def wait_for(b: LocalBackend, job_id: str, done=lambda job: job["state"] in FINAL, timeout: float = 40) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        job = await b.get("alice", job_id)
        if done(job):
            return job
        assert time.monotonic() < deadline, f"{job_id} is still {job['state']}: {json.dumps(job, indent=1)}"
        await asyncio.sleep(0.05)


def trials(job: dict) -> list[dict]:
    return job["trainingOutput"].get("trials", [])


def running(job: dict) -> list[str]:
    return [t["trialId"] for t in trials(job) if t["state"] == "RUNNING"]


def most_at_once(job: dict) -> int:
    """The most trials running at one time, from their start and end times (RFC 3339, one format)."""
    edges = sorted([(t["startTime"], 1) for t in trials(job)] + [(t["endTime"], -1) for t in trials(job)])
    at, most = 0, 0
    for _, step in edges:
        at += step
        most = max(most, at)
    return most


def metrics_file(b: LocalBackend, job_id: str, trial_id: str) -> list[dict]:
    path = b.job_dir("alice", f"{job_id}/trial-{trial_id}") / "master-replica-0.metrics"
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
async def backend(tmp_path):
    b = await LocalBackend.create(tmp_path / "state", grace_s=0.5, poll_s=0.05)
    yield b
    for job in await b.list("alice"):
        if job["state"] not in FINAL:
            await b.cancel("alice", job["jobId"])
            await wait_for(b, job["jobId"])
    await b.close()


async def test_a_sweep_runs_its_trials_two_at_a_time_and_reports_them(backend):
    job_id = uid("tpe")
    plan = sweep_plan(job_id, [LR, EPOCHS, BATCH], ["--sleep=0.1"], maxTrials=5, maxParallelTrials=2)
    submitted = await backend.submit(plan)
    assert submitted["trainingOutput"] == {"isHyperparameterTuningJob": True, "hyperparameterMetricTag": "rmse",
                                           "completedTrialCount": "0"}
    seen_running = await wait_for(backend, job_id, lambda j: len(running(j)) == 2)
    assert seen_running["state"] == "RUNNING"
    job = await wait_for(backend, job_id)
    assert PLATFORM_JOB_SCHEMA.is_valid(job), list(PLATFORM_JOB_SCHEMA.iter_errors(job))
    assert job["state"] == "SUCCEEDED" and job["trainingOutput"]["completedTrialCount"] == "5"
    assert [t["trialId"] for t in trials(job)] == ["1", "2", "3", "4", "5"]
    assert most_at_once(job) == 2
    assert [job["jobId"] for job in await backend.list("alice")] == [job_id]  # trial jobs are not listed
    for t in trials(job):
        hp = t["hyperparameters"]
        assert t["state"] == "SUCCEEDED" and t["isTrialStoppedEarly"] is False
        assert 0.001 <= float(hp["learning_rate"]) <= 0.3 and hp["epochs"] in "234" and hp["batch_size"] in ("16", "32")
        log = [line.text async for line in backend.logs("alice", job_id, f"trial-{t['trialId']}")]
        assert log[1] == (f"hyperparameters: learning_rate={hp['learning_rate']} epochs={hp['epochs']} "
                          f"batch_size={hp['batch_size']}")
        reports = metrics_file(backend, job_id, t["trialId"])  # the trainer's own file: the truth
        assert len(reports) == int(hp["epochs"]) and {r["trial"] for r in reports} == {t["trialId"]}
        assert t["finalMetric"] == {"trainingStep": reports[-1]["global_step"],
                                    "objectiveValue": float(reports[-1]["rmse"])}
        series = await backend.trial_metrics("alice", job_id, t["trialId"])
        assert [(p["trainingStep"], p["objectiveValue"]) for p in series] == [
            (r["global_step"], float(r["rmse"])) for r in reports]
    best = min(trials(job), key=lambda t: t["finalMetric"]["objectiveValue"])
    truth = min((float(metrics_file(backend, job_id, t["trialId"])[-1]["rmse"]), t["trialId"]) for t in trials(job))
    assert (best["finalMetric"]["objectiveValue"], best["trialId"]) == truth
    assert [line.text async for line in backend.logs("alice", job_id, "trial-1/master-replica-0")] == log_of(
        backend, job_id, "1")
    for task in ("trial-9", "master-replica-0", "trial-1/worker-replica-0"):
        with pytest.raises(UserInputError):
            backend.logs("alice", job_id, task)
    with pytest.raises(JobNotFound):
        await backend.trial_metrics("alice", job_id, "9")


def log_of(b: LocalBackend, job_id: str, trial_id: str) -> list[str]:
    return (b.job_dir("alice", f"{job_id}/trial-{trial_id}") / "master-replica-0.log").read_text().splitlines()


async def test_grid_search_covers_its_grid(backend):
    job_id = uid("grid")
    await backend.submit(sweep_plan(job_id, [EPOCHS, BATCH], ["--sleep=0", "--learning_rate=0.05"],
                                    algorithm="GRID_SEARCH", maxTrials=10, maxParallelTrials=2))
    job = await wait_for(backend, job_id)
    assert job["state"] == "SUCCEEDED" and PLATFORM_JOB_SCHEMA.is_valid(job)
    points = sorted((t["hyperparameters"]["epochs"], t["hyperparameters"]["batch_size"]) for t in trials(job))
    assert points == [(e, b) for e in ("2", "3", "4") for b in ("16", "32")]  # 6 points, each once, then it ends


async def test_early_stopping_stops_clearly_worse_trials(backend):
    # the grid fixes its own (seeded) order: the good learning rate first, then three tiny ones
    job_id = uid("early")
    await backend.submit(sweep_plan(job_id, [SLOW_LR], ["--epochs=8", "--sleep=0.25"], algorithm="GRID_SEARCH",
                                    maxTrials=4, enableTrialEarlyStopping=True))
    job = await wait_for(backend, job_id)
    assert job["state"] == "SUCCEEDED" and PLATFORM_JOB_SCHEMA.is_valid(job)
    first, *rest = trials(job)
    assert first["hyperparameters"] == {"learning_rate": "0.1"} and first["isTrialStoppedEarly"] is False
    assert len(metrics_file(backend, job_id, "1")) == 8
    stopped = [t for t in rest if t["isTrialStoppedEarly"]]
    assert stopped, trials(job)
    for t in stopped:
        reports = metrics_file(backend, job_id, t["trialId"])
        assert t["state"] == "SUCCEEDED" and len(reports) < 8
        assert t["finalMetric"]["objectiveValue"] > first["finalMetric"]["objectiveValue"]
    assert job["trainingOutput"]["completedTrialCount"] == "4"


async def test_cancel_stops_the_running_trials(backend):
    job_id = uid("cancel")
    await backend.submit(sweep_plan(job_id, [LR, EPOCHS], ["--sleep=5"], maxTrials=4, maxParallelTrials=2))
    await wait_for(backend, job_id, lambda j: len(running(j)) == 2)
    await wait_for(backend, job_id, lambda j: all(metrics_file_exists(backend, job_id, t) for t in running(j)))
    assert len(job_pids(job_id)) >= 2
    assert (await backend.cancel("alice", job_id))["state"] == "CANCELLING"
    job = await wait_for(backend, job_id)
    assert job["state"] == "CANCELLED" and PLATFORM_JOB_SCHEMA.is_valid(job)
    assert [t["state"] for t in trials(job)] == ["CANCELLED", "CANCELLED"]
    assert job_pids(job_id) == []


def metrics_file_exists(b: LocalBackend, job_id: str, trial_id: str) -> bool:
    return (b.job_dir("alice", f"{job_id}/trial-{trial_id}") / "master-replica-0.metrics").exists()


async def test_a_failing_trainer_fails_the_sweep(backend):
    job_id = uid("failing")
    await backend.submit(sweep_plan(job_id, [EPOCHS], ["--sleep=0", "--fail_at_epoch=1"], maxTrials=6,
                                    maxParallelTrials=2))
    job = await wait_for(backend, job_id)
    assert job["state"] == "FAILED" and "exited with a non-zero status of 1" in job["errorMessage"]
    assert len(trials(job)) <= 4 and {t["state"] for t in trials(job)} <= {"FAILED", "CANCELLED"}


async def test_restart_shows_a_finished_sweep_and_resumes_an_unfinished_one(tmp_path):
    state = tmp_path / "state"
    first = await LocalBackend.create(state, grace_s=0.5, poll_s=0.05)
    done, unfinished = uid("done"), uid("unfinished")
    try:
        await first.submit(sweep_plan(done, [EPOCHS], ["--sleep=0"], maxTrials=2, maxParallelTrials=2))
        finished = await wait_for(first, done)
        # trials of 2-4 epochs of 1 s: the second is still running when the server has stopped
        await first.submit(sweep_plan(unfinished, [EPOCHS], ["--sleep=1"], maxTrials=3, maxParallelTrials=1))
        await wait_for(first, unfinished, lambda j: running(j) == ["2"])
        # a trial is RUNNING in the sweep from the moment it is asked for, while its job still prepares:
        # stop the server only once its process is there (a trial stopped while preparing fails instead)
        deadline = time.monotonic() + 30
        while not job_pids(unfinished):
            assert time.monotonic() < deadline, "trial 2's process never started"
            await asyncio.sleep(0.05)
    finally:
        await first.close()  # the running trial's process keeps running
    assert job_pids(unfinished)
    second = await LocalBackend.create(state, grace_s=0.5, poll_s=0.05)
    try:
        assert await second.get("alice", done) == finished
        job = await wait_for(second, unfinished)
        assert job["state"] == "SUCCEEDED" and PLATFORM_JOB_SCHEMA.is_valid(job)
        assert [t["trialId"] for t in trials(job)] == ["1", "2", "3"]
        assert {t["state"] for t in trials(job)} == {"SUCCEEDED"} and most_at_once(job) == 1
        assert trials(job)[1]["finalMetric"]["trainingStep"] == metrics_file(second, unfinished, "2")[-1]["global_step"]
    finally:
        await second.close()


async def test_resume_previous_job_continues_its_study(backend):
    first, second = uid("first"), uid("second")
    grid = dict(algorithm="GRID_SEARCH", maxTrials=2, maxParallelTrials=2)
    params = [EPOCHS | {"maxValue": 3}, BATCH]
    with pytest.raises(UserInputError) as e:
        await backend.submit(sweep_plan(second, params, ["--sleep=0"], resumePreviousJobId="nope", **grid))
    assert e.value.field == "trainingInput.hyperparameters.resumePreviousJobId"
    await backend.submit(sweep_plan(first, params, ["--sleep=0"], **grid))
    before = await wait_for(backend, first)
    await backend.submit(sweep_plan(second, params, ["--sleep=0"], resumePreviousJobId=first, **grid))
    after = await wait_for(backend, second)
    assert before["state"] == after["state"] == "SUCCEEDED"
    points = [tuple(t["hyperparameters"].values()) for t in trials(before) + trials(after)]
    assert sorted(points) == [(e, b) for e in ("2", "3") for b in ("16", "32")]  # the grid continued, not restarted
    storage = f"sqlite:///{backend.state_dir / 'sweeps.sqlite'}"
    study = optuna.load_study(study_name=f"alice/{second}", storage=storage)
    previous = optuna.load_study(study_name=f"alice/{first}", storage=storage)
    assert len(study.trials) == 4 and study.best_value <= previous.best_value


@pytest.mark.parametrize("hyper, workers, message", [
    ({"maxTrials": 2**31 - 1, "maxParallelTrials": 2**31 - 1}, 0, "2147483647 trials at once × 1 replica each"),
    ({"maxTrials": 20, "maxParallelTrials": 11}, 2, "11 trials at once × 3 replicas each"),
    ({"maxTrials": 40, "maxParallelTrials": 33}, 0, "at most 32 trials at once here"),
])
async def test_parallel_trials_beyond_the_local_process_limit_are_refused(backend, hyper, workers, message):
    assert backend.max_processes == 32  # the default
    job_id = uid("wide")
    plan = sweep_plan(job_id, [EPOCHS], ["--sleep=0"], **hyper)
    if workers:
        training = {**plan.job.training, "scaleTier": "CUSTOM", "masterType": "standard", "workerType": "standard",
                    "workerCount": str(workers)}
        plan = plan_job(parse_job({"jobId": job_id, "trainingInput": training}), SETTINGS, project="alice",
                        owner="alice")
    with pytest.raises(UserInputError) as e:
        await backend.submit(plan)
    assert e.value.field == "trainingInput.hyperparameters.maxParallelTrials" and message in e.value.message
    with pytest.raises(JobNotFound):
        await backend.get("alice", job_id)
    assert not backend.job_dir("alice", job_id).exists()


async def test_parallel_trials_are_counted_up_to_max_trials(tmp_path):
    b = await LocalBackend.create(tmp_path / "state", grace_s=0.5, poll_s=0.05, max_processes=2)
    try:
        job_id = uid("few")  # maxParallelTrials beyond maxTrials runs maxTrials at once: 2 × 1 process
        await b.submit(sweep_plan(job_id, [EPOCHS], ["--sleep=0"], maxTrials=2, maxParallelTrials=1000))
        job = await wait_for(b, job_id)
        assert job["state"] == "SUCCEEDED" and len(trials(job)) == 2
        with pytest.raises(UserInputError) as e:
            await b.submit(sweep_plan(uid("more"), [EPOCHS], ["--sleep=0"], maxTrials=3, maxParallelTrials=3))
        assert e.value.field == "trainingInput.hyperparameters.maxParallelTrials"
        assert "at most 2 trials at once here" in e.value.message
    finally:
        await b.close()


async def test_a_sweep_with_a_spaced_metric_tag_runs_and_reports_the_users_tag(backend):
    """``hyperparameterMetricTag: Taxi Model Accuracy`` (AI Platform takes any string): the trainer
    reports under that tag (CLOUD_ML_HP_METRIC_TAG, as cloudml-hypertune writes it) and every answer
    shows it."""
    job_id, tag = uid("spaced"), "Taxi Model Accuracy"
    plan = sweep_plan(job_id, [LR], ["--epochs=2", "--sleep=0"], maxTrials=2, maxParallelTrials=2,
                      hyperparameterMetricTag=tag)
    assert (await backend.submit(plan))["trainingOutput"]["hyperparameterMetricTag"] == tag
    job = await wait_for(backend, job_id)
    assert job["state"] == "SUCCEEDED", job
    assert job["trainingOutput"]["hyperparameterMetricTag"] == tag
    assert PLATFORM_JOB_SCHEMA.is_valid(job), list(PLATFORM_JOB_SCHEMA.iter_errors(job))
    for t in trials(job):
        reports = metrics_file(backend, job_id, t["trialId"])
        assert t["state"] == "SUCCEEDED" and t["finalMetric"]["objectiveValue"] == float(reports[-1][tag])
        series = await backend.trial_metrics("alice", job_id, t["trialId"])
        assert [p["objectiveValue"] for p in series] == [float(r[tag]) for r in reports] and len(series) == 2
