"""helm-values/login-*.yaml: valid chart values over values.yaml, and their extraConfig snippets set
up the platform's authenticator when run the way z2jh runs them (hub.config first, then the
snippets in key order), with the client secret taken from hub.config."""

from __future__ import annotations

import pathlib

import pytest
import yaml
from traitlets.config import Config

from hub_ext.login.authenticators import PlatformGitHubAuthenticator, PlatformGoogleAuthenticator
from hub_ext.login.rules.claims import ClaimGroups, GitHubGroups
from tests.unit.test_helm_values import chart_values, merged, validator

pytestmark = pytest.mark.unit

ROOT = pathlib.Path(__file__).resolve().parents[2]
BASE = yaml.safe_load((ROOT / "helm-values" / "values.yaml").read_text())
OVERLAYS = ["login-oidc.yaml", "login-google.yaml", "login-github.yaml"]


def values(name):
    return merged(BASE, yaml.safe_load((ROOT / "helm-values" / name).read_text()))


@pytest.mark.parametrize("name", OVERLAYS)
def test_overlay_validates_against_the_charts_schema(name):
    assert sorted(validator().iter_errors(chart_values(values(name))), key=str) == []


def z2jh_config(name) -> Config:
    """What z2jh's jupyterhub_config.py does with the values: hub.config into c, the chart's generated
    crypt key, then every extraConfig snippet in key order."""
    v = values(name)
    c = Config()
    for section, traits in v["hub"]["config"].items():
        c[section].update(traits)
    c.CryptKeeper.keys = ["00" * 32]
    for key in sorted(v["hub"]["extraConfig"]):
        exec(compile(v["hub"]["extraConfig"][key], f"extraConfig.{key}", "exec"), {"c": c})
    return c


def test_github_overlay_sets_up_the_platform_authenticator():
    c = z2jh_config("login-github.yaml")
    auth = PlatformGitHubAuthenticator(config=c)
    assert c.JupyterHub.authenticator_class == "hub_ext.login.authenticators.PlatformGitHubAuthenticator"
    assert auth.client_secret == "<OAuth app client secret>" and auth.allow_all is False and auth.manage_groups
    assert auth.allowed_organizations == {"acme"} and auth.admin_groups == {"ml-admins"}
    groups = auth.auth_state_groups_key({"orgs": ["acme"], "teams": [{"slug": "vision",
                                                                      "organization": {"login": "acme"}}]})
    assert groups == {"acme", "vision"} and set(BASE["hub"]["config"]["PlatformConfig"]["groups"]) >= {"vision"}
    assert isinstance(auth.auth_state_groups_key, GitHubGroups)


def test_google_overlay_checks_the_hosted_domain_and_reads_workspace_groups():
    c = z2jh_config("login-google.yaml")
    auth = PlatformGoogleAuthenticator(config=c)
    assert auth.hosted_domain == ["example.com"] and auth.allow_all is False
    assert auth.allowed_google_groups == {"example.com": {"vision", "research"}}
    assert auth.auth_state_groups_key == ClaimGroups("google_user", ("google_groups",))


def test_oidc_overlay_snippet_compiles_and_calls_configure_oidc():
    snippet = values("login-oidc.yaml")["hub"]["extraConfig"]["mlplatform-login"]
    compile(snippet, "extraConfig.mlplatform-login", "exec")
    assert "configure_oidc(" in snippet and "client_secret" not in snippet
