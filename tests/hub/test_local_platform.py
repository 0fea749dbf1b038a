"""LocalPlatformSpawner in a real hub with the demo's catalogue: the form with capacity, a MIG
spawn that gets CUDA_VISIBLE_DEVICES, entitlements enforced on crafted requests, limits counted
across named servers (also under concurrent spawns), and what a notebook's terminal and job
backend see."""

import asyncio
import concurrent.futures
import json
import os
import re
import sys
import time

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from hub_ext.core.entitlements import personal_project_name
from hub_ext.local.demo import DemoSecrets, demo_source, find_proxy_command
from tests.hub.test_hub_harness import demo_hub_config, form_login

pytestmark = pytest.mark.hub


def server_env(hub, user: str, server: str = "") -> dict:
    for p in hub.processes():
        if "jupyterhub.singleuser" not in p.cmdline:
            continue
        with open(f"/proc/{p.pid}/environ", "rb") as f:
            env = dict(e.split("=", 1) for e in f.read().decode().split("\0") if "=" in e)
        if env.get("JUPYTERHUB_USER") == user and env.get("JUPYTERHUB_SERVER_NAME", "") == server:
            return env
    raise AssertionError(f"no server process for {user}/{server}")


def spawn(hub, user, name, options):
    path = f"/users/{user}/servers/{name}" if name else f"/users/{user}/server"
    return hub.api("POST", path, json=options)


def wait_stopped(hub, user, name=""):
    deadline = time.monotonic() + 60
    while name in hub.api("GET", f"/users/{user}").json()["servers"] and time.monotonic() < deadline:
        time.sleep(0.3)


@pytest.fixture
def demo_hub(hub_factory, tmp_path):
    secrets = DemoSecrets.generate()
    return hub_factory(demo_source(demo_hub_config(tmp_path, secrets))), secrets


def test_form_shows_capacity_and_a_mig_spawn_gets_its_device(demo_hub):
    hub, secrets = demo_hub
    session, r = form_login(hub.url, "alice", secrets.user_password)
    assert r.status_code == 302
    page = session.get(f"{hub.url}/hub/spawn", timeout=30)
    assert page.status_code == 200
    text = page.text
    assert "Small GPU slice" in text and "2 of 2 free" in text and "Vision team" in text
    assert "Whole GPU" not in text and "Medium GPU slice" not in text  # not granted to alice's groups
    xsrf = session.cookies["_xsrf"]
    personal = personal_project_name("alice")
    r = session.post(f"{hub.url}/hub/spawn", data={"_xsrf": xsrf, "project": personal, "profile": "mig-1g"},
                     timeout=60, allow_redirects=False)
    assert r.status_code == 302, r.text
    hub.wait_for_server("alice")
    env = server_env(hub, "alice")
    assert env["CUDA_VISIBLE_DEVICES"] in ("MIG-demo-1g5gb-0", "MIG-demo-1g5gb-1")
    assert env["MLPLATFORM_PROJECT"] == personal and env["MLPLATFORM_PROFILE"] == "mig-1g"
    assert secrets.user_password not in repr(env)
    page = session.get(f"{hub.url}/hub/spawn/alice/second", timeout=30)
    assert "1 of 2 free" in page.text
    assert hub.api("DELETE", "/users/alice/server").status_code in (202, 204)
    wait_stopped(hub, "alice")
    page = session.get(f"{hub.url}/hub/spawn/alice/second", timeout=30)
    assert "2 of 2 free" in page.text  # the slice came back on stop


@pytest.mark.parametrize("options, status, words", [
    ({"project": "vision", "profile": "mig-3g"}, 403, "profile"),   # not in the team's grant
    ({"profile": "gpu"}, 403, "profile"),                              # not in alice's groups
    ({"project": "user-bob"}, 403, "project"),                         # someone else's project
    ({"profile": "cpu", "colour": "blue"}, 400, "colour"),             # unknown key
    ({"profile": "nope"}, 400, "profile"),
])
def test_crafted_user_options_are_refused_and_nothing_starts(demo_hub, options, status, words):
    hub, _ = demo_hub
    assert hub.api("POST", "/users/alice").status_code in (201, 409)
    r = spawn(hub, "alice", "", options)
    assert r.status_code == status, r.text
    assert words in r.json()["message"]
    assert hub.api("GET", "/users/alice").json()["servers"] == {}
    assert not [p for p in hub.processes() if "jupyterhub.singleuser" in p.cmdline]


