"""The operator's probes and metrics on one small HTTP port (plain HTTP: the kubelet probes it).

- ``/healthz``: 200 while the process serves (liveness);
- ``/readyz``: 200 once the webhook server answers a TLS handshake with its certificate and kopf
  is ready, and until the process begins to stop; else 503 naming what is missing (readiness: the
  Service sends the API server's webhook calls only to ready replicas);
- ``/metrics``: Prometheus text: ``mlplatform_operator_leader`` (1 on the leader) and the counters
  in `Metrics` (webhook reviews by webhook and result, dataset loads by result).
"""

from __future__ import annotations

import asyncio
import inspect
import ssl
from collections import Counter
from typing import Awaitable, Callable, Union

from aiohttp import web

class Metrics:
    def __init__(self) -> None:
        self.counts: Counter[tuple[str, tuple[tuple[str, str], ...]]] = Counter()

    def inc(self, name: str, **labels: str) -> None:
        self.counts[(name, tuple(sorted(labels.items())))] += 1

    def text(self, gauges: dict[str, float]) -> str:
        lines = [f"{name} {value:g}" for name, value in gauges.items()]
        for (name, labels), value in sorted(self.counts.items()):
            inner = ",".join(f'{k}="{v}"' for k, v in labels)
            lines.append(f"{name}{{{inner}}} {value}")
        return "\n".join(lines) + "\n"

Check = Callable[[], Union[bool, Awaitable[bool]]]


async def tls_listening(addr: str, port: int) -> bool:
    """Whether a TLS handshake with the webhook server succeeds (any certificate: this is about
    the listener, the API server checks the certificate itself)."""
    host = "127.0.0.1" if addr in ("", "0.0.0.0", "::") else addr
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port, ssl=context), 2)
    except (OSError, asyncio.TimeoutError, ssl.SSLError):
        return False
    writer.close()
    return True


async def serve(addr: str, port: int, checks: dict[str, Check], metrics: Metrics,
                gauges: Callable[[], dict[str, float]]) -> web.AppRunner:
    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def readyz(_: web.Request) -> web.Response:
        missing = []
        for name, check in checks.items():
            result = check()
            if not (await result if inspect.isawaitable(result) else result):
                missing.append(name)
        if missing:
            return web.Response(status=503, text="not ready: " + ", ".join(missing) + "\n")
        return web.Response(text="ok\n")

    async def metrics_text(_: web.Request) -> web.Response:
        return web.Response(text=metrics.text(gauges()), content_type="text/plain")

    app = web.Application()
    app.add_routes([web.get("/healthz", healthz), web.get("/readyz", readyz), web.get("/metrics", metrics_text)])
    runner = web.AppRunner(app, handle_signals=False, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, addr, port).start()
    return runner

