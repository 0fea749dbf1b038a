"""What a newcomer sees of spawns on a real hub (issue 20.6), LocalPlatformSpawner with the demo's
catalogue: the progress names the slice a server was given, the home page each server's profile,
a refused API spawn leaves no named server behind (one that existed stays), a refusal names the
user's own servers that hold the slices, and a dataset ticked under another project is refused."""

import copy
import json
import re
import time

import pytest
import requests

from hub_ext.core.entitlements import personal_project_name
from hub_ext.local.demo import DemoSecrets, demo_source
from tests.hub.test_hub_harness import demo_hub_config, form_login
from tests.hub.test_local_platform import server_env, spawn, wait_stopped

pytestmark = pytest.mark.hub


def progress_messages(hub, user, name) -> list[str]:
    messages = []
    with requests.get(f"{hub.api_url}/users/{user}/servers/{name}/progress", stream=True, timeout=60,
                      headers={"Authorization": f"token {hub.token}"}) as r:
        for line in r.iter_lines(decode_unicode=True):
            if line.startswith("data:"):
                event = json.loads(line[5:])
                messages.append(event.get("message", ""))
                if event.get("ready") or event.get("failed"):
                    break
    return messages


def server_rows(hub, user) -> set[str]:
    """Every server of `user` the hub has in its database, stopped ones included."""
    return set(hub.api("GET", f"/users/{user}?include_stopped_servers=1").json()["servers"])


def gone_soon(hub, user, name, timeout=10) -> bool:
    deadline = time.monotonic() + timeout
    while name in server_rows(hub, user):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def test_progress_names_the_assigned_slice_and_home_shows_each_servers_profile(hub_factory, tmp_path):
    secrets = DemoSecrets.generate()
    settings = copy.deepcopy(demo_hub_config(tmp_path, secrets))
    settings["JupyterHub"]["tornado_settings"] = {"slow_spawn_timeout": 0}  # answer 202 at once: watch the progress
    hub = hub_factory(demo_source(settings))
    hub.api("POST", "/users/alice")
    assert spawn(hub, "alice", "exp", {"profile": "mig-1g"}).status_code == 202
    messages = progress_messages(hub, "alice", "exp")
    hub.wait_for_server("alice", "exp")
    device = server_env(hub, "alice", "exp")["CUDA_VISIBLE_DEVICES"]
    said = f"assigned MIG slice 1g.5gb (device {device})"
    assert said in messages, messages
    assert messages.index(said) < messages.index("starting")
    assert spawn(hub, "alice", "team", {"project": "vision", "profile": "cpu"}).status_code in (201, 202)
    hub.wait_for_server("alice", "team")
    assert not any(m.startswith("assigned") for m in progress_messages(hub, "alice", "team"))

    session, r = form_login(hub.url, "alice", secrets.user_password)
    assert r.status_code == 302
    home = session.get(f"{hub.url}/hub/home", timeout=30)
    assert home.status_code == 200
    rows = dict(re.findall(r'<tr class="mlplatform-server-profile" data-server-name="([^"]*)">\s*(.*?)</tr>',
                           home.text, re.S))
    cells = {name: re.findall(r"<td>(.*?)</td>", row) for name, row in rows.items()}
    assert cells == {"exp": ["exp", "Small GPU slice", "Personal"], "team": ["team", "CPU only", "Vision team"]}
    # a stopped server keeps showing what it was started with
    assert hub.api("DELETE", "/users/alice/servers/team").status_code in (202, 204)
    wait_stopped(hub, "alice", "team")
    home = session.get(f"{hub.url}/hub/home", timeout=30).text
    assert re.search(r'data-server-name="team">\s*<td>team</td>\s*<td>CPU only</td>\s*<td>Vision team</td>', home)