def test_limits_count_across_named_servers_and_hold_under_concurrent_spawns(demo_hub):
    hub, _ = demo_hub
    hub.api("POST", "/users/alice")
    mig = {"profile": "mig-1g"}
    assert spawn(hub, "alice", "one", mig).status_code in (201, 202)
    hub.wait_for_server("alice", "one")
    # one slice left: two spawns at once, exactly one gets it
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        codes = sorted(pool.map(lambda n: spawn(hub, "alice", n, mig).status_code, ["two", "three"]))
    assert codes[0] in (201, 202) and codes[1] in (403, 409), codes
    winner = next(n for n in ("two", "three") if n in hub.api("GET", "/users/alice").json()["servers"])
    hub.wait_for_server("alice", winner)
    devices = {server_env(hub, "alice", n)["CUDA_VISIBLE_DEVICES"] for n in ("one", winner)}
    assert devices == {"MIG-demo-1g5gb-0", "MIG-demo-1g5gb-1"}
    # the personal limit (2 at once) is reached: refused before anything starts
    r = spawn(hub, "alice", "four", mig)
    assert r.status_code == 403 and "may use 2 1g.5gb at once and 2 are in use" in r.json()["message"]
    # the team project has its own limit, but no slice is free on the machine
    r = spawn(hub, "alice", "five", {"project": "vision", "profile": "mig-1g"})
    assert r.status_code == 409 and "0 of 2 free" in r.json()["message"]
    assert hub.api("DELETE", "/users/alice/servers/one").status_code in (202, 204)
    wait_stopped(hub, "alice", "one")
    assert spawn(hub, "alice", "five", {"project": "vision", "profile": "mig-1g"}).status_code in (201, 202)
    hub.wait_for_server("alice", "five")


def _user_token(hub, user):
    r = hub.api("POST", f"/users/{user}/tokens", json={"note": "platform api test"})
    assert r.status_code == 201, r.text
    return r.json()["token"]


def test_platform_api_answers_each_user_for_themselves_only(demo_hub):
    hub, _ = demo_hub
    for user in ("alice", "bob"):
        hub.api("POST", f"/users/{user}")
    alice, bob = _user_token(hub, "alice"), _user_token(hub, "bob")

    def get(path, token=None):
        headers = {"Authorization": f"token {token}"} if token else {}
        return requests.get(f"{hub.api_url}/mlplatform/{path}", headers=headers, timeout=30)

    r = get("users/alice/projects", alice)
    assert r.status_code == 200, r.text
    projects = r.json()["projects"]
    assert [p["name"] for p in projects] == [personal_project_name("alice"), "vision"]
    assert projects[0]["limits"] == {"1g.5gb": 2} and projects[1]["profiles"] == ["cpu", "mig-1g"]
    catalog = get("users/bob/catalog", bob).json()
    assert {a["name"] for a in catalog["accelerators"]} == {"a100", "1g.5gb", "3g.20gb"}
    assert [p["slug"] for p in catalog["profiles"]] == ["cpu", "mig-3g", "gpu"]
    assert get("users/alice/capacity", alice).json() == {"accelerators": {
        "a100": {"free": 1, "total": 1}, "1g.5gb": {"free": 2, "total": 2}, "3g.20gb": {"free": 1, "total": 1}}}
    # the auth matrix: no token, another user's token, a user that does not exist
    assert get("users/alice/projects").status_code == 403
    assert get("users/alice/projects", bob).status_code == 404
    assert get("users/alice/capacity", bob).status_code == 404
    assert get("users/nobody/projects", alice).status_code == 404
    assert get("users/alice/projects", "not-a-token").status_code == 403
    # the harness service holds no platform scope
    assert get("users/alice/projects", hub.token).status_code == 403


