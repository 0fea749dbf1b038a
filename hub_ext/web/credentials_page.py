"""Managing credentials through the hub: a page, ``/hub/mlplatform/credentials``, and REST,
``POST /hub/api/mlplatform/users/{name}/projects/{project}/credentials`` and
``DELETE …/credentials/{credential}``.

Users never need Kubernetes access to Secrets: the hub validates what they submit
(`hub_ext.core.credentials`: the field at fault is named; no part of a value is ever repeated back)
and writes the Secret in a project the user may use. The page shows names, types and
descriptions only. REST needs the custom scope ``custom:mlplatform:credentials`` for the user
(every user holds it for themselves); the page uses the hub login and its XSRF check. Faces
only: the user's spawner's `add_credential` / `delete_credential` do the work, with the hub's
`PlatformService` parts (runtimes that manage credentials otherwise, such as the local one's
files, answer 501 with where they live: `PlatformService.credentials_where`); platform errors are
answered by the base handlers (`hub_ext.web.handlers`).

A credential in a team project belongs to the team: any member may mount it. Only its creator or
a hub admin may delete it (`hub_ext.core.credentials.check_may_delete`, decided on the Secret as it is
when deleted): another member gets 403 naming ``name``. Through REST the caller's rights are the
named user's, and an admin calling for them acts as an admin.
"""

from __future__ import annotations

from tornado import web

from hub_ext.core.credentials import KINDS, check_description, check_kind, check_name, files_from_fields
from hub_ext.core.errors import PlatformError, UserInputError, http_answer
from hub_ext.web.handlers import PlatformAPIHandler, PlatformPageHandler, project_of, scoped

WRITE_SCOPE = "custom:mlplatform:credentials"
SCOPES = {WRITE_SCOPE: {"description": "Add and delete your ML platform cloud credentials (never read them)."}}
FIELDS = ("key_json", "aws_access_key_id", "aws_secret_access_key", "aws_session_token", "region")


async def add(spawner, user, project: str, body: dict) -> dict:
    """Validate and store one credential; returns its metadata."""
    if not isinstance(body, dict):
        raise UserInputError("body", "must be a JSON object")
    project_of(spawner, project)
    name = check_name(body.get("name"))
    kind = check_kind(body.get("type"))
    description = check_description(body.get("description"))
    creds = files_from_fields(kind, {k: body.get(k) for k in FIELDS})
    await spawner.add_credential(project, name, creds, description, user.name)
    spawner.log.info("%s added the %s %r to the project %s", user.name, kind, name, project)
    return {"project": project, "name": name, "type": kind, "description": description}


async def delete(spawner, user, project: str, name: str, admin: bool | None = None) -> None:
    """Delete one credential as `user` (`admin`: whether they act as a hub admin; default: theirs)."""
    project_of(spawner, project)
    admin = bool(user.admin) if admin is None else admin
    await spawner.delete_credential(project, check_name(name, new=False), deleted_by=user.name, admin=admin)
    spawner.log.info("%s deleted the credential %r of the project %s", user.name, name, project)


class CredentialsAPIHandler(PlatformAPIHandler):
    @scoped(WRITE_SCOPE)
    async def post(self, user_name, project):
        user = self.find_platform_user(user_name)
        self.refuse_unmanaged(user, "credentials as files under {}/<project>/credentials")
        out = await add(self.platform.spawner(user), user, project, self.json_body())
        self.set_status(201)
        self.write(out)


class CredentialAPIHandler(PlatformAPIHandler):
    @scoped(WRITE_SCOPE)
    async def delete(self, user_name, project, name):
        user = self.find_platform_user(user_name)
        self.refuse_unmanaged(user, "credentials as files under {}/<project>/credentials")
        await delete(self.platform.spawner(user), user, project, name, self.acting_admin(user))
        self.set_status(204)


class CredentialsPage(PlatformPageHandler):
    async def _render(self, error: str = "", kept: dict | None = None, status: int = 200):
        user = self.platform_user(self.current_user)
        listed = [(p, [c for c in await self.platform.files(user, "credentials") if c["project"] == p.name])
                  for p in self.platform.spawner(user).user_projects()]
        where = self.platform.credentials_where(user)
        self.set_status(status)
        html = await self.render_template("mlplatform-credentials.html", user=user, projects=listed, kinds=KINDS,
                                          error=error, kept=kept or {}, managed=where is None, where=where or "")
        self.finish(html)

    @web.authenticated
    async def get(self):
        await self._render()

    @web.authenticated
    async def post(self):
        user = self.platform_user(self.current_user)
        self.refuse_unmanaged(user, "credentials as files under {}/<project>/credentials")
        spawner = self.platform.spawner(user)
        form = {k: self.get_body_argument(k, "") for k in ("action", "project", "name", "type", "description",
                                                           *FIELDS)}
        try:
            if form["action"] == "delete":
                await delete(spawner, user, form["project"], form["name"])
            else:
                await add(spawner, user, form["project"], form)
        except PlatformError as e:
            status, text = http_answer(e)
            kept = {k: form[k] for k in ("project", "name", "type", "description", "region")}  # never secrets
            await self._render(error=text.replace("%%", "%"), kept=kept, status=status)
            return
        self.redirect(self.request.path)


page_handlers = [(r"/mlplatform/credentials", CredentialsPage)]
api_handlers = [
    (r"/api/mlplatform/users/([^/]+)/projects/([^/]+)/credentials", CredentialsAPIHandler),
    (r"/api/mlplatform/users/([^/]+)/projects/([^/]+)/credentials/([^/]+)", CredentialAPIHandler),
]
