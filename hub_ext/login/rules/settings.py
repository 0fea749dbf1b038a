"""Pure login settings: provider parameters in, ``{"Section": {"trait": value}}`` out.

Nothing here does I/O (beyond logging a warning) or reads traits; :mod:`hub_ext.login` applies
the result to a config.
Every function checks *all* its inputs and raises one :class:`~hub_ext.core.errors.ConfigError`
listing each problem with the config key to fix (``GenericOAuthenticator.allowed_groups``,
``groups_claim (GenericOAuthenticator.auth_state_groups_key)``).

What every result guarantees:

- groups come from the provider at every login and every auth refresh (``manage_groups``,
  ``enable_auth_state``, ``refresh_pre_spawn``, ``auth_refresh_age``), so removing a user from a
  group at the provider removes its projects and profiles at their next spawn;
- who may log in is explicit: ``allow_all`` is False and at least one of ``allowed_groups``,
  ``allowed_users`` (or, for GitHub, ``allowed_organizations``) is non-empty;
- the user refused for their groups sees :data:`NOT_ALLOWED`.

The authenticator classes named in the result (:mod:`.authenticators`) are imported only by JupyterHub.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Collection, Iterable, Mapping

from hub_ext.core.errors import ConfigError, Problem
from hub_ext.login.rules.claims import ClaimGroups, GitHubGroups, format_path, parse_claim_path, parse_group_map

log = logging.getLogger("mlplatform.login")

PACKAGE = "hub_ext.login.authenticators"
NOT_ALLOWED = ("You signed in, but your account is in none of the groups allowed to use this hub. "
               "Ask an administrator of the platform to add you to one of them.")
NO_ONE_ALLOWED = "no one could log in: name the groups whose members may log in (allow_all stays False on purpose)"


@dataclass(frozen=True)
class Endpoints:
    """An OpenID Connect provider's endpoints and what it says it supports (discovery document)."""

    authorize_url: str
    token_url: str
    userdata_url: str
    claims_supported: frozenset[str] | None = None
    scopes_supported: frozenset[str] | None = None

    @classmethod
    def from_discovery(cls, doc: Mapping[str, Any]) -> Endpoints:
        def names(key):
            return frozenset(doc[key]) if isinstance(doc.get(key), list) else None
        return cls(doc["authorization_endpoint"], doc["token_endpoint"], doc["userinfo_endpoint"],
                   names("claims_supported"), names("scopes_supported"))


def _names(raw: Any, key: str, problems: list[Problem]) -> list[str]:
    if isinstance(raw, str) or not isinstance(raw, Iterable) or not all(isinstance(n, str) and n for n in raw):
        problems.append(Problem(key, f"must be a list of names, not {raw!r}"))
        return []
    return sorted(set(raw))


