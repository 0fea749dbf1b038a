"""Benchmark (not a test: prints figures, asserts nothing) of the hub-side cost of a spawn:
PlatformSpawner next to stock KubeSpawner asking for the same resources, in one run. Stock runs
twice: all pods in one namespace (its default), and with `enable_user_namespaces` (a namespace
per user, the layout PlatformSpawner's personal projects have).

    .venv/bin/python -m tests.bench.spawn [--spawns 64]      (or: make bench)

The test cluster (the real control plane built from tests/cluster: kube-apiserver, etcd, the
controller-manager and the real scheduler, behind the fault proxy) runs in its own process
(`tests.bench.jobs_env`) with a status-mode kubelet (bound pods go Running by themselves) on 10
DGX-like nodes with 7 MIG 1g.5gb slices each. Every spawner acts as the hub's ServiceAccount of
`helm-values/hub-rbac.yaml` (not as admin). For each spawner, N servers (N users) start at once;
each start() is timed (hub side: from the call until the pod runs, which includes the same real
scheduling for both), and the proxy's request log gives API requests and writes per spawn. Round
1 is each user's first spawn (PlatformSpawner provisions a project namespace per user then); all
servers stop, and round 2 is the later spawns. Capacity requests are the node and cluster-pod
list/watch requests made during a round: the capacity view's two watches, not one per spawn.
Hub CPU is this process's CPU time (the spawners, reflectors and caches: nothing of the
cluster's); API CPU is kube-apiserver's and etcd's. A start that fails is counted, not timed.
The "PlatformSpawner, Kueue" rows run last, after the real kueue-manager is started against the
cluster (helm-values/kueue.yaml's configuration; `Server.start_kueue`): the slices are held by the
projects' queues (`queueing = "kueue"`: each pod waits behind Kueue's gate until admitted). The
rows before run without Kueue (`queueing = "off"`: ResourceQuotas): with Kueue installed that way,
a project pod without a LocalQueue would wait for ever.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import pathlib
import statistics
import tempfile
import time
import types

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
         "PlatformSpawner, token in env", "PlatformSpawner, Kueue")
API_PROCESSES = ("kube-apiserver", "etcd")
NAN = float("nan")  # a figure of a round whose starts all failed


def user(i: int):  # each spawner kind gets users of its own, so every first spawn is a real first one
    from tests.kube.platform_env import HUB_SETTINGS  # one hub: its users' spawners share its PlatformService

    return types.SimpleNamespace(name=f"user{i:03d}@example.com", id=i + 1, url=f"/user/u{i}/", settings=HUB_SETTINGS,
                                 admin=False, groups=[])


def make(kind: str, i: int):
    from jupyterhub.objects import Hub
    from kubespawner import KubeSpawner

    from hub_ext.spawners.kube import PlatformSpawner

    hub = Hub(ip="127.0.0.1", port=8081, base_url="/hub/")
    common = dict(user=user(i), hub=hub, api_token=f"token-{i}", oauth_client_id=f"c-{i}",
                  start_timeout=120, http_timeout=30, image="quay.io/jupyterhub/k8s-singleuser-sample:4.0.0",
                  cmd=["jupyterhub-singleuser"], events_enabled=True)
    if kind.startswith("stock KubeSpawner"):
        where = {"enable_user_namespaces": True} if "namespaces" in kind else {"namespace": "default"}
        return KubeSpawner(**where, extra_resource_limits={"nvidia.com/mig-1g.5gb": "1"},
                           tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                           **RESOURCES, **common)
    queueing = "kueue" if "Kueue" in kind else "off"  # the others: ResourceQuotas, as without Kueue installed
    spawner = PlatformSpawner(**PLATFORM, api_token_secret=(kind != "PlatformSpawner, token in env"),
                              queueing=queueing, **common)
    spawner.user_options = {"profile": "mig"}
    return spawner


def is_capacity(r) -> bool:
    """A request of the capacity view: nodes, or the cluster-wide list/watch of non-terminated pods."""
    return r.path == "/api/v1/nodes" or (
        r.path == "/api/v1/pods" and "status.phase" in r.query.get("fieldSelector", ""))


async def timed_round(spawners):
    async def one(sp):
        t = time.perf_counter()
        try:
            await sp.start()
        except Exception as e:  # a failed start is counted (and said once), not timed
            return e
        return (time.perf_counter() - t) * 1000
    return await asyncio.gather(*(one(sp) for sp in spawners))


async def api_cpu(server) -> tuple[float, float]:
    """(kube-apiserver's and etcd's CPU seconds, kueue-manager's) so far."""
    cpu = await server.cpu()
    return sum(cpu[name] for name in API_PROCESSES), cpu.get("kueue-manager", 0.0)


async def run(kind: str, server, n: int) -> list[dict]:
    from kubespawner import KubeSpawner

    from tests.kube.platform_env import restart_hub, stop_as_hub

    rows = []
    offset = 1000 * KINDS.index(kind)
    spawners = [make(kind, offset + i) for i in range(n)]
    for label in ("first spawn", "later spawn"):
        await server.clear_requests()
        cpu, (api, kueue) = time.process_time(), await api_cpu(server)
        results = await timed_round(spawners)
        after = await api_cpu(server)
        cpu, api, kueue = time.process_time() - cpu, after[0] - api, after[1] - kueue
        requests = await server.requests()
        times = [r for r in results if not isinstance(r, Exception)]
        failures = [r for r in results if isinstance(r, Exception)]
        if failures:
            print(f"{kind}, {label}: {len(failures)} of {n} starts failed, e.g. {str(failures[0])[:300]}")
        writes = [r for r in requests if r.method in ("POST", "PUT", "PATCH", "DELETE")]
        if os.environ.get("BENCH_DEBUG"):
            print(kind, label, sorted(collections.Counter((r.method, r.path.split("/")[-2] if r.path.count("/") > 5 else r.path.split("/")[-1]) for r in writes).items()))
        rows.append({"spawner": kind, "round": label, "median_ms": statistics.median(times) if times else NAN,
                     "p95_ms": statistics.quantiles(times, n=20)[18] if len(times) > 1 else NAN, "requests": len(requests) / n,
                     "writes": len(writes) / n, "capacity_requests": sum(map(is_capacity, requests)),
                     "hub_cpu_ms": cpu * 1000 / n, "api_cpu_ms": api * 1000 / n, "kueue_cpu_ms": kueue * 1000 / n,
                     "failed": len(failures)})
        await asyncio.gather(*(stop_as_hub(sp) for sp in spawners))  # as JupyterHub stops them
        await asyncio.sleep(1.0)  # the kubelet removes the pods
    await restart_hub()
    await KubeSpawner._stop_all_reflectors()
    return rows


STOCK_BINDING = {
    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
    "metadata": {"name": "bench-stock-kubespawner"},
    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "mlplatform-hub-project"},
    "subjects": [{"kind": "ServiceAccount", "name": "hub", "namespace": "jhub"}]}


