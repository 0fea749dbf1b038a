"""The accelerators a notebook server's jobs may ask for on the local runtime, from the hub.

In a JupyterHub the hub's catalogue is the platform's (the spawn form offers it); the built-in
one (`server_ext.jobs.defaults`) is for a server with no hub. `HubCatalog` asks the hub's platform
API with the server's own token — ``GET {api}/mlplatform/users/{user}/catalog`` for the
accelerators and ``…/projects`` for each project's ``limits`` (accelerator name → at most this
many; ``null`` for admins: no limit), `user` being the one asking — and keeps the answers for
`ttl` seconds per user.

Calling it with a project and a user gives ``(accelerators, limits)``. A hub that refuses
(403/404: not a platform hub, or the server may not read that user) gives the built-in catalogue
and no limits — the local runtime's users are trusted anyway; `answer(project, user)` says None
instead, for a caller that must then find the limits elsewhere (the Kubernetes runtime: the
project's published catalogue, `server_ext.runtimes.kube.target.published`). A malformed answer, or a
project the hub does not list, raises `UpstreamError` / `UserInputError`, never a silent wrong
catalogue.
"""

from __future__ import annotations

import time
from typing import Mapping

from hub_ext.core.catalog import Accelerator
from hub_ext.core.errors import UpstreamError, UserInputError
from hub_ext.core.publish import accelerator_from_json
from server_ext.jobs.defaults import DEFAULT_ACCELERATORS
from server_ext.service.projects import hub_get

Limits = Mapping[str, int] | None  # None: no limit


class HubCatalog:
    def __init__(self, api_url: str, token: str, ttl: float = 30.0):
        self.api_url, self._token, self.ttl = api_url.rstrip("/"), token, ttl
        self._cache: dict[str, tuple[float, dict | None, dict | None]] = {}  # per user

    async def _read(self, user: str) -> tuple[dict | None, dict | None]:
        hit = self._cache.get(user)
        if hit is None or time.monotonic() - hit[0] >= self.ttl:
            doing = "read the platform catalogue from the hub"
            catalog = await hub_get(self.api_url, self._token, user, "catalog", doing)
            projects = await hub_get(self.api_url, self._token, user, "projects", doing)
            hit = self._cache[user] = (time.monotonic(), catalog, projects)
        return hit[1], hit[2]

    async def __call__(self, project: str, user: str) -> tuple[dict[str, Accelerator], Limits]:
        return catalogue_of(*await self._read(user), project)

    async def answer(self, project: str, user: str) -> tuple[dict[str, Accelerator], Limits] | None:
        """As calling it, but None when the hub refuses (no built-in catalogue in its place)."""
        catalog, projects = await self._read(user)
        return None if catalog is None or projects is None else catalogue_of(catalog, projects, project)


def catalogue_of(catalog: dict | None, projects: dict | None, project: str) -> tuple[dict[str, Accelerator], Limits]:
    """`project`'s accelerators and limits from the platform API's two answers (None: refused)."""
    if catalog is None or projects is None:
        return dict(DEFAULT_ACCELERATORS), None
    try:
        accelerators = {a["name"]: accelerator_from_json(a) for a in catalog["accelerators"]}
        entry = next((p for p in projects["projects"] if p["name"] == project), None)
        limits = None if entry is None or entry.get("limits") is None else {
            str(k): int(v) for k, v in entry["limits"].items()}
    except (KeyError, TypeError, ValueError, AttributeError):
        raise UpstreamError("read the platform catalogue from the hub", "the answer is malformed") from None
    if entry is None:
        raise UserInputError("project", f"the hub lists no project {project!r} for you", 403)
    return accelerators, limits
