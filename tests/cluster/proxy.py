"""A fault-injecting HTTPS proxy in front of the real kube-apiserver, for tests.

`FaultProxy(upstream, ca, serving, client).start()` listens on 127.0.0.1 (a free port) with TLS
(`serving`, a pair issued by the cluster CA for 127.0.0.1) and asks for, but does not require, a
client certificate signed by `ca`. What it guarantees:

* Every request (any method, path, query, body up to 64 MiB, headers minus hop-by-hop ones and
  Host) is forwarded to `upstream` over TLS verified against `ca`, and the response comes back
  with its status, headers (Content-Type, Warning, ...) and body unchanged, streamed chunk by chunk
  as it arrives: watches and followed pod logs are never buffered. Connection pools are unbounded
  and streams have no total timeout.
* The caller's identity is preserved. A request with an `Authorization` header is forwarded as is
  (with any `Impersonate-*` headers: the API server checks the token's right to impersonate) and
  without a client certificate. A request that presented a client certificate is forwarded with
  the proxy's own certificate (`client`, a system:masters identity) plus `Impersonate-User: <CN>`
  and one `Impersonate-Group: <O>` per organization, so authentication and RBAC see the caller.
  Any other request is forwarded anonymously. `Impersonate-*` headers a caller sent without a
  token are dropped.
* Test controls, thread-safe and callable from sync tests or async tests on another loop, with the
  semantics of the former stand-in: `inject_fault` (answer the next matching requests with a
  `kind: Status` error, after an optional delay, or hang), `clear_faults`, `requests` (every
  request the proxy received, in order, faulted ones included), `clear_requests`, `cut_watches`
  (end every open watch stream), `force_gone` (answer the next matching watches that resume from a
  resourceVersion as the API server answers a too-old one: 200 and one `ERROR` event with a 410
  `Expired` Status), `expire_watches` (cut every open watch; resuming any of them from a
  resourceVersion is answered that 410 until the client re-lists, as after etcd compaction plus a
  dropped connection), `clear_gone` and `open_watches`.
* Client disconnects end the matching upstream request quietly; `stop()` ends all streams.

Not supported: protocol upgrades (exec/attach/port-forward over SPDY or WebSocket).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import logging
import os
import re
import ssl
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import aiohttp
from aiohttp import web
from yarl import URL

log = logging.getLogger(__name__)

MAX_BODY = 64 * 1024 * 1024
_HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
                         "trailer", "trailers", "transfer-encoding", "upgrade", "host"})
_REQUEST_DROP = _HOP_BY_HOP | {"content-length"}  # aiohttp sets it from the body it sends
# headers aiohttp would add on its own: forward only what the client sent (a body without a
# Content-Type must stay without one: the API server reads it as JSON, not octet-stream)
_NO_AUTO = ("Content-Type", "User-Agent", "Accept", "Accept-Encoding")
_REASONS = {409: "Conflict", 429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable",
            504: "Timeout", 403: "Forbidden", 404: "NotFound", 410: "Expired"}


@dataclass
class Fault:
    method: str | None
    path: re.Pattern
    status: int | None  # None: a hang (the client times out)
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


@dataclass
class _Gone:
    """`force_gone`: the next `count` resuming watches whose path_qs matches `path` are answered 410."""
    path: re.Pattern | None
    count: int
    event: bool = True


@dataclass(eq=False)
class _Stream:
    request: web.Request
    response: web.StreamResponse
    watch: bool
    pump: asyncio.Task | None = None
    cut: bool = False
    abrupt: bool = False


def status_body(code: int, message: str, reason: str | None = None) -> dict:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason or _REASONS.get(code, "InternalError"), "code": code}


def _json(obj: dict, status: int, headers: dict | None = None) -> web.Response:
    return web.Response(body=json.dumps(obj).encode(), status=status, content_type="application/json",
                        headers=headers)


def _is_watch(request: web.Request) -> bool:
    return request.method == "GET" and request.query.get("watch", "").lower() in ("true", "1")


def _resumes(request: web.Request) -> bool:
    """A watch that starts from a specific resourceVersion (not "any" or "most recent")."""
    return request.query.get("resourceVersion", "") not in ("", "0")


def _watch_key(request: web.Request) -> tuple:
    q = request.query
    return request.path, q.get("labelSelector", ""), q.get("fieldSelector", "")


def _peer_identity(request: web.Request) -> tuple[str, list[str]] | None:
    """CN and organizations of the verified client certificate, if the caller presented one."""
    transport = request.transport
    cert = transport.get_extra_info("peercert") if transport else None
    if not cert:
        return None
    cn, orgs = None, []
    for rdn in cert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                cn = value
            elif key == "organizationName":
                orgs.append(value)
    return (cn, orgs) if cn else None


class FaultProxy:
    """The proxy on a private event loop in a daemon thread; see the module docstring."""

    def __init__(self, upstream: str, ca: str | os.PathLike, serving, client, *, host: str = "127.0.0.1",
                 port: int = 0):
        """`serving` and `client` are cert/key pairs (objects with `.cert` and `.key` paths, such as
        `tests.cluster.pki.Pair`, or `(cert, key)` tuples)."""
        self.upstream = upstream.rstrip("/")
        self.ca = str(ca)
        self.serving, self.client = _pair(serving), _pair(client)
        self.host, self.port = host, port
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="fault-proxy", daemon=True)
        self._runner: web.AppRunner | None = None
        self._plain: aiohttp.ClientSession | None = None  # token or anonymous callers
        self._masters: aiohttp.ClientSession | None = None  # the proxy's own certificate, impersonating
        self._faults: list[Fault] = []
        self._gone: list[_Gone] = []
        self._expired: set[tuple] = set()  # (path, labelSelector, fieldSelector) of expired watches
        self._requests: list[RequestRecord] = []
        self._streams: set[_Stream] = set()

    # ---- lifecycle ------------------------------------------------------------------------------
    def start(self) -> "FaultProxy":
        self._thread.start()
        try:
            self._run(self._astart())
        except BaseException:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
            raise
        return self

    async def _astart(self) -> None:
        server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=self.ca)
        server_ctx.load_cert_chain(*self.serving)
        server_ctx.verify_mode = ssl.CERT_OPTIONAL
        plain_ctx = ssl.create_default_context(cafile=self.ca)
        masters_ctx = ssl.create_default_context(cafile=self.ca)
        masters_ctx.load_cert_chain(*self.client)
        timeout = aiohttp.ClientTimeout(total=None, connect=30, sock_connect=10, sock_read=None)
        self._plain = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=plain_ctx, limit=0),
                                            timeout=timeout, auto_decompress=False, skip_auto_headers=_NO_AUTO)
        self._masters = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=masters_ctx, limit=0),
                                              timeout=timeout, auto_decompress=False, skip_auto_headers=_NO_AUTO)
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1,
                                     handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, ssl_context=server_ctx, reuse_address=True)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self.port}"

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        try:
            self._run(self._astop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
            if not self._thread.is_alive():
                self.loop.close()

    async def _astop(self) -> None:
        self._cut(lambda s: True)
        if self._runner:
            await self._runner.cleanup()
        for session in (self._plain, self._masters):
            if session:
                await session.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def _run(self, coro, timeout: float = 60) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def call(self, fn: Callable, *args, **kwargs) -> Any:
        """Run `fn(*args, **kwargs)` on the proxy loop and return its result (or raise its error)."""
        if threading.current_thread() is self._thread:
            return fn(*args, **kwargs)
        fut: concurrent.futures.Future = concurrent.futures.Future()

        def run():
            try:
                fut.set_result(fn(*args, **kwargs))
            except BaseException as e:  # handed to the caller's thread
                fut.set_exception(e)

        self.loop.call_soon_threadsafe(run)
        return fut.result(30)

    # ---- test controls (thread-safe) --------------------------------------------------------------
    def inject_fault(self, method: str | None, path: str, status: int | None = 500, count: int = 1,
                     delay: float = 0.0) -> None:
        """Answer the next `count` requests whose method is `method` (None: any) and whose path and
        query match the regex `path` (re.search) with a `kind: Status` error `status`, after `delay`
        seconds; `status=None` hangs the request (the client times out)."""
        fault = Fault(method.upper() if method else None, re.compile(path), status, count, delay)
        self.call(self._faults.append, fault)

    def clear_faults(self) -> None:
        self.call(self._faults.clear)

    def requests(self, method: str | None = None, path: str | None = None) -> list[RequestRecord]:
        """Every request received, in order; `path` filters by substring of the request path."""
        records = self.call(lambda: list(self._requests))
        return [r for r in records if (method is None or r.method == method) and (path is None or path in r.path)]

    def clear_requests(self) -> None:
        self.call(self._requests.clear)

    def open_watches(self) -> list[RequestRecord]:
        """The watch streams open now (their response has started)."""
        return self.call(lambda: [RequestRecord(s.request.method, s.request.path, dict(s.request.query))
                                  for s in self._streams if s.watch and not s.cut])

    def cut_watches(self, abrupt: bool = False) -> int:
        """End every open watch stream and return how many: the chunked body ends cleanly (as the
        API server ends a watch), or with `abrupt` the connection is dropped mid-stream."""
        return self.call(self._cut, lambda s: s.watch, abrupt)

    def force_gone(self, path_regex: str | None = None, count: int = 1, *, event: bool = True) -> None:
        """Answer the next `count` watches that resume from a resourceVersion (and whose path and
        query match `path_regex`, if given) as a too-old resourceVersion: 200 with one ERROR event
        carrying a 410 `Expired` Status, then the end of the stream. `event=False` answers HTTP 410
        with the Status body instead."""
        gone = _Gone(re.compile(path_regex) if path_regex is not None else None, count, event)
        self.call(self._gone.append, gone)

    def clear_gone(self) -> None:
        """Forget pending `force_gone` answers and `expire_watches` expiries."""
        def clear():
            self._gone.clear()
            self._expired.clear()
        self.call(clear)

    def expire_watches(self) -> int:
        """Cut every open watch and expire its history, as etcd compaction plus dropped connections
        would; returns how many were cut. From then on, a watch on a cut watch's path and selectors
        that resumes from a resourceVersion is answered 410 (the ERROR event of `force_gone`), until
        the client starts over: a list (GET without watch) or a watch without a resourceVersion on
        that path and selectors ends the expiry. So a client that retries the same resourceVersion
        gets 410 again, and one that re-lists watches on normally."""
        def expire() -> int:
            self._expired.update(_watch_key(s.request) for s in self._streams if s.watch and not s.cut)
            return self._cut(lambda s: s.watch)
        return self.call(expire)

    # ---- on the proxy loop --------------------------------------------------------------------
    def _cut(self, which: Callable[[_Stream], bool], abrupt: bool = False) -> int:
        n = 0
        for s in list(self._streams):
            if which(s) and not s.cut:
                s.cut, s.abrupt = True, abrupt
                if s.pump:
                    s.pump.cancel()
                n += s.watch
        return n

    def _take_fault(self, request: web.Request) -> Fault | None:
        for f in self._faults:
            if f.count > 0 and f.matches(request):
                f.count -= 1
                if f.count == 0:
                    self._faults.remove(f)
                return f
        return None

    def _take_gone(self, request: web.Request) -> _Gone | None:
        resumes = _resumes(request)
        key = _watch_key(request)
        if key in self._expired:
            if resumes:
                return _Gone(None, 0)
            self._expired.discard(key)  # a fresh watch: the client started over
        if not resumes:
            return None
        for g in self._gone:
            if g.count > 0 and (g.path is None or g.path.search(request.path_qs)):
                g.count -= 1
                if g.count == 0:
                    self._gone.remove(g)
                return g
        return None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self._requests.append(RequestRecord(request.method, request.path, dict(request.query)))
        fault = self._take_fault(request)
        if fault:
            if fault.delay:
                await asyncio.sleep(fault.delay)
            if fault.status is None:
                await asyncio.sleep(3600)
            code = fault.status or 504  # a hang that outlived its client's patience: a gateway timeout
            return _json(status_body(code, f"injected fault ({code})"), code,
                         {"Retry-After": "1"} if code == 429 else None)
        if _is_watch(request):
            gone = self._take_gone(request)
            if gone:
                return await self._answer_gone(request, gone)
        elif request.method == "GET" and self._expired:
            self._expired.discard(_watch_key(request))  # a re-list: the client starts over
        return await self._forward(request)

    async def _answer_gone(self, request: web.Request, gone: _Gone) -> web.StreamResponse:
        rv = request.query.get("resourceVersion", "")
        try:
            oldest = str(int(rv) + 1)
        except ValueError:
            oldest = rv
        status = status_body(410, f"too old resource version: {rv} ({oldest})", "Expired")
        if not gone.event:
            return _json(status, 410)
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        with contextlib.suppress(ConnectionError):
            await resp.prepare(request)
            await resp.write((json.dumps({"type": "ERROR", "object": status}) + "\n").encode())
            await resp.write_eof()
        return resp

    def _upstream_headers(self, request: web.Request) -> tuple[aiohttp.ClientSession, list[tuple[str, str]]]:
        token = "Authorization" in request.headers
        headers = [(k, v) for k, v in request.headers.items()
                   if k.lower() not in _REQUEST_DROP and (token or not k.lower().startswith("impersonate-"))]
        if token:
            return self._plain, headers
        identity = _peer_identity(request)
        if identity is None:
            return self._plain, headers
        cn, orgs = identity
        headers.append(("Impersonate-User", cn))
        headers.extend(("Impersonate-Group", o) for o in orgs)
        return self._masters, headers

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        body = await request.read() if request.body_exists else None
        session, headers = self._upstream_headers(request)
        url = URL(self.upstream + request.raw_path, encoded=True)
        try:
            up = await session.request(request.method, url, headers=headers, data=body, allow_redirects=False)
        except aiohttp.ClientError as e:
            return _json(status_body(502, f"fault proxy: upstream request failed: {e!r}", "InternalError"), 502)
        stream = None
        try:
            resp = web.StreamResponse(status=up.status, reason=up.reason)
            for k, v in up.headers.items():
                if k.lower() not in _HOP_BY_HOP:
                    resp.headers.add(k, v)
            try:
                await resp.prepare(request)
            except ConnectionError:
                return resp
            stream = _Stream(request, resp, _is_watch(request))
            stream.pump = asyncio.ensure_future(self._pump(up, resp))
            self._streams.add(stream)
            await asyncio.wait([stream.pump])  # the handler's own cancellation still propagates
            if stream.cut:
                if stream.abrupt:
                    self._abort(request)
                else:
                    with contextlib.suppress(ConnectionError):
                        await resp.write_eof()
            elif stream.pump.exception() is not None:
                exc = stream.pump.exception()
                if not isinstance(exc, ConnectionError):  # the upstream broke: so does the client's stream
                    log.debug("fault proxy: upstream stream of %s %s failed: %r", request.method, request.path, exc)
                self._abort(request)
            return resp
        finally:
            clean = stream is not None and stream.pump.done() and not stream.pump.cancelled() \
                and stream.pump.exception() is None
            if stream is not None:
                self._streams.discard(stream)
                stream.pump.cancel()
            if clean:
                up.release()  # read to the end: the connection goes back to the pool
            else:
                up.close()

    @staticmethod
    async def _pump(up: aiohttp.ClientResponse, resp: web.StreamResponse) -> None:
        async for chunk in up.content.iter_any():
            await resp.write(chunk)
        await resp.write_eof()

    @staticmethod
    def _abort(request: web.Request) -> None:
        transport = request.transport
        if transport is not None:
            transport.abort()


def _pair(pair) -> tuple[str, str]:
    if hasattr(pair, "cert"):
        return str(pair.cert), str(pair.key)
    cert, key = pair
    return str(cert), str(key)
