"""Chromium logs into a demo-style hub through the login form and reaches JupyterLab."""

import os
import re
import sys

import pytest

from hub_ext.demo import DemoSecrets, demo_config
from tests.harness.browser import screenshot

pytestmark = pytest.mark.browser


def test_login_form_leads_to_spawn(hub_factory, browser_page, tmp_path):
    demo_secrets = DemoSecrets.generate()
    hub = hub_factory(
        demo_config(
            demo_secrets,
            state_dir=tmp_path / "state",
            python=sys.executable,
            allow_root=os.geteuid() == 0,
        )
    )
    page = browser_page

    page.goto(f"{hub.url}/hub/login")
    page.fill("#username_input", "demo")
    page.fill("#password_input", "wrong-password")
    page.click("#login_submit")
    page.wait_for_selector("text=Invalid username or password")
    screenshot(page, "demo-login-refused")

    page.fill("#username_input", "demo")
    page.fill("#password_input", demo_secrets.user_password)
    page.click("#login_submit")
    # logged in: the hub spawns the server (spawn-pending) and then sends us to it
    page.wait_for_url(re.compile(r"/(hub/spawn-pending/demo|user/demo/)"), timeout=60_000)
    screenshot(page, "demo-login-spawn")
    page.wait_for_url(re.compile(r"/user/demo/"), timeout=120_000)
    assert hub.wait_for_server("demo")["ready"]
    page.wait_for_selector("#jp-main-dock-panel", timeout=120_000)  # JupyterLab has rendered
    screenshot(page, "demo-server-lab")