def _common(section: str, authenticator: str, *, client_id: str, client_secret: str, allowed_groups, admin_groups,
            allowed_users, admin_users, callback_url: str | None, refresh_age: int, max_username_length: int,
            problems: list[Problem], extra_allowed: bool = False) -> dict[str, dict[str, Any]]:
    for key, value in (("client_id", client_id), ("client_secret", client_secret)):
        if not isinstance(value, str) or not value:
            problems.append(Problem(f"{section}.{key}", "must be given (from the provider's OAuth client)"))
    allowed = _names(allowed_groups, f"{section}.allowed_groups", problems)
    admins = _names(admin_groups, f"{section}.admin_groups", problems)
    users = _names(allowed_users, f"{section}.allowed_users", problems)
    admin_names = _names(admin_users, f"{section}.admin_users", problems)
    if not (allowed or users or admins or admin_names or extra_allowed):
        problems.append(Problem(f"{section}.allowed_groups", NO_ONE_ALLOWED))
    if callback_url is not None and not (isinstance(callback_url, str) and
                                         callback_url.startswith(("https://", "http://")) and
                                         callback_url.endswith("/hub/oauth_callback")):
        problems.append(Problem(f"{section}.oauth_callback_url", "must be the hub's public URL ending in "
                                                                 f"/hub/oauth_callback, not {callback_url!r}"))
    if isinstance(refresh_age, bool) or not isinstance(refresh_age, int) or refresh_age <= 0:
        problems.append(Problem(f"refresh_age ({section}.auth_refresh_age)", f"must be a number of seconds > 0, "
                                                                            f"not {refresh_age!r}"))
    if isinstance(max_username_length, bool) or not isinstance(max_username_length, int) or max_username_length < 1:
        problems.append(Problem(f"{section}.max_username_length", "must be a whole number >= 1"))
    out: dict[str, Any] = {
        "manage_groups": True,
        "enable_auth_state": True,
        "refresh_pre_spawn": True,
        "auth_refresh_age": refresh_age,
        "allow_all": False,
        "allow_existing_users": False,
        "client_id": client_id,
        "client_secret": client_secret,
        "allowed_groups": set(allowed),
        "admin_groups": set(admins),
        "allowed_users": set(users),
        "admin_users": set(admin_names),
        "custom_403_message": NOT_ALLOWED,
        "max_username_length": max_username_length,
    }
    if callback_url:
        out["oauth_callback_url"] = callback_url
    return {"JupyterHub": {"authenticator_class": f"{PACKAGE}.{authenticator}"}, section: out}


def _provider_names(names: Iterable[str], renames: tuple[tuple[str, str], ...]) -> set[str]:
    """The provider's group names that become `names` (JupyterHub names) under `renames`."""
    wanted = set(names)
    renamed = {src for src, dst in renames if dst in wanted}
    return renamed | {n for n in wanted if n not in dict(renames)}


def _check_claims(path: tuple[str, ...], key: str, endpoints: Endpoints | None) -> None:
    """Warn (at hub start) about a claim that cannot be confirmed: one the provider's discovery
    document does not list, or any claim where it lists none (or none was read). Many providers
    list only standard claims (Keycloak's ``claims_supported`` never has mapper claims such as
    ``groups``), so this is a hint naming `key`, not an error."""
    if not path:
        return
    supported = endpoints.claims_supported if endpoints else None
    if supported is None:
        source = "discovery document lists no claims_supported" if endpoints else "discovery document was not read"
        log.warning("%s: %r cannot be checked at hub start (the provider's %s); if logins get no groups or "
                    "usernames, fix this setting", key, path[0], source)
    elif path[0] not in supported:
        log.warning("%s: the provider's claims_supported does not list %r (%s); if logins get no groups or "
                    "usernames, fix this setting", key, path[0], ", ".join(sorted(supported)))


