"""Hostile and malformed input to the ml/v1 API: every answer is Google's error JSON naming the
field (the REST name: ``package.path``, ``task``, ``mounts.credentials[0]``, never a CLI flag),
never a 500, a traceback or Jupyter's HTML page, and nothing is created."""

from __future__ import annotations

import base64
import json
import shutil

import pytest

from tests.local.rest.conftest import PROJECT, TRAINER, job_body

pytestmark = pytest.mark.local


@pytest.fixture
def raw(http_server_client, jp_auth_header, jp_base_url):
    """A request to ``ml/v1/projects/<rest>`` sent exactly as written (no escaping: ``%2F``, ``%FF``,
    ``:CANCEL`` reach the server as they are); answers (status, Content-Type, body)."""
    async def call(method: str, rest: str, *, headers=None, body=None, auth=True):
        sent = {**(jp_auth_header if auth else {}), **(headers or {})}
        if body is None and method in ("POST", "PUT", "PATCH"):
            body = b""
        resp = await http_server_client.fetch(f"{jp_base_url}ml/v1/{rest}", method=method, headers=sent, body=body,
                                              raise_error=False, allow_nonstandard_methods=True)
        return resp.code, resp.headers.get("Content-Type", ""), resp.body.decode("utf-8", "replace")
    return call


def violation(code: int, content_type: str, text: str, status: int = 400) -> str:
    """The one field Google's error JSON names (after checking its shape)."""
    assert code == status, (code, text[:500])
    assert content_type.startswith("application/json"), (content_type, text[:200])
    assert "Traceback" not in text and "<html" not in text.lower()
    error = json.loads(text)["error"]
    assert error["code"] == status and error["status"] == ("INVALID_ARGUMENT" if status == 400 else
                                                           "PERMISSION_DENIED" if status == 403 else error["status"])
    (detail,) = error["details"]
    (field,) = detail["fieldViolations"]
    assert field["description"]
    return field["field"]


def google_error(code: int, content_type: str, text: str) -> dict:
    assert content_type.startswith("application/json"), (content_type, text[:200])
    assert "Traceback" not in text and "<html" not in text.lower()
    error = json.loads(text)["error"]
    assert error["code"] == code and set(error) == {"code", "message", "status", "details"}
    return error


def jobs_of(run, api) -> list:
    code, listed = run(api("GET", PROJECT, "jobs"))
    assert code == 200, listed
    return listed["jobs"]


@pytest.mark.parametrize("body", [
    "[" * 5000 + "]" * 5000,
    '{"a":' * 5000 + "1" + "}" * 5000,
    json.dumps({"jobId": "deep", "labels": {}, "trainingInput": {"args": [json.loads("[" * 100 + "]" * 100)]}}),
])
def test_a_deeply_nested_body_is_refused(raw, api, run, body):
    assert violation(*run(raw("POST", f"projects/{PROJECT}/jobs", body=body))) == "body"
    assert jobs_of(run, api) == []


@pytest.mark.parametrize("text", [
    "(" * 2000 + "a=b" + ")" * 2000,
    "NOT " * 3000 + "a=b",
    "-" * 3000 + "a=b",
    "(" * 100 + "a=b" + ")" * 100,
    "a=b OR " * 400 + "a=b",  # longer than the API takes
])
def test_a_filter_too_long_or_too_deep_is_refused(api, run, text):
    code, error = run(api("GET", PROJECT, "jobs", params={"filter": text}))
    assert code == 400, error
    assert error["error"]["details"][0]["fieldViolations"][0]["field"] == "filter"


@pytest.mark.parametrize("token", [
    base64.urlsafe_b64encode(b"[" * 5000 + b"]" * 5000).decode(),
    base64.urlsafe_b64encode(json.dumps(["2026-01-01T00:00:00Z", "a" * 5000]).encode()).decode(),
    "%FF%FE",  # not UTF-8 once unquoted
])
def test_a_page_token_the_api_did_not_give_is_refused(raw, run, token):
    assert violation(*run(raw("GET", f"projects/{PROJECT}/jobs?pageToken={token}"))) == "pageToken"


