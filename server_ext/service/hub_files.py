"""The credentials and datasets a notebook server's owner may mount into a job, from the hub.

On Kubernetes the notebook server may not read Secrets (its ServiceAccount's Role has no such
rule: `hub_ext.manifests.tenancy`), so `HubFiles` asks the hub's platform API
(``GET {api}/mlplatform/users/{owner}/credentials`` and ``…/datasets``) with the server's own
token and rebuilds each project's `Available` from the metadata (names, types, paths and dataset
states; never content). Answers are kept for `ttl` seconds, so a burst of submissions asks once; a
credential added a moment ago is seen after at most that long. The hub answering 403/404 (not this
server's owner) means nothing to mount; any other failure raises `UpstreamError`, never a silent
empty choice.
"""

from __future__ import annotations

import time

from hub_ext.core.errors import UpstreamError
from hub_ext.core.mounts import Available, credential_from_metadata, dataset_from_metadata
from server_ext.service.projects import hub_get


def available_from_answers(credentials: dict | None, datasets: dict | None, project: str) -> Available:
    """`project`'s share of the platform API's two answers (None: the hub refused)."""
    try:
        creds = [credential_from_metadata(e) for e in (credentials or {}).get("credentials", [])
                 if e.get("project") == project]
        sets = [dataset_from_metadata(e) for e in (datasets or {}).get("datasets", []) if e.get("project") == project]
    except (KeyError, TypeError, AttributeError):
        raise UpstreamError("read your credentials and datasets from the hub", "the answer is malformed") from None
    return Available(tuple(creds), tuple(sets))


class HubFiles:
    def __init__(self, api_url: str, token: str, owner: str, ttl: float = 10.0):
        self.api_url, self._token, self.owner, self.ttl = api_url.rstrip("/"), token, owner, ttl
        self._cache: tuple[float, dict | None, dict | None] | None = None

    async def __call__(self, project: str) -> Available:
        if self._cache is None or time.monotonic() - self._cache[0] >= self.ttl:
            doing = "read your credentials and datasets from the hub"
            credentials = await hub_get(self.api_url, self._token, self.owner, "credentials", doing)
            datasets = await hub_get(self.api_url, self._token, self.owner, "datasets", doing)
            self._cache = (time.monotonic(), credentials, datasets)
        return available_from_answers(self._cache[1], self._cache[2], project)