def platform_metrics(hub) -> dict[tuple[str, tuple], float]:
    """The hub's /hub/metrics (JupyterHub's, read:metrics), its mlplatform_* samples by name and labels."""
    r = requests.get(f"{hub.url}/hub/metrics", headers={"Authorization": f"token {hub.token}"}, timeout=30)
    assert r.status_code == 200, r.text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for family in text_string_to_metric_families(r.text)
            for s in family.samples if s.name.startswith("mlplatform_")}


def test_in_use_counts_show_in_the_api_and_the_hubs_metrics(demo_hub):
    hub, _ = demo_hub
    hub.api("POST", "/users/alice")
    assert spawn(hub, "alice", "", {"profile": "mig-1g"}).status_code in (201, 202)
    hub.wait_for_server("alice")
    token = _user_token(hub, "alice")
    r = requests.get(f"{hub.api_url}/mlplatform/users/alice/projects", headers={"Authorization": f"token {token}"},
                     timeout=30)
    assert r.json()["projects"][0]["in_use"] == {"1g.5gb": 1}
    labels = (("accelerator", "1g.5gb"), ("profile", "mig-1g"), ("project", personal_project_name("alice")))
    assert platform_metrics(hub) == {("mlplatform_servers_running", labels): 1,
                                     ("mlplatform_accelerators_allocated", labels): 1}
    assert hub.api("DELETE", "/users/alice/server").status_code in (202, 204)
    wait_stopped(hub, "alice")
    assert platform_metrics(hub) == {}


def test_an_invalid_platform_config_stops_the_hub_naming_the_field(hub_factory, tmp_path):
    import copy

    settings = copy.deepcopy(demo_hub_config(tmp_path, DemoSecrets.generate()))
    settings["LocalPlatformSpawner"]["profiles"]["gpu"]["accelerator"] = "h100"
    with pytest.raises(RuntimeError) as e:
        hub_factory(demo_source(settings), start_timeout=30)
    assert "profiles['gpu'].accelerator: unknown accelerator 'h100' (known: 1g.5gb, 3g.20gb, a100)" in str(e.value)


def test_devices_stay_taken_across_a_hub_restart_and_come_back_when_the_server_goes(hub_factory, tmp_path):
    import copy

    settings = copy.deepcopy(demo_hub_config(tmp_path, DemoSecrets.generate()))
    settings["JupyterHub"]["cleanup_servers"] = False
    hub = hub_factory(demo_source(settings))
    hub.api("POST", "/users/alice")
    assert spawn(hub, "alice", "one", {"profile": "mig-1g"}).status_code in (201, 202)
    hub.wait_for_server("alice", "one")
    held = server_env(hub, "alice", "one")["CUDA_VISIBLE_DEVICES"]

    hub.restart()
    hub.wait_for_server("alice", "one")  # still running, found again by the new hub
    assert spawn(hub, "alice", "two", {"profile": "mig-1g"}).status_code in (201, 202)
    hub.wait_for_server("alice", "two")
    other = server_env(hub, "alice", "two")["CUDA_VISIBLE_DEVICES"]
    assert {held, other} == {"MIG-demo-1g5gb-0", "MIG-demo-1g5gb-1"}  # not given twice after the restart
    r = spawn(hub, "alice", "three", {"project": "vision", "profile": "mig-1g"})
    assert r.status_code == 409

    assert hub.api("DELETE", "/users/alice/servers/one").status_code in (202, 204)
    wait_stopped(hub, "alice", "one")
    assert spawn(hub, "alice", "three", {"project": "vision", "profile": "mig-1g"}).status_code in (201, 202)
    hub.wait_for_server("alice", "three")
    assert server_env(hub, "alice", "three")["CUDA_VISIBLE_DEVICES"] == held
    for name in ("two", "three"):
        hub.api("DELETE", f"/users/alice/servers/{name}")
        wait_stopped(hub, "alice", name)


