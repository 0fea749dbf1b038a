"""Benchmark (not a test: prints figures, asserts nothing) of GPUs shared under contention: the
platform's Kueue queues against today's ResourceQuota refusal, in one run on one inventory.

    .venv/bin/python -m tests.bench.contention [--jobs 120 --spawns 20 --seed 7 --scale 1]   (or: make bench)

The test cluster (the real control plane built from tests/cluster, `tests.bench.jobs_env`) runs in its
own process with a process-mode kubelet (every container a local process: here ``sleep N``) on a
declared inventory of 4 A100s (``nvidia.com/gpu``) and 7 MIG 1g.5gb slices. Four projects with
different entitlements (their sum is the inventory; each project's weight is its entitlement) are
made as the hub makes them (`project_objects`, applied by its `Provisioner`), first with
ResourceQuotas (``queueing = "off"``), then, after the real kueue-manager is started, with queues
(``queueing = "kueue"``: a Cohort and a servers' and a jobs' ClusterQueue each, borrowing whatever
is idle). The same seeded workload runs in each mode: `--jobs` batch Jobs (one or, for a quarter,
two pods of one accelerator each, every pod ``sleep 2..5``) and `--spawns` notebook servers (a pod
as PlatformSpawner makes it, holding one accelerator for 8 s; under Kueue in the servers' queue),
arriving over 20 s (`--scale` stretches durations and arrivals alike). The demand is about three times what the inventory gives.

Figures, per mode: submissions refused (a Job is never refused at creation: the quota refuses its
pods, which the Job controller retries with back-off; a server's pod is refused outright, as
PlatformSpawner's ``when_full = "refuse"`` would: counted, not retried); partial allocations (a
two-pod job holding one accelerator while its other pod is refused or waits, for 2 s or more);
accelerator-seconds used over accelerator-seconds available from the first arrival to the last
completion (utilization); p50/p95 wait from arrival to first pod running, per project; fairness
(Jain's index over projects of accelerator-seconds used per unit of weight, while every project
still had work waiting); the makespan. Samples every 0.5 s from the API server's pods.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import pathlib
import random
import tempfile
import time

from hub_ext.core.catalog import parse_accelerators
from hub_ext.core.entitlements import Project
from hub_ext.kube.client import Kube, KubeError
from hub_ext.kube.provision import Provisioner
from hub_ext.manifests.queues import LOCAL_QUEUE, QUEUE_LABEL, SERVERS_QUEUE
from hub_ext.manifests.tenancy import SERVICE_ACCOUNT as RUNNER, TenancySettings, project_objects
from tests.bench.jobs_env import Server, new_kube

A100 = "NVIDIA-A100-SXM4-40GB"
CATALOG = parse_accelerators({"a100": {"type": "gpu", "product": A100}, "1g.5gb": {"type": "mig", "profile": "1g.5gb"}})
TAINT = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
NODES = [{"name": "dgx-a100", "allocatable": {"cpu": "256", "memory": "2Ti", "pods": "250", "nvidia.com/gpu": "4"},
          "labels": {"nvidia.com/gpu.product": A100}, "taints": TAINT},
         {"name": "dgx-mig", "allocatable": {"cpu": "256", "memory": "2Ti", "pods": "250",
                                             "nvidia.com/mig-1g.5gb": "7"}, "taints": TAINT}]
CAPACITY = 11  # 4 A100s and 7 slices
PROJECTS = {"vision": {"a100": 2, "1g.5gb": 2}, "nlp": {"a100": 1, "1g.5gb": 2},
            "speech": {"a100": 1, "1g.5gb": 2}, "interns": {"1g.5gb": 1}}
ITEM_LABEL = "bench.mlplatform.io/item"
SAMPLE = 0.5
PARTIAL_SECONDS = 2.0


@dataclasses.dataclass
class Item:
    """One job or server of the workload, and what happened to it."""
    id: str
    project: str
    accelerator: str
    pods: int
    seconds: int
    arrival: float
    server: bool = False
    refused: str = ""
    first_running: float | None = None
    done: float | None = None
    partial_for: float = 0.0


def workload(jobs: int, spawns: int, seed: int, scale: float = 1.0) -> list[Item]:
    """The seeded mix; `scale` stretches every duration and the arrival window alike."""
    rng = random.Random(seed)
    names = sorted(PROJECTS)
    items = []
    for i in range(jobs + spawns):
        project = names[i % len(names)]
        acc = rng.choice(sorted(PROJECTS[project]))
        server = i >= jobs
        pods = 2 if not server and rng.random() < 0.25 and PROJECTS[project][acc] >= 2 else 1
        seconds = 8 if server else rng.randint(2, 5)
        items.append(Item(f"{'nb' if server else 'job'}-{i:03d}", project, acc, pods,
                          round(seconds * scale), rng.uniform(0, 20) * scale, server))
    return sorted(items, key=lambda it: it.arrival)


def _pod_spec(item: Item) -> dict:
    acc = CATALOG[item.accelerator]
    return {"restartPolicy": "Never", "serviceAccountName": RUNNER, "nodeSelector": acc.node_selector_dict(),
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "main", "image": "python:3.11-slim", "command": ["sleep", str(item.seconds)],
                            "resources": {"limits": {acc.resource: "1"}}}]}


def manifest(item: Item, ns: str, queued: bool) -> dict:
    labels = {ITEM_LABEL: item.id}
    if item.server:
        if queued:
            labels[QUEUE_LABEL] = SERVERS_QUEUE
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": item.id, "namespace": ns, "labels": labels},
                "spec": _pod_spec(item)}
    job_labels = {QUEUE_LABEL: LOCAL_QUEUE} if queued else {}  # as the jobs backend labels its jobs
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": item.id, "namespace": ns, "labels": job_labels},
            "spec": {"parallelism": item.pods, "completions": item.pods, "backoffLimit": 0,
                     "template": {"metadata": {"labels": labels}, "spec": _pod_spec(item)}}}


async def provision(kube: Kube, mode: str) -> dict[str, str]:
    """The four projects of `mode` ("quota" or "kueue"), as the hub makes them; project → namespace."""
    settings = TenancySettings(queue_cohort=f"contention-{mode}", kueue=mode == "kueue")
    out = {}
    for name, limits in PROJECTS.items():
        ns = f"{mode}-{name}"
        project = Project(ns, name, False, frozenset(), limits, owner=f"group:{name}")
        await Provisioner(kube).ensure(ns, lambda p=project: project_objects(p, CATALOG, (), [], settings),
                                       f"prepare the project {ns!r}")
        out[name] = ns
    return out


async def submit(kube: Kube, item: Item, ns: str, queued: bool, t0: float) -> None:
    await asyncio.sleep(max(0.0, t0 + item.arrival - time.monotonic()))
    body = manifest(item, ns, queued)
    path = (f"/api/v1/namespaces/{ns}/pods" if item.server else f"/apis/batch/v1/namespaces/{ns}/jobs")
    try:
        await kube.request("POST", path, body)
    except KubeError as e:
        item.refused = str(e)[:200]


async def follow(kube: Kube, items: list[Item], namespaces: dict[str, str], t0: float, timeout: float) -> list:
    """Sample the items' pods until every item is done or refused; the samples: (t, running per project)."""
    by_id = {it.id: it for it in items}
    samples = []
    while time.monotonic() - t0 < timeout:
        now = time.monotonic() - t0
        running = {p: 0 for p in PROJECTS}
        seen: dict[str, list[dict]] = {}
        for project, ns in namespaces.items():
            for pod in (await kube.list(f"/api/v1/namespaces/{ns}/pods", labelSelector=ITEM_LABEL))["items"]:
                seen.setdefault(pod["metadata"]["labels"][ITEM_LABEL], []).append(pod)
        for item_id, pods in seen.items():
            item = by_id[item_id]
            phases = [p.get("status", {}).get("phase") for p in pods if not p["metadata"].get("deletionTimestamp")]
            up = phases.count("Running")
            finished = phases.count("Succeeded")
            running[item.project] += up
            if up and item.first_running is None:
                item.first_running = now
            if 0 < up < item.pods and not finished:
                item.partial_for += SAMPLE
            if finished >= item.pods and item.done is None:
                item.done = now
        samples.append((now, running))
        if all(it.done is not None or it.refused for it in items):
            break
        await asyncio.sleep(SAMPLE)
    return samples


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def report(mode: str, items: list[Item], samples: list) -> dict:
    weights = {p: sum(limits.values()) for p, limits in PROJECTS.items()}
    end = max((it.done for it in items if it.done is not None), default=samples[-1][0])
    used = sum(sum(r.values()) for t, r in samples if t <= end) * SAMPLE
    # fairness while every project still had work that had not started
    waiting_until = min(max((it.arrival if it.first_running is None else it.first_running)
                            for it in items if it.project == p and not it.refused) for p in PROJECTS)
    share = {p: sum(r[p] for t, r in samples if t <= waiting_until) * SAMPLE / weights[p] for p in PROJECTS}
    total = sum(share.values())
    jain = total * total / (len(share) * sum(x * x for x in share.values())) if total else float("nan")
    waits = {p: [it.first_running - it.arrival for it in items if it.project == p and it.first_running is not None]
             for p in PROJECTS}
    out = {"mode": mode, "refused": sum(1 for it in items if it.refused),
           "refused_servers": sum(1 for it in items if it.refused and it.server),
           "partial": sum(1 for it in items if it.partial_for >= PARTIAL_SECONDS),
           "unfinished": sum(1 for it in items if it.done is None and not it.refused),
           "utilization": used / (CAPACITY * end) if end else float("nan"), "makespan": end, "jain": jain,
           "waits": {p: (_pct(w, 0.5), _pct(w, 0.95)) for p, w in waits.items()}}
    return out


