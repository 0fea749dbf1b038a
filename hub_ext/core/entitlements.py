"""Projects and entitlements: which projects, profiles and how many accelerators a user may use.

Configuration (name-keyed by JupyterHub group, parsed once into frozen objects)::

    everyone = {"profiles": ["cpu"], "limits": {}}
    groups = {
        "vision": {"project": "vision", "display_name": "Vision team",
                   "profiles": ["cpu", "mig-small"], "limits": {"1g.5gb": 2}},
        "research": {"profiles": ["cpu", "a100"], "limits": {"a100": 1}},
    }

Rules:

- Every user has a personal project, ``user-<slug>`` (KubeSpawner's safe slug: valid DNS
  label, no collisions, hashed when shortened; see `personal_project_name`). Its profiles are the union of ``everyone`` and the user's groups'
  profiles; its limit per accelerator is the largest any of those grants allows.
- A group with ``project`` has a team project that all its members may use, with that group's
  profiles and limits; a team project's limits are shared by all its members.
- Admins may use every project and profile, with no accelerator limit.
- Limits count accelerators *at once* across every server of the project (for a personal
  project: all of the user's named servers) — see `Ledger`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from hub_ext.core.catalog import NAME, Accelerator
from hub_ext.core.errors import ConfigError, Problem, UserInputError
from hub_ext.core.profiles import Profile
from hub_ext.core.slugs import safe_slug


@dataclass(frozen=True)
class Grant:
    profiles: frozenset[str]
    limits: Mapping[str, int] = field(default_factory=dict)  # accelerator name → at most this many at once


@dataclass(frozen=True)
class TeamProject:
    name: str
    display_name: str
    group: str
    grant: Grant


@dataclass(frozen=True)
class Entitlements:
    everyone: Grant
    groups: Mapping[str, Grant]
    teams: Mapping[str, TeamProject]  # project name → team project


@dataclass(frozen=True)
class Project:
    """A project as one user sees it: what they may run there."""
    name: str
    display_name: str
    personal: bool
    profiles: frozenset[str]
    limits: Mapping[str, int] | None  # None: unlimited (admins)
    owner: str = ""  # "user:<hub username>" (personal) or "group:<group>" (team): recorded on its namespace


_PERSONAL_SLUG_MAX = 63 - len("user-")


def personal_project_name(username: str) -> str:
    """``user-<slug>``: a DNS label that no other username gets. A slug that fits (every username
    up to 58 characters, and every hashed one: KubeSpawner hashes invalid names to at most 32)
    is used as it always was, so existing namespaces keep their names (``user-alice``). A longer
    one is shortened by KubeSpawner's `safe_slug` with a hash of the whole username
    (``user-<first 47>---<8 hex>``), where it used to be cut at 63 characters, which gave two
    usernames sharing their first 58 characters one namespace. Such a user's former (cut)
    namespace is left alone: the hub never adopts it (`hub_ext.kube.provision`)."""
    slug = safe_slug(username)
    if len(slug) > _PERSONAL_SLUG_MAX:
        slug = safe_slug(username, max_length=_PERSONAL_SLUG_MAX)
    return f"user-{slug}"


def _grant(raw: Any, path: str, profiles: Mapping[str, Profile], accelerators: Mapping[str, Accelerator],
           problems: list[Problem]) -> Grant:
    if not isinstance(raw, Mapping):
        problems.append(Problem(path, "must be a mapping with 'profiles' and 'limits'"))
        return Grant(frozenset())
    names = raw.get("profiles", [])
    if names == "*":
        names = list(profiles)
    if not isinstance(names, list):
        problems.append(Problem(f"{path}.profiles", "must be a list of profile slugs, or '*'"))
        names = []
    for i, n in enumerate(names):
        if n not in profiles:
            problems.append(Problem(f"{path}.profiles[{i}]", f"unknown profile {n!r} (known: "
                                                             f"{', '.join(profiles) or 'none'})"))
    limits = raw.get("limits", {})
    if not isinstance(limits, Mapping):
        problems.append(Problem(f"{path}.limits", "must be a mapping of accelerator names to counts"))
        limits = {}
    for acc, n in limits.items():
        if acc not in accelerators:
            problems.append(Problem(f"{path}.limits.{acc}", f"unknown accelerator (known: "
                                                            f"{', '.join(accelerators) or 'none'})"))
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            problems.append(Problem(f"{path}.limits.{acc}", f"must be a whole number >= 0, not {n!r}"))
    return Grant(frozenset(n for n in names if n in profiles), dict(limits))


def parse_entitlements(everyone: Any, groups: Any, profiles: Iterable[Profile],
                       accelerators: Mapping[str, Accelerator]) -> Entitlements:
    by_slug = {p.slug: p for p in profiles}
    problems: list[Problem] = []
    base = _grant(everyone if everyone is not None else {"profiles": "*"}, "everyone", by_slug, accelerators,
                  problems)
    out_groups: dict[str, Grant] = {}
    teams: dict[str, TeamProject] = {}
    if not isinstance(groups, Mapping):
        problems.append(Problem("groups", "must be a mapping of JupyterHub group names to grants"))
        groups = {}
    for name, raw in groups.items():
        path = f"groups[{name!r}]"
        extra = sorted(set(raw) - {"profiles", "limits", "project", "display_name"}) if isinstance(raw, Mapping) else []
        for key in extra:
            problems.append(Problem(f"{path}.{key}", "unknown key"))
        grant = _grant({k: v for k, v in raw.items() if k in ("profiles", "limits")} if isinstance(raw, Mapping)
                       else raw, path, by_slug, accelerators, problems)
        out_groups[name] = grant
        project = raw.get("project") if isinstance(raw, Mapping) else None
        if project is not None:
            if not isinstance(project, str) or not NAME.fullmatch(project) or project.startswith("user-") or \
                    len(project) > 63 or "_" in project or "." in project:
                problems.append(Problem(f"{path}.project", "must be a DNS label (lower-case letters, digits and "
                                                           "'-') not starting with 'user-'"))
            elif project in teams:
                problems.append(Problem(f"{path}.project", f"is already the project of group "
                                                           f"{teams[project].group!r}"))
            else:
                teams[project] = TeamProject(project, raw.get("display_name") or project, name, grant)
    if problems:
        raise ConfigError(problems)
    return Entitlements(base, out_groups, teams)


def projects_for(ent: Entitlements, username: str, groups: Iterable[str], admin: bool = False) -> list[Project]:
    """The projects a user may use, personal first, then team projects by name."""
    groups = set(groups)
    grants = [ent.everyone] + [g for name, g in ent.groups.items() if name in groups]
    if admin:
        all_profiles = frozenset().union(*(g.profiles for g in [ent.everyone, *ent.groups.values()]))
        personal = Project(personal_project_name(username), "Personal", True, all_profiles, None, f"user:{username}")
        # every team project, within the team's own grant: what a project may use is the project's
        # (its namespace's quota and entitlement), so an admin provisioning it must not lift it
        teams = [Project(t.name, t.display_name, False, t.grant.profiles, dict(t.grant.limits), f"group:{t.group}")
                 for t in ent.teams.values()]
    else:
        limits: dict[str, int] = {}
        for g in grants:
            for acc, n in g.limits.items():
                limits[acc] = max(limits.get(acc, 0), n)
        profiles = frozenset().union(*(g.profiles for g in grants))
        personal = Project(personal_project_name(username), "Personal", True, profiles, limits, f"user:{username}")
        teams = [Project(t.name, t.display_name, False, t.grant.profiles, dict(t.grant.limits), f"group:{t.group}")
                 for t in ent.teams.values() if t.group in groups]
    return [personal] + sorted(teams, key=lambda p: p.name)


def choose(projects: list[Project], profiles: Mapping[str, Profile], project: str | None,
           profile: str | None) -> tuple[Project, Profile]:
    """Validate a user's (untrusted) project and profile choice; UserInputError names the field."""
    by_name = {p.name: p for p in projects}
    chosen = by_name.get(project) if project else projects[0]
    if chosen is None:
        raise UserInputError("project", f"you may not use the project {project!r}", 403)
    if profile:
        if profile not in profiles:
            raise UserInputError("profile", f"no such profile {profile!r}")
        if profile not in chosen.profiles:
            raise UserInputError("profile", f"the profile {profile!r} is not available in the project "
                                            f"{chosen.name!r}", 403)
        return chosen, profiles[profile]
    allowed = [p for p in profiles.values() if p.slug in chosen.profiles]
    if not allowed:
        raise UserInputError("profile", f"no profile is available in the project {chosen.name!r}", 403)
    return chosen, next((p for p in allowed if p.default), allowed[0])


