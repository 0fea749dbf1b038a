"""`mlplatform render-project`: every Kubernetes object the hub would create or keep for one user's
projects, as multi-document YAML (like ``helm template``), so an operator can review the tenancy
before deploying.

The objects are exactly the hub's own: the user's projects from `hub_ext.entitlements.projects_for`
(personal project first, then team projects by name) and, per project,
`hub_ext.tenancy.project_objects` with the catalogue and profiles the hub parses from the same file,
the member binding of ``member_identity_template`` and the tenancy settings of the
``PlatformSpawner`` section (read as traitlets would: ``c.KubeSpawner.x`` applies unless
``c.PlatformSpawner.x`` says otherwise). Output is deterministic: the same file and arguments give
the same bytes (no time, no absolute paths beyond the file name given).
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterable, Mapping
from typing import Any

import yaml
from traitlets.config import Config, LazyConfigValue

from .entitlements import Project, projects_for
from .errors import ConfigError, Problem
from .platform import Runtime, kubespawner_traits
from .setup import settings_from_config
from .tenancy import TenancySettings, project_objects


class NotKubernetes(Exception):
    """The file configures the local runtime, which makes no Kubernetes objects."""


def spawner_values(c: Config) -> dict[str, Any]:
    """The ``PlatformSpawner`` trait values `c` sets, as a PlatformSpawner would load them: every
    section of its class hierarchy (``Spawner``, ``KubeSpawner``, ...), the most derived winning."""
    from .kube_spawner import PlatformSpawner

    traits = PlatformSpawner.class_traits(config=True)
    values: dict[str, Any] = {}
    for section in PlatformSpawner.section_names():
        if section not in c:
            continue
        for name, value in c[section].items():
            if name not in traits:
                continue
            if isinstance(value, LazyConfigValue):  # c.PlatformSpawner.x.update({...})
                value = value.get_value(values.get(name, traits[name].default()))
            values[name] = value
    return values


def members_of(username: str, values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The (hub user, Kubernetes user) member of the user's projects, as the spawner binds it."""
    template = values.get("member_identity_template") or ""
    if not template:
        return []
    try:
        return [(username, template.format(username=username))]
    except (KeyError, IndexError, ValueError) as e:
        raise ConfigError([Problem("PlatformSpawner.member_identity_template",
                                   f"must be a format string with only {{username}} ({type(e).__name__}: {e})")])


def tenancy_settings(values: Mapping[str, Any]) -> TenancySettings:
    """`TenancySettings.from_config`, its problems named under the section the operator sets."""
    try:
        return TenancySettings.from_config(values)
    except ConfigError as e:
        raise ConfigError([Problem(f"PlatformSpawner.{p.path}" if p.path else "PlatformSpawner", p.message)
                           for p in e.problems]) from None


def _owner_text(project: Project) -> str:
    if project.personal:
        return "personal"
    kind, _, group = project.owner.partition(":")
    return f"team project of group {group}" if kind == "group" else "team project"


class _Dumper(yaml.SafeDumper):
    """Block style; multi-line strings (the catalogue's JSON) as literal blocks, to be read."""


def _str(dumper: yaml.SafeDumper, value: str):
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump(obj: Any) -> str:
    return yaml.dump(obj, Dumper=_Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True, width=100)


def render(c: Config, section: str, source: str, username: str, groups: Iterable[str] = (),
           admin: bool = False) -> str:
    """The YAML for `username` in `groups` under config `c` (`section`: the spawner section that
    applies, from `hub_ext.cli.load_config`; `source`: the file name for the header). Raises
    ConfigError with every problem of the file, NotKubernetes for a local runtime config."""
    if section != "PlatformSpawner":
        raise NotKubernetes(f"{source}: the spawner is the local runtime ({section}), which creates no Kubernetes "
                            "objects; set c.JupyterHub.spawner_class = \"platform\" (or render a z2jh values file)")
    if not username:
        raise ValueError("the user name is empty")
    groups = sorted(set(groups))
    runtime = Runtime.parse(settings_from_config(c, section), kubespawner_traits())
    values = spawner_values(c)
    members = members_of(username, values)
    settings = tenancy_settings(values)
    projects = projects_for(runtime.entitlements, username, groups, admin)

    header = [
        "# mlplatform render-project: the objects the hub creates or keeps for one user's projects",
        f"# config: {source}",
        f"# user: {username}" + (" (admin)" if admin else ""),
        f"# groups: {', '.join(groups) if groups else '(none)'}",
        f"# member identity: {members[0][1] if members else '(none: only the project ServiceAccount is bound)'}",
        "# projects: " + ", ".join(f"{p.name} ({_owner_text(p)})" for p in projects),
    ]
    unknown = [g for g in groups if g not in runtime.entitlements.groups]
    if unknown:
        header.append(f"# note: no grant in this config for group(s): {', '.join(unknown)}")
    docs = []
    for project in projects:
        for obj in project_objects(project, runtime.accelerators, runtime.profiles, members, settings):
            meta = obj.get("metadata", {})
            docs.append(f"---\n# project {project.name} ({_owner_text(project)}): {obj['kind']} "
                        f"{meta.get('name', '')}\n{dump(obj)}")
    return "\n".join(header) + "\n" + "".join(docs)


def render_file(path: pathlib.Path, username: str, groups: Iterable[str] = (), admin: bool = False) -> str:
    """`render` for a jupyterhub_config.py or z2jh values file (`hub_ext.cli.load_config`)."""
    from .cli import load_config

    c, section = load_config(path)
    return render(c, section, str(path), username, groups, admin)
