"""Benchmark (prints figures, asserts nothing): the operator's memory, CPU and API requests with
1,000 dataset PVCs, beside the same operator with none, in one run.

    .venv/bin/python -m tests.bench.operator_datasets [--pvcs 1000] [--namespaces 4] [--idle 30]   (or: make bench)

The real control plane (tests/cluster: kube-apiserver, etcd, the controller-manager with the Job
and PV controllers, the scheduler, the hostPath provisioner) and `mlplatform operator` as the kube
tier runs it (`tests.kube.operator_env.OperatorProcess`: its own ServiceAccount with the shipped
RBAC, one replica), with the shipped defaults where the tests shorten them: progress read every
2 s, a 15 s lease, the TLS check every 60 s.

1. **baseline**: the operator starts with no dataset PVC; its RSS once it leads, then after
   ``--idle`` seconds; it stops (releasing its Lease).
2. **loading**: a new operator process starts the same way; ``--pvcs`` dataset PVCs (an anonymous
   ``s3://`` source each, spread over ``--namespaces`` project namespaces) are created (by this
   process, not through the fault proxy) and timed until every one has the operator's ``Loaded``
   condition. There is no kubelet yet, so every loader Job's pod stays Pending: each dataset has
   had the full reconcile (claim read, Jobs listed, its loader Job created, ``Loaded`` False /
   ``Loading`` written) and has a progress task following its pod — 1,000 loads at once, the
   controller's busiest state. Then ``--idle`` seconds with nothing done by this process.
3. **loaded**: a status-mode kubelet comes up with one node large enough for every loader pod;
   the scheduler binds them, the kubelet marks them Running, and this process plays the loader:
   each Running loader pod gets a ``done`` progress line in its log and exits 0. Timed until every
   PVC is ``Loaded`` True (the Job controller, at its own rate limit, ends each Job; the operator
   reads the pod's last line and writes the outcome), then ``--idle`` seconds: the steady state of
   a cluster whose datasets are loaded.

RSS is the operator process's (psutil), sampled every 0.2 s: the value at each point and the peak
of each phase; CPU is its user + system seconds in the phase. Requests are the fault proxy's log
(`tests/cluster/proxy.py`): only the operator's requests pass through it here (this process and
the kubelet reach the API server directly), grouped by verb and resource. After the table: the
operator's writes per dataset over phases 2 and 3, its load counters (``/metrics``), and what its
own log says: how often it took the Lease (more than once: a renewal failed and it stepped down,
its tasks cancelled, and resynced every dataset when it led again), reconciles retried after an
API error, progress reads that failed, and how many times it decided a load started and loaded.
The work directory keeps the operator's log (its path is printed); the cluster's data is removed.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import logging
import pathlib
import re
import shutil
import tempfile
import threading
import time

import psutil

from hub_ext.operator.rules.datasets import LOADED, LOADER_LABEL
from tests.cluster.cluster import Cluster
from tests.cluster.identities import install_platform
from tests.kube.operator_env import OperatorProcess, make_project

DATASET_LABEL = "mlplatform.io/dataset"  # MountSettings.dataset_label's default
SHIPPED = ["--progress-interval=2", "--lease-duration=15", "--tls-check=60"]  # after the harness's: these win
NODE = {"name": "bench-node", "allocatable": {"cpu": "4000", "memory": "16Ti", "pods": "5000"}}
MiB = 1 << 20


# -- pure ---------------------------------------------------------------------------------------------

def claim(ns: str, name: str) -> dict:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": ns, "labels": {DATASET_LABEL: "true"},
                         "annotations": {"mlplatform.io/source": f"s3://bench-datasets/{ns}/{name}"}},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}


def loaded_condition(pvc: dict) -> dict | None:
    return next((c for c in (pvc.get("status") or {}).get("conditions") or [] if c.get("type") == LOADED), None)


def request_kind(method: str, path: str, query: dict) -> str:
    """``GET pods list``, ``PATCH persistentvolumeclaims/status``, ``GET jobs watch``, …"""
    parts = path.strip("/").split("/")
    rest = parts[2:] if parts[:1] == ["api"] else parts[3:] if parts[:1] == ["apis"] else []
    if len(rest) >= 3 and rest[0] == "namespaces":
        rest = rest[2:]
    if not rest:
        return f"{method} {path}"
    what = rest[0] + (f"/{rest[2]}" if len(rest) > 2 else "")
    if method == "GET":
        what += " watch" if query.get("watch") in ("true", "1") else " get" if len(rest) > 1 else " list"
    return f"{method} {what}"


def summary(records: list, seconds: float) -> str:
    counts = collections.Counter(request_kind(r.method, r.path, r.query) for r in records)
    top = ", ".join(f"{k} {v}" for k, v in counts.most_common(8))
    rate = f"{len(records) / seconds:.1f}/s" if seconds > 0 else "-"
    return f"{len(records)} ({rate}): {top}" if records else "0"


def log_summary(text: str) -> str:
    """What the operator's own log says of a run: elections, retries, decisions."""
    lines = text.splitlines()

    def count(pattern: str) -> int:
        return sum(1 for line in lines if re.search(pattern, line))
    return (f"it took the lease {count('holds the lease')} time(s) (a renewal that failed: "
            f"{count('WARNING mlplatform.operator.leader')}); reconciles retried after an API error: "
            f"{count(r'WARNING mlplatform.operator.datasets: .*trying again$')}; progress reads or writes failed: "
            f"{count('progress not read or written')}; loads started: {count(r'started [(]Job ')}, "
            f"adopted: {count('adopted the loader Job')}, decided loaded: {count(r': load [0-9a-f]+ loaded$')}, "
            f"failed: {count(r': load [0-9a-f]+ failed$')}")


