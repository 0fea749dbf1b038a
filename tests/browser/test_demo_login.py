"""Chromium through the demo hub: a refused login, then alice logs in, sees the spawn form with
free capacity, picks a MIG profile, starts, lands in JupyterLab and sees the slice she was given
in CUDA_VISIBLE_DEVICES from a notebook."""

import json
import os
import re
import sys

import pytest

from hub_ext.local.demo import DemoSecrets, demo_config, demo_source
from tests.harness.browser import run_notebook, screenshot

pytestmark = pytest.mark.browser

NOTEBOOK = {
    "cells": [{"cell_type": "code", "execution_count": None, "id": "env", "metadata": {}, "outputs": [],
               "source": ["import os\n", "print('devices:', os.environ['CUDA_VISIBLE_DEVICES'])"]}],
    "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
    "nbformat": 4, "nbformat_minor": 5,
}


def test_login_pick_a_mig_profile_and_see_the_device(hub_factory, browser_page, tmp_path):
    demo_secrets = DemoSecrets.generate()
    state = tmp_path / "state"
    hub = hub_factory(demo_source(demo_config(demo_secrets, state_dir=state, python=sys.executable,
                                              allow_root=os.geteuid() == 0)))
    home = state / "users" / "alice"
    home.mkdir(parents=True)
    (home / "check.ipynb").write_text(json.dumps(NOTEBOOK))
    page = browser_page

    page.goto(f"{hub.url}/hub/login")
    page.fill("#username_input", "alice")
    page.fill("#password_input", "wrong-password")
    page.click("#login_submit")
    page.wait_for_selector("text=Invalid username or password")
    screenshot(page, "demo-login-refused")

    page.fill("#username_input", "alice")
    page.fill("#password_input", demo_secrets.user_password)
    page.click("#login_submit")
    page.wait_for_url(re.compile(r"/hub/spawn"), timeout=60_000)
    page.wait_for_selector("text=Small GPU slice")
    assert page.locator(".mlplatform-capacity").first.inner_text() == "2 of 2 free"
    assert page.get_by_text("Whole GPU").count() == 0  # not granted to alice
    screenshot(page, "demo-spawn-form")

    page.get_by_label("Small GPU slice").check()
    page.get_by_label("Vision team").check()
    page.click("input[type=submit], button[type=submit]")
    page.wait_for_url(re.compile(r"/user/alice/"), timeout=120_000)
    page.wait_for_selector("#jp-main-dock-panel", timeout=120_000)
    screenshot(page, "demo-lab")

    text = run_notebook(page, f"{hub.url}/user/alice/lab/tree/check.ipynb")
    assert re.fullmatch(r"devices: MIG-demo-1g5gb-[01]", text)
    screenshot(page, "demo-notebook-cuda-visible-devices")
    server = hub.api("GET", "/users/alice").json()["servers"][""]
    assert server["user_options"] == {"project": "vision", "profile": "mig-1g"}
