"""Run the stand-in as its own process:

    .venv/bin/python -m tests.kubeapi --port 8001 --kubeconfig /tmp/standin.kubeconfig [--kubelet status|process]
        [--nodes nodes.json]   (a JSON list of {"name", "allocatable", "labels", "taints"} for the kubelet)

It writes a kubeconfig pointing at itself, prints the URL, and serves until SIGINT/SIGTERM.
Test controls are at /_standin/{faults,requests,cut-watches,compact}.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal

from aiohttp import web

from .kubelet import Kubelet
from .standin import build, write_kubeconfig


async def main(args) -> None:
    api = await build(bookmark_interval=args.bookmark_interval)
    nodes = json.loads(open(args.nodes).read()) if args.nodes else None
    kubelet = Kubelet(api.store, api.logs, args.kubelet, workdir=args.workdir, nodes=nodes) if args.kubelet else None
    runner = web.AppRunner(api.app(), access_log=None, handle_signals=False, shutdown_timeout=1)
    await runner.setup()
    site = web.TCPSite(runner, args.host, args.port, reuse_address=True)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    url = f"http://{args.host}:{port}"
    if args.kubeconfig:
        write_kubeconfig(args.kubeconfig, url, args.namespace)
    print(f"kubeapi stand-in serving on {url}" + (f"; kubeconfig: {args.kubeconfig}" if args.kubeconfig else ""),
          flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    if kubelet:
        await kubelet.shutdown()
    api.cut_watches()
    await runner.cleanup()


def parse(argv=None):
    p = argparse.ArgumentParser(prog="python -m tests.kubeapi", description="Kubernetes API stand-in for tests")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0 picks a free port (printed)")
    p.add_argument("--kubeconfig", help="write a kubeconfig for this server here")
    p.add_argument("--namespace", default="default", help="the kubeconfig context's namespace")
    p.add_argument("--kubelet", choices=["status", "process"], help="run an emulated kubelet")
    p.add_argument("--workdir", help="process-mode kubelet's pod files (default under /tmp)")
    p.add_argument("--nodes", help="a JSON file listing the kubelet's nodes (default: one CPU node)")
    p.add_argument("--bookmark-interval", type=float, default=5.0)
    return p.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse()))