async def run_mode(server: Server, mode: str, items: list[Item], timeout: float) -> dict:
    kube = await new_kube(server.kubeconfig)
    try:
        namespaces = await provision(kube, mode)
        if mode == "kueue":
            await asyncio.sleep(3)  # Kueue sees the new LocalQueues (its cache lags their creation)
        items = [dataclasses.replace(it) for it in items]
        t0 = time.monotonic()
        follower = asyncio.ensure_future(follow(kube, items, namespaces, t0, timeout))
        await asyncio.gather(*(submit(kube, it, namespaces[it.project], mode == "kueue", t0) for it in items))
        return report(mode, items, await follower)
    finally:
        await kube.api_client.close()


def print_table(rows: list[dict], demand: float) -> None:
    print(f"\ndemand {demand:.0f} accelerator-seconds on {CAPACITY} accelerators "
          f"(at least {demand / CAPACITY:.0f} s if perfectly packed)")
    print(f"{'':<28}" + "".join(f"{r['mode']:>16}" for r in rows))
    for key, label, fmt in (("refused", "submissions refused", "{:>16d}"), ("refused_servers", "  of them servers", "{:>16d}"),
                            ("partial", "partial allocations", "{:>16d}"), ("unfinished", "not done at the end", "{:>16d}"),
                            ("utilization", "utilization", "{:>16.2f}"), ("jain", "fairness (Jain)", "{:>16.3f}"),
                            ("makespan", "makespan (s)", "{:>16.1f}")):
        print(f"{label:<28}" + "".join(fmt.format(r[key]) for r in rows))
    for p in PROJECTS:
        print(f"{'wait p50/p95 ' + p + ' (s)':<28}" + "".join(
            f"{r['waits'][p][0]:>8.1f}{r['waits'][p][1]:>8.1f}" for r in rows))


async def main(args) -> None:
    items = workload(args.jobs, args.spawns, args.seed, args.scale)
    demand = sum(it.pods * it.seconds for it in items)
    print(f"{args.jobs} jobs and {args.spawns} servers over 4 projects "
          f"({', '.join(f'{p} {sum(v.values())}' for p, v in PROJECTS.items())} accelerators entitled)")
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="contention-"))
    server = Server(namespaces=(), kubeconfig=tmp / "kubeconfig", kubelet="process", nodes=NODES)
    rows = []
    try:
        rows.append(await run_mode(server, "quota", items, args.timeout))
        await server.start_kueue()
        rows.append(await run_mode(server, "kueue", items, args.timeout))
    finally:
        server.stop()
    print_table(rows, demand)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=120)
    parser.add_argument("--spawns", type=int, default=20)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--scale", type=float, default=1.0, help="durations and the arrival window times this")
    parser.add_argument("--timeout", type=float, default=900, help="seconds each mode may take at most")
    asyncio.run(main(parser.parse_args()))
