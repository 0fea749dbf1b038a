"""Logging in: OAuthenticator set up for the platform in a few lines of hub config.

At the end of ``jupyterhub_config.py`` (or in z2jh's ``hub.extraConfig``), after the platform::

    from hub_ext.login import configure_oidc
    configure_oidc(c, issuer="https://login.example.org", client_id="jupyterhub",
                   client_secret="...", allowed_groups=["vision", "research"], admin_groups=["ml-admins"])

(or :func:`configure_google`, :func:`configure_github`). The JupyterHub groups the user gets at
each login are the keys of the platform's entitlements (``PlatformConfig.groups``), so the
provider's groups decide projects and GPU profiles.

Guarantees (see :mod:`.settings` for the settings themselves):

- Misconfiguration stops the hub at start with a :class:`~hub_ext.core.errors.ConfigError` naming
  each config key to fix: no one allowed to log in, a malformed groups claim path, no auth state
  key (``JUPYTERHUB_CRYPT_KEY`` / ``CryptKeeper.keys``), ``JupyterHub.load_groups`` set (groups
  come from the provider).
- A groups or username claim, or a scope, that the provider's discovery document does not list
  (or any claim, where it lists none) is a *warning* in the hub log at start, naming the key:
  providers list standard claims only, so an unlisted name is a hint, not proof; the hub starts.
- Group membership is refreshed at every login and every auth refresh, before every spawn.
- Client secrets are written only into the config object; never logged, never put in any
  environment variable (single-user servers cannot see them).
"""

from __future__ import annotations

import json
import os
import urllib.request
from typing import Any, Mapping

from hub_ext.core.errors import ConfigError, Problem
from hub_ext.core.logs import use_hub_format
from hub_ext.login.rules.settings import Endpoints, github_settings, google_settings, oidc_settings

__all__ = ["configure_oidc", "configure_google", "configure_github", "discover", "apply"]


def discover(issuer: str, timeout: float = 10) -> Endpoints:
    """Read ``{issuer}/.well-known/openid-configuration`` (at hub start; ConfigError ``issuer`` if it fails)."""
    url = issuer.rstrip("/") + "/.well-known/openid-configuration"
    if not issuer.startswith(("https://", "http://")):
        raise ConfigError([Problem("issuer", f"must be the provider's http(s) URL, not {issuer!r}")])
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:  # noqa: S310 (http(s) only, checked above)
            doc = json.loads(r.read(1_000_000))
        if doc.get("issuer", "").rstrip("/") != issuer.rstrip("/"):
            raise ValueError(f"the document names another issuer, {doc.get('issuer')!r}")
        return Endpoints.from_discovery(doc)
    except (OSError, ValueError, KeyError, AttributeError) as e:
        raise ConfigError([Problem("issuer", f"could not read the provider's discovery document {url}: {e}")]) \
            from None


def apply(c, settings: Mapping[str, Mapping[str, Any]], env: Mapping[str, str] | None = None) -> None:
    """Check the hub-wide preconditions, then put `settings` into the config `c`."""
    env = os.environ if env is None else env
    problems = []
    if "JupyterHub" in c and c.JupyterHub.get("load_groups"):
        problems.append(Problem("JupyterHub.load_groups", "groups come from the identity provider "
                                                          "(manage_groups): remove load_groups"))
    if not env.get("JUPYTERHUB_CRYPT_KEY") and not ("CryptKeeper" in c and c.CryptKeeper.get("keys")):
        problems.append(Problem("JUPYTERHUB_CRYPT_KEY", "auth state (the tokens that refresh group membership) "
                                                        "must be encrypted: set JUPYTERHUB_CRYPT_KEY (openssl rand "
                                                        "-hex 32) or c.CryptKeeper.keys"))
    if problems:
        raise ConfigError(problems)
    for section, values in settings.items():
        for key, value in values.items():
            c[section][key] = value


_FROM_CONFIG = {"client_id": "client_id", "client_secret": "client_secret", "callback_url": "oauth_callback_url"}


def _from_config(c, section: str, kwargs: dict) -> dict:
    """`client_id`, `client_secret` and `callback_url` default to what `c` already holds for `section`
    (z2jh: ``hub.config.<section>.client_secret`` lives in the chart's Secret, not in extraConfig)."""
    out = dict(kwargs)
    for arg, trait in _FROM_CONFIG.items():
        if arg not in out and section in c and trait in c[section]:
            out[arg] = c[section][trait]
    return out


def configure_oidc(c, *, issuer: str, endpoints: Endpoints | None = None, env: Mapping[str, str] | None = None,
                   **kwargs) -> None:
    """Generic OpenID Connect login (GenericOAuthenticator); endpoints from the issuer's discovery document.
    Keyword arguments: those of :func:`.settings.oidc_settings`."""
    use_hub_format()
    kwargs = _from_config(c, "GenericOAuthenticator", kwargs)
    apply(c, oidc_settings(endpoints=endpoints or discover(issuer), **kwargs), env)


def configure_google(c, *, env: Mapping[str, str] | None = None, **kwargs) -> None:
    """Google login (GoogleOAuthenticator): ``hosted_domains`` checked on the ``hd`` claim.
    Keyword arguments: those of :func:`.settings.google_settings`."""
    use_hub_format()
    apply(c, google_settings(**_from_config(c, "GoogleOAuthenticator", kwargs)), env)


def configure_github(c, *, env: Mapping[str, str] | None = None, **kwargs) -> None:
    """GitHub login (GitHubOAuthenticator): groups ``org`` and ``org:team``.
    Keyword arguments: those of :func:`.settings.github_settings`."""
    use_hub_format()
    apply(c, github_settings(**_from_config(c, "GitHubOAuthenticator", kwargs)), env)
