"""A small JSON-in, JSON-out layer over `kubernetes_asyncio`'s ApiClient, for the objects the
platform manages by path (plain dicts, as the pure builders make them).

Guarantees: transient failures (429, 5xx, timeouts, dropped connections) are retried a few times
with a short backoff, except that a POST is retried only when the server said it did nothing
(429, 503), so a create that timed out is never sent twice; any other failure raises
`ApiException` at once, and a connection that still fails raises `ConnectionError` (an `OSError`);
`get` and `delete` treat 404 as "not there". `path_of` knows where each kind the platform manages lives. No request or
response body is ever logged.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, AsyncIterator

import aiohttp
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

TRANSIENT = {429, 500, 502, 503, 504}
NOT_PROCESSED = {429, 503}
_CORE = {"Namespace": "namespaces", "ServiceAccount": "serviceaccounts", "ResourceQuota": "resourcequotas",
         "ConfigMap": "configmaps", "Secret": "secrets", "PersistentVolumeClaim": "persistentvolumeclaims",
         "Pod": "pods", "Node": "nodes", "Event": "events", "LimitRange": "limitranges"}
_GROUPS = {"Role": ("/apis/rbac.authorization.k8s.io/v1", "roles"),
           "RoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "rolebindings"),
           "NetworkPolicy": ("/apis/networking.k8s.io/v1", "networkpolicies")}


def path_of(kind: str, namespace: str | None = None, name: str | None = None) -> str:
    if kind in _CORE:
        base, plural = "/api/v1", _CORE[kind]
    elif kind in _GROUPS:
        base, plural = _GROUPS[kind]
    else:
        raise ValueError(f"unknown kind {kind}")
    path = base + (f"/namespaces/{namespace}" if namespace and kind not in ("Namespace", "Node") else "")
    path += f"/{plural}"
    return path + (f"/{name}" if name else "")


def obj_path(obj: dict, with_name: bool = True) -> str:
    meta = obj["metadata"]
    return path_of(obj["kind"], meta.get("namespace"), meta["name"] if with_name else None)


def reason(e: BaseException) -> str:
    """A short, safe description of a Kubernetes failure (the API's Status message, never a body we sent)."""
    if isinstance(e, ApiException):
        try:
            status = json.loads(e.body or "{}")
            return f"Kubernetes answered {e.status} {status.get('reason') or e.reason}: {status.get('message', '')}".strip()
        except (ValueError, TypeError, AttributeError):
            return f"Kubernetes answered {e.status} {e.reason}"
    if isinstance(e, asyncio.TimeoutError):
        return "the Kubernetes API did not answer in time"
    if isinstance(e, ConnectionError) and str(e):
        return str(e)
    return f"the Kubernetes API could not be reached ({type(e).__name__})"


class Kube:
    def __init__(self, api_client: ApiClient, timeout: float = 10, retries: int = 3, backoff: float = 0.2):
        self.api_client, self.timeout, self.retries, self.backoff = api_client, timeout, retries, backoff

    async def request(self, method: str, path: str, body: Any = None, query: dict | None = None,
                      content_type: str = "application/json", timeout: float | None = None) -> Any:
        retry_on = NOT_PROCESSED if method == "POST" else TRANSIENT
        for attempt in range(self.retries + 1):
            try:
                return await self.api_client.call_api(
                    path, method, query_params=list((query or {}).items()), body=body,
                    header_params={"Accept": "application/json", "Content-Type": content_type},
                    auth_settings=["BearerToken"], response_types_map={200: "object", 201: "object", 202: "object"},
                    _return_http_data_only=True, _request_timeout=timeout or self.timeout)
            except ApiException as e:
                if e.status not in retry_on or attempt == self.retries:
                    raise
            except (asyncio.TimeoutError, aiohttp.ClientError) as e:
                if method == "POST" or attempt == self.retries:
                    if isinstance(e, asyncio.TimeoutError):
                        raise
                    raise ConnectionError(f"the Kubernetes API could not be reached ({type(e).__name__})") from None
            await asyncio.sleep(self.backoff * (2 ** attempt))

    async def get(self, path: str) -> dict | None:
        try:
            return await self.request("GET", path)
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    async def list(self, path: str, timeout: float | None = None, **query) -> dict:
        return await self.request("GET", path, query=query, timeout=timeout)

    async def create(self, obj: dict) -> dict:
        return await self.request("POST", obj_path(obj, with_name=False), obj)

    async def replace(self, obj: dict) -> dict:
        return await self.request("PUT", obj_path(obj), obj)

    async def delete(self, path: str) -> bool:
        try:
            await self.request("DELETE", path, {"propagationPolicy": "Background"})
            return True
        except ApiException as e:
            if e.status == 404:
                return False
            raise

    async def watch(self, path: str, **query) -> AsyncIterator[dict]:
        """The events of one watch request (ends when the server ends it)."""
        query = {**query, "watch": "true"}
        timeout = aiohttp.ClientTimeout(total=int(query.get("timeoutSeconds", 300)) + 30, sock_connect=self.timeout)
        resp = await self.api_client.call_api(
            path, "GET", query_params=list(query.items()), header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"], _preload_content=False, _request_timeout=timeout)
        if resp.status != 200:
            error = ApiException(status=resp.status, reason=resp.reason)
            error.body = await resp.text()
            resp.release()
            raise error
        try:
            async for line in resp.content:
                if line.strip():
                    yield json.loads(line)
        finally:
            resp.release()
