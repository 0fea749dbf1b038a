"""Sweeps through the same ml/v1 REST API (local backend, the example trainer): a job with
trainingInput.hyperparameters answers with trainingOutput, its trials' logs are tasks trial-N and
their metric series are served for plotting."""

from __future__ import annotations

import json

import pytest

from tests.local.rest.conftest import PROJECT, job_body
from tests.local.rest.test_jobs_api import wait_state
from tests.sse import sse_events
from tests.unit.test_job_model import PLATFORM_JOB_SCHEMA

pytestmark = pytest.mark.local


def test_a_sweep_over_rest(api, jp_fetch, run):
    async def go():
        body = job_body("sweep_rest", "--epochs=3", "--sleep=0")
        body["trainingInput"]["hyperparameters"] = {
            "goal": "MINIMIZE", "hyperparameterMetricTag": "rmse", "maxTrials": 2, "maxParallelTrials": 2,
            "algorithm": "GRID_SEARCH",
            "params": [{"parameterName": "learning_rate", "type": "DISCRETE", "discreteValues": [0.01, 0.1]}]}
        code, job = await api("POST", PROJECT, "jobs", body=body)
        assert code == 200, job
        assert job["trainingOutput"]["isHyperparameterTuningJob"] is True
        done = await wait_state(api, "sweep_rest", ("SUCCEEDED", "FAILED"), timeout=90)
        assert done["state"] == "SUCCEEDED", done
        PLATFORM_JOB_SCHEMA.validate(done)
        out = done["trainingOutput"]
        assert out["completedTrialCount"] == "2" and out["hyperparameterMetricTag"] == "rmse"
        by_rate = {t["hyperparameters"]["learning_rate"]: t for t in out["trials"]}
        assert set(by_rate) == {"0.01", "0.1"}
        trial = by_rate["0.1"]
        code, series = await api("GET", PROJECT, "jobs", "sweep_rest", "trials", trial["trialId"], "metrics")
        assert code == 200 and len(series["metrics"]) == 3  # one report per epoch
        assert series["metrics"][-1]["objectiveValue"] == pytest.approx(trial["finalMetric"]["objectiveValue"])
        resp = await jp_fetch("ml", "v1", "projects", PROJECT, "jobs", "sweep_rest", "logs",
                              params={"task": f"trial-{trial['trialId']}"})
        lines = [json.loads(e["data"]) for e in sse_events(resp.body.decode()) if "id" in e]
        assert any("epoch 3/3" in line["text"] for line in lines)
        assert {line["task"] for line in lines} == {f"trial-{trial['trialId']}"}
        code, error = await api("GET", PROJECT, "jobs", "sweep_rest", "trials", "9", "metrics")
        assert code == 404 and error["error"]["status"] == "NOT_FOUND"
        code, listed = await api("GET", PROJECT, "jobs", params={"filter": "trainingOutput.isHyperparameterTuningJob=true"})
        assert [j["jobId"] for j in listed["jobs"]] == ["sweep_rest"]
    run(go())
