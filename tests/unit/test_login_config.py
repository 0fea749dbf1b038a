"""The login helpers: settings are whole dicts, every misconfiguration names its config key, claim
paths resolve whatever the provider sends, and the identity checks OAuthenticator lacks."""

from __future__ import annotations

import pytest
from oauthenticator.generic import GenericOAuthenticator
from tornado import web
from traitlets.config import Config

from hub_ext.core.errors import ConfigError
from hub_ext.login import apply, configure_github, discover
from hub_ext.login.authenticators import (
    PlatformGitHubAuthenticator,
    PlatformGoogleAuthenticator,
    PlatformOIDCAuthenticator,
)
from hub_ext.login.rules.claims import MAX_GROUP_NAME, ClaimGroups, GitHubGroups, group_names, parse_claim_path, resolve
from hub_ext.login.rules.settings import NOT_ALLOWED, Endpoints, github_settings, google_settings, oidc_settings

pytestmark = pytest.mark.unit

ENDPOINTS = Endpoints("https://idp/auth", "https://idp/token", "https://idp/me",
                      frozenset({"sub", "email", "groups", "preferred_username", "realm_access"}),
                      frozenset({"openid", "email", "profile", "groups"}))
CLIENT = {"client_id": "hub", "client_secret": "s3cret"}
ENV = {"JUPYTERHUB_CRYPT_KEY": "00" * 32}


def test_oidc_settings_whole():
    assert oidc_settings(**CLIENT, endpoints=ENDPOINTS, allowed_groups=["vision", "research"],
                         admin_groups=["ml-admins"], callback_url="https://hub.example.org/hub/oauth_callback") == {
        "JupyterHub": {"authenticator_class": "hub_ext.login.authenticators.PlatformOIDCAuthenticator"},
        "GenericOAuthenticator": {
            "manage_groups": True, "enable_auth_state": True, "refresh_pre_spawn": True, "auth_refresh_age": 300,
            "allow_all": False, "allow_existing_users": False, "client_id": "hub", "client_secret": "s3cret",
            "allowed_groups": {"vision", "research"}, "admin_groups": {"ml-admins"}, "allowed_users": set(),
            "admin_users": set(), "custom_403_message": NOT_ALLOWED, "max_username_length": 128,
            "oauth_callback_url": "https://hub.example.org/hub/oauth_callback", "login_service": "your organisation",
            "authorize_url": "https://idp/auth", "token_url": "https://idp/token", "userdata_url": "https://idp/me",
            "username_claim": "preferred_username", "scope": ["email", "groups", "openid", "profile"],
            "auth_state_groups_key": ClaimGroups("oauth_user", ("groups",)),
        },
    }


@pytest.mark.parametrize("kwargs, problem", [
    ({"allowed_groups": []}, "GenericOAuthenticator.allowed_groups: no one could log in"),
    ({"allowed_groups": "vision"}, "GenericOAuthenticator.allowed_groups: must be a list of names"),
    ({"groups_claim": "realm_access..roles"}, "groups_claim (GenericOAuthenticator.auth_state_groups_key): "
                                              "'realm_access..roles' is not a claim path"),
    ({"groups_claim": []}, "groups_claim (GenericOAuthenticator.auth_state_groups_key): must be a dotted claim path"),
    ({"scope": ["email"]}, "GenericOAuthenticator.scope: must include 'openid'"),
    ({"client_secret": ""}, "GenericOAuthenticator.client_secret: must be given"),
    ({"callback_url": "https://hub.example.org/"}, "GenericOAuthenticator.oauth_callback_url: must be the hub's"),
    ({"refresh_age": 0}, "refresh_age (GenericOAuthenticator.auth_refresh_age): must be a number of seconds > 0"),
])
def test_oidc_misconfiguration_names_the_key(kwargs, problem):
    args = {**CLIENT, "endpoints": ENDPOINTS, "allowed_groups": ["vision"], **kwargs}
    with pytest.raises(ConfigError) as e:
        oidc_settings(**args)
    assert any(str(p).startswith(problem) for p in e.value.problems), e.value.problems


