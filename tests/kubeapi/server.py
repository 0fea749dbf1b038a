"""The HTTP face of the stand-in: Kubernetes REST paths, discovery, watch streams, pod logs, and the
test controls (fault injection, request log) as aiohttp middleware.

Paths: `/api/v1/...` and `/apis/{group}/{version}/...`, each as
`[namespaces/{ns}/]{plural}[/{name}[/{subresource}]]`. Every error is a `kind: Status` body.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import re
import time
from dataclasses import dataclass, field

from aiohttp import web

from . import discovery, errors, logs
from .patch import APPLY, JSON, MERGE, STRATEGIC
from .selection import parse_field_selector, parse_label_selector
from .store import CLOSE, Store

_PATCH_TYPES = (MERGE, JSON, STRATEGIC)


@dataclass
class Fault:
    method: str | None
    path: re.Pattern
    status: int | None  # None with delay: a hang (the client times out)
    count: int
    delay: float = 0.0

    def matches(self, request: web.Request) -> bool:
        return (self.method is None or self.method == request.method) and bool(self.path.search(request.path_qs))


@dataclass
class RequestRecord:
    method: str
    path: str
    query: dict
    at: float = field(default_factory=time.monotonic)


class Controls:
    """Fault injection and the request log. Mutated only on the server's loop."""

    def __init__(self):
        self.faults: list[Fault] = []
        self.requests: list[RequestRecord] = []

    def inject(self, method: str | None, path: str, status: int | None = 500, count: int = 1,
               delay: float = 0.0) -> None:
        self.faults.append(Fault(method.upper() if method else None, re.compile(path), status, count, delay))

    def take_fault(self, request: web.Request) -> Fault | None:
        for f in self.faults:
            if f.count > 0 and f.matches(request):
                f.count -= 1
                if f.count == 0:
                    self.faults.remove(f)
                return f
        return None


_FAULT_REASONS = {409: "Conflict", 429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable",
                  504: "Timeout", 403: "Forbidden", 404: "NotFound"}


def _json(obj, status: int = 200, warnings: list[str] | None = None) -> web.Response:
    resp = web.Response(body=json.dumps(obj).encode(), status=status, content_type="application/json")
    for w in warnings or []:
        resp.headers.add("Warning", '299 - "' + w.replace('"', '\\"') + '"')
    return resp


def _flag(value: str | None) -> bool:
    return (value or "").lower() in ("true", "1")


