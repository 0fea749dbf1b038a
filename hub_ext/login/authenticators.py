"""The platform's OAuthenticator subclasses: OAuthenticator's own checks, plus the few it lacks.

- :class:`PlatformOIDCAuthenticator` (GenericOAuthenticator), :class:`PlatformGoogleAuthenticator`
  (GoogleOAuthenticator) and :class:`PlatformGitHubAuthenticator` (GitHubOAuthenticator) are
  configured through their parents' config sections (``c.GenericOAuthenticator.…``), so the
  upstream documentation applies unchanged.
- Whatever the provider sends, a username longer than ``max_username_length`` is refused with
  403 *before* JupyterHub or OAuthenticator logs it, and a missing username claim is refused
  without logging the user info (OAuthenticator's own message logs all of it).
- Where the username claim is ``email``, a login is refused unless the provider says the address
  is verified (``email_verified`` in OpenID Connect, ``verified_email`` in Google's userinfo v1):
  GenericOAuthenticator does not check it at all (17.x), GoogleOAuthenticator only for Google.
  The same checks run when auth state is refreshed, so they hold for every spawn too.
- At hub start (JupyterHub's ``check_allow_config`` hook, before any login) the hub stops with a
  :class:`~hub_ext.core.errors.ConfigError` naming ``<Section>.allowed_groups`` when no one could log
  in, however the traits were set: ``configure_*`` checks its own arguments, this also catches a
  later ``c.GenericOAuthenticator.allowed_groups = set()``.
- Google's ``hd`` (hosted domain) check and allowed/admin groups are OAuthenticator's own.
- :class:`PlatformGitHubAuthenticator` also reads the user's organisations (``GET /user/orgs``)
  into ``auth_state["orgs"]`` when groups are managed; :class:`~.claims.GitHubGroups` turns them and
  the teams (``populate_teams_in_auth_state``) into JupyterHub groups ``org`` and ``org:team``.

The settings these classes are configured with are :mod:`.settings`' (pure: it imports none of this).
"""

from __future__ import annotations

from typing import Mapping

from oauthenticator.generic import GenericOAuthenticator
from oauthenticator.github import GitHubOAuthenticator
from oauthenticator.google import GoogleOAuthenticator
from tornado import web
from traitlets import Bool, HasTraits, Integer

from hub_ext.core.errors import ConfigError, Problem
from hub_ext.login.rules.settings import NO_ONE_ALLOWED

__all__ = ["IdentityChecks", "PlatformGitHubAuthenticator", "PlatformGoogleAuthenticator", "PlatformOIDCAuthenticator"]


class IdentityChecks(HasTraits):
    """Mixin placed before an OAuthenticator class: bounded, verified usernames."""

    max_username_length = Integer(
        128,
        help="""Refuse (403) a username from the identity provider longer than this, before it is logged.

        c.Authenticator.max_username_length = 128
        """,
    ).tag(config=True)

    require_verified_email = Bool(
        True,
        help="""Where the username claim is 'email', refuse logins whose address the provider has not
        verified (`email_verified` / Google's `verified_email` must be true).

        c.Authenticator.require_verified_email = True
        """,
    ).tag(config=True)

    #: the upstream config section, as named in start-time errors (``c.<section>.allowed_groups``)
    config_section = "Authenticator"

    def check_allow_config(self):
        """Stop the hub at start when no one could log in: nothing allowed (JupyterHub's
        ``any_allow_config``: ``allow_all``, ``allowed_users``, ``allowed_groups``, GitHub's
        ``allowed_organizations``, …) and no admin users or groups."""
        if not (self.any_allow_config or self.admin_users or self.admin_groups):
            raise ConfigError([Problem(f"{self.config_section}.allowed_groups", NO_ONE_ALLOWED)])
        super().check_allow_config()

    def user_info_to_username(self, user_info):
        claim = self.username_claim
        if isinstance(claim, str):
            raw = user_info.get(claim) if isinstance(user_info, Mapping) else None
            if not isinstance(raw, str) or not raw:
                self.log.warning("login refused: no %r claim in the user info", claim)
                raise web.HTTPError(403, f"The identity provider sent no {claim!r} to use as your username.")
            if len(raw) > self.max_username_length:
                self.log.warning("login refused: a %d-character username (at most %d)", len(raw),
                                 self.max_username_length)
                raise web.HTTPError(403, f"The username from the identity provider is {len(raw)} characters "
                                         f"long; at most {self.max_username_length} are allowed.")
            if claim == "email" and self.require_verified_email:
                verified = user_info.get("email_verified", user_info.get("verified_email"))
                if verified is not True:
                    self.log.warning("login refused: unverified email address used as the username")
                    raise web.HTTPError(403, "Your identity provider has not verified your email address, so it "
                                             "cannot be your username here. Verify it there and sign in again.")
        return super().user_info_to_username(user_info)


class PlatformOIDCAuthenticator(IdentityChecks, GenericOAuthenticator):
    """GenericOAuthenticator for any OpenID Connect provider, with the platform's identity checks."""

    config_section = "GenericOAuthenticator"


GOOGLE_DOMAIN_REFUSED = ("Your account does not belong to a Google organisation (hosted domain) allowed on this "
                         "hub, or it has been blocked.")


class PlatformGoogleAuthenticator(IdentityChecks, GoogleOAuthenticator):
    """GoogleOAuthenticator (hosted domain checked on the ``hd`` claim), with the identity checks;
    a user refused for their hosted domain is told why. With Workspace groups (service-account
    keys per domain), an account of another domain is refused *before* its groups are looked up:
    upstream would look up the key of the email's domain first and fail with a KeyError (a 500)."""

    config_section = "GoogleOAuthenticator"

    async def update_auth_model(self, auth_model):
        info = auth_model["auth_state"][self.user_auth_state_key]
        if self.google_service_account_keys and (
                (self.hosted_domain and info.get("hd", "") not in self.hosted_domain)
                or info.get("domain", "") not in self.google_service_account_keys):
            self.log.warning("login refused: a Google account outside the configured Workspace domains")
            raise web.HTTPError(403, GOOGLE_DOMAIN_REFUSED)
        return await super().update_auth_model(auth_model)

    def check_blocked_users(self, username, auth_model):
        if not super().check_blocked_users(username, auth_model):
            raise web.HTTPError(403, GOOGLE_DOMAIN_REFUSED)
        return True


class PlatformGitHubAuthenticator(IdentityChecks, GitHubOAuthenticator):
    """GitHubOAuthenticator that also records the user's organisations for group management."""

    config_section = "GitHubOAuthenticator"

    async def update_auth_model(self, auth_model):
        auth_model = await super().update_auth_model(auth_model)
        if self.manage_groups:
            token = auth_model["auth_state"]["token_response"]
            orgs = await self._paginated_fetch(f"{self.github_api}/user/orgs?per_page=100", token["access_token"],
                                               token["token_type"])
            auth_model["auth_state"]["orgs"] = [o["login"] for o in orgs if isinstance(o, Mapping) and
                                                isinstance(o.get("login"), str)]
        return auth_model