def test_claims_and_scopes_the_provider_does_not_list_are_warnings(caplog):
    """Discovery documents list standard claims only (Keycloak never lists mapper claims such as
    ``groups``): a name missing there is reported, and the hub still starts."""
    keycloak_like = Endpoints("https://idp/auth", "https://idp/token", "https://idp/me",
                              frozenset({"sub", "iss", "preferred_username", "email"}),
                              frozenset({"openid", "profile", "email"}))
    with caplog.at_level("WARNING", logger="mlplatform.login"):
        s = oidc_settings(**CLIENT, endpoints=keycloak_like, allowed_groups=["vision"],
                          groups_claim="realm_access.roles", username_claim="login")
    assert s["GenericOAuthenticator"]["scope"] == ["email", "openid", "profile"]  # no 'groups' scope asked for
    assert [r.getMessage().split(":")[0] for r in caplog.records] == [
        "groups_claim (GenericOAuthenticator.auth_state_groups_key)",
        "username_claim (GenericOAuthenticator.username_claim)"]
    caplog.clear()
    with caplog.at_level("WARNING", logger="mlplatform.login"):
        oidc_settings(**CLIENT, endpoints=keycloak_like, allowed_groups=["vision"], username_claim="email",
                      scope=["openid", "offline_access"])
    assert [r.getMessage() for r in caplog.records if r.getMessage().startswith("GenericOAuthenticator.scope")] == [
        "GenericOAuthenticator.scope: the provider's scopes_supported does not list 'offline_access' "
        "(email, openid, profile)"]


def test_claims_are_warnings_where_the_provider_lists_none(caplog):
    """A discovery document without claims_supported (or none read, as for Google's fixed endpoints)
    cannot confirm any claim: each claim setting gets a warning naming its key at start; where every
    claim is listed there is none."""
    unlisted = Endpoints("https://idp/auth", "https://idp/token", "https://idp/me")
    with caplog.at_level("WARNING", logger="mlplatform.login"):
        oidc_settings(**CLIENT, endpoints=ENDPOINTS, allowed_groups=["vision"])
    assert caplog.records == []
    with caplog.at_level("WARNING", logger="mlplatform.login"):
        oidc_settings(**CLIENT, endpoints=unlisted, allowed_groups=["vision"], groups_claim="grups")
    assert [r.getMessage() for r in caplog.records] == [
        "groups_claim (GenericOAuthenticator.auth_state_groups_key): 'grups' cannot be checked at hub start (the "
        "provider's discovery document lists no claims_supported); if logins get no groups or usernames, fix this "
        "setting",
        "username_claim (GenericOAuthenticator.username_claim): 'preferred_username' cannot be checked at hub start "
        "(the provider's discovery document lists no claims_supported); if logins get no groups or usernames, fix "
        "this setting"]
    caplog.clear()
    with caplog.at_level("WARNING", logger="mlplatform.login"):
        google_settings(**CLIENT, hosted_domains=["example.org"], allowed_groups=["vision"], groups_claim="groups")
    assert [r.getMessage().split(": ")[0] for r in caplog.records] == [
        "groups_claim (GoogleOAuthenticator.auth_state_groups_key)"]
    assert "discovery document was not read" in caplog.records[0].getMessage()


def test_a_nested_or_namespaced_groups_claim():
    s = oidc_settings(**CLIENT, endpoints=ENDPOINTS, allowed_groups=["a"], groups_claim="realm_access.roles")
    key = s["GenericOAuthenticator"]["auth_state_groups_key"]
    assert key({"oauth_user": {"realm_access": {"roles": ["a", "b"]}}}) == {"a", "b"}
    url_claim = ClaimGroups("oauth_user", parse_claim_path(["https://example.org/groups"], "k", []))
    assert url_claim({"oauth_user": {"https://example.org/groups": "team"}}) == {"team"}


@pytest.mark.parametrize("value, groups", [
    (["a", "b", "a"], {"a", "b"}),
    ("solo", {"solo"}),
    (None, set()),
    ({"a": 1}, set()),
    ([1, None, "", " padded", "ok", "x" * (MAX_GROUP_NAME + 1)], {"ok"}),
])
def test_group_names_keep_only_sane_names(value, groups):
    assert group_names(value) == groups


