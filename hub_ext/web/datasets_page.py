"""Managing datasets through the hub: a page, ``/hub/mlplatform/datasets``, and REST,
``GET``/``POST /hub/api/mlplatform/users/{name}/projects/{project}/datasets`` and
``DELETE …/datasets/{dataset}``.

Users add a dataset (name, source, credential, size, description; checked by
`hub_ext.manifests.datasets.check_request`, every mistake told with its field, nothing made) in a project
they may use, and see each dataset of their projects with its state and the loader's progress
(`hub_ext.manifests.datasets.row`: "loading: 12 of 1000 objects, 1.2 MB of 100 MB", a percentage; the
reason of a failed load). They never need Kubernetes rights on PVCs: the hub makes them. A
credential is chosen by name from the project's (never shown, never read). REST needs the custom
scope ``custom:mlplatform:datasets`` for the user (every user holds it for themselves); the page
uses the hub login and its XSRF check. Faces only: the user's spawner's `add_dataset` /
`delete_dataset` / `dataset_rows` do the work; a runtime whose datasets are directories (the local
one) answers 501 with where they live (`PlatformService.credentials_where`: its projects'
directory); platform errors are answered by the base handlers (`hub_ext.web.handlers`).

A dataset in a team project belongs to the team: any member may mount it. Only its creator or a
hub admin may delete it (`hub_ext.manifests.datasets.check_may_delete`, decided on the PVC as it is when
deleted): another member gets 403 naming ``name``. Through REST the caller's rights are the
named user's, and an admin calling for them acts as an admin.
"""

from __future__ import annotations

from tornado import web

from hub_ext.manifests.datasets import check_existing_name, check_request
from hub_ext.core.errors import PlatformError, UserInputError, http_answer
from hub_ext.web.api import SCOPE as READ_SCOPE
from hub_ext.web.handlers import PlatformAPIHandler, PlatformPageHandler, project_of, scoped

WRITE_SCOPE = "custom:mlplatform:datasets"
SCOPES = {WRITE_SCOPE: {"description": "Add and delete your ML platform datasets (PVCs loaded from S3 or GCS)."}}
FIELDS = ("name", "source", "credential", "size", "description")


async def add(spawner, user, project: str, body) -> dict:
    """Check one dataset request and make its PVC; returns its row (`hub_ext.manifests.datasets.row`)."""
    if not isinstance(body, dict):
        raise UserInputError("body", "must be a JSON object")
    project_of(spawner, project)
    available = await spawner.project_files(project)
    request = check_request(body, {c.name: c.type for c in available.credentials}, spawner.dataset_settings(),
                            project)
    out = await spawner.add_dataset(project, request, user.name)
    spawner.log.info("%s added the dataset %r (%s) to the project %s", user.name, request.name, request.source,
                     project)
    return out


async def delete(spawner, user, project: str, name: str, admin: bool | None = None) -> None:
    """Delete one dataset as `user` (`admin`: whether they act as a hub admin; default: theirs)."""
    project_of(spawner, project)
    admin = bool(user.admin) if admin is None else admin
    await spawner.delete_dataset(project, check_existing_name(name), deleted_by=user.name, admin=admin)
    spawner.log.info("%s deleted the dataset %r of the project %s", user.name, name, project)


async def listing(spawner, user) -> list[tuple]:
    """(project, its dataset rows) for each project of the user."""
    return [(p, await spawner.dataset_rows(p.name)) for p in spawner.user_projects()]


class DatasetsAPIHandler(PlatformAPIHandler):
    @scoped(READ_SCOPE, WRITE_SCOPE)
    async def get(self, user_name, project):
        user = self.find_platform_user(user_name)
        spawner = self.platform.spawner(user)
        project_of(spawner, project)
        self.write({"datasets": await spawner.dataset_rows(project)})

    @scoped(WRITE_SCOPE)
    async def post(self, user_name, project):
        user = self.find_platform_user(user_name)
        self.refuse_unmanaged(user, "datasets as directories under {}/<project>/datasets/<name>")
        out = await add(self.platform.spawner(user), user, project, self.json_body())
        self.set_status(201)
        self.write(out)


class DatasetAPIHandler(PlatformAPIHandler):
    @scoped(WRITE_SCOPE)
    async def delete(self, user_name, project, name):
        user = self.find_platform_user(user_name)
        self.refuse_unmanaged(user, "datasets as directories under {}/<project>/datasets/<name>")
        await delete(self.platform.spawner(user), user, project, name, self.acting_admin(user))
        self.set_status(204)


class DatasetsPage(PlatformPageHandler):
    async def _render(self, error: str = "", kept: dict | None = None, status: int = 200):
        user = self.platform_user(self.current_user)
        spawner = self.platform.spawner(user)
        where = self.platform.credentials_where(user)
        credentials = [] if where is not None else await self.platform.files(user, "credentials")
        self.set_status(status)
        html = await self.render_template("mlplatform-datasets.html", user=user, projects=await listing(spawner, user),
                                          credentials=credentials, error=error, kept=kept or {},
                                          managed=where is None, where=where or "",
                                          max_size=getattr(spawner, "dataset_max_size", ""))
        self.finish(html)

    @web.authenticated
    async def get(self):
        await self._render()

    @web.authenticated
    async def post(self):
        user = self.platform_user(self.current_user)
        self.refuse_unmanaged(user, "datasets as directories under {}/<project>/datasets/<name>")
        spawner = self.platform.spawner(user)
        form = {k: self.get_body_argument(k, "") for k in ("action", "project", *FIELDS)}
        try:
            if form["action"] == "delete":
                await delete(spawner, user, form["project"], form["name"])
            else:
                await add(spawner, user, form["project"], {k: form[k] for k in FIELDS})
        except PlatformError as e:
            status, text = http_answer(e)
            kept = form if form["action"] != "delete" else {}
            await self._render(error=text.replace("%%", "%"), kept=kept, status=status)
            return
        self.redirect(self.request.path)


page_handlers = [(r"/mlplatform/datasets", DatasetsPage)]
api_handlers = [
    (r"/api/mlplatform/users/([^/]+)/projects/([^/]+)/datasets", DatasetsAPIHandler),
    (r"/api/mlplatform/users/([^/]+)/projects/([^/]+)/datasets/([^/]+)", DatasetAPIHandler),
]
