"""Claim paths: where in the identity provider's user info a value (the groups) is found.

A claim path is written as a dotted string (``"groups"``, ``"realm_access.roles"``) or, for
claim names that contain dots or slashes (Auth0-style ``"https://example.org/groups"``), as a
list of keys (``["https://example.org/groups"]``). :func:`parse_claim_path` checks it once, at
hub start, and reports a malformed path with the config key it came from; :func:`resolve` then
never raises, whatever the provider sends.

:class:`ClaimGroups` is the callable given to OAuthenticator's ``auth_state_groups_key``: it
turns a claim (a list of names, or one name) into a set of JupyterHub group names, renamed by an
optional ``group_map`` (the provider's names → the platform's group names). Values that
are not non-empty strings of at most :data:`MAX_GROUP_NAME` characters are dropped, and at most
:data:`MAX_GROUPS` groups are kept, so a provider cannot make the hub create unbounded groups.
:class:`GitHubGroups` is GitHub's: organisations and teams recorded in the auth state.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from hub_ext.core.errors import Problem

log = logging.getLogger("mlplatform.login")

_SEGMENT = re.compile(r"[A-Za-z0-9_:\-]+")
MAX_GROUP_NAME = 255
MAX_GROUPS = 1000
_MISSING = object()


def parse_claim_path(raw: Any, key: str, problems: list[Problem]) -> tuple[str, ...]:
    """The path as a tuple of keys; a malformed `raw` adds a Problem at `key` and gives ()."""
    if isinstance(raw, str):
        parts = raw.split(".")
        if not raw or not all(_SEGMENT.fullmatch(p) for p in parts):
            problems.append(Problem(key, f"{raw!r} is not a claim path: write dot-separated claim names "
                                         "(letters, digits, '_', '-', ':'), e.g. 'groups' or 'realm_access.roles'; "
                                         "give a claim name with dots or slashes as a list, e.g. "
                                         "['https://example.org/groups']"))
            return ()
        return tuple(parts)
    if isinstance(raw, (list, tuple)) and raw and all(isinstance(p, str) and p for p in raw):
        return tuple(raw)
    problems.append(Problem(key, f"must be a dotted claim path or a non-empty list of claim names, not {raw!r}"))
    return ()


def format_path(path: Sequence[str]) -> str:
    return ".".join(path) if all(_SEGMENT.fullmatch(p) for p in path) else repr(list(path))


def resolve(info: Any, path: Sequence[str]) -> Any:
    """The value at `path` in nested mappings, or :data:`None` where any key is missing."""
    value = info
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key, _MISSING)
        if value is _MISSING:
            return None
    return value


def group_names(value: Any, group_map: tuple[tuple[str, str], ...] = ()) -> set[str]:
    """JupyterHub group names from a claim value (a list of strings, or one string), each renamed by
    `group_map` (provider name → JupyterHub name; names not in it are kept as they are)."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple, set, frozenset)):
        return set()
    names = sorted({v for v in value if isinstance(v, str) and v.strip() == v and 0 < len(v) <= MAX_GROUP_NAME})
    renames = dict(group_map)
    return {renames.get(n, n) for n in names[:MAX_GROUPS]}


def parse_group_map(raw: Any, key: str, problems: list[Problem]) -> tuple[tuple[str, str], ...]:
    """`raw` ({provider group: JupyterHub group}) as sorted pairs; a malformed one adds a Problem at `key`."""
    if raw is None:
        return ()
    if not isinstance(raw, Mapping) or not all(isinstance(k, str) and k and isinstance(v, str) and v
                                               for k, v in raw.items()):
        problems.append(Problem(key, f"must map provider group names to JupyterHub group names, not {raw!r}"))
        return ()
    return tuple(sorted(raw.items()))


@dataclass(frozen=True)
class ClaimGroups:
    """``auth_state_groups_key`` callable: the groups at `path` in ``auth_state[user_key]``.

    A missing or malformed claim gives no groups (the user keeps only what everyone gets) and a
    warning naming the claim path, never the claim's value.
    """

    user_key: str
    path: tuple[str, ...]
    group_map: tuple[tuple[str, str], ...] = ()

    def __call__(self, auth_state: Mapping[str, Any]) -> set[str]:
        value = resolve((auth_state or {}).get(self.user_key), self.path)
        if value is None:
            log.warning("the groups claim %s is missing from the user info; no groups", format_path(self.path))
            return set()
        return group_names(value, self.group_map)


@dataclass(frozen=True)
class GitHubGroups:
    """``auth_state_groups_key`` callable for GitHub: ``org`` for each organisation the user is a
    member of, ``org:team`` (the team's slug, as in GitHub's URLs) for each team, renamed by
    `group_map` where listed; only for the `trusted` organisations (and names `group_map` lists).
    Anyone can create a GitHub organisation with any free name, so an organisation the hub was
    not told about (one named ``ml-admins`` or ``vision``, say) must not become a group: it would
    grant admin rights or a team's projects."""

    group_map: tuple[tuple[str, str], ...] = ()
    trusted: frozenset[str] = frozenset()

    def __call__(self, auth_state: Mapping[str, Any]) -> set[str]:
        names = list((auth_state or {}).get("orgs") or [])
        for team in (auth_state or {}).get("teams") or []:
            org = (team.get("organization") or {}).get("login") if isinstance(team, Mapping) else None
            if isinstance(org, str) and isinstance(team.get("slug"), str):
                names += [org, f"{org}:{team['slug']}"]
        mapped = dict(self.group_map)
        kept = [n for n in names if isinstance(n, str) and (n.split(":")[0] in self.trusted or n in mapped)]
        return group_names(kept, self.group_map)
