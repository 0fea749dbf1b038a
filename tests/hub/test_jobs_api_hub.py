"""The ml/v1 jobs API of a real single-user server, reached through a real JupyterHub's proxy with
tokens the hub issued: the local runtime's projects (personal and team, from the hub's platform
API), the hub's own auth in front of the server, and a credential whose content never leaves its
file (no REST response, log line, job environment value or captured log carries it).

The server loads `server_ext` from the config file the package installs
(``<sys.prefix>/etc/jupyter/jupyter_server_config.d/server_ext.json``); the hub passes it nothing
for that, so a missing install shows up here as a 404 on ``ml/v1``."""

from __future__ import annotations

import json
import pathlib
import secrets
import sys
import time

import pytest
import requests

from hub_ext.core.entitlements import personal_project_name
from hub_ext.local.demo import DemoSecrets, demo_source
from tests.conftest import ROOT
from tests.harness.hub import HubProcess
from tests.hub.test_hub_harness import demo_hub_config
from tests.sse import sse_events

pytestmark = pytest.mark.hub

TRAINER = ROOT / "examples" / "trainer" / "trainer"
PERSONAL = personal_project_name("alice")
CANARY = f"canary-{secrets.token_hex(16)}"
TERMINAL = ("SUCCEEDED", "FAILED", "CANCELLED")

ENVDUMP = '''import json, os
for key, value in sorted(os.environ.items()):
    print("ENV " + json.dumps([key, value]))
'''


class Platform:
    """The hub, alice's running server, the projects directory and tokens the hub issued."""

    def __init__(self, hub: HubProcess, state: pathlib.Path):
        self.hub, self.state = hub, state
        self.projects_dir = state / "platform" / "projects"
        self.tokens: dict[str, str] = {}

    def token(self, user: str, key: str | None = None, scopes: list[str] | None = None) -> str:
        key = key or user
        if key not in self.tokens:
            body = {"note": f"jobs api test {key}", **({"scopes": scopes} if scopes is not None else {})}
            r = self.hub.api("POST", f"/users/{user}/tokens", json=body)
            assert r.status_code == 201, r.text
            self.tokens[key] = r.json()["token"]
        return self.tokens[key]

    def call(self, method: str, project: str, *parts: str, token: str | None, body=None,
             params=None, headers=None) -> requests.Response:
        url = "/".join([f"{self.hub.url}/user/alice/ml/v1/projects", project, "jobs", *parts])
        h = {"Authorization": f"token {token}"} if token else {}
        h.update(headers or {})
        kwargs = {"json": body} if body is not None else ({"data": b""} if method == "POST" else {})
        return requests.request(method, url, headers=h, params=params, timeout=60, allow_redirects=False, **kwargs)

    def wait_done(self, project: str, job_id: str, token: str, timeout: float = 60) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            r = self.call("GET", project, job_id, token=token)
            assert r.status_code == 200, r.text
            job = r.json()
            if job["state"] in TERMINAL:
                return job
            assert time.monotonic() < deadline, job
            time.sleep(0.2)


@pytest.fixture(scope="module")
def platform(tmp_path_factory):
    root = tmp_path_factory.mktemp("jobs-hub")
    hub = HubProcess(demo_source(demo_hub_config(root, DemoSecrets.generate())), root / "hub")
    p = Platform(hub, root / "state")
    key = p.projects_dir / PERSONAL / "credentials" / "canary-sa.json"
    key.parent.mkdir(parents=True)
    key.write_text(json.dumps({"type": "service_account", "project_id": "p", "client_email": "sa@p.iam",
                               "private_key": f"-----BEGIN PRIVATE KEY-----{CANARY}-----END PRIVATE KEY-----"}))
    key.chmod(0o600)
    hub.start()
    ok = False
    try:
        for user in ("alice", "bob"):
            assert hub.api("POST", f"/users/{user}").status_code in (201, 409)
        r = hub.api("POST", "/users/alice/server", json={"profile": "cpu"})
        assert r.status_code in (201, 202), r.text
        hub.wait_for_server("alice")
        assert "server_ext | extension was successfully loaded" in hub.log_text(), \
            f"the single-user server did not load server_ext (is {sys.prefix}/etc/jupyter/" \
            "jupyter_server_config.d/server_ext.json installed?)"
        yield p
        ok = True
    finally:
        if not ok:
            print(f"--- {hub.log_path} (tail) ---\n{hub.log_tail(200)}")
        hub.stop(check=ok)


def trainer_job(job_id: str) -> dict:
    return {"jobId": job_id, "labels": {"team": "vision"},
            "trainingInput": {"scaleTier": "BASIC", "pythonModule": "trainer.task",
                              "packageUris": [TRAINER.as_uri()], "args": ["--epochs=2", "--sleep=0"]}}


@pytest.mark.parametrize("project", [PERSONAL, "vision"])
def test_alice_runs_the_example_trainer_in_her_projects(platform, project):
    alice = platform.token("alice")
    job_id = f"trainer_{project.replace('-', '_')}"
    r = platform.call("POST", project, token=alice, body=trainer_job(job_id))
    assert r.status_code == 200, (r.status_code, r.text, platform.hub.log_tail())
    assert r.json()["jobId"] == job_id
    done = platform.wait_done(project, job_id, alice)
    assert done["state"] == "SUCCEEDED", done
    r = platform.call("GET", project, token=alice)
    assert r.status_code == 200 and [j["jobId"] for j in r.json()["jobs"]] == [job_id]  # each project its own
    assert platform.call("GET", project, job_id, token=alice).json() == done
    r = platform.call("GET", project, job_id, "logs", token=alice)
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/event-stream")
    events = sse_events(r.text)
    texts = [json.loads(e["data"])["text"] for e in events if "id" in e]
    assert any("epoch 2/2" in t for t in texts), texts
    assert events[-1] == {"event": "end", "data": json.dumps({"state": "SUCCEEDED"})}


