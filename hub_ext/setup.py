"""One call that puts the platform into a JupyterHub configuration.

At the end of ``jupyterhub_config.py`` (or in z2jh's ``hub.extraConfig``)::

    from hub_ext.setup import configure
    configure(c)

It parses the platform settings found in `c` right away, so an invalid catalogue, profile list
or entitlement stops the hub before it starts, with every problem and its field path
(`ConfigError`, paths as written in the config: ``KubeSpawner.profile_list[2].slug``); logs a
warning, with its path and a did-you-mean, for each key KubeSpawner would ignore and each key of
the platform's config sections no platform spawner reads (traitlets would report
``c.PlatformConfig.acelerators`` only when a server starts, as a key of the spawner class);
makes the hub's one `PlatformService` (`hub_ext.spawners.service`: the parsed settings, the runtime's
shared parts) and keeps it in ``c.JupyterHub.tornado_settings["mlplatform"]``, where handlers
and spawners find it; registers the platform API handlers and their custom scope; grants every user
``custom:mlplatform:read``, ``custom:mlplatform:credentials`` and ``custom:mlplatform:datasets`` for
themselves, and each notebook server ``custom:mlplatform:read`` for its owner (its jobs API checks
projects with it); adds the platform's templates (the credentials and datasets pages, and
home.html, which adds links to them and each server's profile and project to JupyterHub's home
page); adds the platform's metrics to the hub's ``/hub/metrics`` (`hub_ext.spawners.metrics`:
running servers and held accelerators per project, profile and accelerator); and makes
`platform-local` the spawner unless one is set (or profiles are set on
``c.KubeSpawner``/``c.PlatformSpawner``: then ``platform``).

On Kubernetes (`PlatformSpawner`) it also adds the membership reconciler (`hub_ext.web.reconcile`):
the endpoint ``POST /hub/api/mlplatform/reconcile`` and its scope, and, unless
``c.PlatformSpawner.member_reconcile_interval`` is 0, the hub-managed service
``mlplatform-reconciler`` (holding only that scope) that calls it when the hub starts and every
that many seconds (default 300).
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any, Mapping

from traitlets.config import Config

from hub_ext.core.errors import ConfigError, Problem
from hub_ext.core.logs import LOGGER, use_hub_format
from hub_ext.core.profiles.keys import did_you_mean
from hub_ext.web.reconcile import DEFAULT_INTERVAL, SERVICE_NAME
from hub_ext.web.reconcile import SCOPE as RECONCILE_SCOPE
from hub_ext.spawners import metrics
from hub_ext.spawners.platform import PlatformConfig
from hub_ext.spawners.runtime import Runtime, kubespawner_traits
from hub_ext.spawners.service import KEY, PlatformService
from hub_ext.web.api import CUSTOM_SCOPES, SCOPE, handlers, kubernetes_handlers
from hub_ext.web.credentials_page import SCOPES as CREDENTIAL_SCOPES
from hub_ext.web.credentials_page import WRITE_SCOPE, api_handlers, page_handlers
from hub_ext.web.datasets_page import SCOPES as DATASET_SCOPES
from hub_ext.web.datasets_page import WRITE_SCOPE as DATASETS_SCOPE
from hub_ext.web.datasets_page import api_handlers as dataset_api_handlers
from hub_ext.web.datasets_page import page_handlers as dataset_page_handlers

TEMPLATES = os.path.join(os.path.dirname(__file__), "templates")
SERVER_SCOPES = ["users:activity!user", "access:servers!server"]  # JupyterHub's default server role
_SECTIONS = ("PlatformConfig", "LocalPlatformSpawner", "PlatformSpawner")
_KEYS = ("accelerators", "profiles", "profile_list", "everyone", "groups")


# spawner_class values that mean the Kubernetes runtime
KUBERNETES_SPAWNERS = ("kubespawner.KubeSpawner", "kubespawner.spawner.KubeSpawner", "kubernetes", "platform",
                       "hub_ext.spawners.kube.PlatformSpawner")


def inferred_spawner(c: Config) -> str | None:
    """`c.JupyterHub.spawner_class`; when unset, ``"platform"`` if the config gives profiles to
    KubeSpawner or PlatformSpawner (``c.KubeSpawner.profile_list``: the Kubernetes spawner is
    meant), else None."""
    spawner = c.JupyterHub.get("spawner_class", None) if "JupyterHub" in c else None
    if spawner:
        return spawner
    if any(name in c and any(key in c[name] for key in _KEYS) for name in ("KubeSpawner", "PlatformSpawner")):
        return "platform"
    return None


def spawner_section(spawner_class: Any) -> str:
    """Which spawner's config section applies for a `JupyterHub.spawner_class` value."""
    return "PlatformSpawner" if str(spawner_class) in KUBERNETES_SPAWNERS else "LocalPlatformSpawner"