def test_group_names_are_bounded_in_number():
    assert len(group_names([f"g{i}" for i in range(5000)])) == 1000


@pytest.mark.parametrize("info, path, value", [
    ({"a": {"b": ["x"]}}, ("a", "b"), ["x"]),
    ({"a": "not a mapping"}, ("a", "b"), None),
    ({}, ("a",), None),
    (None, ("a",), None),
])
def test_resolve_never_raises(info, path, value):
    assert resolve(info, path) == value


def test_github_groups_are_orgs_and_org_teams_of_trusted_orgs_only():
    state = {"orgs": ["acme", "other"], "teams": [{"slug": "vision", "organization": {"login": "acme"}},
                                                  {"slug": "x", "organization": {"login": "other"}},
                                                  {"slug": "broken"}, "junk"]}
    assert GitHubGroups(trusted=frozenset({"acme"}))(state) == {"acme", "acme:vision"}
    assert GitHubGroups((("other:x", "vision"),), frozenset({"acme"}))(state) == {"acme", "acme:vision", "vision"}
    assert GitHubGroups()(state) == set()


def test_a_github_org_named_like_an_admin_or_team_group_grants_nothing():
    """Anyone may create an organisation called ``ml-admins``: it must not make them admin."""
    settings = github_settings(**CLIENT, allowed_organizations=["acme"], admin_groups=["ml-admins"],
                               group_map={"acme:ml-admins": "ml-admins", "acme:vision": "vision"})
    groups = settings["GitHubOAuthenticator"]["auth_state_groups_key"]
    stranger = {"orgs": ["ml-admins", "vision"], "teams": [{"slug": "ml-admins", "organization": {"login": "vision"}}]}
    assert groups(stranger) == set()
    member = {"orgs": ["acme"], "teams": [{"slug": "ml-admins", "organization": {"login": "acme"}}]}
    assert groups(member) == {"acme", "ml-admins"}
    # an org:team group names its organisation; a bare group name does not
    assert github_settings(**CLIENT, allowed_groups=["acme:vision", "research"])[
        "GitHubOAuthenticator"]["auth_state_groups_key"].trusted == {"acme"}


def test_github_settings_and_their_problems():
    s = github_settings(**CLIENT, allowed_organizations=["acme", "acme:vision"], github_url="https://ghe.example/")
    gh = s["GitHubOAuthenticator"]
    assert gh["allowed_organizations"] == {"acme", "acme:vision"} and gh["github_url"] == "https://ghe.example"
    assert gh["scope"] == ["read:user", "read:org"] and gh["populate_teams_in_auth_state"] is True
    with pytest.raises(ConfigError) as e:
        github_settings(**CLIENT, allowed_organizations=["acme:a:b"])
    assert [str(p) for p in e.value.problems] == [
        "GitHubOAuthenticator.allowed_organizations[0]: 'acme:a:b' is not 'org' or 'org:team'"]
    with pytest.raises(ConfigError) as e:
        github_settings(**CLIENT)
    assert str(e.value.problems[0]).startswith("GitHubOAuthenticator.allowed_groups: no one could log in")


def test_google_settings_groups_from_workspace_or_a_claim():
    s = google_settings(**CLIENT, hosted_domains=["Example.org"], allowed_groups=["vision"], admin_groups=["admins"],
                        workspace={"service_account_keys": {"example.org": "/etc/key.json"},
                                   "administrators": {"example.org": "admin"}})["GoogleOAuthenticator"]
    assert s["hosted_domain"] == ["example.org"] and s["username_claim"] == "email"
    assert s["allowed_google_groups"] == {"example.org": {"vision"}}
    assert s["admin_google_groups"] == {"example.org": {"admins"}}
    assert s["auth_state_groups_key"] == ClaimGroups("google_user", ("google_groups",))
    for extra in ({}, {"groups_claim": "groups", "workspace": {}}):
        with pytest.raises(ConfigError) as e:
            google_settings(**CLIENT, allowed_groups=["vision"], **extra)
        assert str(e.value.problems[0]).startswith("groups_claim (GoogleOAuthenticator.auth_state_groups_key): "
                                                   "give exactly one source of groups")
    with pytest.raises(ConfigError) as e:
        google_settings(**CLIENT, hosted_domains=["example.org", "example.com"], allowed_groups=["vision"],
                        workspace={"service_account_keys": {"example.org": "k"}, "administrators": {"example.org": "a"}})
    assert str(e.value.problems[0]).startswith("workspace: has no service-account key for the hosted domains "
                                               "['example.com']")