class Ledger:
    """Accelerators in use per project, reserved atomically.

    All methods are synchronous and run on the hub's event loop, so a check and its reservation
    cannot interleave with another spawn's: two concurrent spawns cannot both take the last
    allowed slice. Holders are server ids (``"alice/"``, ``"alice/big"``); a spawner re-registers
    its reservation from its saved state after a hub restart.
    """

    def __init__(self):
        self._held: dict[str, dict[str, tuple[str, int]]] = {}  # project → holder → (accelerator, count)

    def usage(self, project: str) -> dict[str, int]:
        """Accelerator name → how many the project's servers hold now."""
        out: dict[str, int] = {}
        for acc, n in self._held.get(project, {}).values():
            out[acc] = out.get(acc, 0) + n
        return out

    def used(self, project: str, accelerator: str) -> int:
        return self.usage(project).get(accelerator, 0)

    def reserve(self, project: Project, holder: str, accelerator: str, count: int) -> None:
        held = self._held.setdefault(project.name, {})
        previous = held.pop(holder, None)
        if project.limits is not None:
            limit = project.limits.get(accelerator, 0)
            in_use = self.used(project.name, accelerator)
            if in_use + count > limit:
                if previous:
                    held[holder] = previous
                raise UserInputError("profile", f"the project {project.name!r} may use {limit} {accelerator} at "
                                                f"once and {in_use} are in use", 403)
        held[holder] = (accelerator, count)

    def restore(self, project: str, holder: str, accelerator: str, count: int) -> None:
        """Re-register a reservation found in a running server's state (no limit check)."""
        self._held.setdefault(project, {})[holder] = (accelerator, count)

    def release(self, project: str, holder: str) -> None:
        self._held.get(project, {}).pop(holder, None)

    def holdings(self, project: str) -> dict[str, tuple[str, int]]:
        return dict(self._held.get(project, {}))
