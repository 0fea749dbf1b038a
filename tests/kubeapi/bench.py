"""Benchmark of the Kubernetes API stand-in (not a test): prints figures, asserts nothing.

    .venv/bin/python -m tests.kubeapi.bench      (or: make bench)

1. Simple GETs per second (one ConfigMap by name, 16 concurrent keep-alive connections), next to a
   baseline measured the same way in the same run: a bare aiohttp handler answering a fixed JSON
   body, i.e. the ceiling of the HTTP stack the stand-in is built on.
2. Fan-out: 10 watchers on one namespace; 1,000 ConfigMaps are created (8 concurrent POSTs); the
   time from the first POST until every watcher has received all 1,000 ADDED events.

The server runs in its own process (as `python -m tests.kubeapi`), so client and server each get a
core of this 2-core machine.
"""

from __future__ import annotations

import asyncio
import json
import pathlib
import subprocess
import sys
import time

import aiohttp

ROOT = pathlib.Path(__file__).resolve().parents[2]
BASELINE = """
import sys
from aiohttp import web
body = b'{"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "c", "namespace": "bench"}, "data": {}}'
async def h(request):
    return web.Response(body=body, content_type="application/json")
app = web.Application(); app.router.add_get("/{tail:.*}", h)
print("serving on http://127.0.0.1:%s" % sys.argv[1], flush=True)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None)
"""


def start(cmd: list[str]) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    return proc, line.split("serving on ")[1].split(";")[0].strip()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def gets_per_second(url: str, seconds: float = 3.0, concurrency: int = 16) -> float:
    count = 0
    deadline = time.perf_counter() + seconds
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:
        async def worker():
            nonlocal count
            while time.perf_counter() < deadline:
                async with session.get(url) as r:
                    await r.read()
                    assert r.status == 200, r.status
                count += 1

        start_t = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return count / (time.perf_counter() - start_t)


async def fan_out(base: str, watchers: int = 10, events: int = 1000) -> tuple[float, float]:
    ns_url = f"{base}/api/v1/namespaces/fanout/configmaps"
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as session:
        async with session.post(f"{base}/api/v1/namespaces", json={"metadata": {"name": "fanout"}}) as r:
            assert r.status == 201
        async with session.get(ns_url) as r:
            rv = (await r.json())["metadata"]["resourceVersion"]
        done = [asyncio.get_running_loop().create_future() for _ in range(watchers)]

        async def watch(i):
            seen = 0
            async with session.get(ns_url, params={"watch": "true", "resourceVersion": rv}) as r:
                async for line in r.content:
                    if json.loads(line)["type"] == "ADDED":
                        seen += 1
                        if seen == events:
                            done[i].set_result(time.perf_counter())
                            return

        tasks = [asyncio.ensure_future(watch(i)) for i in range(watchers)]
        await asyncio.sleep(0.5)  # watches established
        queue = list(range(events))
        t0 = time.perf_counter()

        async def writer():
            while queue:
                n = queue.pop()
                async with session.post(ns_url, json={"metadata": {"name": f"c{n}"}, "data": {"n": str(n)}}) as r:
                    assert r.status == 201, await r.text()

        await asyncio.gather(*(writer() for _ in range(8)))
        writes_done = time.perf_counter() - t0
        last = max(await asyncio.gather(*done))
        for t in tasks:
            t.cancel()
        return writes_done, last - t0


async def main() -> None:
    standin, url = start([sys.executable, "-m", "tests.kubeapi", "--port", "0"])
    baseline, burl = start([sys.executable, "-c", BASELINE, str(free_port())])
    try:
        async with aiohttp.ClientSession() as s:
            await s.post(f"{url}/api/v1/namespaces", json={"metadata": {"name": "bench"}})
            await s.post(f"{url}/api/v1/namespaces/bench/configmaps", json={"metadata": {"name": "c"}, "data": {}})
        target = f"{url}/api/v1/namespaces/bench/configmaps/c"
        await gets_per_second(target, 0.5)  # warm-up
        base_rate = await gets_per_second(f"{burl}/api/v1/namespaces/bench/configmaps/c")
        rate = await gets_per_second(target)
        writes, fan = await fan_out(url)
    finally:
        for p in (standin, baseline):
            p.terminate()
            p.wait(10)
    print(f"simple GETs/s:   stand-in {rate:8.0f}   bare aiohttp baseline {base_rate:8.0f}   "
          f"({rate / base_rate:.0%} of baseline)")
    print(f"fan-out:         1000 events to 10 watchers in {fan:.3f} s "
          f"(of which the 1000 POSTs took {writes:.3f} s)")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    asyncio.run(main())
