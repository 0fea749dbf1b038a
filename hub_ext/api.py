"""The platform API on the hub: ``/hub/api/mlplatform/users/{name}/{projects,catalog,capacity,
credentials,datasets}`` (credentials: metadata only), and on Kubernetes
``POST /hub/api/mlplatform/reconcile`` (`ReconcileHandler`: team membership, `hub_ext.reconcile`).

JSON, authenticated with JupyterHub tokens or the hub cookie, and scoped: the custom scope
``custom:mlplatform:read`` (granted by `hub_ext.setup.configure` to every user for themselves,
``custom:mlplatform:read!user``) is checked with the URL's user as filter, so a user reads only
their own view; a caller holding the scope for nobody gets 403, for someone else 404 (as
JupyterHub's own API answers). Faces only: every answer comes from the user's spawner's
`Runtime` (projects, entitlements, catalogue) and its capacity view. With a callable
``profile_list`` (`hub_ext.profile_source`), ``projects`` and ``catalog`` call it for that user
first, as the spawn form does, so they list that user's profiles; when it raises or gives a list
with problems they answer 500 naming the path at fault (`profile_source.refusal`).
"""

from __future__ import annotations

from jupyterhub.apihandlers.base import APIHandler
from jupyterhub.scopes import has_scope
from tornado import web

from .errors import ConfigError, PlatformError, http_answer
from .mounts import metadata
from .profile_source import refusal
from .publish import accelerator_json, profile_json

SCOPE = "custom:mlplatform:read"
CUSTOM_SCOPES = {SCOPE: {"description": "Read your ML platform projects, entitlements, catalogue and free "
                                        "accelerator capacity."}}


def scoped_user(handler: APIHandler, scope: str, user_name: str):
    """The hub user `user_name`, if the caller holds `scope` for them: 403 without credentials or
    without the scope for anyone, 404 with it for others only (as JupyterHub's own API answers)."""
    if not handler.current_user:
        raise web.HTTPError(403, "Missing or invalid credentials.")
    if not has_scope(f"{scope}!user={user_name}", handler.parsed_scopes, db=handler.db):
        if scope in handler.parsed_scopes:
            raise web.HTTPError(404, "No access to resources or resources not found")
        raise web.HTTPError(403, f"Action is not authorized with current scopes; requires [{scope}]")
    user = handler.find_user(user_name)
    if user is None:
        raise web.HTTPError(404, "No access to resources or resources not found")
    return user


class _PlatformHandler(APIHandler):
    def _spawner_for(self, user_name: str):
        user = scoped_user(self, SCOPE, user_name)
        spawner = user.spawner
        if not hasattr(spawner, "runtime"):
            raise web.HTTPError(404, "this hub's spawner is not a platform spawner")
        return spawner

    async def _with_profiles(self, user_name: str):
        """`_spawner_for`, its profiles loaded for this user (a callable profile_list is called)."""
        spawner = self._spawner_for(user_name)
        try:
            await spawner.load_profiles()
        except ConfigError as e:
            self.log.error("the profile list for %s is invalid: %s", spawner.user.name, e)
            raise refusal(e, spawner.user.name) from None
        return spawner


class ReconcileHandler(APIHandler):
    """``POST /hub/api/mlplatform/reconcile``: one round of `hub_ext.reconcile` (team projects'
    member RoleBindings and leavers' servers), in the hub process; answers what it removed and
    stopped. For the ``mlplatform-reconciler`` service (``custom:mlplatform:reconcile``) and admins
    (``admin:users``: they may remove users anyway)."""

    async def post(self):
        from .reconcile import SCOPE as RECONCILE, reconcile_hub

        if not self.current_user:
            raise web.HTTPError(403, "Missing or invalid credentials.")
        if not (has_scope(RECONCILE, self.parsed_scopes) or has_scope("admin:users", self.parsed_scopes)):
            raise web.HTTPError(403, f"Action is not authorized with current scopes; requires [{RECONCILE}] "
                                     "or [admin:users]")
        self.write((await reconcile_hub(self)).json())


class ProjectsHandler(_PlatformHandler):
    async def get(self, user_name):
        spawner = await self._with_profiles(user_name)
        offered = spawner.runtime.profiles_by_slug  # a grant may name a profile a callable did not give
        out = []
        for p in spawner.user_projects():
            in_use = await spawner.usage(p.name)
            out.append({"name": p.name, "display_name": p.display_name, "personal": p.personal,
                        "profiles": sorted(p.profiles & offered.keys()), "limits": p.limits, "in_use": in_use})
        self.write({"projects": out})


class CatalogHandler(_PlatformHandler):
    async def get(self, user_name):
        spawner = await self._with_profiles(user_name)
        rt = spawner.runtime
        usable = set().union(*(p.profiles for p in spawner.user_projects()))
        self.write({"accelerators": [accelerator_json(a) for a in rt.accelerators.values()],
                    "profiles": [profile_json(p) for p in rt.profiles if p.slug in usable]})


class CapacityHandler(_PlatformHandler):
    async def get(self, user_name):
        spawner = self._spawner_for(user_name)
        self.write({"accelerators": {name: {"free": free, "total": total}
                                     for name, (free, total) in (await spawner.capacity()).items()}})


class _FilesHandler(_PlatformHandler):
    kind = ""

    async def get(self, user_name):
        spawner = self._spawner_for(user_name)
        out = []
        try:
            for p in spawner.user_projects():
                available = await spawner.project_files(p.name)
                out += metadata(getattr(available, self.kind), p.name)
        except PlatformError as e:
            raise web.HTTPError(*http_answer(e)) from None
        self.write({self.kind: out})


class CredentialsHandler(_FilesHandler):
    """Names and types only: a credential's content is never read for, or sent in, an answer."""
    kind = "credentials"


class DatasetsHandler(_FilesHandler):
    kind = "datasets"


handlers = [
    (r"/api/mlplatform/users/([^/]+)/credentials", CredentialsHandler),
    (r"/api/mlplatform/users/([^/]+)/datasets", DatasetsHandler),
    (r"/api/mlplatform/users/([^/]+)/projects", ProjectsHandler),
    (r"/api/mlplatform/users/([^/]+)/catalog", CatalogHandler),
    (r"/api/mlplatform/users/([^/]+)/capacity", CapacityHandler),
]
# the Kubernetes runtime's only (`hub_ext.setup.configure` adds them there)
kubernetes_handlers = [(r"/api/mlplatform/reconcile", ReconcileHandler)]
