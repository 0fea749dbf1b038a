"""The platform API on the hub: ``/hub/api/mlplatform/users/{name}/{projects,catalog,capacity,
credentials,datasets}`` (credentials: metadata only), and on Kubernetes
``POST /hub/api/mlplatform/reconcile`` (`ReconcileHandler`: team membership, `hub_ext.web.reconcile`).

JSON, authenticated with JupyterHub tokens or the hub cookie, and scoped: the custom scope
``custom:mlplatform:read`` (granted by `hub_ext.setup.configure` to every user for themselves,
``custom:mlplatform:read!user``) is checked with the URL's user as filter, so a user reads only
their own view; a caller holding the scope for nobody gets 403, for someone else 404 (as
JupyterHub's own API answers: JupyterHub's `needs_scope`, `hub_ext.web.handlers.scoped`). Faces
only: every answer comes from the hub's `PlatformService` (`hub_ext.spawners.service`: the user's
projects, entitlements, catalogue and the capacity view); its errors are answered by the base
handler (`hub_ext.web.handlers`). With a callable
``profile_list`` (`hub_ext.spawners.profile_source`), ``projects`` and ``catalog`` call it for that user
first, as the spawn form does, so they list that user's profiles; when it raises or gives a list
with problems they answer 500 naming the path at fault (`profile_source.refusal`).
"""

from __future__ import annotations

from hub_ext.web.reconcile import SCOPE as RECONCILE_SCOPE
from hub_ext.web.reconcile import reconcile_hub
from hub_ext.web.handlers import PlatformAPIHandler, scoped

SCOPE = "custom:mlplatform:read"
CUSTOM_SCOPES = {SCOPE: {"description": "Read your ML platform projects, entitlements, catalogue and free "
                                        "accelerator capacity."}}


class ReconcileHandler(PlatformAPIHandler):
    """``POST /hub/api/mlplatform/reconcile``: one round of `hub_ext.web.reconcile` (team projects'
    member RoleBindings and leavers' servers), in the hub process; answers what it removed and
    stopped. For the ``mlplatform-reconciler`` service (``custom:mlplatform:reconcile``) and admins
    (``admin:users``: they may remove users anyway)."""

    @scoped(RECONCILE_SCOPE, "admin:users")
    async def post(self):
        self.write((await reconcile_hub(self)).json())


class ProjectsHandler(PlatformAPIHandler):
    @scoped(SCOPE)
    async def get(self, user_name):
        self.write({"projects": await self.platform.projects(self.find_platform_user(user_name))})


class CatalogHandler(PlatformAPIHandler):
    @scoped(SCOPE)
    async def get(self, user_name):
        self.write(await self.platform.catalog(self.find_platform_user(user_name)))


class CapacityHandler(PlatformAPIHandler):
    @scoped(SCOPE)
    async def get(self, user_name):
        self.write({"accelerators": await self.platform.capacity(self.find_platform_user(user_name))})


class _FilesHandler(PlatformAPIHandler):
    kind = ""

    @scoped(SCOPE)
    async def get(self, user_name):
        self.write({self.kind: await self.platform.files(self.find_platform_user(user_name), self.kind)})


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
