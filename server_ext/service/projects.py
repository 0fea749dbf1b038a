"""Which projects the notebook server's user may use, for the jobs service's project check.

- In a JupyterHub (``JUPYTERHUB_API_URL`` and ``JUPYTERHUB_API_TOKEN`` set): `HubProjects` asks
  the hub's platform API (``GET {api}/mlplatform/users/{user}/projects``) with the server's own
  token, which holds ``custom:mlplatform:read`` for its owner only (`hub_ext.setup.configure`), so
  anyone else gets no projects. Answers are kept for `ttl` seconds (group changes reach the hub
  at login anyway); a failure raises `UpstreamError`, never an empty list.
- Otherwise `StaticProjects`: a configured list, or the user's personal project.
"""

from __future__ import annotations

import json
import time
import urllib.parse

from tornado.httpclient import AsyncHTTPClient, HTTPClientError

from hub_ext.core.entitlements import personal_project_name
from hub_ext.core.errors import UpstreamError


class StaticProjects:
    def __init__(self, names: list[str] | None = None):
        self.names = list(names or [])

    async def __call__(self, user: str) -> list[str]:
        return self.names or [personal_project_name(user)]


async def hub_get(api_url: str, token: str, user: str, what: str, doing: str) -> dict | None:
    """``GET {api}/mlplatform/users/{user}/{what}`` with the server's token: the JSON answer, None
    when the hub refuses this server (403/404: not its owner), `UpstreamError` on any other failure."""
    url = f"{api_url}/mlplatform/users/{urllib.parse.quote(user, safe='')}/{what}"
    try:
        resp = await AsyncHTTPClient().fetch(url, headers={"Authorization": f"token {token}"}, request_timeout=10)
    except HTTPClientError as e:
        if e.code in (403, 404):
            return None
        raise UpstreamError(doing, f"the hub answered {e.code}") from None
    except OSError as e:
        raise UpstreamError(doing, type(e).__name__) from None
    try:
        answer = json.loads(resp.body)
    except ValueError:
        answer = None
    if not isinstance(answer, dict):  # e.g. a proxy's error page
        raise UpstreamError(doing, "the hub's answer is not a JSON object")
    return answer


class HubProjects:
    def __init__(self, api_url: str, token: str, ttl: float = 30.0):
        self.api_url, self._token, self.ttl = api_url.rstrip("/"), token, ttl
        self._cache: dict[str, tuple[float, list[str]]] = {}

    async def __call__(self, user: str) -> list[str]:
        hit = self._cache.get(user)
        if hit and time.monotonic() - hit[0] < self.ttl:
            return hit[1]
        answer = await hub_get(self.api_url, self._token, user, "projects", "read your projects from the hub")
        if answer is None:  # not this server's owner: no projects
            return []
        try:
            names = [p["name"] for p in answer["projects"]]
        except (KeyError, TypeError):
            raise UpstreamError("read your projects from the hub", "the answer is malformed") from None
        self._cache[user] = (time.monotonic(), names)
        return names