# -- measuring the operator -----------------------------------------------------------------------------

class Sampler(threading.Thread):
    """The RSS of one process every 0.2 s, for peaks between two instants."""

    def __init__(self, pid: int):
        super().__init__(daemon=True, name="rss-sampler")
        self.proc = psutil.Process(pid)
        self.samples: list[tuple[float, int]] = []
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            try:
                self.samples.append((time.monotonic(), self.proc.memory_info().rss))
            except psutil.Error:
                return
            self.stopped.wait(0.2)

    def rss(self) -> int:
        return self.proc.memory_info().rss

    def cpu(self) -> float:
        times = self.proc.cpu_times()
        return times.user + times.system

    def peak(self, since: float, until: float) -> int:
        return max((rss for at, rss in self.samples if since <= at <= until), default=0)


class Phase:
    """One row: RSS at its end and peak during, the operator's CPU, the proxy's requests."""

    def __init__(self, name: str, cluster: Cluster, sampler: Sampler):
        self.name, self.cluster, self.sampler = name, cluster, sampler
        self.start, self.cpu0 = time.monotonic(), sampler.cpu()
        self.note = ""

    def end(self, note: str = "") -> dict:
        end = time.monotonic()
        records = [r for r in self.cluster.requests() if self.start <= r.at < end]
        return {"phase": self.name, "seconds": end - self.start, "rss": self.sampler.rss(),
                "peak": self.sampler.peak(self.start, end), "cpu": self.sampler.cpu() - self.cpu0,
                "requests": summary(records, end - self.start), "note": note}


async def leading(op: OperatorProcess, timeout: float = 60) -> None:
    """Until the operator reports that it leads (its controller has listed the datasets)."""
    import aiohttp

    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession() as http:
        while time.monotonic() < deadline:
            async with http.get(f"{op.health_url}/metrics") as resp:
                if "mlplatform_operator_leader 1" in await resp.text():
                    return
            await asyncio.sleep(0.2)
    raise RuntimeError(f"the operator did not lead within {timeout} s:\n{op.log()[-2000:]}")


