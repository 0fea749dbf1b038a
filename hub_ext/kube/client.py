"""A small JSON-in, JSON-out layer over `kubernetes_asyncio`'s ApiClient, for the objects the
platform manages by path (plain dicts, as the pure builders make them), and the one place where
the API's failures become the platform's exceptions.

Guarantees: transient failures (429, 5xx, timeouts, dropped connections) are retried a few times
with a short backoff, except that a POST is retried only when the server said it did nothing
(429, 503, or a 403 "status unknown for quota": a new project's quota not yet counted, waited for
up to 30 s), or when a webhook could not be called (a 500 "failed calling webhook": admission failed
before anything was stored; sent once more after `WEBHOOK_RETRY_S`, as an operator restarting is
gone in a moment), so a create that timed out is never sent twice. What still fails is raised as a
`KubeError` (an `UpstreamError`: HTTP 502 at a face, its `reason` safe to show), by kind:

    KubeError        any other refusal; ``code`` the API's HTTP status, ``body`` its answer (never logged)
     ├── NotFound    404            ├── Conflict   409 (exists, or changed meanwhile)
     ├── Gone        410 (a watch's resourceVersion is too old: list again)
     ├── Forbidden   403 (RBAC or an admission/quota refusal; 401 is a plain KubeError)
     ├── Invalid     422, with ``causes``: the API's ``(field, message)`` pairs
     └── Unavailable 429, 5xx, a timeout or no connection (``code`` 0: no answer)

No other module sees an `ApiException` from these calls (KubeSpawner's own calls raise theirs,
which `reason` also describes). `get` and `delete` treat 404 as "not there"; `stream` yields the raw
lines of a streaming GET (a pod's log, a watch). `path_of` knows where each kind the platform
manages lives; `serves` asks discovery whether an API group version has given resources. No request
or response body is ever logged.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from typing import Any, AsyncIterator

import aiohttp
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from hub_ext.core.errors import UpstreamError

TRANSIENT = {429, 500, 502, 503, 504}
# the Accept header that asks for an object's metadata only (a Secret's labels, never its data)
METADATA_ONLY = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
STRATEGIC_MERGE = "application/strategic-merge-patch+json"  # lists merged by their key (conditions by type)
MERGE_PATCH = "application/merge-patch+json"


def timestamp() -> str:
    """Now, as Kubernetes writes a time (RFC 3339, UTC, seconds)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
# the API server's refusal when a webhook of `mlplatform operator` (helm-values/operator.yaml) fails
_OPERATOR_HOOK = re.compile(r'failed calling webhook "([a-z0-9-]+)\.operator\.mlplatform\.io"')
NOT_PROCESSED = {429, 503}
_WEBHOOK_CALL_FAILED = "failed calling webhook"  # a webhook's denial says "denied the request" instead
WEBHOOK_RETRY_S = 1.0
# A ResourceQuota made moments ago (a new project's) has no usage counted yet, and until the quota
# controller counts it the API server refuses every create it governs with 403 "status unknown for
# quota" — nothing was done, so a POST too is sent again, every QUOTA_PENDING_POLL s, a while.
_QUOTA_PENDING = "status unknown for quota"
QUOTA_PENDING_POLL, QUOTA_PENDING_TRIES = 0.5, 60
_VERBS = {"GET": "read", "POST": "create in", "PUT": "replace", "PATCH": "change", "DELETE": "delete"}

KUEUE_API = "/apis/kueue.x-k8s.io/v1beta2"
_CORE = {"Namespace": "namespaces", "ServiceAccount": "serviceaccounts", "ResourceQuota": "resourcequotas",
         "ConfigMap": "configmaps", "Secret": "secrets", "PersistentVolumeClaim": "persistentvolumeclaims",
         "Pod": "pods", "Node": "nodes", "Event": "events", "LimitRange": "limitranges"}