class KubeAPI:
    def __init__(self, store: Store, pod_logs: logs.PodLogs, bookmark_interval: float = 1.0):
        self.store = store
        self.logs = pod_logs
        self.controls = Controls()
        self.bookmark_interval = bookmark_interval
        self._streams: set[web.StreamResponse] = set()

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._middleware], client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/_standin/{action}", self._control)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        return app

    @web.middleware
    async def _middleware(self, request: web.Request, handler):
        if not request.path.startswith("/_standin/"):
            self.controls.requests.append(RequestRecord(request.method, request.path, dict(request.query)))
            fault = self.controls.take_fault(request)
            if fault:
                if fault.delay:
                    await asyncio.sleep(fault.delay)
                if fault.status is None:
                    await asyncio.sleep(3600)
                code = fault.status
                return _json(errors.ApiError(code, _FAULT_REASONS.get(code, "InternalError"),
                                             f"injected fault ({code})").status(), code)
        try:
            return await handler(request)
        except errors.ApiError as e:
            return _json(e.status(), e.code)

    # ---- test controls over HTTP (for a stand-in in its own process) ----------------------------
    async def _control(self, request: web.Request) -> web.Response:
        action = request.match_info["action"]
        body = await request.json() if request.can_read_body else {}
        if action == "faults" and request.method == "POST":
            self.controls.inject(body.get("method"), body.get("path", ""), body.get("status", 500),
                                 body.get("count", 1), body.get("delay", 0.0))
        elif action == "faults" and request.method == "DELETE":
            self.controls.faults.clear()
        elif action == "requests" and request.method == "GET":
            return _json([r.__dict__ for r in self.controls.requests])
        elif action == "requests" and request.method == "DELETE":
            self.controls.requests.clear()
        elif action == "cut-watches" and request.method == "POST":
            return _json({"cut": self.cut_watches()})
        elif action == "compact" and request.method == "POST":
            self.store.compact()
        else:
            raise errors.ApiError(404, "NotFound", f"no such control: {request.method} {action}")
        return _json({"ok": True})

    def cut_watches(self) -> int:
        return self.store.cut_watches()

    # ---- routing -----------------------------------------------------------------------------------
    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        parts = [p for p in request.path.split("/") if p]
        if not parts:
            return _json({"paths": ["/api", "/api/v1", "/apis", "/version"]})
        if parts == ["version"]:
            return _json(discovery.version())
        if parts[0] == "api":
            if len(parts) == 1:
                return _json(discovery.api_versions(request.host))
            group, version, rest = "", parts[1], parts[2:]
        elif parts[0] == "apis":
            if len(parts) == 1:
                return _json(discovery.group_list(self.store.registry))
            if len(parts) == 2:
                return _json(discovery.group(self.store.registry, parts[1]))
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise errors.ApiError(404, "NotFound", "the server could not find the requested resource")
        if not rest:
            if request.method != "GET":
                raise errors.method_not_allowed("method not allowed on discovery documents")
            return _json(discovery.resource_list(self.store.registry, group, version))
        ns = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            cand = self.store.registry.get(group, version, rest[2])
            if cand and cand.namespaced:
                ns, rest = rest[1], rest[2:]
        if len(rest) > 3:
            raise errors.ApiError(404, "NotFound", "the server could not find the requested resource")
        rt = self.store.rt(group, version, rest[0])
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if sub and sub not in rt.subresources:
            raise errors.ApiError(404, "NotFound", "the server could not find the requested resource")
        if rt.namespaced and name and ns is None:
            raise errors.ApiError(404, "NotFound", "the server could not find the requested resource")
        if rt.namespaced and ns is None and request.method not in ("GET",):
            raise errors.method_not_allowed(f"{request.method} is not supported on {rt.plural} across namespaces")
        q = request.query
        if name is None:
            if request.method == "GET":
                if _flag(q.get("watch")):
                    return await self._watch(request, rt, ns)
                return self._list(rt, ns, q)
            if request.method == "POST":
                body = await self._body(request)
                obj, warnings = self.store.create(rt, ns, body, dry_run=q.get("dryRun") == "All",
                                                  strict=q.get("fieldValidation") == "Strict")
                return _json(obj, 201, warnings)
            if request.method == "DELETE":
                return self._delete_collection(rt, ns, q)
            raise errors.method_not_allowed(f"{request.method} is not allowed on a collection")
        if sub == "log":
            return await self._log(request, ns, name)
        if request.method == "GET":
            return _json(self.store.get(rt, ns, name))
        if request.method == "PUT":
            body = await self._body(request)
            obj, warnings = self.store.replace(rt, ns, name, body, subresource=sub,
                                               strict=q.get("fieldValidation") == "Strict",
                                               dry_run=q.get("dryRun") == "All")
            return _json(obj, 200, warnings)
        if request.method == "PATCH":
            ctype = request.content_type
            if ctype == APPLY or ctype not in _PATCH_TYPES:
                raise errors.unsupported_media(f"the body of the request was in an unknown format - accepted "
                                               f"media types include: {', '.join(_PATCH_TYPES)}")
            body = await self._body(request)
            obj, warnings = self.store.patch(rt, ns, name, body, ctype, subresource=sub,
                                             strict=q.get("fieldValidation") == "Strict",
                                             dry_run=q.get("dryRun") == "All")
            return _json(obj, 200, warnings)
        if request.method == "DELETE":
            opts = await self._body(request, optional=True) or {}
            grace = q.get("gracePeriodSeconds", opts.get("gracePeriodSeconds"))
            propagation = q.get("propagationPolicy", opts.get("propagationPolicy"))
            if propagation is None and (_flag(q.get("orphanDependents")) or opts.get("orphanDependents")):
                propagation = "Orphan"
            obj = self.store.delete(rt, ns, name, grace=int(grace) if grace is not None else None,
                                    propagation=propagation, preconditions=opts.get("preconditions"),
                                    dry_run=q.get("dryRun") == "All" or opts.get("dryRun") == ["All"])
            return _json(obj)
        raise errors.method_not_allowed(f"{request.method} is not allowed")

    async def _body(self, request: web.Request, optional: bool = False):
        raw = await request.read()
        if not raw:
            if optional:
                return None
            raise errors.bad_request("the body of the request was empty")
        try:
            return json.loads(raw)
        except ValueError:
            if optional:
                return None
            raise errors.bad_request("the body of the request was in an unknown format") from None

    # ---- list / delete collection --------------------------------------------------------------------
    def _selectors(self, rt, q):
        return (parse_label_selector(q.get("labelSelector")),
                parse_field_selector(q.get("fieldSelector"), rt.field_labels, rt.kind))

    def _list(self, rt, ns, q) -> web.Response:
        label, fld = self._selectors(rt, q)
        items = self.store.items(rt, ns, label, fld)
        meta = {"resourceVersion": str(self.store.rv)}
        limit = int(q.get("limit") or 0)
        start = 0
        if q.get("continue"):
            try:
                rv_s, start_s = q["continue"].split(":")
                start = int(start_s)
            except ValueError:
                raise errors.bad_request("continue key is not valid") from None
        if limit > 0:
            page = items[start:start + limit]
            if start + limit < len(items):
                meta["continue"] = f"{self.store.rv}:{start + limit}"
                meta["remainingItemCount"] = len(items) - start - limit
            items = page
        return _json({"kind": f"{rt.kind}List", "apiVersion": rt.api_version, "metadata": meta, "items": items})

    def _delete_collection(self, rt, ns, q) -> web.Response:
        label, fld = self._selectors(rt, q)
        items = self.store.items(rt, ns, label, fld)
        for obj in items:
            self.store.delete(rt, obj["metadata"].get("namespace"), obj["metadata"]["name"])
        return _json({"kind": f"{rt.kind}List", "apiVersion": rt.api_version,
                      "metadata": {"resourceVersion": str(self.store.rv)}, "items": items})

    # ---- watch --------------------------------------------------------------------------------------
    async def _watch(self, request: web.Request, rt, ns) -> web.StreamResponse:
        q = request.query
        label, fld = self._selectors(rt, q)
        watcher = self.store.watch(rt, ns, label, fld, q.get("resourceVersion"))
        timeout = float(q["timeoutSeconds"]) if q.get("timeoutSeconds") else None
        bookmarks = _flag(q.get("allowWatchBookmarks"))
        resp = web.StreamResponse(headers={"Content-Type": "application/json", "Transfer-Encoding": "chunked"})
        await resp.prepare(request)
        self._streams.add(resp)
        deadline = time.monotonic() + timeout if timeout else None
        try:
            while True:
                wait = self.bookmark_interval if bookmarks else None
                if deadline is not None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    wait = min(wait, left) if wait else left
                try:
                    item = await asyncio.wait_for(watcher.queue.get(), wait) if wait else await watcher.queue.get()
                except asyncio.TimeoutError:
                    if bookmarks and (deadline is None or time.monotonic() < deadline):
                        mark = {"type": "BOOKMARK", "object": {"kind": rt.kind, "apiVersion": rt.api_version,
                                                               "metadata": {"resourceVersion": str(self.store.rv)}}}
                        await resp.write((json.dumps(mark) + "\n").encode())
                    continue
                if item is CLOSE:
                    break
                chunk = item
                while not watcher.queue.empty():  # coalesce what is already queued into one write
                    nxt = watcher.queue.get_nowait()
                    if nxt is CLOSE:
                        await resp.write(chunk)
                        return resp
                    chunk += nxt
                await resp.write(chunk)
        except ConnectionResetError:  # the client went away
            pass
        finally:
            self.store.unwatch(watcher)
            self._streams.discard(resp)
        return resp

    # ---- pod logs ------------------------------------------------------------------------------------
    async def _log(self, request: web.Request, ns: str, name: str) -> web.StreamResponse:
        q = request.query
        pods = self.store.rt("", "v1", "pods")
        pod = self.store.get(pods, ns, name)
        containers = [c["name"] for c in pod["spec"].get("containers") or []]
        inits = [c["name"] for c in pod["spec"].get("initContainers") or []]
        container = q.get("container")
        if not container:
            if len(containers) != 1:
                raise errors.bad_request(f"a container name must be specified for pod {name}, choose one of: "
                                         f"[{' '.join(containers)}]")
            container = containers[0]
        if container not in containers + inits:
            raise errors.bad_request(f"container {container} is not valid for pod {name}")
        if not self.logs.has(ns, name, container):
            reason = "ContainerCreating"
            for st in (pod.get("status") or {}).get("containerStatuses") or []:
                if st.get("name") == container and "waiting" in (st.get("state") or {}):
                    reason = st["state"]["waiting"].get("reason", reason)
            raise errors.bad_request(f'container "{container}" in pod "{name}" is waiting to start: {reason}')
        log = self.logs.container(ns, name, container)
        tail = int(q["tailLines"]) if q.get("tailLines") else None
        since = None
        if q.get("sinceTime"):
            try:
                since = dt.datetime.fromisoformat(q["sinceTime"].replace("Z", "+00:00"))
            except ValueError:
                raise errors.bad_request(f"invalid sinceTime: {q['sinceTime']!r}") from None
        elif q.get("sinceSeconds"):
            since = dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=int(q["sinceSeconds"]))
        stamps = _flag(q.get("timestamps"))
        lines = logs.select(log, tail, since)
        if not _flag(q.get("follow")):
            return web.Response(text="".join(logs.format_line(w, t, stamps) for w, t in lines),
                                content_type="text/plain")
        resp = web.StreamResponse(headers={"Content-Type": "text/plain", "Transfer-Encoding": "chunked"})
        await resp.prepare(request)
        self._streams.add(resp)
        try:
            sent = len(log.lines)
            if lines:
                await resp.write("".join(logs.format_line(w, t, stamps) for w, t in lines).encode())
            while True:
                if len(log.lines) > sent:
                    fresh = log.lines[sent:]
                    sent += len(fresh)
                    await resp.write("".join(logs.format_line(w, t, stamps) for w, t in fresh).encode())
                    continue
                if log.terminated:
                    break
                await log.changed.wait()
        except ConnectionResetError:  # the client went away
            pass
        finally:
            self._streams.discard(resp)
        return resp
