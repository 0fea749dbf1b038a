"""A callable (async) ``profile_list`` in a real hub, as KubeSpawner hubs use it to make profiles per
user: each user's form shows what the function gave them (choice descriptions included), a spawn
gets its profile, and a result with a problem refuses the spawn naming the path at fault."""

import pytest

from hub_ext.local.demo import CONFIGURE, DemoSecrets, render_config
from tests.hub.test_hub_harness import demo_hub_config, form_login
from tests.hub.test_local_platform import server_env

pytestmark = pytest.mark.hub

PER_USER = '''
import asyncio


async def per_user(spawner):
    """Profiles for this user (written as production hubs write them)."""
    await asyncio.sleep(0)
    name = spawner.user.name
    profiles = [{
        "display_name": "CPU only", "slug": "cpu", "description": f"Made for {name}",
        "kubespawner_override": {"cpu_limit": 2, "mem_limit": "4G"},
        "profile_options": {"flavour": {"display_name": "Flavour", "choices": {
            "plain": {"display_name": "Plain", "slug": "plain", "description": "Nothing added", "default": True},
            "lab": {"display_name": "Lab", "description": "Opens JupyterLab",
                    "kubespawner_override": {"default_url": "/lab"}}}}},
    }]
    if name == "bob":
        profiles.append({"display_name": "Bob's big box", "slug": "big", "kubespawner_override": {"cpu_limit": 8}})
    if name == "mallory":
        profiles[0]["kubespawner_override"] = {"cpu_limit": "two"}
    return profiles


c.LocalPlatformSpawner.profile_list = per_user
'''


@pytest.fixture
def hub(hub_factory, tmp_path):
    secrets = DemoSecrets.generate()
    settings = demo_hub_config(tmp_path, secrets)
    platform = settings["LocalPlatformSpawner"]
    platform.pop("profiles")
    platform["everyone"] = {"profiles": "*", "limits": {}}
    platform["groups"] = {"research": {"profiles": ["cpu", "big"], "limits": {}}}
    return hub_factory(render_config(settings) + PER_USER + CONFIGURE), secrets


def test_callable_profile_list_per_user(hub):
    hub, secrets = hub
    pages = {}
    for user in ("alice", "bob"):
        session, r = form_login(hub.url, user, secrets.user_password)
        assert r.status_code == 302
        pages[user] = session.get(f"{hub.url}/hub/spawn", timeout=30)
        assert pages[user].status_code == 200, pages[user].text
    assert "Made for alice" in pages["alice"].text and "Bob&#39;s big box" not in pages["alice"].text
    assert "Made for bob" in pages["bob"].text and "Bob&#39;s big box" in pages["bob"].text
    assert "<li><strong>Plain</strong>: Nothing added</li>" in pages["alice"].text

    r = hub.api("POST", "/users/bob/server", json={"profile": "big"})
    assert r.status_code in (201, 202), r.text
    hub.wait_for_server("bob")
    assert server_env(hub, "bob")["MLPLATFORM_PROFILE"] == "big"
    assert hub.api("DELETE", "/users/bob/server").status_code in (202, 204)

    r = hub.api("POST", "/users/alice/server", json={"profile": "big"})  # not in alice's list
    assert r.status_code == 400 and "profile" in r.text

    assert hub.api("POST", "/users/mallory").status_code == 201
    r = hub.api("POST", "/users/mallory/server", json={"profile": "cpu"})
    assert r.status_code == 500
    assert "profile_list(spawner)[0].kubespawner_override.cpu_limit: " in r.json()["message"]
    assert not any(s.get("ready") for s in hub.api("GET", "/users/mallory").json()["servers"].values())
