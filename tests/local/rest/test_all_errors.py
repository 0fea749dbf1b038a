"""A real notebook server's ml/v1 API answers every independent mistake of one create at once
(issue 20.6: four mistakes took four submits): one Google ``fieldViolation`` each, named as the
body names the field, and nothing is created."""

from __future__ import annotations

import pytest

from server_ext.client.errors import from_response
from tests.local.rest.conftest import PROJECT, job_body

pytestmark = pytest.mark.local


def field_violations(code: int, answer: dict) -> list[str]:
    assert code == 400, answer
    error = answer["error"]
    assert (error["code"], error["status"]) == (400, "INVALID_ARGUMENT")
    (detail,) = error["details"]
    assert detail["@type"] == "type.googleapis.com/google.rpc.BadRequest"
    assert all(v["description"] for v in detail["fieldViolations"])
    return [v["field"] for v in detail["fieldViolations"]]


def test_four_mistakes_in_one_body_are_four_field_violations_and_nothing_is_made(api, run):
    body = job_body("1st_try", "--epochs", "1")
    body["labels"] = {"Team": "vision"}
    body["trainingInput"].update({"pythonModule": "trainer-task", "scheduling": {"maxRunningTime": "0s"}})
    code, answer = run(api("POST", PROJECT, "jobs", body=body))
    assert field_violations(code, answer) == ["jobId", "labels.Team", "trainingInput.scheduling.maxRunningTime",
                                              "trainingInput.pythonModule"]
    assert answer["error"]["message"].startswith("jobId: must start with a letter")
    # the notebook's client (and so the submit form) gets every one of them back
    e = from_response(code, answer, action="create job", project=PROJECT)
    assert len(e.violations) == 4 and e.field == "jobId"
    code, listed = run(api("GET", PROJECT, "jobs"))
    assert (code, listed.get("jobs", [])) == (200, [])


def test_the_plan_s_mistakes_come_together_too(api, run):
    body = job_body("custom_one")
    body["trainingInput"].update({"scaleTier": "CUSTOM", "masterType": "n1-standard-9000", "runtimeVersion": "0.1",
                                  "workerType": "n1-standard-8", "workerCount": "1",
                                  "workerConfig": {"acceleratorConfig": {"type": "NVIDIA_L4"}}})
    code, answer = run(api("POST", PROJECT, "jobs", body=body))
    assert field_violations(code, answer) == ["trainingInput.runtimeVersion", "trainingInput.masterType",
                                              "trainingInput.workerConfig.acceleratorConfig.type"]
    code, listed = run(api("GET", PROJECT, "jobs"))
    assert (code, listed.get("jobs", [])) == (200, [])


def test_a_bad_package_field_names_its_bucket_and_its_path_together(api, run):
    body = {**job_body("pkg"), "package": {"path": "../elsewhere", "stagingBucket": 7}}
    code, answer = run(api("POST", PROJECT, "jobs", body=body))
    assert field_violations(code, answer) == ["package.stagingBucket", "package.path"]


def test_one_mistake_is_still_one_field_violation(api, run):
    code, answer = run(api("POST", PROJECT, "jobs", body=job_body("j", scheduling={"maxRunningTime": "0s"})))
    assert field_violations(code, answer) == ["trainingInput.scheduling.maxRunningTime"]
    assert answer["error"]["message"] == ("trainingInput.scheduling.maxRunningTime: must be a positive duration "
                                          "such as 7200s")


def test_the_body_the_mounts_and_the_plan_are_told_together(api, run):
    def fields_of(body):
        code, answer = run(api("POST", PROJECT, "jobs", body=body))
        assert code == 400, answer  # a 403 (an unknown credential) among 400s is a 400
        return [v["field"] for v in answer["error"]["details"][0]["fieldViolations"]]

    body = job_body("mounted")
    body["mounts"] = {"credentials": ["no-such-credential"]}
    body["labels"] = {"Team": "vision"}
    assert fields_of(body) == ["labels.Team", "mounts.credentials[0]"]
    del body["labels"]  # a body that parses is planned too (the plan needs a valid job)
    body["trainingInput"]["runtimeVersion"] = "0.1"
    assert fields_of(body) == ["mounts.credentials[0]", "trainingInput.runtimeVersion"]
    code, listed = run(api("GET", PROJECT, "jobs"))
    assert (code, listed.get("jobs", [])) == (200, [])


def test_a_bad_package_field_does_not_hide_the_body_s_own_mistakes(api, run):
    body = {**job_body("1st_pkg"), "package": {"path": "../elsewhere"}}
    body["trainingInput"].pop("packageUris", None)
    code, answer = run(api("POST", PROJECT, "jobs", body=body))
    assert field_violations(code, answer) == ["package.path", "jobId"]