_GROUPS = {"Role": ("/apis/rbac.authorization.k8s.io/v1", "roles"),
           "RoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "rolebindings"),
           "NetworkPolicy": ("/apis/networking.k8s.io/v1", "networkpolicies"),
           "Job": ("/apis/batch/v1", "jobs"),
           "VolumeSnapshot": ("/apis/snapshot.storage.k8s.io/v1", "volumesnapshots"),
           "ResourceFlavor": (KUEUE_API, "resourceflavors"), "ClusterQueue": (KUEUE_API, "clusterqueues"),
           "Cohort": (KUEUE_API, "cohorts"),
           "LocalQueue": (KUEUE_API, "localqueues"), "Workload": (KUEUE_API, "workloads")}


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


class KubeError(UpstreamError):
    """The Kubernetes API refused a request, or could not be reached, after the retries."""

    def __init__(self, code: int, reason: str, body: str = "", action: str = "use the Kubernetes API"):
        self.code, self.body = code, body or ""
        super().__init__(action, reason)


class NotFound(KubeError):
    pass


class Gone(KubeError):
    pass


class Conflict(KubeError):
    pass


class Forbidden(KubeError):
    pass


class Unavailable(KubeError):
    pass


class Invalid(KubeError):
    """422: ``causes`` are the API's ``(field, message)`` pairs (the field may be empty)."""

    def __init__(self, code: int, reason: str, body: str = "", action: str = "use the Kubernetes API",
                 causes: tuple[tuple[str, str], ...] = ()):
        super().__init__(code, reason, body, action)
        self.causes = causes


_KINDS: dict[int, type[KubeError]] = {404: NotFound, 409: Conflict, 410: Gone, 403: Forbidden, 422: Invalid}


def _answered(code: int, http_reason: str | None, body: str | None) -> tuple[str, dict]:
    """(safe text, the API's Status object or {}) of an answer."""
    try:
        status = json.loads(body or "{}")
        message = str(status.get("message", ""))
        hook = _OPERATOR_HOOK.search(message)
        if hook:  # the platform's own webhook did not answer: say so, not the dial error behind it
            return (f"the platform's operator (mlplatform operator, webhook {hook.group(1)}) is not answering, so "
                    "Kubernetes refused the request; try again in a minute, or ask your administrator to check "
                    "it"), status
        text = f"Kubernetes answered {code} {status.get('reason') or http_reason}: {message}".strip()
        return text, status
    except (ValueError, TypeError, AttributeError):
        return f"Kubernetes answered {code} {http_reason}", {}


def error_of(code: int, http_reason: str | None, body: str | None = "",
             action: str = "use the Kubernetes API") -> KubeError:
    """The platform's exception for an answer of the API (`code`: its HTTP status)."""
    text, status = _answered(code, http_reason, body)
    kind = _KINDS.get(code) or (Unavailable if code in TRANSIENT else KubeError)
    if kind is Invalid:
        causes = ((status.get("details") or {}).get("causes") or []) if isinstance(status, dict) else []
        return Invalid(code, text, body or "", action, tuple(
            (str(c.get("field") or ""), str(c.get("message") or "")) for c in causes if isinstance(c, dict)))
    return kind(code, text, body or "", action)


def unreachable(e: BaseException, action: str = "use the Kubernetes API") -> Unavailable:
    """`Unavailable` (code 0) for a request that got no answer (timeout, broken connection)."""
    return Unavailable(0, reason(e), "", action)


def reason(e: BaseException) -> str:
    """A short, safe description of a Kubernetes failure (the API's Status message, never a body we sent)."""
    if isinstance(e, KubeError):
        return e.reason
    if isinstance(e, ApiException):  # KubeSpawner's own calls
        return _answered(e.status, e.reason, e.body)[0]
    if isinstance(e, asyncio.TimeoutError):
        return "the Kubernetes API did not answer in time"
    if isinstance(e, ConnectionError) and str(e):
        return str(e)
    return f"the Kubernetes API could not be reached ({type(e).__name__})"