@pytest.mark.parametrize("query, field", [("pageSize=%D9%A1%D9%A2", "pageSize"), ("pageSize=1_0", "pageSize"),
                                          ("pageSize=" + "9" * 5000, "pageSize"), ("filter=%FF", "filter")])
def test_other_list_parameters_are_read_strictly(raw, run, query, field):
    assert violation(*run(raw("GET", f"projects/{PROJECT}/jobs?{query}"))) == field


@pytest.mark.parametrize("path", ["train\u0000erpkg", "t" * 5000, "\ud800", "a/" * 3000,
                                  "t" * 300, "a/" * 2000, "loop/x", "work\nline"])
def test_a_package_path_the_file_system_cannot_hold_is_refused(raw, api, run, jp_root_dir, path):
    (jp_root_dir / "loop").symlink_to(jp_root_dir / "loop")  # a symbolic link loop
    body = {"jobId": "pkg", "package": {"path": path}, "trainingInput": {"pythonModule": "trainer.task"}}
    assert violation(*run(raw("POST", f"projects/{PROJECT}/jobs", body=json.dumps(body)))) == "package.path"
    assert jobs_of(run, api) == []


def test_a_lone_surrogate_anywhere_in_the_body_is_refused_naming_its_field(raw, api, run):
    body = job_body("bad_text", "\ud800")
    assert violation(*run(raw("POST", f"projects/{PROJECT}/jobs", body=json.dumps(body)))) == \
        "trainingInput.args[0]"
    assert jobs_of(run, api) == []


def test_package_and_mount_errors_name_the_rest_fields(api, run, jp_root_dir):
    shutil.copytree(TRAINER, jp_root_dir / "work" / "trainer")
    module = {"pythonModule": "trainer.task", "args": ["--epochs=1", "--sleep=0"]}
    container = {"scaleTier": "CUSTOM", "masterType": "n1-standard-4", "masterConfig": {"imageUri": "python:3.11"}}
    cases = [
        ({"package": {"path": "work/trainer", "stagingBucket": "ftp://nowhere"}, "trainingInput": module},
         400, "package.stagingBucket"),
        ({"package": {"path": "work/trainer"}, "trainingInput": container}, 400, "package.path"),
        ({"mounts": {"credentials": ["nope"]}, "trainingInput": module}, 403, "mounts.credentials[0]"),
        ({"mounts": {"datasets": ["nope"]}, "trainingInput": module}, 403, "mounts.datasets[0]"),
        ({"mounts": {"datasets": 5}, "trainingInput": module}, 400, "mounts.datasets"),
        ({"credentials": ["nope"], "trainingInput": module}, 400, "credentials"),  # not a mount: unknown
    ]
    for extra, status, field in cases:
        body = {"jobId": "named", **extra}
        if "package" not in body:
            body["trainingInput"] = {**body["trainingInput"], "packageUris": [TRAINER.as_uri()]}
        code, error = run(api("POST", PROJECT, "jobs", body=body))
        assert code == status, (extra, error)
        (detail,) = error["error"]["details"]
        assert detail["fieldViolations"][0]["field"] == field, (extra, error)
        assert error["error"]["message"].startswith(f"{field}: "), error
    assert jobs_of(run, api) == []