def settings_from_config(c: Config, section: str = "LocalPlatformSpawner") -> dict[str, Any]:
    """The platform settings as a spawner of config `section` would see them (class config wins
    over `PlatformConfig`; a plain `c.KubeSpawner.profile_list` counts for the Kubernetes spawner)."""
    return located_settings(c, section)[0]


def located_settings(c: Config, section: str = "LocalPlatformSpawner") -> tuple[dict[str, Any], dict[str, str]]:
    """`settings_from_config`, and for each setting the config path it came from
    (``{"profile_list": "KubeSpawner.profile_list"}``)."""
    out: dict[str, Any] = {}
    origins: dict[str, str] = {}
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
                origins[key] = f"{name}.{key}"
    return out, origins


def locate(problem: Problem, origins: Mapping[str, str]) -> Problem:
    """`problem` with its settings path (``profile_list[0].slug``) made the config's
    (``KubeSpawner.profile_list[0].slug``)."""
    for key, origin in origins.items():
        if problem.path == key or problem.path.startswith((f"{key}[", f"{key}.")):
            return Problem(origin + problem.path[len(key):], problem.message)
    return problem


def spawner_class_for(section: str):
    """The platform spawner class whose config `section` is."""
    if section == "PlatformSpawner":
        from hub_ext.spawners.kube import PlatformSpawner

        return PlatformSpawner
    from hub_ext.spawners.local import LocalPlatformSpawner

    return LocalPlatformSpawner


def unread_keys(c: Config, section: str) -> list[Problem]:
    """A warning for each key of ``PlatformConfig`` or the spawner's own section that the spawner
    has no setting for (traitlets ignores it), named where it is written, with a did-you-mean."""
    known = set(spawner_class_for(section).class_trait_names())
    out = []
    for name in dict.fromkeys(["PlatformConfig", section]):
        if name in c:
            for key in sorted(set(c[name]) - known, key=str):
                out.append(Problem(f"{name}.{key}", f"not a setting of the platform's spawner, ignored"
                                                    f"{did_you_mean(key, known)}"))
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
        sys.executable, "-m", "hub_ext.web.reconcile", "--interval", str(interval)]}]
    roles[:] = [r for r in roles if r.get("name") != SERVICE_NAME]
    roles.append({"name": SERVICE_NAME, "description": "The ML platform's membership reconciler",
                  "scopes": [RECONCILE_SCOPE], "services": [SERVICE_NAME]})


def configure(c: Config) -> Runtime:
    use_hub_format()
    spawner = inferred_spawner(c)
    if spawner == "platform" and not c.JupyterHub.get("spawner_class", None):
        logging.getLogger(f"{LOGGER}.setup").warning(
            "c.JupyterHub.spawner_class is not set and profiles are configured for KubeSpawner: using the "
            "platform's Kubernetes spawner ('platform')")
    if not spawner:
        spawner = "platform-local"
    c.JupyterHub.spawner_class = spawner
    section = spawner_section(spawner)
    kubernetes = section == "PlatformSpawner"
    settings, origins = located_settings(c, section)
    try:
        runtime = Runtime.parse(settings, kubespawner_traits())
    except ConfigError as e:
        raise ConfigError([locate(p, origins) for p in e.problems]) from None
    log = logging.getLogger(f"{LOGGER}.setup")
    for warning in [*unread_keys(c, section), *(locate(w, origins) for w in runtime.warnings)]:
        log.warning("c.%s", warning)
    if kubernetes:
        reconcile_interval(c)  # checked before anything is changed
    # keyed as the spawners ask for it (`PlatformConfig.platform_settings`: every key, defaults included)
    traits = PlatformConfig.class_traits()
    service = PlatformService("kubernetes" if kubernetes else "local",
                              {**{key: traits[key].default() for key in _KEYS}, **settings}, runtime)
    c.JupyterHub.tornado_settings = {**dict(c.JupyterHub.get("tornado_settings", {})), KEY: service}
    c.JupyterHub.extra_handlers = list(c.JupyterHub.get("extra_handlers", [])) + handlers + api_handlers + \
        page_handlers + dataset_api_handlers + dataset_page_handlers
    c.JupyterHub.custom_scopes = {**dict(c.JupyterHub.get("custom_scopes", {})), **CUSTOM_SCOPES,
                                  **CREDENTIAL_SCOPES, **DATASET_SCOPES}
    c.JupyterHub.template_paths = list(c.JupyterHub.get("template_paths", [])) + [TEMPLATES]
    roles = list(c.JupyterHub.get("load_roles", []))
    user_role = next((r for r in roles if r.get("name") == "user"), None)
    mine = [f"{SCOPE}!user", f"{WRITE_SCOPE}!user", f"{DATASETS_SCOPE}!user"]
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
    metrics.register()
    return runtime