async def main(n: int, server) -> None:
    from tests.cluster.rest import Rest

    rows = []
    admin = Rest(server.kubeconfig)
    path = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"
    try:
        for kind in KINDS:
            # stock KubeSpawner needs pods and Secrets in every namespace (cluster-wide rights the
            # platform's hub does not hold: it binds them per project): given for its rounds only
            stock = kind.startswith("stock")
            if "Kueue" in kind:
                await server.start_kueue()
            if stock:
                await admin.post(path, STOCK_BINDING)
                await asyncio.sleep(1.0)  # the authorizer sees the binding
            try:
                rows += await run(kind, server, n)
            finally:
                if stock:
                    await admin.delete(f"{path}/{STOCK_BINDING['metadata']['name']}")
    finally:
        await admin.close()
    print(f"\n{n} concurrent spawns per round; the real control plane (kube-apiserver, etcd, scheduler, "
          "controller-manager) in its own process, status-mode kubelet; every spawner acts as the hub's "
          "ServiceAccount\n")
    print(f"{'spawner':34} {'round':12} {'median ms':>9} {'p95 ms':>8} {'hub CPU ms':>10} {'API CPU ms':>10} "
          f"{'Kueue CPU ms':>12} {'requests':>8} {'writes':>6} {'capacity req.':>13} {'failed':>6}")
    for r in rows:
        print(f"{r['spawner']:34} {r['round']:12} {r['median_ms']:9.1f} {r['p95_ms']:8.1f} {r['hub_cpu_ms']:10.2f} "
              f"{r['api_cpu_ms']:10.2f} {r['kueue_cpu_ms']:12.2f} {r['requests']:8.2f} {r['writes']:6.2f} "
              f"{r['capacity_requests']:13d} {r['failed']:6d}")
    for baseline in KINDS[:2]:
        stock = {r["round"]: r for r in rows if r["spawner"] == baseline}
        for r in rows:
            if not r["spawner"].startswith("stock"):
                base = stock[r["round"]]
                print(f"{r['spawner']} / {baseline}, {r['round']}: wall ×{r['median_ms'] / base['median_ms']:.2f} "
                      f"(median), hub CPU ×{r['hub_cpu_ms'] / base['hub_cpu_ms']:.2f}, writes {r['writes']:.2f} vs "
                      f"{base['writes']:.2f} per spawn")
    print("(per spawn: hub CPU = this process's CPU time (spawners, reflectors, caches) / spawns; API CPU = "
          "kube-apiserver's and etcd's; Kueue CPU = the kueue-manager's (Kueue rows only); requests and writes = "
          "starts only, through the fault proxy; capacity req. = "
          "all node and cluster-pod list/watch requests of the round; failed = starts that raised, not timed)")


if __name__ == "__main__":
    import kubernetes_asyncio

    from tests.bench.jobs_env import Server

    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--spawns", type=int, default=64)
    n = args.parse_args().spawns
    if os.environ.get("BENCH_LOG"):  # the spawners' log (traitlets, kubespawner, mlplatform) to this file
        import logging

        logging.basicConfig(filename=os.environ["BENCH_LOG"], level=logging.INFO,
                            format="%(asctime)s %(name)s %(levelname)s %(message)s")
    hub_kubeconfig = pathlib.Path(tempfile.mkdtemp(prefix="spawn-bench-")) / "hub.kubeconfig"
    server = Server(kubelet="status", nodes=NODES, hub_kubeconfig=hub_kubeconfig)
    # KubeSpawner loads the default kubeconfig: the hub's ServiceAccount, not admin
    kubernetes_asyncio.config.kube_config.KUBE_CONFIG_DEFAULT_LOCATION = str(hub_kubeconfig)
    try:
        asyncio.run(main(n, server))
    finally:
        server.stop()
