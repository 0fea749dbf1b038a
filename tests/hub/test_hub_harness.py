"""End to end on a real hub with the demo config: password login, spawn, proxy, clean stop."""

import os
import re
import sys
import time

import pytest
import requests

from hub_ext.local.demo import DemoSecrets, demo_config

pytestmark = pytest.mark.hub

USER = "demo"


def demo_hub_config(tmp_path, demo_secrets):
    return demo_config(
        demo_secrets,
        state_dir=tmp_path / "state",
        python=sys.executable,
        allow_root=os.geteuid() == 0,
    )


def form_login(url, username, password) -> tuple[requests.Session, requests.Response]:
    """Log in through the hub's HTML login form, as a browser would."""
    session = requests.Session()
    page = session.get(f"{url}/hub/login", timeout=30)
    page.raise_for_status()
    xsrf = re.search(r'name="_xsrf" value="([^"]+)"', page.text).group(1)
    response = session.post(
        f"{url}/hub/login",
        data={"username": username, "password": password, "_xsrf": xsrf},
        allow_redirects=False,
        timeout=30,
    )
    return session, response


def test_login_spawn_proxy_and_clean_stop(hub_factory, tmp_path):
    demo_secrets = DemoSecrets.generate()
    hub = hub_factory(demo_hub_config(tmp_path, demo_secrets))

    session, response = form_login(hub.url, USER, demo_secrets.user_password)
    assert response.status_code == 302, response.text
    assert "jupyterhub-hub-login" in session.cookies

    # start the server as the logged-in user (cookie + XSRF header), wait through the hub API
    r = session.post(
        f"{hub.api_url}/users/{USER}/server",
        headers={"X-XSRFToken": session.cookies["_xsrf"]},
        timeout=30,
    )
    assert r.status_code in (201, 202), r.text
    hub.wait_for_server(USER)

    # through the proxy: the OAuth dance sets the server's cookie, then its REST API answers
    assert session.get(f"{hub.url}/user/{USER}/", timeout=60).status_code == 200
    status = session.get(f"{hub.url}/user/{USER}/api/status", timeout=30)
    assert status.status_code == 200, status.text
    assert "started" in status.json()

    servers = [p for p in hub.processes() if "jupyterhub.singleuser" in p.cmdline]
    assert len(servers) == 1
    with open(f"/proc/{servers[0].pid}/environ", "rb") as f:
        environ = f.read()
    assert demo_secrets.user_password.encode() not in environ
    assert demo_secrets.admin_password.encode() not in environ

    assert hub.api("DELETE", f"/users/{USER}/server").status_code in (202, 204)
    deadline = time.monotonic() + 60
    while hub.api("GET", f"/users/{USER}").json()["servers"] and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not servers[0].alive()

    hub.stop()  # asserts that no process of the hub, proxy or servers is left
    assert not any(p.alive() for p in servers)
    log = hub.log_text()
    assert demo_secrets.user_password not in log and demo_secrets.admin_password not in log


def test_wrong_password_is_refused(hub_factory, tmp_path):
    demo_secrets = DemoSecrets.generate()
    hub = hub_factory(demo_hub_config(tmp_path, demo_secrets))

    session, response = form_login(hub.url, USER, "not-the-password")
    assert response.status_code == 403
    assert "jupyterhub-hub-login" not in session.cookies

    # the admin name needs the admin password, not the user one
    _, response = form_login(hub.url, "admin", demo_secrets.user_password)
    assert response.status_code == 403
    _, response = form_login(hub.url, "admin", demo_secrets.admin_password)
    assert response.status_code == 302
    assert hub.api("GET", "/users/admin").json()["admin"] is True


def test_stop_fails_loudly_on_leftover_servers(hub_factory, tmp_path):
    """A hub that leaves its servers running (cleanup_servers=False) makes stop() fail, and the
    harness still kills what was left."""
    config = demo_hub_config(tmp_path, DemoSecrets.generate())
    config["JupyterHub"]["cleanup_servers"] = False
    hub = hub_factory(config)
    assert hub.api("POST", f"/users/{USER}").status_code == 201
    assert hub.api("POST", f"/users/{USER}/server").status_code in (201, 202)
    hub.wait_for_server(USER)
    servers = [p for p in hub.processes() if "jupyterhub.singleuser" in p.cmdline]
    assert servers

    with pytest.raises(AssertionError, match="jupyterhub.singleuser"):
        hub.stop()
    deadline = time.monotonic() + 10
    while servers[0].alive() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not servers[0].alive()