def test_refused_api_spawns_leave_no_new_named_server_and_name_the_users_own_holders(hub_factory, tmp_path):
    secrets = DemoSecrets.generate()
    hub = hub_factory(demo_source(demo_hub_config(tmp_path, secrets)))
    hub.api("POST", "/users/alice")
    # a bad choice: refused, and the server the request made is gone again
    r = spawn(hub, "alice", "bad", {"profile": "nope"})
    assert r.status_code == 400 and "profile" in r.json()["message"]
    assert gone_soon(hub, "alice", "bad"), server_rows(hub, "alice")
    # a named server made before (PUT) stays after a refused start
    assert hub.api("PUT", "/users/alice/servers/kept").status_code == 201
    assert spawn(hub, "alice", "kept", {"profile": "nope"}).status_code == 400
    # over the project's limit, with the user's own servers holding the slices
    for name in ("one", "gpu2"):
        assert spawn(hub, "alice", name, {"profile": "mig-1g"}).status_code in (201, 202)
        hub.wait_for_server("alice", name)
    r = spawn(hub, "alice", "three", {"profile": "mig-1g"})
    assert r.status_code == 403, r.text
    assert r.json()["message"] == (
        f"profile: the project {personal_project_name('alice')!r} may use 2 1g.5gb at once and 2 are in use; "
        "your servers 'gpu2' and 'one' hold all 2: stop one of them or pick another profile")
    # no slice free on the machine, the team's limit not reached: still the user's own servers
    r = spawn(hub, "alice", "four", {"project": "vision", "profile": "mig-1g"})
    assert r.status_code == 409, r.text
    assert r.json()["message"] == ("no MIG 1g.5gb slice is free now (0 of 2 free); your servers 'gpu2' and 'one' "
                                   "hold all 2: stop one of them or pick another profile")
    assert gone_soon(hub, "alice", "three") and gone_soon(hub, "alice", "four")
    # a server that ran before and was stopped stays after a refused start
    assert hub.api("DELETE", "/users/alice/servers/one").status_code in (202, 204)
    wait_stopped(hub, "alice", "one")
    assert spawn(hub, "alice", "one", {"profile": "nope"}).status_code == 400
    r = spawn(hub, "alice", "five", {"project": "vision", "profile": "mig-1g"})  # one slice free again
    assert r.status_code in (201, 202), r.text
    hub.wait_for_server("alice", "five")
    time.sleep(1)
    assert server_rows(hub, "alice") - {""} == {"kept", "one", "gpu2", "five"}
    session, _ = form_login(hub.url, "alice", secrets.user_password)
    home = session.get(f"{hub.url}/hub/home", timeout=30).text
    listed = set(re.findall(r'<tr class="home-server-row" data-server-name="([^"]+)"', home))
    assert listed == {"kept", "one", "gpu2", "five"}


def test_a_dataset_ticked_under_another_project_is_refused_naming_it(hub_factory, tmp_path):
    secrets = DemoSecrets.generate()
    hub = hub_factory(demo_source(demo_hub_config(tmp_path, secrets)))
    personal = personal_project_name("alice")
    projects = tmp_path / "state" / "platform" / "projects"
    (projects / personal / "datasets" / "mnist").mkdir(parents=True)
    (projects / "vision" / "datasets" / "imagenet").mkdir(parents=True)
    session, _ = form_login(hub.url, "alice", secrets.user_password)
    page = session.get(f"{hub.url}/hub/spawn", timeout=30).text
    assert "Dataset mnist" in page and "Dataset imagenet" in page
    form = {"_xsrf": session.cookies["_xsrf"], "project": "vision", "profile": "cpu",
            f"dataset--{personal}": "mnist", "dataset--vision": "imagenet"}
    r = session.post(f"{hub.url}/hub/spawn", data=form, timeout=60, allow_redirects=False)
    assert r.status_code == 400, r.text[:2000]
    text = r.text.replace("&#39;", "'")
    assert (f"datasets: the dataset 'mnist' of the project '{personal}' is ticked, but the server starts in the "
            f"project 'vision' and mounts only that project's datasets: untick it or choose the project "
            f"'{personal}'") in text
    assert "Dataset imagenet" in text  # the form again, to correct the choice
    assert not [p for p in hub.processes() if "jupyterhub.singleuser" in p.cmdline]
    # untick it: the server starts with the team's dataset
    del form[f"dataset--{personal}"]
    r = session.post(f"{hub.url}/hub/spawn", data=form, timeout=60, allow_redirects=False)
    assert r.status_code == 302, r.text[:2000]
    hub.wait_for_server("alice")
    assert json.loads(server_env(hub, "alice")["MLPLATFORM_DATASETS"]) == {
        "imagenet": str(projects / "vision" / "datasets" / "imagenet")}
