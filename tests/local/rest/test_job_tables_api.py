"""`c.MLPlatformApp.job_tables` reaches the jobs the REST API plans: an operator's machine type
and runtime are accepted, and what the table replaced is refused naming the field."""

import pytest

from tests.local.rest.conftest import PROJECT, job_body

pytestmark = pytest.mark.local


@pytest.fixture
def tables():
    return {"machines": {"tiny": {"cpu": 1, "memory_gib": 2}}, "replace_runtimes": True,
            "runtimes": {"plain": {"3.11": {"image": "python:3.11"}}}, "default_runtime_version": "plain"}


@pytest.fixture
def jp_server_config(jp_server_config, tables):
    return {**jp_server_config, "MLPlatformApp": {**jp_server_config["MLPlatformApp"], "job_tables": tables}}


def test_the_operators_tables_decide_machines_and_runtimes(api, run):
    async def go():
        code, job = await api("POST", PROJECT, "jobs", body=job_body(
            "tiny_1", "--epochs=1", "--sleep=0", scaleTier="CUSTOM", masterType="tiny", runtimeVersion="plain"))
        assert code == 200, job
        assert job["trainingInput"]["masterType"] == "tiny"
        code, error = await api("POST", PROJECT, "jobs", body=job_body("tf_1", runtimeVersion="2.11"))
        assert code == 400, error
        (violation,) = error["error"]["details"][0]["fieldViolations"]
        assert violation["field"] == "trainingInput.runtimeVersion" and "plain" in violation["description"]
        code, _ = await api("GET", PROJECT, "jobs", "tf_1")
        assert code == 404
    run(go())


@pytest.mark.parametrize("tables", [{"machines": {"tiny": {"cpu": "one", "memory_gib": 2}}}])
def test_a_mistake_in_the_tables_is_answered_naming_its_key_and_nothing_runs(api, run, jp_serverapp):
    async def go():
        for method, parts, body in [("POST", ("jobs",), job_body("t_1")), ("GET", ("jobs",), None),
                                    ("GET", ("jobs", "t_1"), None)]:
            code, error = await api(method, PROJECT, *parts, body=body)
            assert code == 503 and error["error"]["status"] == "UNAVAILABLE", (method, parts, error)
            assert "MLPlatformApp.job_tables.machines.tiny.cpu: must be a positive number" in error["error"]["message"]
    run(go())
