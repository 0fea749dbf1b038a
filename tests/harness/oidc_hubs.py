"""Hub configurations for the login tests: the demo's platform (catalogue, entitlements, local
spawner) with an OAuthenticator from :mod:`hub_ext.login` instead of the shared password.

:func:`login_hub_source` returns ``jupyterhub_config.py`` source: the platform settings, the
platform's ``configure(c)``, then the given ``hub_ext.login`` call (keyword arguments written
with ``repr``). The client secret only ever lives in that file (mode 0600, written by the hub
harness); the crypt key goes into the hub's environment only (:func:`hub_env`).
"""

from __future__ import annotations

import copy
import os
import secrets
import sys
from pathlib import Path

from hub_ext.local.demo import CONFIGURE, DemoSecrets, demo_config, render_config

PASSWORD = secrets.token_urlsafe(12)  # every provider user's password in these tests


def user(groups, **claims) -> dict:
    return {"password": PASSWORD, "claims": {"groups": list(groups), **claims}}


def platform_settings(state_dir: Path) -> dict:
    """The demo's settings (catalogue, groups "vision" and "research") without its login and groups."""
    settings = copy.deepcopy(demo_config(DemoSecrets.generate(), state_dir=state_dir, python=sys.executable,
                                         allow_root=os.geteuid() == 0))
    del settings["JupyterHub"]["load_groups"], settings["Authenticator"], settings["SharedPasswordAuthenticator"]
    return settings


def login_hub_source(state_dir: Path, function: str, **kwargs) -> str:
    args = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
    return (render_config(platform_settings(state_dir)) + CONFIGURE +
            f"\nfrom hub_ext.login import {function}\nfrom hub_ext.login.rules.settings import Endpoints\n\n"
            f"{function}(c, {args})\n")


def hub_env() -> dict[str, str]:
    return {"JUPYTERHUB_CRYPT_KEY": secrets.token_hex(32)}
