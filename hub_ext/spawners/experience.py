"""What the platform spawners add to JupyterHub's handling of a user's servers (mixin `SpawnExperience`).

- `server_profile(user_options)`: the profile and project a server was started with, in words,
  for the hub's home page (``hub_ext/templates/home.html`` lists every server's): the display
  names of the profile and project its options plan to; the options' own words when they no
  longer plan (the profile was removed, the user left the team).
- A named server that a *refused* ``POST /hub/api/users/<u>/servers/<name>`` made is removed again
  (`forget_if_refused`), as JupyterHub's ``DELETE …`` with ``{"remove": true}`` would, once
  JupyterHub has finished its own clean-up of the failed start. Refused: a 4xx answer (a bad
  choice, no quota left, no free accelerator). Guarantee: only a row that very request made is
  removed; a named server that existed before (made by ``PUT``, by the spawn page, started
  before, or found in the database after a hub restart) is never removed. The row counts as made
  by the request when the spawner object is the first ever made for that database row, was made
  during the request, the row was made in this hub process (not loaded from the database) and had
  never started a server.
- The form's ticks of credentials and datasets of a project other than the chosen one are
  refused with the field named (`hub_ext.core.mounts.refuse_other_projects`), not dropped.
- `refused(e)`: the one way a spawner turns a platform error into the `web.HTTPError` JupyterHub
  expects of a refused start or form (`http_error`; a config error is logged).
  The rows a spawner was made for are remembered by the hub's `PlatformService`.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from typing import Any, Mapping

import sqlalchemy
from jupyterhub.apihandlers.users import UserServerAPIHandler
from jupyterhub.utils import maybe_future
from tornado import web

from hub_ext.core.errors import ConfigError, PlatformError, UserInputError, http_answer
from hub_ext.core.mounts import refuse_other_projects


def http_error(e: PlatformError) -> web.HTTPError:
    """The answer to a platform error, as tornado raises it."""
    return web.HTTPError(*http_answer(e))


def _made_in_process(row: Any) -> bool:
    """Whether an ORM object was constructed here rather than loaded from the database (SQLAlchemy
    records a load's run id only on loaded objects)."""
    try:
        return sqlalchemy.inspect(row).runid is None
    except (sqlalchemy.exc.NoInspectionAvailable, AttributeError):
        return False


class SpawnExperience:
    """Mixin of the platform spawners (before `PlatformConfig` among the bases)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        row = getattr(self, "orm_spawner", None)
        self._made_at = time.time()
        self._row_is_new = False
        if row is not None and _made_in_process(row):
            rows = self.platform.part(("spawner rows",), weakref.WeakSet)  # orm.Spawner rows a spawner was made for
            first = row not in rows
            rows.add(row)
            self._row_is_new = first and row.started is None and row.last_activity is None and row.server is None

    # ---- the home page ------------------------------------------------------------------------
    def server_profile(self, user_options: Mapping[str, Any] | None) -> dict[str, str]:
        """{"profile": …, "project": …} in words for a server of this user started with `user_options`."""
        options = {k: v for k, v in (user_options or {}).items() if k not in ("credentials", "datasets")}
        try:
            plan = self.user_plan(options)
        except (UserInputError, ConfigError):
            slug, project = options.get("profile"), options.get("project")
            known = self.runtime.profiles_by_slug.get(slug) if isinstance(slug, str) else None
            return {"profile": known.display_name if known else str(slug or ""), "project": str(project or "")}
        return {"profile": plan.profile.display_name, "project": plan.project.display_name}

    # ---- the form -----------------------------------------------------------------------------
    def options_from_form(self, formdata):
        project = (formdata.get("project") or [None])[0]
        try:
            refuse_other_projects(formdata, project)
        except UserInputError as e:
            raise self.refused(e) from None
        return super().options_from_form(formdata)

    def refused(self, e: PlatformError) -> web.HTTPError:
        """The answer to a spawn (or its form) the platform refuses; a config error is logged for
        the administrator (the user is told only that the platform is misconfigured)."""
        if isinstance(e, ConfigError):
            self.log.error("platform configuration is invalid for %s: %s", self._log_name, e)
        return http_error(e)

    # ---- refused spawns -----------------------------------------------------------------------
    def forget_if_refused(self, status: int) -> None:
        """Called by `start` when it refuses with `status`: a named server the refused API request
        made goes again once JupyterHub is done with the failed start."""
        handler = getattr(self, "handler", None)
        if not (self.name and self._row_is_new and 400 <= status < 500 and isinstance(handler, UserServerAPIHandler)
                and handler.request.method == "POST"
                and self._made_at >= time.time() - handler.request.request_time()):
            return
        future = getattr(self, "_spawn_future", None)
        if future is not None:
            future.add_done_callback(lambda _: asyncio.ensure_future(self._forget_row()))

    async def _forget_row(self) -> None:
        user = self.user
        if self.active or dict.get(user.spawners, self.name) is not self:
            return  # started again meanwhile, or already replaced
        self.log.info("removing the named server %s: the request that made it was refused", self._log_name)
        try:
            await maybe_future(self.delete_forever())
        except Exception:
            self.log.exception("could not clean up after %s", self._log_name)
        user.db.delete(self.orm_spawner)
        user.spawners.pop(self.name, None)
        user.db.commit()
