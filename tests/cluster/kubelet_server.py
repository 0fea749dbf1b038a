"""The test kubelet's HTTPS port: what the API server calls for `pods/{name}/log`.

`GET /containerLogs/{namespace}/{pod}/{container}` with `follow`, `tailLines`, `sinceTime`,
`sinceSeconds`, `timestamps` and `limitBytes`, as the kubelet serves it; a container that has not
started answers 400 with the kubelet's wording ("is waiting to start"), which the API server
passes on. `/healthz` answers ok. The API server runs without `--kubelet-certificate-authority`,
so the serving certificate is only checked for being TLS; callers are not authenticated (debt: a
real kubelet checks the API server's client certificate).
"""

from __future__ import annotations

import datetime as dt
import ssl

from aiohttp import web

from tests.cluster.logs import PodLogs, format_line, select


def _time(value: str) -> dt.datetime:
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))


def _flag(value: str | None) -> bool:
    return (value or "").lower() in ("true", "1")


def app(logs: PodLogs, pods) -> web.Application:
    """`pods()` returns the kubelet's {(ns, name): pod} map (to tell a waiting container from none)."""

    async def container_logs(request: web.Request) -> web.StreamResponse:
        ns, name, container = (request.match_info[k] for k in ("ns", "pod", "container"))
        q = request.query
        if not logs.has(ns, name, container):
            pod = pods().get((ns, name))
            if pod is None:
                raise web.HTTPNotFound(text=f'pod "{name}" not found')
            raise web.HTTPBadRequest(text=f'container "{container}" in pod "{name}" is waiting to start: '
                                          "ContainerCreating")
        clog = logs.container(ns, name, container)
        try:
            tail = int(q["tailLines"]) if "tailLines" in q else None
            since = _time(q["sinceTime"]) if "sinceTime" in q else None
            if "sinceSeconds" in q:
                since = dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=int(q["sinceSeconds"]))
            limit = int(q["limitBytes"]) if "limitBytes" in q else None
        except ValueError as e:
            raise web.HTTPBadRequest(text=str(e))
        timestamps = _flag(q.get("timestamps"))
        resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await resp.prepare(request)
        sent = 0

        async def send(entries) -> bool:
            nonlocal sent
            data = "".join(format_line(when, line, timestamps) for when, line in entries).encode()
            if limit is not None:
                data = data[:max(0, limit - sent)]
            if data:
                await resp.write(data)
                sent += len(data)
            return limit is None or sent < limit

        entries = select(clog, tail, since)
        seen = len(clog.lines) if tail is not None or since is not None else len(entries)
        more = await send(entries)
        if _flag(q.get("follow")):
            while more and not clog.terminated and logs.has(ns, name, container):
                changed = clog.changed
                await changed.wait()
                new, seen = clog.lines[seen:], len(clog.lines)
                more = await send(new)
        await resp.write_eof()
        return resp

    async def healthz(_request: web.Request) -> web.Response:
        return web.Response(text="ok")

    application = web.Application()
    application.router.add_get("/containerLogs/{ns}/{pod}/{container}", container_logs)
    application.router.add_get("/healthz", healthz)
    return application


async def serve(logs: PodLogs, pods, cert: str, key: str, port: int) -> web.AppRunner:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    runner = web.AppRunner(app(logs, pods), access_log=None, handle_signals=False, shutdown_timeout=0.5)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port, ssl_context=ctx, reuse_address=True).start()
    return runner