def oidc_settings(*, endpoints: Endpoints, client_id: str = "", client_secret: str = "", allowed_groups=(),
                  admin_groups=(), allowed_users=(), admin_users=(), groups_claim: Any = "groups",
                  username_claim: str = "preferred_username", scope: Iterable[str] | None = None,
                  callback_url: str | None = None, refresh_age: int = 300, max_username_length: int = 128,
                  login_service: str = "your organisation", group_map: Mapping[str, str] | None = None
                  ) -> dict[str, dict[str, Any]]:
    """GenericOAuthenticator settings for an OpenID Connect provider. `scope` defaults to openid,
    profile, email, and groups where the provider lists that scope (or lists none)."""
    section, problems = "GenericOAuthenticator", []
    out = _common(section, "PlatformOIDCAuthenticator", client_id=client_id, client_secret=client_secret,
                  allowed_groups=allowed_groups, admin_groups=admin_groups, allowed_users=allowed_users,
                  admin_users=admin_users, callback_url=callback_url, refresh_age=refresh_age,
                  max_username_length=max_username_length, problems=problems)
    groups_key = f"groups_claim ({section}.auth_state_groups_key)"
    path = parse_claim_path(groups_claim, groups_key, problems)
    _check_claims(path, groups_key, endpoints)
    renames = parse_group_map(group_map, "group_map", problems)
    user_key = f"username_claim ({section}.username_claim)"
    if not isinstance(username_claim, str) or not username_claim:
        problems.append(Problem(user_key, f"must be the name of a claim, not {username_claim!r}"))
    else:
        _check_claims((username_claim,), user_key, endpoints)
    if scope is None:
        listed = endpoints.scopes_supported
        scope = ["openid", "profile", "email", *(["groups"] if listed is None or "groups" in listed else [])]
    scopes = _names(scope, f"{section}.scope", problems)
    if scopes and "openid" not in scopes:
        problems.append(Problem(f"{section}.scope", "must include 'openid'"))
    for name in scopes if endpoints.scopes_supported is not None else ():
        if name not in endpoints.scopes_supported:  # a provider may accept scopes it does not list
            log.warning("%s.scope: the provider's scopes_supported does not list %r (%s)", section, name,
                        ", ".join(sorted(endpoints.scopes_supported)))
    if problems:
        raise ConfigError(problems)
    out[section].update({
        "login_service": login_service,
        "authorize_url": endpoints.authorize_url,
        "token_url": endpoints.token_url,
        "userdata_url": endpoints.userdata_url,
        "username_claim": username_claim,
        "scope": scopes,
        "auth_state_groups_key": ClaimGroups("oauth_user", path, renames),
    })
    return out


def google_settings(*, client_id: str = "", client_secret: str = "", hosted_domains: Collection[str] = (),
                    allowed_groups=(), admin_groups=(), allowed_users=(), admin_users=(), groups_claim: Any = None,
                    workspace: Mapping[str, Any] | None = None, endpoints: Endpoints | None = None,
                    scope: Iterable[str] = ("openid", "email"), callback_url: str | None = None,
                    refresh_age: int = 300, max_username_length: int = 128,
                    group_map: Mapping[str, str] | None = None) -> dict[str, dict[str, Any]]:
    """GoogleOAuthenticator settings. Groups come from `workspace` (Google Workspace groups read with a
    service account: ``{"service_account_keys": {domain: key file}, "administrators": {domain: admin user}}``)
    or from a `groups_claim` in the user info (a Google-compatible provider that issues one)."""
    section, problems = "GoogleOAuthenticator", []
    out = _common(section, "PlatformGoogleAuthenticator", client_id=client_id, client_secret=client_secret,
                  allowed_groups=allowed_groups, admin_groups=admin_groups, allowed_users=allowed_users,
                  admin_users=admin_users, callback_url=callback_url, refresh_age=refresh_age,
                  max_username_length=max_username_length, problems=problems)
    domains = [d.lower() for d in _names(hosted_domains, f"{section}.hosted_domain", problems)]
    scopes = _names(scope, f"{section}.scope", problems)
    renames = parse_group_map(group_map, "group_map", problems)
    settings = out[section]
    groups_key = f"groups_claim ({section}.auth_state_groups_key)"
    if (groups_claim is None) == (workspace is None):
        problems.append(Problem(groups_key, "give exactly one source of groups: workspace (Google Workspace groups) "
                                            "or groups_claim (a claim in the user info)"))
    elif workspace is not None:
        keys = workspace.get("service_account_keys") if isinstance(workspace, Mapping) else None
        admins = workspace.get("administrators") if isinstance(workspace, Mapping) else None
        if not isinstance(keys, Mapping) or not keys or not isinstance(admins, Mapping) or set(keys) != set(admins):
            problems.append(Problem("workspace", "must be {'service_account_keys': {domain: key file}, "
                                                 "'administrators': {domain: admin user}} for the same domains"))
        elif not set(domains) <= set(keys):
            problems.append(Problem("workspace", f"has no service-account key for the hosted domains "
                                                 f"{sorted(set(domains) - set(keys))}: their users' groups could "
                                                 "not be read, so they could never log in"))
        else:
            settings.update({
                "google_service_account_keys": dict(keys),
                "gsuite_administrator": dict(admins),
                # GoogleOAuthenticator compares Workspace names: undo group_map's renaming
                "allowed_google_groups": {d: _provider_names(settings["allowed_groups"], renames) for d in keys},
                "admin_google_groups": {d: _provider_names(settings["admin_groups"], renames) for d in keys},
                "auth_state_groups_key": ClaimGroups("google_user", ("google_groups",), renames),
            })
    else:
        path = parse_claim_path(groups_claim, groups_key, problems)
        _check_claims(path, groups_key, endpoints)
        settings["auth_state_groups_key"] = ClaimGroups("google_user", path, renames)
    if problems:
        raise ConfigError(problems)
    settings.update({"hosted_domain": domains, "scope": scopes, "username_claim": "email"})
    if endpoints is not None:
        settings.update({"authorize_url": endpoints.authorize_url, "token_url": endpoints.token_url,
                         "userdata_url": endpoints.userdata_url})
    return out


