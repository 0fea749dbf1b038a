"""The ml/v1 jobs REST + SSE API of the notebook server, through jupyter_server's own test client
(`jp_fetch`), on the local backend running the example trainer as real processes."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from tests.local.rest.conftest import PROJECT, job_body
from tests.sse import sse_events
from tests.unit.test_job_model import PLATFORM_JOB_SCHEMA as JOB_SCHEMA  # Google's, with the progress the trainer reports

pytestmark = pytest.mark.local


async def wait_state(api, job_id: str, states: tuple[str, ...], timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        code, job = await api("GET", PROJECT, "jobs", job_id)
        assert code == 200, job
        if job["state"] in states or time.monotonic() > deadline:
            assert job["state"] in states, job
            return job
        await asyncio.sleep(0.1)


def test_create_get_list_and_logs(api, jp_fetch, run):
    async def go():
        code, job = await api("POST", PROJECT, "jobs", body=job_body("census_1", "--epochs=3", "--sleep=0"))
        assert code == 200, job
        assert job["jobId"] == "census_1" and job["state"] in ("QUEUED", "PREPARING", "RUNNING")
        JOB_SCHEMA.validate(job)
        done = await wait_state(api, "census_1", ("SUCCEEDED", "FAILED"))
        assert done["state"] == "SUCCEEDED", done
        JOB_SCHEMA.validate(done)
        assert done["createTime"] <= done["startTime"] <= done["endTime"]

        await api("POST", PROJECT, "jobs", body=job_body("failing", "--epochs=3", "--sleep=0", "--fail_at_epoch=2"))
        failed = await wait_state(api, "failing", ("SUCCEEDED", "FAILED"))
        assert failed["state"] == "FAILED" and "non-zero status of 1" in failed["errorMessage"]

        code, listed = await api("GET", PROJECT, "jobs")
        assert code == 200 and [j["jobId"] for j in listed["jobs"]] == ["failing", "census_1"]
        code, listed = await api("GET", PROJECT, "jobs", params={"filter": "state=SUCCEEDED AND labels.team=vision"})
        assert [j["jobId"] for j in listed["jobs"]] == ["census_1"]
        code, first = await api("GET", PROJECT, "jobs", params={"pageSize": "1"})
        code, second = await api("GET", PROJECT, "jobs", params={"pageSize": "1", "pageToken": first["nextPageToken"]})
        assert [j["jobId"] for j in first["jobs"] + second["jobs"]] == ["failing", "census_1"]
        assert "nextPageToken" not in second

        resp = await jp_fetch("ml", "v1", "projects", PROJECT, "jobs", "census_1", "logs")
        assert resp.headers["Content-Type"] == "text/event-stream"
        events = sse_events(resp.body.decode())
        lines = [json.loads(e["data"]) for e in events if "id" in e]
        assert [line["seq"] for line in lines] == list(range(1, len(lines) + 1))
        assert any("epoch 3/3" in line["text"] for line in lines)
        assert events[-1] == {"event": "end", "data": json.dumps({"state": "SUCCEEDED"})}

        # resume: only what comes after the last id received, nothing twice
        resp = await jp_fetch("ml", "v1", "projects", PROJECT, "jobs", "census_1", "logs",
                              headers={"Last-Event-ID": "2"})
        rest = [json.loads(e["data"]) for e in sse_events(resp.body.decode()) if "id" in e]
        assert rest == lines[2:]
    run(go())


def test_follow_streams_until_the_job_ends(api, jp_fetch, run):
    async def go():
        await api("POST", PROJECT, "jobs", body=job_body("slow", "--epochs=4", "--sleep=0.3"))
        resp = await jp_fetch("ml", "v1", "projects", PROJECT, "jobs", "slow", "logs", params={"follow": "true"},
                              request_timeout=60)
        events = sse_events(resp.body.decode())
        texts = [json.loads(e["data"])["text"] for e in events if "id" in e]
        assert any("epoch 4/4" in t for t in texts)
        assert events[-1]["event"] == "end" and json.loads(events[-1]["data"]) == {"state": "SUCCEEDED"}
    run(go())


def test_cancel(api, run):
    async def go():
        await api("POST", PROJECT, "jobs", body=job_body("long", "--epochs=1000", "--sleep=0.5"))
        await wait_state(api, "long", ("RUNNING",))
        code, body = await api("POST", PROJECT, "jobs", "long:cancel")
        assert (code, body) == (200, {})
        job = await wait_state(api, "long", ("CANCELLED",), timeout=30)
        JOB_SCHEMA.validate(job)
        code, body = await api("POST", PROJECT, "jobs", "long:cancel")
        assert code == 400 and body["error"]["status"] == "FAILED_PRECONDITION"
    run(go())


@pytest.mark.parametrize("body, field", [
    ({"jobId": "1bad", "trainingInput": {}}, "jobId"),
    ({"jobId": "ok", "trainingInput": {"scaleTier": "BASIC", "pythonModule": "m", "packageUris": ["gs://b/p.tgz"],
                                       "masterType": "n1-standard-4"}}, "trainingInput.masterType"),
    ({"jobId": "ok", "trainingInput": {"pythonModule": "m", "packageUris": ["gs://b/p"], "sclaeTier": "BASIC"}},
     "trainingInput.sclaeTier"),
    ({"jobId": "ok", "state": "RUNNING", "trainingInput": {}}, "state"),
    ({"jobId": "ok", "trainingInput": {"scaleTier": "CUSTOM", "masterType": "n1-standard-4", "pythonModule": "m",
                                       "packageUris": ["gs://b/p"],
                                       "masterConfig": {"acceleratorConfig": {"type": "TPU_V3", "count": 8}}}},
     "trainingInput.masterConfig.acceleratorConfig.type"),
    ("[1, 2", "body"),
])
def test_bad_jobs_are_refused_naming_the_field_and_nothing_is_created(api, run, body, field):
    async def go():
        code, error = await api("POST", PROJECT, "jobs", body=body)
        assert code == 400, error
        assert error["error"]["status"] == "INVALID_ARGUMENT"
        assert error["error"]["details"][0]["fieldViolations"][0]["field"] == field
        assert "Traceback" not in json.dumps(error)
        assert (await api("GET", PROJECT, "jobs"))[1] == {"jobs": []}
    run(go())


def test_conflicts_missing_jobs_and_other_projects(api, run):
    async def go():
        assert (await api("POST", PROJECT, "jobs", body=job_body("dup", "--epochs=1", "--sleep=0")))[0] == 200
        code, error = await api("POST", PROJECT, "jobs", body=job_body("dup"))
        assert code == 409 and error["error"]["status"] == "ALREADY_EXISTS"
        code, error = await api("GET", PROJECT, "jobs", "nope")
        assert code == 404 and error["error"]["status"] == "NOT_FOUND"
        # a project the user may use has its own jobs; one they may not is refused for every verb
        assert (await api("GET", "vision", "jobs", "dup"))[0] == 404
        for method, parts in [("GET", ("jobs",)), ("POST", ("jobs",)), ("GET", ("jobs", "dup")),
                              ("POST", ("jobs", "dup:cancel")), ("GET", ("jobs", "dup", "logs"))]:
            code, error = await api(method, "bob", *parts, body=job_body("x") if parts == ("jobs",) and method == "POST"
                                    else None)
            assert code == 403 and error["error"]["status"] == "PERMISSION_DENIED", (method, parts, error)
    run(go())


@pytest.mark.parametrize("headers", [{"Authorization": ""}, {"Authorization": "token wrong"}])
def test_every_route_needs_the_servers_token(api, run, headers):
    async def go():
        for method, parts in [("GET", ("jobs",)), ("POST", ("jobs",)), ("GET", ("jobs", "a")),
                              ("POST", ("jobs", "a:cancel")), ("GET", ("jobs", "a", "logs"))]:
            code, error = await api(method, PROJECT, *parts, headers=headers,
                                    body=job_body("a") if method == "POST" else None)
            assert code == 403 and error["error"]["status"] == "PERMISSION_DENIED", (method, parts)
        assert (await api("GET", PROJECT, "jobs"))[1] == {"jobs": []}
    run(go())


def test_a_package_directory_of_the_notebook_folder_is_built_and_shipped(api, jp_root_dir, run):
    import shutil

    from tests.local.rest.conftest import TRAINER
    shutil.copytree(TRAINER, jp_root_dir / "work" / "trainer")

    async def go():
        body = {"jobId": "from_folder", "package": {"path": "work/trainer"},
                "trainingInput": {"pythonModule": "trainer.task", "args": ["--epochs=2", "--sleep=0"]}}
        code, job = await api("POST", PROJECT, "jobs", body=body)
        assert code == 200, job
        assert "package" not in job and job["trainingInput"]["packageUris"][0].startswith("configmap://")
        assert (await wait_state(api, "from_folder", ("SUCCEEDED", "FAILED")))["state"] == "SUCCEEDED"
        for bad, field in [({"path": "../outside"}, "package.path"), ({"path": "/etc"}, "package.path"),
                           ({"path": "work/missing"}, "package.path"), ("work/trainer", "package"),
                           ({"path": "work/trainer", "extra": 1}, "package")]:
            code, error = await api("POST", PROJECT, "jobs", body={**body, "jobId": "bad", "package": bad})
            assert code == 400 and error["error"]["details"][0]["fieldViolations"][0]["field"] == field, (bad, error)
    run(go())
