"""`mlplatform render-project`: every Kubernetes object the hub would create or keep for one user's
projects, as multi-document YAML (like ``helm template``), so an operator can review the tenancy
before deploying.

The objects are exactly the hub's own: the user's projects from `hub_ext.core.entitlements.projects_for`
(personal project first, then team projects by name) and, per project,
`hub_ext.manifests.tenancy.project_objects` with the catalogue and profiles the hub parses from the same file,
the member binding of ``member_identity_template`` and the tenancy settings of the
``PlatformSpawner`` section (read as traitlets would: ``c.KubeSpawner.x`` applies unless
``c.PlatformSpawner.x`` says otherwise). Output is deterministic: the same file and arguments give
the same bytes (no time, no absolute paths beyond the file name given).

Problems are named where the file writes them, as ``mlplatform check-config`` names them
(``KubeSpawner.profile_list[0].slug``, ``singleuser.profileList[0]...`` in values files,
``hub.config.PlatformSpawner.pod_security_enforce``). A callable ``profile_list`` cannot be
called here (it is a function of the hub's spawner, called per user at each spawn form and
spawn): every other object is rendered, the catalogues list no profiles, and the header says so
naming the setting (on the hub, a team project's catalogue lists none either; a personal
project's lists its owner's result: `hub_ext.spawners.kube`).
"""

from __future__ import annotations

import dataclasses

import pathlib
from collections.abc import Iterable, Mapping
from typing import Any

import yaml
from traitlets.config import Config, LazyConfigValue

from hub_ext.cli.config_files import load_located
from hub_ext.core.entitlements import Project, projects_for
from hub_ext.core.errors import ConfigError, Problem
from hub_ext.manifests.tenancy import TenancySettings, project_objects
from hub_ext.setup import locate, located_settings
from hub_ext.spawners.runtime import Runtime, kubespawner_traits


class NotKubernetes(Exception):
    """The file configures the local runtime, which makes no Kubernetes objects."""


def spawner_values(c: Config) -> dict[str, Any]:
    """The ``PlatformSpawner`` trait values `c` sets, as a PlatformSpawner would load them: every
    section of its class hierarchy (``Spawner``, ``KubeSpawner``, ...), the most derived winning."""
    from hub_ext.spawners.kube import PlatformSpawner

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
    try:
        return [(username, template.format(username=username) if template else "")]
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


QUEUEING_NOTES = {
    "kueue": "# queueing: Kueue holds the accelerators (ResourceFlavors, a ClusterQueue and a LocalQueue per project)",
    "auto": "# queueing: auto: rendered as on a cluster without Kueue; where the hub finds Kueue it holds the "
            "accelerators with queues instead (set PlatformSpawner.queueing = \"kueue\" to render them)",
    "off": "# queueing: off: the projects' ResourceQuotas hold the accelerators",
}


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


def config_origins(origins: Mapping[str, str], prefix: str = "", profile_list_path: str = "") -> dict[str, str]:
    """`hub_ext.setup.located_settings`' origins as the file writes them: under the values files'
    ``hub.config.`` `prefix`, and a z2jh ``singleuser.profileList`` at `profile_list_path`."""
    out = {key: prefix + origin for key, origin in origins.items()}
    if profile_list_path and out.get("profile_list", "").endswith("KubeSpawner.profile_list"):
        out["profile_list"] = profile_list_path
    return out


def _parsed(c: Config, section: str, prefix: str, profile_list_path: str) -> tuple[Runtime, dict[str, str]]:
    """The platform settings of `c` parsed, and where each is written; problems named there."""
    settings, origins = located_settings(c, section)
    origins = config_origins(origins, prefix, profile_list_path)
    try:
        return Runtime.parse(settings, kubespawner_traits()), origins
    except ConfigError as e:
        located = [locate(p, origins) for p in e.problems]
        raise ConfigError([Problem(profile_list_path, p.message) if p.path == "profiles" and profile_list_path
                           and p.message == "no profiles are configured" else p for p in located]) from None


def render(c: Config, section: str, source: str, username: str, groups: Iterable[str] = (),
           admin: bool = False, prefix: str = "", profile_list_path: str = "") -> str:
    """The YAML for `username` in `groups` under config `c` (`section`, `prefix`,
    `profile_list_path`: from `hub_ext.cli.config_files.load_located`; `source`: the file name for the header).
    Raises ConfigError with every problem of the file, NotKubernetes for a local runtime config."""
    if section != "PlatformSpawner":
        raise NotKubernetes(f"{source}: the spawner is the local runtime ({section}), which creates no Kubernetes "
                            "objects; set c.JupyterHub.spawner_class = \"platform\" (or render a z2jh values file)")
    if not username:
        raise ValueError("the user name is empty")
    groups = sorted(set(groups))
    values, problems = spawner_values(c), []  # every problem of the file at once
    try:
        runtime, origins = _parsed(c, section, prefix, profile_list_path)
    except ConfigError as e:
        problems += e.problems
    for step in (lambda: members_of(username, values), lambda: tenancy_settings(values)):
        try:
            step()
        except ConfigError as e:  # named under the spawner's section, as the file writes it
            problems += [Problem(prefix + p.path, p.message) for p in e.problems]
    if problems:
        raise ConfigError(problems)
    members, settings = members_of(username, values), tenancy_settings(values)
    projects = projects_for(runtime.entitlements, username, groups, admin)

    header = [
        "# mlplatform render-project: the objects the hub creates or keeps for one user's projects",
        f"# config: {source}",
        f"# user: {username}" + (" (admin)" if admin else ""),
        f"# groups: {', '.join(groups) if groups else '(none)'}",
        f"# member identity: {members[0][1] or '(none: in a team project only the member ServiceAccount is bound)'}",
        "# projects: " + ", ".join(f"{p.name} ({_owner_text(p)})" for p in projects),
    ]
    unknown = [g for g in groups if g not in runtime.entitlements.groups]
    if unknown:
        header.append(f"# note: no grant in this config for group(s): {', '.join(unknown)}")
    if runtime.dynamic is not None:
        header += [f"# note: {origins.get('profile_list', 'profile_list')} is a function of the spawner: only the hub "
                   "can call it (per user, at each spawn form and spawn),",
                   "#   so the catalogues below list no profiles (on the hub, a team project's lists none either; "
                   "a personal project's lists its owner's profiles)"]
    header.append(QUEUEING_NOTES[settings.queueing])
    settings = dataclasses.replace(settings, kueue=settings.queueing == "kueue")
    docs, shared = [], set()
    for project in projects:
        for obj in project_objects(project, runtime.accelerators, runtime.profiles, members, settings):
            meta = obj.get("metadata", {})
            if obj["kind"] == "ResourceFlavor":  # cluster-wide, one for every project
                if meta["name"] in shared:
                    continue
                shared.add(meta["name"])
            docs.append(f"---\n# project {project.name} ({_owner_text(project)}): {obj['kind']} "
                        f"{meta.get('name', '')}\n{dump(obj)}")
    return "\n".join(header) + "\n" + "".join(docs)


def render_file(path: pathlib.Path, username: str, groups: Iterable[str] = (), admin: bool = False) -> str:
    """`render` for a jupyterhub_config.py or z2jh values file (`hub_ext.cli.config_files.load_config`)."""
    c, section, prefix, profile_list_path = load_located(path)
    return render(c, section, str(path), username, groups, admin, prefix, profile_list_path)
