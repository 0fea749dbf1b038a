"""Benchmark (not a test: prints figures, asserts nothing) of the hub-side cost of a spawn:
PlatformSpawner next to stock KubeSpawner asking for the same resources, in one run. Stock runs
twice: all pods in one namespace (its default), and with `enable_user_namespaces` (a namespace
per user, the layout PlatformSpawner's personal projects have).

    .venv/bin/python -m tests.bench.spawn [--spawns 64]      (or: make bench)

The stand-in runs in its own process with a status-mode kubelet (pods go Running by themselves)
on 10 DGX-like nodes with 7 MIG 1g.5gb slices each. For each spawner, N servers (N users) start
at once; each start() is timed (hub side: from the call until the pod runs, which includes the
same emulated scheduling for both), and the stand-in's request log gives API requests and writes
per spawn. Round 1 is each user's first spawn (PlatformSpawner provisions a project namespace per
user then); all servers stop, and round 2 is the later spawns. Capacity requests are the node
and cluster-pod list/watch requests made during a round: the capacity view's two watches, not
one per spawn.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
import types

import aiohttp

ROOT = pathlib.Path(__file__).resolve().parents[2]
TAINT = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
NODES = [{"name": f"dgx-{i:02d}", "allocatable": {"cpu": "256", "memory": "2Ti", "pods": "250",
                                                   "nvidia.com/mig-1g.5gb": "7"}, "taints": TAINT}
         for i in range(10)]
RESOURCES = {"cpu_limit": 4.0, "mem_limit": "16G"}
PLATFORM = {
    "accelerators": {"1g.5gb": {"type": "mig", "profile": "1g.5gb"}},
    "profiles": {"mig": {"display_name": "MIG 1g.5gb", "accelerator": "1g.5gb", "cpu": {"limit": 4},
                         "memory": {"limit": "16G"}}},
    "everyone": {"profiles": ["mig"], "limits": {"1g.5gb": 1}},
}


KINDS = ("stock KubeSpawner", "stock KubeSpawner, user namespaces", "PlatformSpawner",
         "PlatformSpawner, token in env")


def start_standin(tmp: pathlib.Path):
    nodes = tmp / "nodes.json"
    nodes.write_text(json.dumps(NODES))
    kubeconfig = tmp / "kubeconfig"
    proc = subprocess.Popen([sys.executable, "-m", "tests.kubeapi", "--kubelet", "status", "--nodes", str(nodes),
                             "--kubeconfig", str(kubeconfig), "--bookmark-interval", "5"],
                            cwd=ROOT, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    url = line.split("serving on ")[1].split(";")[0].strip()
    return proc, url, kubeconfig


def user(i: int):  # each spawner kind gets users of its own, so every first spawn is a real first one
    return types.SimpleNamespace(name=f"user{i:03d}@example.com", id=i + 1, url=f"/user/u{i}/", settings={},
                                 admin=False, groups=[])


def make(kind: str, url: str, i: int):
    from jupyterhub.objects import Hub
    from kubespawner import KubeSpawner

    from hub_ext.kube_spawner import PlatformSpawner

    hub = Hub(ip="127.0.0.1", port=8081, base_url="/hub/")
    common = dict(user=user(i), hub=hub, k8s_api_host=url, api_token=f"token-{i}", oauth_client_id=f"c-{i}",
                  start_timeout=120, http_timeout=30, image="quay.io/jupyterhub/k8s-singleuser-sample:4.0.0",
                  cmd=["jupyterhub-singleuser"], events_enabled=True)
    if kind.startswith("stock KubeSpawner"):
        where = {"enable_user_namespaces": True} if "namespaces" in kind else {"namespace": "default"}
        return KubeSpawner(**where, extra_resource_limits={"nvidia.com/mig-1g.5gb": "1"},
                           tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                           **RESOURCES, **common)
    spawner = PlatformSpawner(**PLATFORM, api_token_secret=(kind == "PlatformSpawner"), **common)
    spawner.user_options = {"profile": "mig"}
    return spawner


async def control(url: str, method: str, action: str):
    async with aiohttp.ClientSession() as s:
        async with s.request(method, f"{url}/_standin/{action}") as r:
            return await r.json() if method == "GET" else None


def is_capacity(r) -> bool:
    """A request of the capacity view: nodes, or the cluster-wide list/watch of non-terminated pods."""
    return r["path"] == "/api/v1/nodes" or (
        r["path"] == "/api/v1/pods" and "status.phase" in r["query"].get("fieldSelector", ""))


async def timed_round(spawners):
    async def one(sp):
        t = time.perf_counter()
        await sp.start()
        return (time.perf_counter() - t) * 1000
    return await asyncio.gather(*(one(sp) for sp in spawners))


def server_cpu() -> float:
    """CPU seconds the stand-in process has used (user + system)."""
    fields = pathlib.Path(f"/proc/{PROC.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def run(kind: str, url: str, n: int) -> list[dict]:
    from kubespawner import KubeSpawner

    from hub_ext.kube_spawner import PlatformSpawner

    rows = []
    offset = 1000 * KINDS.index(kind)
    spawners = [make(kind, url, offset + i) for i in range(n)]
    for label in ("first spawn", "later spawn"):
        await control(url, "DELETE", "requests")
        cpu, server = time.process_time(), server_cpu()
        times = await timed_round(spawners)
        cpu, server = time.process_time() - cpu, server_cpu() - server
        requests = await control(url, "GET", "requests")
        writes = [r for r in requests if r["method"] in ("POST", "PUT", "PATCH", "DELETE")]
        if os.environ.get("BENCH_DEBUG"):
            print(kind, label, sorted({(r["method"], r["path"].split("/")[-1]) for r in writes}))
        rows.append({"spawner": kind, "round": label, "median_ms": statistics.median(times),
                     "p95_ms": statistics.quantiles(times, n=20)[18], "requests": len(requests) / n,
                     "writes": len(writes) / n, "capacity_requests": sum(map(is_capacity, requests)),
                     "hub_cpu_ms": cpu * 1000 / n, "api_cpu_ms": server * 1000 / n})
        await asyncio.gather(*(sp.stop(now=True) for sp in spawners))
        await asyncio.sleep(1.0)  # the kubelet removes the pods
    await PlatformSpawner.stop_shared()
    await KubeSpawner._stop_all_reflectors()
    return rows


async def main(n: int) -> None:
    rows = []
    for kind in KINDS:
        rows += await run(kind, URL, n)
    print(f"\n{n} concurrent spawns per round, stand-in in its own process, status-mode kubelet\n")
    print(f"{'spawner':30} {'round':12} {'median ms':>9} {'p95 ms':>8} {'hub CPU ms':>10} {'API CPU ms':>10} "
          f"{'requests':>8} {'writes':>6} {'capacity req.':>13}")
    for r in rows:
        print(f"{r['spawner']:30} {r['round']:12} {r['median_ms']:9.1f} {r['p95_ms']:8.1f} {r['hub_cpu_ms']:10.2f} "
              f"{r['api_cpu_ms']:10.2f} {r['requests']:8.2f} {r['writes']:6.2f} {r['capacity_requests']:13d}")
    for baseline in KINDS[:2]:
        stock = {r["round"]: r for r in rows if r["spawner"] == baseline}
        for r in rows:
            if not r["spawner"].startswith("stock"):
                base = stock[r["round"]]
                print(f"{r['spawner']} / {baseline}, {r['round']}: wall ×{r['median_ms'] / base['median_ms']:.2f} "
                      f"(median), hub CPU ×{r['hub_cpu_ms'] / base['hub_cpu_ms']:.2f}, writes {r['writes']:.2f} vs "
                      f"{base['writes']:.2f} per spawn")
    print("(per spawn: hub CPU = this process's CPU time (spawners, reflectors, caches) / spawns; API CPU = the "
          "stand-in's; requests and writes = starts only; capacity req. = all node and cluster-pod list/watch "
          "requests of the round)")


if __name__ == "__main__":
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--spawns", type=int, default=64)
    n = args.parse_args().spawns
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="spawn-bench-"))
    PROC, URL, kubeconfig = start_standin(tmp)
    os.environ["KUBECONFIG"] = str(kubeconfig)
    try:
        asyncio.run(main(n))
    finally:
        PROC.terminate()
        PROC.wait(10)
