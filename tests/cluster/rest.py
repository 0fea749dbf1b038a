"""A small JSON client of the Kubernetes REST API for test tooling (the emulated kubelet, fixtures).

Reads a kubeconfig (server, CA, client certificate or token), speaks JSON over one aiohttp session,
raises `ApiError` (status code, reason, message of the `kind: Status` body) for non-2xx answers,
and iterates watch events. Plain dicts in and out: no model classes, so the kubelet's status
writes cost what the wire costs.
"""

from __future__ import annotations

import asyncio
import json
import logging
import pathlib
import ssl
from typing import AsyncIterator

import aiohttp
import yaml

MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"


log = logging.getLogger("tests.cluster.rest")


class ApiError(Exception):
    def __init__(self, status: int, body: dict | str):
        self.status = status
        self.body = body if isinstance(body, dict) else {"message": str(body)}
        self.reason = self.body.get("reason", "")
        super().__init__(f"{status} {self.reason}: {self.body.get('message', '')}")


def ssl_context(kubeconfig: str | pathlib.Path) -> tuple[str, ssl.SSLContext, dict]:
    """(server URL, SSL context, extra headers) of a kubeconfig's current context."""
    cfg = yaml.safe_load(pathlib.Path(kubeconfig).read_text())
    ctx_name = cfg.get("current-context")
    context = next(c["context"] for c in cfg["contexts"] if c["name"] == ctx_name)
    cluster = next(c["cluster"] for c in cfg["clusters"] if c["name"] == context["cluster"])
    user = next(u["user"] for u in cfg["users"] if u["name"] == context["user"])
    ctx = ssl.create_default_context(cafile=cluster.get("certificate-authority"))
    headers = {}
    if user.get("client-certificate"):
        ctx.load_cert_chain(user["client-certificate"], user["client-key"])
    if user.get("token"):
        headers["Authorization"] = f"Bearer {user['token']}"
    return cluster["server"], ctx, headers


class Rest:
    def __init__(self, kubeconfig: str | pathlib.Path):
        self.server, self._ssl, self._headers = ssl_context(kubeconfig)
        self._session: aiohttp.ClientSession | None = None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=self._ssl, limit=0),
                                                  headers=self._headers)
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def request(self, method: str, path: str, body=None, *, params: dict | None = None,
                      content_type: str = "application/json") -> dict:
        data = None if body is None else json.dumps(body).encode()
        async with self.session.request(method, self.server + path, data=data, params=params,
                                        headers={"Content-Type": content_type},
                                        timeout=aiohttp.ClientTimeout(total=60)) as r:
            text = await r.text()
            try:
                payload = json.loads(text) if text else {}
            except ValueError:
                payload = {"message": text}
            if r.status >= 300:
                raise ApiError(r.status, payload)
            return payload

    async def get(self, path: str, **params) -> dict:
        return await self.request("GET", path, params=params or None)

    async def post(self, path: str, body: dict) -> dict:
        return await self.request("POST", path, body)

    async def put(self, path: str, body: dict) -> dict:
        return await self.request("PUT", path, body)

    async def patch(self, path: str, body: dict, content_type: str = MERGE) -> dict:
        return await self.request("PATCH", path, body, content_type=content_type)

    async def delete(self, path: str, body: dict | None = None) -> dict:
        return await self.request("DELETE", path, body)

    async def watch(self, path: str, resource_version: str, **params) -> AsyncIterator[dict]:
        """Events of one watch request from `resource_version` until the server ends it."""
        q = {"watch": "true", "resourceVersion": resource_version, "allowWatchBookmarks": "true", **params}
        async with self.session.get(self.server + path, params=q,
                                    timeout=aiohttp.ClientTimeout(total=None, sock_read=None)) as r:
            if r.status >= 300:
                raise ApiError(r.status, await r.text())
            async for line in r.content:
                if line.strip():
                    yield json.loads(line)

    async def follow(self, path: str, handle, who: str, *, listed=None, deleted=None) -> None:
        """Call `handle(obj)` for each object at `path` and each one added or changed since, for
        ever (a controller's list-then-watch): after a watch error event, a cut watch, a 5xx or a
        failed `handle`, list again after a pause, so nothing missed stays missed. `who` names the
        loop in the log. `listed(items)`, when given, takes each whole listing instead (a cache
        starts again from it); `deleted(obj)` each object deleted."""
        rv = None
        while True:
            try:
                if rv is None:
                    listing = await self.get(path)
                    rv = listing["metadata"]["resourceVersion"]
                    if listed is not None:
                        await listed(listing["items"])
                    for obj in listing["items"] if listed is None else ():
                        await handle(obj)
                async for ev in self.watch(path, rv, timeoutSeconds="60"):
                    if ev["type"] == "ERROR":
                        rv = None
                        break
                    rv = ev["object"]["metadata"]["resourceVersion"]
                    if ev["type"] in ("ADDED", "MODIFIED"):
                        await handle(ev["object"])
                    elif ev["type"] == "DELETED" and deleted is not None:
                        await deleted(ev["object"])
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.info("%s: watch of %s ended (%s); listing again", who, path, e)
                rv = None
                await asyncio.sleep(0.5)
