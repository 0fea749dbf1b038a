"""The hub's base handlers for the platform's pages and API, and the one translation of its errors.

`PlatformAPIHandler` (JSON, JupyterHub's `APIHandler`) and `PlatformPageHandler` (HTML,
JupyterHub's `BaseHandler`) find the hub's `PlatformService` in the tornado settings
(`platform`; 404 when the hub runs without it or its spawner is no platform spawner) and turn
any platform error a method raises (`hub_ext.core.errors.PlatformError`: a field at fault, an
upstream failure, a bad config) into its answer (`http_answer`: status and a message safe to
show; 500 for a config error, whose detail goes to the log only). `scoped` is JupyterHub's
`needs_scope` for the platform's custom scopes, which exist only once the hub has loaded them.
Spawners raise `http_error(e)` where JupyterHub expects a `web.HTTPError` (the spawn form, a
refused start). What the credentials and datasets faces share: `json_body` (400 naming ``body``),
`project_of` (a project of the user's, else 403 naming ``project``), `acting_admin` and
`refuse_unmanaged` (501 where the runtime keeps such things as files: the local one).
"""

from __future__ import annotations

import functools
import json

from jupyterhub.apihandlers.base import APIHandler
from jupyterhub.handlers.base import BaseHandler
from jupyterhub.scopes import needs_scope
from tornado import web

from hub_ext.core.errors import ConfigError, PlatformError, UserInputError, http_answer
from hub_ext.spawners.experience import http_error
from hub_ext.spawners.service import KEY, PlatformService


def project_of(spawner, project: str):
    """The user's project named `project` (one `spawner.user_projects()` lists), else 403."""
    for p in spawner.user_projects():
        if p.name == project:
            return p
    raise UserInputError("project", f"you may not use the project {project!r}", 403)


def scoped(*scopes: str):
    """JupyterHub's `needs_scope(*scopes)` (any of them): with a ``user_name`` argument, for that
    user (403 without credentials or the scope, 404 with it for other users only). Applied per
    call: a custom scope is known to JupyterHub only once the hub has loaded its config."""
    def decorator(method):
        @functools.wraps(method)
        def checked(self, *args, **kwargs):
            return needs_scope(*scopes)(method)(self, *args, **kwargs)
        return checked
    return decorator


class _Answers:
    def _handle_request_exception(self, e: BaseException) -> None:
        if not isinstance(e, PlatformError):
            return super()._handle_request_exception(e)
        if isinstance(e, ConfigError):
            self.log.error("platform configuration is invalid for %s: %s", self.request.path, e)
        try:
            raise http_error(e) from None
        except web.HTTPError as answer:
            return super()._handle_request_exception(answer)

    @property
    def platform(self) -> PlatformService:
        service = self.settings.get(KEY)
        if service is None:
            raise web.HTTPError(404, "this hub's spawner is not a platform spawner")
        return service

    def platform_user(self, user):
        """`user`, checked to have a platform spawner (404 otherwise)."""
        if self.platform.spawner(user) is None:
            raise web.HTTPError(404, "this hub's spawner is not a platform spawner")
        return user

    def json_body(self) -> object:
        try:
            return json.loads(self.request.body or b"{}")
        except (ValueError, RecursionError):
            raise web.HTTPError(400, "body: is not valid JSON") from None

    def acting_admin(self, user) -> bool:
        """Whether the call acts as an admin: `user` is one, or an admin calls for them."""
        return bool(user.admin) or bool(getattr(self.current_user, "admin", False))

    def refuse_unmanaged(self, user, kept_as: str) -> None:
        """501 where the user's runtime keeps these as files (`PlatformService.credentials_where`):
        `kept_as` says how, after the root (e.g. ``"credentials as files under {}/<project>/credentials"``)."""
        where = self.platform.credentials_where(user)
        if where is not None:
            raise web.HTTPError(501, "this runtime keeps " + kept_as.format(where))

    def find_platform_user(self, user_name: str):
        """The hub user `user_name` (after `scoped`: the caller may act for them), 404 if none."""
        user = self.find_user(user_name)
        if user is None:
            raise web.HTTPError(404, "No access to resources or resources not found")
        return self.platform_user(user)


class PlatformAPIHandler(_Answers, APIHandler):
    """Base of the platform's JSON API on the hub."""


class PlatformPageHandler(_Answers, BaseHandler):
    """Base of the platform's pages on the hub."""