def test_apply_reports_hub_wide_preconditions():
    c = Config()
    c.JupyterHub.load_groups = {"vision": {"users": ["alice"]}}
    with pytest.raises(ConfigError) as e:
        apply(c, {}, env={})
    assert [p.path for p in e.value.problems] == ["JupyterHub.load_groups", "JUPYTERHUB_CRYPT_KEY"]
    c = Config()
    c.CryptKeeper.keys = ["00" * 32]
    apply(c, {"GenericOAuthenticator": {"client_id": "hub"}}, env={})
    assert c.GenericOAuthenticator.client_id == "hub"


def test_the_configured_authenticator_loads_with_groups_managed_and_refreshed():
    from hub_ext.login.authenticators import PlatformGitHubAuthenticator

    c = Config()
    configure_github(c, **CLIENT, allowed_organizations=["acme"], env=ENV)
    assert c.JupyterHub.authenticator_class == "hub_ext.login.authenticators.PlatformGitHubAuthenticator"
    auth = PlatformGitHubAuthenticator(config=c)
    assert (auth.manage_groups, auth.enable_auth_state, auth.refresh_pre_spawn, auth.allow_all) == \
        (True, True, True, False)
    assert auth.allowed_organizations == {"acme"}
    assert auth.auth_state_groups_key == GitHubGroups(trusted=frozenset({"acme"}))


@pytest.mark.parametrize("cls, traits, refused", [
    (PlatformOIDCAuthenticator, {}, "GenericOAuthenticator.allowed_groups"),
    (PlatformOIDCAuthenticator, {"allowed_groups": set(), "allowed_users": set()},
     "GenericOAuthenticator.allowed_groups"),
    (PlatformGoogleAuthenticator, {}, "GoogleOAuthenticator.allowed_groups"),
    (PlatformGitHubAuthenticator, {}, "GitHubOAuthenticator.allowed_groups"),
    (PlatformOIDCAuthenticator, {"allowed_groups": {"vision"}}, None),
    (PlatformOIDCAuthenticator, {"allowed_users": {"alice"}}, None),
    (PlatformOIDCAuthenticator, {"admin_groups": {"ml-admins"}}, None),
    (PlatformOIDCAuthenticator, {"admin_users": {"carol"}}, None),
    (PlatformGoogleAuthenticator, {"allowed_google_groups": {"example.org": {"vision"}}}, None),
    (PlatformGitHubAuthenticator, {"allowed_organizations": {"acme"}}, None),
])
def test_no_one_allowed_stops_the_hub_however_the_traits_were_set(cls, traits, refused):
    """JupyterHub calls check_allow_config once at start: traits set directly (not through
    configure_*) that let no one in stop the hub with the key to fix."""
    auth = cls(manage_groups=True, **traits)  # as configure_* sets it (group settings need it)
    if refused:
        with pytest.raises(ConfigError) as e:
            auth.check_allow_config()
        assert [str(p) for p in e.value.problems] == [f"{refused}: no one could log in: name the groups whose "
                                                      "members may log in (allow_all stays False on purpose)"]
    else:
        auth.check_allow_config()


def test_discover_refuses_a_non_http_issuer():
    with pytest.raises(ConfigError) as e:
        discover("ftp://idp.example")
    assert e.value.problems[0].path == "issuer"


@pytest.mark.parametrize("verified, refused", [(True, False), (False, True), (None, True), ("true", True)])
def test_email_as_username_needs_a_verified_address(verified, refused):
    auth = PlatformOIDCAuthenticator(username_claim="email")
    info = {"email": "eve@example.org", **({} if verified is None else {"email_verified": verified})}
    if refused:
        with pytest.raises(web.HTTPError) as e:
            auth.user_info_to_username(info)
        assert e.value.status_code == 403 and "not verified" in e.value.log_message
    else:
        assert auth.user_info_to_username(info) == "eve@example.org"
    # GenericOAuthenticator 17 itself takes any email (the gap the subclass closes)
    assert GenericOAuthenticator(username_claim="email").user_info_to_username(info) == "eve@example.org"