def test_log_parameters_are_read_strictly_and_named_as_sent(api, raw, run):
    code, job = run(api("POST", PROJECT, "jobs", body=job_body("logged", "--epochs=1", "--sleep=0")))
    assert code == 200, job
    logs = f"projects/{PROJECT}/jobs/logged/logs"
    for query, headers, field in [
        ("task=worker-" + "1" * 5000, None, "task"),
        ("task=worker-%D9%A1", None, "task"),  # ARABIC-INDIC DIGIT ONE
        ("task=launcher-0", None, "task"),
        ("task=worker-3", None, "task"),  # the job has no such task
        ("task=trial-1/" * 500 + "master-0", None, "task"),
        ("task=%FF", None, "task"),
        ("follow=maybe", None, "follow"),
        ("follow=", None, "follow"),
        ("after=abc", None, "after"),
        ("after=%D9%A1%D9%A2", None, "after"),
        ("after=1_0", None, "after"),
        ("after=" + "9" * 5000, None, "after"),
        ("", {"Last-Event-ID": "abc"}, "Last-Event-ID"),
        ("", {"Last-Event-ID": "1_0"}, "Last-Event-ID"),
        ("", {"Last-Event-ID": "-1"}, "Last-Event-ID"),
    ]:
        code, content_type, text = run(raw("GET", f"{logs}?{query}", headers=headers))
        assert violation(code, content_type, text) == field, (query, headers, text[:300])
    for query in ("follow=false", "follow=0", "follow=FALSE", "after=0", "task=chief-0"):
        code, content_type, _ = run(raw("GET", f"{logs}?{query}"))
        assert code == 200 and content_type == "text/event-stream", query


@pytest.mark.parametrize("method, rest, field", [
    ("GET", "jobs/a%2Fb", "jobId"),
    ("GET", "jobs/1abc", "jobId"),
    ("GET", "jobs/%C3%A9", "jobId"),
    ("GET", "jobs/%FF", "jobId"),
    ("GET", "jobs/1abc/logs", "jobId"),
    ("POST", "jobs/1abc:cancel", "jobId"),
    ("GET", "jobs/a/trials/0/metrics", "trialId"),
    ("GET", "jobs/a/trials/-1/metrics", "trialId"),
    ("GET", "jobs/a/trials/abc/metrics", "trialId"),
])
def test_a_malformed_id_is_invalid_argument(raw, run, method, rest, field):
    assert violation(*run(raw(method, f"projects/{PROJECT}/{rest}"))) == field


@pytest.mark.parametrize("method, rest", [
    ("POST", f"projects/{PROJECT}/jobs/a:CANCEL"),
    ("POST", f"projects/{PROJECT}/jobs/a:delete"),
    ("GET", f"projects/{PROJECT}/jobs/a/trials"),
    ("GET", f"projects/{PROJECT}/jobs/a/trials/1"),
    ("GET", f"projects/{PROJECT}/jobs/a/nothing"),
    ("GET", f"projects/{PROJECT}/jobs/"),
    ("GET", f"projects/{PROJECT}/models"),
    ("GET", f"projects/{PROJECT}"),
    ("GET", "projects/"),  # GET projects lists the user's projects (test_jobs_api)
    ("DELETE", f"projects/{PROJECT}/jobs/a"),
    ("GET", ""),
])
def test_an_unknown_path_is_googles_not_found(raw, run, method, rest):
    code, content_type, text = run(raw(method, rest))
    error = google_error(code, content_type, text)
    assert (code, error["status"]) in ((404, "NOT_FOUND"), (405, "UNIMPLEMENTED")), (method, rest, error)
    if method != "DELETE":
        assert code == 404


@pytest.mark.parametrize("method, rest", [("GET", "jobs/1abc"), ("POST", "jobs/a:CANCEL"), ("GET", "nothing"),
                                          ("GET", "jobs/a/trials/0/metrics"), ("DELETE", "jobs/a")])
@pytest.mark.parametrize("headers", [{}, {"Authorization": "token wrong"}])
def test_unknown_paths_need_the_servers_token_too(raw, run, method, rest, headers):
    code, content_type, text = run(raw(method, f"projects/{PROJECT}/{rest}", headers=headers, auth=False))
    assert code == 403 and google_error(code, content_type, text)["status"] == "PERMISSION_DENIED", (method, rest)


def test_a_path_segment_that_is_not_utf8_is_named_after_authentication(raw, run):
    assert violation(*run(raw("GET", "projects/%FF/jobs"))) == "project"
    code, content_type, text = run(raw("GET", "projects/%FF/jobs", auth=False))
    assert code == 403 and google_error(code, content_type, text)["status"] == "PERMISSION_DENIED"
