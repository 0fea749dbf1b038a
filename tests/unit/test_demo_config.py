"""The demo's pure config: fresh passwords, loopback only, port honoured, secrets not in env."""

from pathlib import Path

import pytest

from hub_ext.local.demo import ADMIN_USER, DEMO_PLATFORM, PROJECT_ROOT, DemoSecrets, banner, demo_config, render_config

pytestmark = pytest.mark.unit

SECRETS = DemoSecrets(user_password="u" * 16, admin_password="a" * 43)
STATE = Path("/srv/demo")


def test_passwords_are_fresh_and_long_enough():
    a, b = DemoSecrets.generate(), DemoSecrets.generate()
    assert a != b
    assert len(a.user_password) >= 8 and len(a.admin_password) >= 32
    assert a.user_password != a.admin_password
    assert a.user_password not in repr(a) and a.admin_password not in repr(a)


@pytest.mark.parametrize("port", [8000, 8123])
def test_everything_binds_to_loopback_and_port_is_honoured(port):
    c = demo_config(SECRETS, state_dir=STATE, port=port, hub_port=9001, proxy_api_port=9002)
    assert c["JupyterHub"]["bind_url"] == f"http://127.0.0.1:{port}"
    assert c["JupyterHub"]["hub_ip"] == "127.0.0.1"
    assert c["JupyterHub"]["hub_port"] == 9001
    assert c["ConfigurableHTTPProxy"]["api_url"] == "http://127.0.0.1:9002"
    assert c["Spawner"]["ip"] == "127.0.0.1"


def test_whole_config():
    c = demo_config(SECRETS, state_dir=STATE, proxy_command="/x/chp", python="/venv/bin/python")
    assert c == {
        "JupyterHub": {
            "bind_url": "http://127.0.0.1:8000",
            "hub_ip": "127.0.0.1",
            "hub_port": 8081,
            "authenticator_class": "jupyterhub.authenticators.shared.SharedPasswordAuthenticator",
            "spawner_class": "platform-local",
            "db_url": "sqlite:////srv/demo/jupyterhub.sqlite",
            "cookie_secret_file": "/srv/demo/jupyterhub_cookie_secret",
            "pid_file": "/srv/demo/jupyterhub.pid",
            "cleanup_servers": True,
            "cleanup_proxy": True,
            "allow_named_servers": True,
            "load_groups": {"vision": {"users": ["alice"]}, "research": {"users": ["bob"]}},
        },
        "ConfigurableHTTPProxy": {
            "command": ["/x/chp"],
            "api_url": "http://127.0.0.1:8001",
            "pid_file": "/srv/demo/jupyterhub-proxy.pid",
        },
        "Authenticator": {"allow_all": True, "admin_users": {ADMIN_USER}},
        "SharedPasswordAuthenticator": {"user_password": "u" * 16, "admin_password": "a" * 43},
        "Spawner": {
            "cmd": ["/venv/bin/python", "-m", "jupyterhub.singleuser"],
            "args": [],
            "ip": "127.0.0.1",
            "start_timeout": 120,
            "http_timeout": 90,
            "environment": {"MLPLATFORM_EXAMPLES": str(PROJECT_ROOT / "examples")},
        },
        "SimpleLocalProcessSpawner": {"home_dir_template": "/srv/demo/users/{username}"},
        "LocalPlatformSpawner": {**DEMO_PLATFORM, "state_dir": "/srv/demo/platform"},
    }


def test_allow_root_only_when_asked():
    c = demo_config(SECRETS, state_dir=STATE, allow_root=True)
    assert c["Spawner"]["args"] == ["--ServerApp.allow_root=True"]


def test_passwords_only_in_authenticator_settings():
    c = demo_config(SECRETS, state_dir=STATE)
    elsewhere = {k: v for k, v in c.items() if k != "SharedPasswordAuthenticator"}
    assert SECRETS.user_password not in repr(elsewhere)
    assert SECRETS.admin_password not in repr(elsewhere)


def test_render_config_round_trips():
    c = demo_config(SECRETS, state_dir=STATE)
    namespace = {}

    class Section(dict):
        __getattr__ = dict.__getitem__

        def __setattr__(self, key, value):
            self[key] = value

    class Root(dict):
        def __getattr__(self, key):
            return self.setdefault(key, Section())

    root = Root()
    exec(render_config(c), {"get_config": lambda: root}, namespace)
    assert {k: dict(v) for k, v in root.items()} == c
    assert render_config({"JupyterHub.port": 1}).endswith("c.JupyterHub.port = 1\n")


def test_banner_shows_url_and_passwords():
    text = banner("http://127.0.0.1:8000", SECRETS)
    assert "http://127.0.0.1:8000/hub/login" in text
    assert SECRETS.user_password in text and SECRETS.admin_password in text
    assert "demo" in text


def test_demo_platform_parses():
    from hub_ext.local.inventory import declared_inventory
    from hub_ext.spawners.runtime import Runtime

    runtime = Runtime.parse({k: v for k, v in DEMO_PLATFORM.items() if k != "inventory"})
    assert [p.slug for p in runtime.profiles] == ["cpu", "mig-1g", "mig-3g", "gpu"]
    assert len(declared_inventory(DEMO_PLATFORM["inventory"])) == 4