def test_google_verified_email_counts_too():
    auth = PlatformGoogleAuthenticator()
    assert auth.user_info_to_username({"email": "g@example.org", "verified_email": True}) == "g@example.org"


async def test_google_workspace_groups_refuse_another_domain_before_looking_up_its_groups():
    auth = PlatformGoogleAuthenticator(hosted_domain=["example.org"], google_service_account_keys={
        "example.org": "/nonexistent/key.json"}, gsuite_administrator={"example.org": "admin"},
                                       allowed_google_groups={"example.org": {"vision"}})
    for info in ({"email": "eve@gmail.com", "domain": "gmail.com"},  # no hd: a consumer account
                 {"email": "al@alias.example.org", "domain": "alias.example.org", "hd": "example.org"}):
        with pytest.raises(web.HTTPError) as e:
            await auth.update_auth_model({"name": info["email"], "admin": None, "auth_state": {"google_user": info}})
        assert e.value.status_code == 403 and "hosted domain" in e.value.log_message


def test_a_long_or_missing_username_is_refused_without_echoing_it():
    auth = PlatformOIDCAuthenticator(username_claim="preferred_username", max_username_length=10)
    with pytest.raises(web.HTTPError) as e:
        auth.user_info_to_username({"preferred_username": "y" * 5000})
    assert e.value.status_code == 403 and "5000 characters" in e.value.log_message and "yyyy" not in \
        e.value.log_message
    with pytest.raises(web.HTTPError) as e:
        auth.user_info_to_username({"secret_stuff": "z" * 100})
    assert "zzz" not in e.value.log_message and "'preferred_username'" in e.value.log_message
    assert auth.user_info_to_username({"preferred_username": "ok"}) == "ok"


def test_group_map_renames_provider_groups_everywhere():
    s = oidc_settings(**CLIENT, endpoints=ENDPOINTS, allowed_groups=["vision"],
                      group_map={"cn=vision,ou=ml": "vision"})
    key = s["GenericOAuthenticator"]["auth_state_groups_key"]
    assert key({"oauth_user": {"groups": ["cn=vision,ou=ml", "other"]}}) == {"vision", "other"}
    gh = github_settings(**CLIENT, allowed_organizations=["acme"], group_map={"acme:vision": "vision"})
    assert gh["GitHubOAuthenticator"]["auth_state_groups_key"]({"orgs": ["acme"], "teams": [
        {"slug": "vision", "organization": {"login": "acme"}}]}) == {"acme", "vision"}
    g = google_settings(**CLIENT, allowed_groups=["vision", "research"], group_map={"ml-vision": "vision"},
                        workspace={"service_account_keys": {"example.org": "k"},
                                   "administrators": {"example.org": "a"}})
    # GoogleOAuthenticator checks Workspace names itself: the map is undone for its settings (a Workspace
    # group literally named "vision" is not renamed, so it becomes "vision" too)
    assert g["GoogleOAuthenticator"]["allowed_google_groups"] == {"example.org": {"ml-vision", "vision",
                                                                                  "research"}}
    with pytest.raises(ConfigError) as e:
        oidc_settings(**CLIENT, endpoints=ENDPOINTS, allowed_groups=["vision"], group_map={"a": 1})
    assert e.value.problems[0].path == "group_map"


def test_client_credentials_come_from_the_config_when_not_given():
    c = Config()
    c.GitHubOAuthenticator.client_id = "from-helm"
    c.GitHubOAuthenticator.client_secret = "helm-secret"
    c.GitHubOAuthenticator.oauth_callback_url = "https://hub.example.org/hub/oauth_callback"
    configure_github(c, allowed_organizations=["acme"], env=ENV)
    assert (c.GitHubOAuthenticator.client_id, c.GitHubOAuthenticator.client_secret) == ("from-helm", "helm-secret")