async def metrics(op: OperatorProcess) -> str:
    import aiohttp

    async with aiohttp.ClientSession() as http, http.get(f"{op.health_url}/metrics") as resp:
        return await resp.text()


async def start(op: OperatorProcess, cluster: Cluster) -> tuple[Sampler, dict]:
    began = time.monotonic()
    await op.start()
    sampler = Sampler(op.proc.pid)
    sampler.start()
    await leading(op)
    row = {"phase": "start (until it leads)", "seconds": time.monotonic() - began, "rss": sampler.rss(),
           "peak": sampler.rss(), "cpu": sampler.cpu(),
           "requests": summary([r for r in cluster.requests() if r.at >= began], time.monotonic() - began),
           "note": "includes the harness's readiness checks"}
    return sampler, row


async def idle(cluster: Cluster, sampler: Sampler, seconds: float, name: str) -> dict:
    phase = Phase(name, cluster, sampler)
    await asyncio.sleep(seconds)
    return phase.end()


async def datasets(cluster: Cluster) -> list[dict]:
    listing = await cluster.arun(cluster.rest.get("/api/v1/persistentvolumeclaims", labelSelector=DATASET_LABEL))
    return listing.get("items") or []


async def until_all(cluster: Cluster, n: int, done, what: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while True:
        items = await datasets(cluster)
        count = sum(1 for pvc in items if done(loaded_condition(pvc)))
        if count >= n:
            return ""
        if time.monotonic() > deadline:
            return f"only {count} of {n} {what} after {timeout:.0f} s"
        await asyncio.sleep(1.0)


async def create_claims(cluster: Cluster, names: list[tuple[str, str]], concurrency: int = 16) -> None:
    gate = asyncio.Semaphore(concurrency)

    async def one(ns: str, name: str) -> None:
        async with gate:
            await cluster.arun(cluster.rest.post(f"/api/v1/namespaces/{ns}/persistentvolumeclaims", claim(ns, name)))
    await asyncio.gather(*(one(ns, name) for ns, name in names))


async def play_loaders(kubelet, n: int) -> None:
    """On the cluster's loop: each loader pod the kubelet runs says it is done and exits 0."""
    finished: set[tuple[str, str]] = set()
    while len(finished) < n:
        for key, pod in list(kubelet.pods.items()):
            if key in finished or (pod.get("status") or {}).get("phase") != "Running" or \
                    LOADER_LABEL not in (pod["metadata"].get("labels") or {}):
                continue
            finished.add(key)
            line = {"phase": "done", "objects_done": 10, "objects_total": 10, "bytes_done": 1000,
                    "bytes_total": 1000, "objects_copied": 10, "objects_kept": 0, "files_removed": 0}
            await kubelet.log(*key, json.dumps(line, separators=(",", ":")) + "\n")
            await kubelet.finish(*key, 0)
        await asyncio.sleep(0.5)


# -- the run --------------------------------------------------------------------------------------------

async def main(n: int, namespaces: int, idle_s: float, timeout: float) -> None:
    work = pathlib.Path(tempfile.mkdtemp(prefix="bench-operator-datasets-"))
    cluster = Cluster(work / "cluster").start()
    tables: dict[str, list[dict]] = {}
    try:
        install_platform(cluster)
        op = OperatorProcess(cluster, work, SHIPPED)
        await op.install()
        projects = [f"bench-data-{i}" for i in range(namespaces)]
        for ns in projects:
            await make_project(op.kube, ns)
            await cluster.arun(cluster.rest.post(f"/api/v1/namespaces/{ns}/serviceaccounts",
                                                 {"metadata": {"name": "mlplatform-runner"}}))

        # 1. the baseline
        sampler, row = await start(op, cluster)
        tables["no dataset PVCs"] = [row, await idle(cluster, sampler, idle_s, f"idle {idle_s:.0f} s")]
        await op.stop()
        sampler.stopped.set()

        # 2. N datasets loading at once (no kubelet: their pods stay Pending)
        log_start = len(op.log())
        sampler, row = await start(op, cluster)
        rows = tables[f"{n} dataset PVCs"] = [row]
        names = [(projects[i % namespaces], f"ds-{i:04}") for i in range(n)]
        phase = Phase(f"create {n} + reconcile until all Loading", cluster, sampler)
        began = time.monotonic()
        await create_claims(cluster, names)
        created = time.monotonic() - began
        note = await until_all(cluster, n, lambda c: c is not None and c.get("reason") in ("Loading", "Failed"),
                               "Loading", timeout)
        rows.append(phase.end(note or f"the creates took {created:.1f} s"))
        failed = sum(1 for pvc in await datasets(cluster) if (loaded_condition(pvc) or {}).get("reason") == "Failed")
        if failed:
            rows[-1]["note"] += f"; {failed} Failed"
        rows.append(await idle(cluster, sampler, idle_s, f"idle {idle_s:.0f} s, {n} loading"))

        # 3. the loaders run and end: every dataset Loaded
        phase = Phase("loaders run and end until all Loaded", cluster, sampler)
        kubelet = cluster.kubelet(mode="status", nodes=[NODE])
        player = asyncio.run_coroutine_threadsafe(play_loaders(kubelet.kubelet, n), cluster.loop)
        note = await until_all(cluster, n, lambda c: c is not None and c.get("status") == "True", "Loaded", timeout)
        player.cancel()
        rows.append(phase.end(note))
        rows.append(await idle(cluster, sampler, idle_s, f"idle {idle_s:.0f} s, {n} loaded"))
        counters = [line for line in (await metrics(op)).splitlines() if "loads_total" in line]
        await op.stop()
        sampler.stopped.set()
        writes = collections.Counter(request_kind(r.method, r.path, r.query) for r in cluster.requests()
                                     if r.method in ("POST", "PATCH", "PUT", "DELETE") and r.at >= began)

        print(f"\n`mlplatform operator` RSS (MiB), CPU (s) and API requests; {n} dataset PVCs in {namespaces} "
              "project namespaces")
        for title, rows in tables.items():
            print(f"\n{title}")
            print(f"  {'phase':<44} {'s':>7} {'RSS':>7} {'peak':>7} {'CPU s':>7}  requests")
            for r in rows:
                print(f"  {r['phase']:<44} {r['seconds']:>7.1f} {r['rss'] / MiB:>7.1f} {r['peak'] / MiB:>7.1f} "
                      f"{r['cpu']:>7.1f}  {r['requests']}")
                if r["note"]:
                    print(f"  {'':<44} ({r['note']})")
        print(f"\nthe operator's writes per dataset, from the first create to the end: "
              + ", ".join(f"{k} {v / n:.2f}" for k, v in writes.most_common() if "leases" not in k))
        print("the operator's counters:", "; ".join(counters) or "none")
        print("the operator's log (with the datasets):", log_summary(op.log()[log_start:]))
        print("the operator's log:", op.log_path)
        await op._api.close()
    finally:
        cluster.stop()
        shutil.rmtree(work / "cluster", ignore_errors=True)  # etcd's data and the volumes: hundreds of MB


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pvcs", type=int, default=1000)
    parser.add_argument("--namespaces", type=int, default=4)
    parser.add_argument("--idle", type=float, default=30)
    parser.add_argument("--timeout", type=float, default=900, help="seconds to wait for all Loading, then all Loaded")
    args = parser.parse_args()
    # the test kubelet's log server (in this process) logs a traceback for each log read whose
    # client gave up (the operator's 10 s timeout when the API is slow): its own log counts those
    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)
    asyncio.run(main(args.pvcs, args.namespaces, args.idle, args.timeout))