def test_a_project_alice_is_not_in_is_refused_for_every_verb(platform):
    alice = platform.token("alice")
    for method, parts, body in [("GET", (), None), ("POST", (), trainer_job("nope")), ("GET", ("x",), None),
                                ("POST", ("x:cancel",), None), ("GET", ("x", "logs"), None)]:
        r = platform.call(method, personal_project_name("bob"), *parts, token=alice, body=body)
        assert r.status_code == 403, (method, parts, r.text)
        error = r.json()["error"]
        assert error["code"] == 403 and error["status"] == "PERMISSION_DENIED", error
    assert platform.call("GET", "research", token=alice).status_code == 403  # a group without a team project


def test_the_hub_keeps_everyone_else_out_of_alices_server(platform):
    """JupyterHub's auth in the server answers 403 for all of them (bob's valid token and alice's
    token without ``access:servers`` are authenticated by the hub but not allowed; no token or an
    unknown one is not authenticated; a POST without a token fails the XSRF check first), and our
    handlers render it as Google's error JSON."""
    bob = platform.token("bob")
    narrow = platform.token("alice", "narrow", scopes=["read:users!user=alice"])
    for token in (bob, narrow, None, "not-a-token"):
        for method, parts in [("GET", ()), ("POST", ()), ("GET", ("x",)), ("GET", ("x", "logs"))]:
            r = platform.call(method, PERSONAL, *parts, token=token,
                              body=trainer_job("intruder") if method == "POST" else None)
            assert r.status_code == 403, (token and token[:4], method, parts, r.status_code, r.text)
            assert r.json()["error"]["status"] == "PERMISSION_DENIED", r.text
    # nothing was created by any of them
    r = platform.call("GET", PERSONAL, token=platform.token("alice"))
    assert "intruder" not in r.text


def test_a_credential_reaches_the_job_as_a_path_and_its_content_nowhere(platform):
    alice = platform.token("alice")
    key = platform.projects_dir / PERSONAL / "credentials" / "canary-sa.json"
    package = platform.state.parent / "pkg"
    (package / "envdump").mkdir(parents=True, exist_ok=True)
    (package / "envdump" / "__init__.py").write_text("")
    (package / "envdump" / "__main__.py").write_text(ENVDUMP)
    body = {"jobId": "envdump", "mounts": {"credentials": ["canary-sa"]},
            "trainingInput": {"scaleTier": "BASIC", "pythonModule": "envdump",
                              "packageUris": [(package / "envdump").as_uri()]}}
    responses = [platform.call("POST", PERSONAL, token=alice, body=body)]
    assert responses[0].status_code == 200, responses[0].text
    assert "mounts" not in responses[0].json()
    done = platform.wait_done(PERSONAL, "envdump", alice)
    assert done["state"] == "SUCCEEDED", done
    responses += [platform.call("GET", PERSONAL, "envdump", token=alice), platform.call("GET", PERSONAL, token=alice),
                  platform.call("GET", PERSONAL, "envdump", "logs", token=alice)]
    assert all(r.status_code == 200 for r in responses), [r.text for r in responses]
    for r in responses:
        assert CANARY not in r.text
    texts = [json.loads(e["data"])["text"] for e in sse_events(responses[-1].text) if "id" in e]
    env = dict(json.loads(t[4:]) for t in texts if t.startswith("ENV "))
    assert env["GOOGLE_APPLICATION_CREDENTIALS"] == str(key), env.get("GOOGLE_APPLICATION_CREDENTIALS")
    assert env["CLOUD_ML_JOB_ID"] == "envdump"
    assert not [k for k, v in env.items() if CANARY in v]
    assert not {"JUPYTERHUB_API_TOKEN", "JPY_API_TOKEN"} & set(env)  # the server's hub token stays with the server
    # the captured logs: the hub's (with the proxy's and the server's output) and the job's files
    assert CANARY not in platform.hub.log_text()
    for path in (platform.state / "platform" / "jobs").rglob("*"):
        if path.is_file():
            assert CANARY.encode() not in path.read_bytes(), path


@pytest.mark.parametrize("accelerator, count, status, message", [
    ("NVIDIA_TESLA_H100", 8, 400, "no NVIDIA_TESLA_H100 on this platform"),  # not in the hub's catalogue
    ("NVIDIA_A100_3G_20GB", 1, 403, "may use none of MIG 3g.20gb slice"),  # research's, not vision's
    ("NVIDIA_A100_1G_5GB", 3, 403, "may use at most 2 at once of MIG 1g.5gb slice"),
])
def test_jobs_get_the_hubs_catalogue_and_the_projects_limits(platform, accelerator, count, status, message):
    """The local runtime in a JupyterHub plans with the hub's catalogue and each project's accelerator
    limits, not the built-in catalogue; a refused job is not created."""
    alice = platform.token("alice")
    job = trainer_job("too_big")
    job["trainingInput"].update(scaleTier="CUSTOM", masterType="n1-standard-4",
                                masterConfig={"acceleratorConfig": {"type": accelerator, "count": count}})
    r = platform.call("POST", "vision", token=alice, body=job)
    assert r.status_code == status, r.text
    (violation,) = r.json()["error"]["details"][0]["fieldViolations"]
    assert violation["field"].startswith("trainingInput.masterConfig.acceleratorConfig"), violation
    assert message in violation["description"], violation
    assert platform.call("GET", "vision", "too_big", token=alice).status_code == 404