def test_waiting_for_a_free_slice_is_reported_as_progress(hub_factory, tmp_path):
    import copy
    import json

    settings = copy.deepcopy(demo_hub_config(tmp_path, DemoSecrets.generate()))
    settings["LocalPlatformSpawner"]["when_full"] = "wait"
    settings["LocalPlatformSpawner"]["wait_poll_interval"] = 0.5
    settings["JupyterHub"]["tornado_settings"] = {"slow_spawn_timeout": 0}
    hub = hub_factory(demo_source(settings))
    hub.api("POST", "/users/alice")
    for name in ("one", "two"):
        assert spawn(hub, "alice", name, {"profile": "mig-1g"}).status_code in (201, 202)
        hub.wait_for_server("alice", name)
    assert spawn(hub, "alice", "three", {"project": "vision", "profile": "mig-1g"}).status_code == 202
    messages = []
    with requests.get(f"{hub.api_url}/users/alice/servers/three/progress", stream=True, timeout=60,
                      headers={"Authorization": f"token {hub.token}"}) as r:
        for line in r.iter_lines(decode_unicode=True):
            if line.startswith("data:"):
                event = json.loads(line[5:])
                messages.append(event.get("message", ""))
                if "waiting for a free 1g.5gb MIG slice (0 of 2 free)" in event.get("message", ""):
                    hub.api("DELETE", "/users/alice/servers/one")
                if event.get("ready"):
                    break
    assert "waiting for a free 1g.5gb MIG slice (0 of 2 free)" in messages
    assert "starting" in messages
    hub.wait_for_server("alice", "three")


SECRET = "-----BEGIN PRIVATE KEY-----not-a-real-key-----END PRIVATE KEY-----"


def test_credentials_and_datasets_of_the_chosen_project(demo_hub, tmp_path):
    import json

    hub, secrets = demo_hub
    vision = tmp_path / "state" / "platform" / "projects" / "vision"
    (vision / "credentials").mkdir(parents=True)
    key = vision / "credentials" / "training-sa.json"
    key.write_text(json.dumps({"type": "service_account", "project_id": "p", "private_key": SECRET,
                               "client_email": "sa@p.iam.gserviceaccount.com"}))
    key.chmod(0o600)
    (vision / "datasets" / "imagenet").mkdir(parents=True)
    session, _ = form_login(hub.url, "alice", secrets.user_password)
    page = session.get(f"{hub.url}/hub/spawn", timeout=30).text
    assert "Credential training-sa" in page and "gcp-credential" in page and "Dataset imagenet" in page
    assert SECRET not in page
    r = session.post(f"{hub.url}/hub/spawn", timeout=60, allow_redirects=False, data={
        "_xsrf": session.cookies["_xsrf"], "project": "vision", "profile": "cpu",
        "credential--vision": "training-sa", "dataset--vision": "imagenet"})
    assert r.status_code == 302, r.text
    hub.wait_for_server("alice")
    env = server_env(hub, "alice")
    assert env["GOOGLE_APPLICATION_CREDENTIALS"] == str(key)
    assert json.loads(env["MLPLATFORM_DATASETS"]) == {"imagenet": str(vision / "datasets" / "imagenet")}
    assert all(SECRET not in v for v in env.values())
    token = _user_token(hub, "alice")
    creds = requests.get(f"{hub.api_url}/mlplatform/users/alice/credentials", timeout=30,
                         headers={"Authorization": f"token {token}"})
    assert creds.json() == {"credentials": [{"project": "vision", "name": "training-sa", "type": "gcp-credential",
                                             "description": "", "path": str(key)}]}
    assert SECRET not in creds.text
    datasets = requests.get(f"{hub.api_url}/mlplatform/users/alice/datasets", timeout=30,
                            headers={"Authorization": f"token {token}"})
    assert datasets.json() == {"datasets": [{"project": "vision", "name": "imagenet", "description": "",
                                             "path": str(vision / "datasets" / "imagenet"),
                                             "state": "ready", "message": "", "source": "", "size": ""}]}
    assert SECRET not in hub.log_text()
    # the personal project has no such credential: a crafted request is refused, nothing starts
    r = spawn(hub, "alice", "other", {"profile": "cpu", "credentials": ["training-sa"]})
    assert r.status_code == 403 and "credentials[0]" in r.json()["message"]
    assert "other" not in hub.api("GET", "/users/alice").json()["servers"]
    # the datasets page lists the directories; adding one is the operator's job on Kubernetes only:
    # 501 naming where local datasets live, on the page and through REST
    page = session.get(f"{hub.url}/hub/mlplatform/datasets", timeout=30)
    assert page.status_code == 200 and 'data-dataset="imagenet" data-state="ready"' in page.text
    assert 'id="add-dataset"' not in page.text
    r = session.post(f"{hub.url}/hub/mlplatform/datasets", timeout=30, data={
        "_xsrf": session.cookies["_xsrf"], "action": "add", "project": "vision", "name": "x", "source": "gs://bkt/x",
        "size": "1Gi"})
    assert r.status_code == 501 and "datasets as directories under" in r.text
    r = requests.post(f"{hub.api_url}/mlplatform/users/alice/projects/vision/datasets", timeout=30,
                      headers={"Authorization": f"token {token}"}, json={"name": "x", "source": "gs://bkt/x", "size": "1Gi"})
    assert r.status_code == 501 and "datasets as directories under" in r.json()["message"]