def _trusted_orgs(orgs: Iterable[str], groups: Iterable[str], renames) -> frozenset[str]:
    """The GitHub organisations whose memberships may become groups: those the hub names itself
    (allowed organisations, ``org:team`` groups, `group_map` keys). A bare group name is a
    platform group, never a reason to trust an organisation of that name."""
    named = [*orgs, *(g for g in groups if ":" in g), *(k for k, _ in renames)]
    return frozenset(n.split(":")[0] for n in named)


def github_settings(*, client_id: str = "", client_secret: str = "", allowed_organizations=(), allowed_groups=(),
                    admin_groups=(), allowed_users=(), admin_users=(), github_url: str | None = None,
                    callback_url: str | None = None, refresh_age: int = 300, max_username_length: int = 128,
                    group_map: Mapping[str, str] | None = None) -> dict[str, dict[str, Any]]:
    """GitHubOAuthenticator settings: groups ``org`` and ``org:team`` from the user's organisations and
    teams; `allowed_organizations` (``org`` or ``org:team``) are checked by GitHubOAuthenticator itself."""
    section, problems = "GitHubOAuthenticator", []
    orgs = _names(allowed_organizations, f"{section}.allowed_organizations", problems)
    out = _common(section, "PlatformGitHubAuthenticator", client_id=client_id, client_secret=client_secret,
                  allowed_groups=allowed_groups, admin_groups=admin_groups, allowed_users=allowed_users,
                  admin_users=admin_users, callback_url=callback_url, refresh_age=refresh_age,
                  max_username_length=max_username_length, problems=problems, extra_allowed=bool(orgs))
    for i, name in enumerate(orgs):
        if name.count(":") > 1 or name.startswith(":") or name.endswith(":"):
            problems.append(Problem(f"{section}.allowed_organizations[{i}]", f"{name!r} is not 'org' or 'org:team'"))
    renames = parse_group_map(group_map, "group_map", problems)
    if github_url is not None and not (isinstance(github_url, str) and github_url.startswith(("https://", "http://"))):
        problems.append(Problem(f"{section}.github_url", f"must be an http(s) URL, not {github_url!r}"))
    if problems:
        raise ConfigError(problems)
    out[section].update({
        "allowed_organizations": set(orgs),
        "scope": ["read:user", "read:org"],
        "populate_teams_in_auth_state": True,
        "auth_state_groups_key": GitHubGroups(renames, _trusted_orgs(
            orgs, out[section]["allowed_groups"] | out[section]["admin_groups"], renames)),
    })
    if github_url:
        out[section]["github_url"] = github_url.rstrip("/")
    return out


__all__ = ["Endpoints", "oidc_settings", "google_settings", "github_settings", "format_path"]
