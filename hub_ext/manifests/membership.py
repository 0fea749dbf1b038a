"""Who may still be in each team project, and what a leaver loses there. Pure.

Given the hub's users (their JupyterHub groups, whether they are admins or blocked by the
authenticator) and the team projects (project name → the group whose project it is), this module
decides:

- `wanted_members`: per team project, the hub users granted it now: the members of its group and
  the admins (who may use every project, `hub_ext.core.entitlements.projects_for`), never a blocked
  user. A deleted user is not among the hub's users, so is granted nothing.
- `stale_bindings`: of the member objects found in a project's namespace (labelled
  ``mlplatform.io/member``, named `hub_ext.manifests.tenancy.member_binding_name`: each member's
  RoleBinding and their ServiceAccount), the ones no wanted member has, each with the reason it
  goes. Deleting a member's ServiceAccount voids every token of it, those copied out of a pod
  included.
- `server_project` and `servers_to_stop`: the team project a server runs in (its
  ``user_options["project"]``, as the spawner chose it; anything else runs in the user's personal
  project and is never stopped here) and which servers run in a team project their user is no
  longer granted.

Jobs are not decided here: a leaver's jobs belong to the team, so they keep running and stay visible
to the remaining members, but with their member's ServiceAccount gone they hold no right any more
(and their controller can make them no new pod).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from hub_ext.manifests.tenancy import member_binding_name

BINDING_PREFIX = "mlplatform-member-"  # every member_binding_name starts so


@dataclass(frozen=True)
class HubUser:
    """What the hub knows of one user that decides their team projects."""
    name: str
    groups: frozenset[str] = frozenset()
    admin: bool = False
    blocked: bool = False


@dataclass(frozen=True)
class Server:
    """One running server: its user, its name ('' for the default server) and its options."""
    user: str
    name: str
    user_options: Mapping[str, Any]


@dataclass(frozen=True)
class Removal:
    """A member's RoleBinding or ServiceAccount (`kind`) to delete from a project, and why (for the log)."""
    project: str
    binding: str  # the object's name (a member's RoleBinding and ServiceAccount share it)
    why: str
    kind: str = "RoleBinding"


@dataclass(frozen=True)
class Stop:
    """A server to stop, the project it runs in, and why (for the log)."""
    server: Server
    project: str
    why: str


def wanted_members(teams: Mapping[str, str], users: Iterable[HubUser]) -> dict[str, frozenset[str]]:
    """Team project → names of the users granted it (its group's members and the admins, unblocked)."""
    users = [u for u in users if not u.blocked]
    return {project: frozenset(u.name for u in users if u.admin or group in u.groups)
            for project, group in teams.items()}


def why_not(user: HubUser | None, group: str) -> str:
    """Why `user` (None: no such hub user) is not granted the project of `group`."""
    if user is None:
        return "no such hub user (deleted)"
    if user.blocked:
        return f"{user.name} is blocked by the authenticator"
    return f"{user.name} is no longer a member of the group {group!r}"


def stale_bindings(project: str, group: str, found: Iterable[Mapping[str, Any]], wanted: Iterable[str],
                   users: Iterable[HubUser], kind: str = "RoleBinding") -> list[Removal]:
    """The member objects of `kind` in `found` (listed in `project`'s namespace) that no user of
    `wanted` has. `users`: every hub user, to say why one goes."""
    keep = {member_binding_name(name) for name in wanted}
    by_binding = {member_binding_name(u.name): u for u in users}
    out = []
    for obj in found:
        name = (obj.get("metadata") or {}).get("name")
        if not name or not name.startswith(BINDING_PREFIX) or name in keep:
            continue
        out.append(Removal(project, name, why_not(by_binding.get(name), group), kind))
    return sorted(out, key=lambda r: r.binding)


def server_project(user_options: Mapping[str, Any] | None, teams: Iterable[str]) -> str | None:
    """The team project a server runs in, from its (stored) options; None for a personal project."""
    project = (user_options or {}).get("project")
    return project if isinstance(project, str) and project in set(teams) else None


def servers_to_stop(servers: Iterable[Server], teams: Mapping[str, str], wanted: Mapping[str, frozenset[str]],
                    users: Iterable[HubUser]) -> list[Stop]:
    """The servers running in a team project their user is no longer granted."""
    by_name = {u.name: u for u in users}
    out = []
    for server in servers:
        project = server_project(server.user_options, teams)
        if project is None or server.user in wanted.get(project, frozenset()):
            continue
        out.append(Stop(server, project, why_not(by_name.get(server.user), teams[project])))
    return sorted(out, key=lambda s: (s.server.user, s.server.name))
