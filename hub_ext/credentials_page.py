"""Managing credentials through the hub: a page, ``/hub/mlplatform/credentials``, and REST,
``POST /hub/api/mlplatform/users/{name}/projects/{project}/credentials`` and
``DELETE …/credentials/{credential}``.

Users never need Kubernetes access to Secrets: the hub validates what they submit
(`hub_ext.credentials`: the field at fault is named; no part of a value is ever repeated back)
and writes the Secret in a project the user may use. The page shows names, types and
descriptions only. REST needs the custom scope ``custom:mlplatform:credentials`` for the user
(every user holds it for themselves); the page uses the hub login and its XSRF check. Faces
only: the spawner's `add_credential` / `delete_credential` do the work (runtimes that manage
credentials otherwise, such as the local one's files, answer 501 with where they live).

A credential in a team project belongs to the team: any member may mount it. Only its creator or
a hub admin may delete it (`hub_ext.credentials.check_may_delete`, decided on the Secret as it is
when deleted): another member gets 403 naming ``name``. Through REST the caller's rights are the
named user's, and an admin calling for them acts as an admin.
"""

from __future__ import annotations

import json

from jupyterhub.apihandlers.base import APIHandler
from jupyterhub.handlers.base import BaseHandler
from tornado import web

from .api import scoped_user
from .credentials import KINDS, check_description, check_kind, check_name, files_from_fields
from .errors import PlatformError, UserInputError, http_answer
from .mounts import metadata

WRITE_SCOPE = "custom:mlplatform:credentials"
SCOPES = {WRITE_SCOPE: {"description": "Add and delete your ML platform cloud credentials (never read them)."}}
FIELDS = ("key_json", "aws_access_key_id", "aws_secret_access_key", "aws_session_token", "region")


async def add(spawner, user, project: str, body: dict) -> dict:
    """Validate and store one credential; returns its metadata."""
    if not isinstance(body, dict):
        raise UserInputError("body", "must be a JSON object")
    _project_of(spawner, user, project)
    name = check_name(body.get("name"))
    kind = check_kind(body.get("type"))
    description = check_description(body.get("description"))
    creds = files_from_fields(kind, {k: body.get(k) for k in FIELDS})
    await spawner.add_credential(project, name, creds, description, user.name)
    spawner.log.info("%s added the %s %r to the project %s", user.name, kind, name, project)
    return {"project": project, "name": name, "type": kind, "description": description}


async def delete(spawner, user, project: str, name: str, admin: bool | None = None) -> None:
    """Delete one credential as `user` (`admin`: whether they act as a hub admin; default: theirs)."""
    _project_of(spawner, user, project)
    admin = bool(user.admin) if admin is None else admin
    await spawner.delete_credential(project, check_name(name, new=False), deleted_by=user.name, admin=admin)
    spawner.log.info("%s deleted the credential %r of the project %s", user.name, name, project)


def _project_of(spawner, user, project: str):
    for p in spawner.user_projects():
        if p.name == project:
            return p
    raise UserInputError("project", f"you may not use the project {project!r}", 403)


def _supports(spawner) -> None:
    if not hasattr(spawner, "add_credential"):
        where = getattr(spawner, "projects_dir", "the projects directory")
        raise web.HTTPError(501, f"this runtime keeps credentials as files under {where}/<project>/credentials")


class _CredentialsAPI(APIHandler):
    def _user_spawner(self, user_name: str):
        user = scoped_user(self, WRITE_SCOPE, user_name)
        _supports(user.spawner)
        return user, user.spawner


class CredentialsAPIHandler(_CredentialsAPI):
    async def post(self, user_name, project):
        user, spawner = self._user_spawner(user_name)
        try:
            body = json.loads(self.request.body or b"{}")
        except (ValueError, RecursionError):
            raise web.HTTPError(400, "body: is not valid JSON") from None
        try:
            out = await add(spawner, user, project, body)
        except PlatformError as e:
            raise web.HTTPError(*http_answer(e)) from None
        self.set_status(201)
        self.write(out)


class CredentialAPIHandler(_CredentialsAPI):
    async def delete(self, user_name, project, name):
        user, spawner = self._user_spawner(user_name)
        caller = self.current_user
        admin = bool(user.admin) or bool(getattr(caller, "admin", False))  # an admin may call for a user
        try:
            await delete(spawner, user, project, name, admin)
        except PlatformError as e:
            raise web.HTTPError(*http_answer(e)) from None
        self.set_status(204)


class CredentialsPage(BaseHandler):
    async def _render(self, error: str = "", kept: dict | None = None, status: int = 200):
        user = self.current_user
        spawner = user.spawner
        projects = spawner.user_projects()
        listed = []
        for p in projects:
            listed.append((p, metadata((await spawner.project_files(p.name)).credentials, p.name)))
        self.set_status(status)
        html = await self.render_template("mlplatform-credentials.html", user=user, projects=listed, kinds=KINDS,
                                          error=error, kept=kept or {}, managed=hasattr(spawner, "add_credential"),
                                          where=getattr(spawner, "projects_dir", ""))
        self.finish(html)

    @web.authenticated
    async def get(self):
        try:
            await self._render()
        except PlatformError as e:
            raise web.HTTPError(*http_answer(e)) from None

    @web.authenticated
    async def post(self):
        user = self.current_user
        _supports(user.spawner)
        form = {k: self.get_body_argument(k, "") for k in ("action", "project", "name", "type", "description",
                                                           *FIELDS)}
        try:
            if form["action"] == "delete":
                await delete(user.spawner, user, form["project"], form["name"])
            else:
                await add(user.spawner, user, form["project"], form)
        except PlatformError as e:
            status, text = http_answer(e)
            kept = {k: form[k] for k in ("project", "name", "type", "description", "region")}  # never secrets
            try:
                await self._render(error=text.replace("%%", "%"), kept=kept, status=status)
            except PlatformError as again:
                raise web.HTTPError(*http_answer(again)) from None
            return
        self.redirect(self.request.path)


page_handlers = [(r"/mlplatform/credentials", CredentialsPage)]
api_handlers = [
    (r"/api/mlplatform/users/([^/]+)/projects/([^/]+)/credentials", CredentialsAPIHandler),
    (r"/api/mlplatform/users/([^/]+)/projects/([^/]+)/credentials/([^/]+)", CredentialAPIHandler),
]
