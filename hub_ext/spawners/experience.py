"""A named server's database row that a refused API request made, removed again (part `NewServerRow`
of both platform spawners), and `http_error`, the answer to a platform error as tornado raises it.

Guarantee: a named server that a *refused* ``POST /hub/api/users/<u>/servers/<name>`` made is
removed (as JupyterHub's ``DELETE …`` with ``{"remove": true}`` would) once JupyterHub has finished
its own clean-up of the failed start, and only such a row. Refused: a 4xx answer (a bad choice, no
quota left, no free accelerator). A named server that existed before (made by ``PUT``, by the spawn
page, started before, or found in the database after a hub restart) is never removed. The row
counts as made by the request when the spawner object is the first ever made for that database row,
was made during the request, the row was made in this hub process (not loaded from the database)
and had never started a server. The rows a spawner was made for are remembered by the hub's
`PlatformService` (a weak set: nothing outlives the rows).
"""

from __future__ import annotations

import asyncio
import time
import weakref
from typing import Any

import sqlalchemy
from jupyterhub.apihandlers.users import UserServerAPIHandler
from jupyterhub.utils import maybe_future
from tornado import web

from hub_ext.core.errors import PlatformError, http_answer


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


class NewServerRow:
    """The spawner's database row, and whether the request being served made it. Made as the spawner
    is (after JupyterHub's own `__init__`); uses of its spawner: ``orm_spawner``, ``platform``,
    ``name``, ``handler``, ``_spawn_future``, ``active``, ``user``, ``delete_forever``, ``log``."""

    def __init__(self, spawner) -> None:
        self.spawner = spawner
        self.made_at = time.time()
        self.is_new = False
        row = getattr(spawner, "orm_spawner", None)
        if row is not None and _made_in_process(row):
            rows = spawner.platform.part(("spawner rows",), weakref.WeakSet)  # orm.Spawner rows a spawner was made for
            first = row not in rows
            rows.add(row)
            self.is_new = first and row.started is None and row.last_activity is None and row.server is None

    def forget_if_refused(self, status: int) -> None:
        """Called by the spawner's `start` when it refuses with `status`: a named server the refused
        API request made goes again once JupyterHub is done with the failed start."""
        spawner = self.spawner
        handler = getattr(spawner, "handler", None)
        if not (spawner.name and self.is_new and 400 <= status < 500 and isinstance(handler, UserServerAPIHandler)
                and handler.request.method == "POST"
                and self.made_at >= time.time() - handler.request.request_time()):
            return
        future = getattr(spawner, "_spawn_future", None)
        if future is not None:
            future.add_done_callback(lambda _: asyncio.ensure_future(self._forget()))

    async def _forget(self) -> None:
        spawner = self.spawner
        user = spawner.user
        if spawner.active or dict.get(user.spawners, spawner.name) is not spawner:
            return  # started again meanwhile, or already replaced
        spawner.log.info("removing the named server %s: the request that made it was refused", spawner._log_name)
        try:
            await maybe_future(spawner.delete_forever())
        except Exception:
            spawner.log.exception("could not clean up after %s", spawner._log_name)
        user.db.delete(spawner.orm_spawner)
        user.spawners.pop(spawner.name, None)
        user.db.commit()
