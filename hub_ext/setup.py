"""One call that puts the platform into a JupyterHub configuration.

At the end of ``jupyterhub_config.py`` (or in z2jh's ``hub.extraConfig``)::

    from hub_ext.setup import configure
    configure(c)

It parses the platform settings found in `c` right away, so an invalid catalogue, profile list
or entitlement stops the hub before it starts, with every problem and its field path
(`ConfigError`); registers the platform API handlers and their custom scope; grants every user
``custom:mlplatform:read`` and ``custom:mlplatform:credentials`` for themselves, and each notebook
server ``custom:mlplatform:read`` for its owner (its jobs API checks projects with it); adds the
credentials page's template; and makes `platform-local` the spawner unless one
is set.

On Kubernetes (`PlatformSpawner`) it also adds the membership reconciler (`hub_ext.reconcile`):
the endpoint ``POST /hub/api/mlplatform/reconcile`` and its scope, and, unless
``c.PlatformSpawner.member_reconcile_interval`` is 0, the hub-managed service
``mlplatform-reconciler`` (holding only that scope) that calls it when the hub starts and every
that many seconds (default 300).
"""

from __future__ import annotations

import os
import sys
from typing import Any

from traitlets.config import Config

from .api import CUSTOM_SCOPES, SCOPE, handlers, kubernetes_handlers
from .credentials_page import SCOPES as CREDENTIAL_SCOPES
from .credentials_page import WRITE_SCOPE, api_handlers, page_handlers
from .errors import ConfigError, Problem
from .logs import use_hub_format
from .platform import Runtime, kubespawner_traits
from .reconcile import DEFAULT_INTERVAL, SERVICE_NAME
from .reconcile import SCOPE as RECONCILE_SCOPE

TEMPLATES = os.path.join(os.path.dirname(__file__), "templates")
SERVER_SCOPES = ["users:activity!user", "access:servers!server"]  # JupyterHub's default server role
_SECTIONS = ("PlatformConfig", "LocalPlatformSpawner", "PlatformSpawner")
_KEYS = ("accelerators", "profiles", "profile_list", "everyone", "groups")


# spawner_class values that mean the Kubernetes runtime
KUBERNETES_SPAWNERS = ("kubespawner.KubeSpawner", "kubespawner.spawner.KubeSpawner", "kubernetes", "platform",
                       "hub_ext.kube_spawner.PlatformSpawner")


def spawner_section(spawner_class: Any) -> str:
    """Which spawner's config section applies for a `JupyterHub.spawner_class` value."""
    return "PlatformSpawner" if str(spawner_class) in KUBERNETES_SPAWNERS else "LocalPlatformSpawner"


def settings_from_config(c: Config, section: str = "LocalPlatformSpawner") -> dict[str, Any]:
    """The platform settings as a spawner of config `section` would see them (class config wins
    over `PlatformConfig`; a plain `c.KubeSpawner.profile_list` counts for the Kubernetes spawner)."""
    out: dict[str, Any] = {}
    sections = ["PlatformConfig"]
    if section == "PlatformSpawner":
        sections.insert(0, "KubeSpawner")
    sections.append(section)
    for name in sections:
        if name not in c:
            continue
        for key in _KEYS:
            if key in c[name]:
                out[key] = c[name][key]
    return out


def reconcile_interval(c: Config) -> float:
    """``c.PlatformSpawner.member_reconcile_interval``: seconds between membership rounds (0: none)."""
    value = c.PlatformSpawner.get("member_reconcile_interval", DEFAULT_INTERVAL) if "PlatformSpawner" in c \
        else DEFAULT_INTERVAL
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ConfigError([Problem("PlatformSpawner.member_reconcile_interval",
                                   f"must be a number of seconds >= 0 (0: never), not {value!r}")])
    return value


def add_reconciler(c: Config, roles: list[dict]) -> None:
    """The membership reconciler's endpoint, scope and (with an interval) service and role."""
    interval = reconcile_interval(c)
    c.JupyterHub.extra_handlers = list(c.JupyterHub.extra_handlers) + kubernetes_handlers
    c.JupyterHub.custom_scopes = {**c.JupyterHub.custom_scopes, RECONCILE_SCOPE: {
        "description": "Reconcile ML platform team projects with the hub's groups (remove leavers' access)."}}
    if not interval:
        return
    services = [s for s in c.JupyterHub.get("services", []) if s.get("name") != SERVICE_NAME]
    c.JupyterHub.services = services + [{"name": SERVICE_NAME, "command": [
        sys.executable, "-m", "hub_ext.reconcile", "--interval", str(interval)]}]
    roles[:] = [r for r in roles if r.get("name") != SERVICE_NAME]
    roles.append({"name": SERVICE_NAME, "description": "The ML platform's membership reconciler",
                  "scopes": [RECONCILE_SCOPE], "services": [SERVICE_NAME]})


def configure(c: Config) -> Runtime:
    use_hub_format()
    spawner = c.JupyterHub.get("spawner_class", None) if "JupyterHub" in c else None
    if not spawner:
        c.JupyterHub.spawner_class = "platform-local"
        spawner = "platform-local"
    kubernetes = spawner_section(spawner) == "PlatformSpawner"
    runtime = Runtime.parse(settings_from_config(c, spawner_section(spawner)), kubespawner_traits())
    if kubernetes:
        reconcile_interval(c)  # checked before anything is changed
    c.JupyterHub.extra_handlers = list(c.JupyterHub.get("extra_handlers", [])) + handlers + api_handlers + \
        page_handlers
    c.JupyterHub.custom_scopes = {**dict(c.JupyterHub.get("custom_scopes", {})), **CUSTOM_SCOPES,
                                  **CREDENTIAL_SCOPES}
    c.JupyterHub.template_paths = list(c.JupyterHub.get("template_paths", [])) + [TEMPLATES]
    roles = list(c.JupyterHub.get("load_roles", []))
    user_role = next((r for r in roles if r.get("name") == "user"), None)
    mine = [f"{SCOPE}!user", f"{WRITE_SCOPE}!user"]
    if user_role is None:
        roles.append({"name": "user", "scopes": ["self", *mine]})
    else:
        user_role["scopes"] = list(user_role.get("scopes", ["self"])) + \
            [s for s in mine if s not in user_role.get("scopes", [])]
    # the notebook server reads its owner's projects (the jobs API checks them)
    server_role = next((r for r in roles if r.get("name") == "server"), None)
    if server_role is None:
        roles.append({"name": "server", "scopes": [*SERVER_SCOPES, f"{SCOPE}!user"]})
    elif f"{SCOPE}!user" not in server_role.get("scopes", []):
        server_role["scopes"] = list(server_role.get("scopes", SERVER_SCOPES)) + [f"{SCOPE}!user"]
    if kubernetes:
        add_reconciler(c, roles)
    c.JupyterHub.load_roles = roles
    return runtime