def _in_terminal(hub, token: str, server_path: str, command: str, timeout: float = 30) -> list[str]:
    """Run `command` in a new terminal of a server, through its terminals REST API and websocket
    (as JupyterLab does); the lines it printed."""
    headers = {"Authorization": f"token {token}"}
    r = requests.post(f"{hub.url}{server_path}api/terminals", headers=headers, timeout=30)
    assert r.status_code == 200, r.text
    name = r.json()["name"]
    ws_url = f"{hub.url.replace('http://', 'ws://')}{server_path}terminals/websocket/{name}"
    # the markers are computed by the shell, so the terminal's echo of the typed line has neither
    text = asyncio.run(_terminal_output(ws_url, headers, f"echo BEGIN$((6*7)); {command}; echo END$((6*7))",
                                        "END42", timeout))
    requests.delete(f"{hub.url}{server_path}api/terminals/{name}", headers=headers, timeout=30)
    lines = [line.strip() for line in re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\r", "", text).split("\n")]
    return lines[lines.index("BEGIN42") + 1:lines.index("END42")]


async def _terminal_output(ws_url: str, headers: dict, line: str, until: str, timeout: float) -> str:
    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect

    conn = await websocket_connect(HTTPRequest(ws_url, headers=headers))
    conn.write_message(json.dumps(["stdin", line + "\r"]))
    text = ""
    deadline = time.monotonic() + timeout
    while until not in text:
        message = await asyncio.wait_for(conn.read_message(), max(0.1, deadline - time.monotonic()))
        assert message is not None, f"the terminal closed: {text!r}"
        kind, *data = json.loads(message)
        if kind == "stdout":
            text += data[0]
    conn.close()
    return text


def test_terminals_have_the_platform_tools_and_each_server_its_own_job_state(hub_factory, tmp_path):
    import copy

    settings = copy.deepcopy(demo_hub_config(tmp_path, DemoSecrets.generate()))
    settings["ConfigurableHTTPProxy"]["command"] = [find_proxy_command()]
    # as `make demo` starts it: the environment's bin directory is not on the hub's PATH
    hub = hub_factory(demo_source(settings), env={"PATH": "/usr/local/bin:/usr/bin:/bin"})
    hub.api("POST", "/users/alice")
    for name in ("", "exp"):
        assert spawn(hub, "alice", name, {"profile": "cpu"}).status_code in (201, 202)
        hub.wait_for_server("alice", name)
    # the platform applies project and profile itself: JupyterHub has nothing to warn about
    assert "unhandled user_options" not in hub.log_text()
    jobs = tmp_path / "state" / "platform" / "jobs" / "alice"
    assert server_env(hub, "alice")["MLPLATFORM_STATE_DIR"] == str(jobs)
    assert server_env(hub, "alice", "exp")["MLPLATFORM_STATE_DIR"] == str(jobs / "servers" / "exp")
    tools = os.path.dirname(sys.executable)
    found = _in_terminal(hub, _user_token(hub, "alice"), "/user/alice/exp/", "command -v kubectl-ai_platform python")
    assert found == [f"{tools}/kubectl-ai_platform", f"{tools}/python"]