class Kube:
    def __init__(self, api_client: ApiClient, timeout: float = 10, retries: int = 3, backoff: float = 0.2):
        self.api_client, self.timeout, self.retries, self.backoff = api_client, timeout, retries, backoff

    async def request(self, method: str, path: str, body: Any = None, query: dict | None = None,
                      content_type: str = "application/json", timeout: float | None = None,
                      accept: str = "application/json") -> Any:
        """One request, retried as the module says; `accept` asks for another representation of a
        JSON answer (e.g. ``application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1``: an
        object's metadata only)."""
        retry_on = NOT_PROCESSED if method == "POST" else TRANSIENT
        action = f"{_VERBS.get(method, method)} {path}"
        quota_waits = webhook_tries = 0
        attempt = 0
        while True:
            try:
                return await self.api_client.call_api(
                    path, method, query_params=list((query or {}).items()), body=body,
                    header_params={"Accept": accept, "Content-Type": content_type},
                    auth_settings=["BearerToken"], response_types_map={200: "object", 201: "object", 202: "object"},
                    _return_http_data_only=True, _request_timeout=timeout or self.timeout)
            except ApiException as e:
                if e.status == 403 and _QUOTA_PENDING in str(e.body or "") and quota_waits < QUOTA_PENDING_TRIES:
                    quota_waits += 1  # refused before anything was done: a new quota not yet counted
                    await asyncio.sleep(QUOTA_PENDING_POLL)
                    continue
                if (e.status == 500 and e.status not in retry_on and webhook_tries < 1
                        and _WEBHOOK_CALL_FAILED in str(e.body or "")):
                    webhook_tries += 1  # refused before anything was stored: a POST too may go again
                    await asyncio.sleep(WEBHOOK_RETRY_S)
                    continue
                if e.status not in retry_on or attempt == self.retries:
                    raise error_of(e.status, e.reason, e.body, action) from None
            except (asyncio.TimeoutError, aiohttp.ClientError) as e:
                if method == "POST" or attempt == self.retries:
                    if isinstance(e, asyncio.TimeoutError):
                        raise unreachable(e, action) from None
                    raise Unavailable(0, f"the Kubernetes API could not be reached ({type(e).__name__})", "",
                                      action) from None
            await asyncio.sleep(self.backoff * (2 ** attempt))
            attempt += 1

    async def get(self, path: str) -> dict | None:
        try:
            return await self.request("GET", path)
        except NotFound:
            return None

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
        except NotFound:
            return False

    async def stream(self, path: str, query: list[tuple[str, str]], accept: str,
                     timeout: aiohttp.ClientTimeout) -> AsyncIterator[bytes]:
        """The raw lines of one streaming GET, each with its newline but perhaps the last (a line may
        be any length); none for a 204 No Content. A refusal raises `error_of` its answer; a connection
        that cannot be made or breaks raises `Unavailable`."""
        action = f"read {path}"
        try:
            resp = await self.api_client.call_api(
                path, "GET", query_params=query, header_params={"Accept": accept}, auth_settings=["BearerToken"],
                _preload_content=False, _request_timeout=timeout)
        except (asyncio.TimeoutError, aiohttp.ClientError) as e:
            raise unreachable(e, action) from None
        try:
            if resp.status == 204:  # nothing to read now (seen from pods/log under load): an empty stream
                return
            if resp.status != 200:
                raise error_of(resp.status, resp.reason, await resp.text(), action)
            pending = b""
            async for chunk in resp.content.iter_any():  # not readline: a line may be any length
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    yield line + b"\n"
            if pending:
                yield pending
        except (asyncio.TimeoutError, aiohttp.ClientError) as e:
            raise unreachable(e, action) from None
        finally:
            resp.release()

    async def watch(self, path: str, **query) -> AsyncIterator[dict]:
        """The events of one watch request (ends when the server ends it)."""
        query = {**query, "watch": "true"}
        timeout = aiohttp.ClientTimeout(total=int(query.get("timeoutSeconds", 300)) + 30, sock_connect=self.timeout)
        async for line in self.stream(path, list(query.items()), "application/json", timeout):
            if line.strip():
                yield json.loads(line)


async def serves(kube: Kube, group_version: str, plurals: set[str], what: str) -> bool:
    """Whether discovery of `group_version` (``kubeflow.org/v1``) lists every resource of `plurals`
    (a group version the cluster lacks lists none); `UpstreamError` naming `what` if it cannot tell."""
    try:
        body = await kube.get(f"/apis/{group_version}")
    except KubeError as e:
        raise UpstreamError(f"discover {what} ({group_version})", reason(e)) from None
    return plurals <= {r.get("name") for r in (body or {}).get("resources") or []}
