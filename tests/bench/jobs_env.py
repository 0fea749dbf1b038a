"""Shared set-up for the benchmarks (`tests.bench.jobs_list`, `idle_lists`, `sweep_status`, `spawn`): the
test cluster (`tests.cluster`: the real control plane built from Go modules, its fault proxy, a
test kubelet on demand) in its own process, pre-filled with realistic ``PyTorchJob`` objects made
by `server_ext.jobs.kube.kubeflow.job_manifest` (varied plans, labels, owners and states) or a Katib
sweep, and small helpers over the proxy's request log. Not a test module: nothing here asserts.

    .venv/bin/python -m tests.bench.jobs_env --kubeconfig K [--hub-kubeconfig H] [--fill NS=N ...]
        [--namespace NS ...] [--sweep NS=N ...] [--kubelet status --nodes nodes.json]

The server process starts the cluster, creates the namespaces and writes the objects through the
API server (each job created, then its Training Operator conditions written through the
``/status`` subresource: the same validation, resourceVersions and watch events as any client's),
directly rather than through the proxy, so the request log starts empty. Only then does it print
``serving on URL; control: URL; filled: {...}``. So the benchmark's own process holds nothing of
the cluster's: its heap, its garbage collections and its CPU are the hub's or the notebook
server's alone, as in production where the API server is remote. Clients connect through the
proxy with `Server.kubeconfig` (admin) or `Server.hub_kubeconfig` (the hub's ServiceAccount of
`helm-values/hub-rbac.yaml`, when asked for); the request log and the control plane's CPU time
are read over the control URL (``/requests``, ``/cpu``). A POST to ``/kueue`` (`Server.start_kueue`)
starts the real kueue-manager (`tests.controllers.kueue_system`, helm-values/kueue.yaml's
configuration) against the cluster; ``/cpu`` then reports it as ``kueue-manager``.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import pathlib
import random
import signal
import subprocess
import sys
import tempfile
import types

import aiohttp
import kubernetes_asyncio

from hub_ext.kube.client import Kube
from server_ext.jobs.kube.kubeflow import API, job_manifest
from tests.kube.job_env import SETTINGS, plan

ROOT = pathlib.Path(__file__).resolve().parents[2]
TEAMS = ("vision", "nlp", "speech", "recsys", "forecasting", "research")
MACHINES = ("n1-standard-4", "n1-standard-8", "n1-highmem-16", "n2-standard-32", "e2-standard-8")
PHASES = ("experiment", "tuning", "production", "ablation")
# (what is written, the Training Operator conditions in .status, weight)
STATES = (
    ("QUEUED", [], 10),
    ("PREPARING", ["Created"], 10),
    ("RUNNING", ["Created", "Running"], 30),
    ("SUCCEEDED", ["Created", "Running", "Succeeded"], 35),
    ("FAILED", ["Created", "Running", "Failed"], 10),
    ("QUEUED (suspended)", ["Created", "Suspended"], 5),
)
CONCURRENCY = 32  # writes in flight while filling
MERGE = "application/merge-patch+json"


# ---- the jobs ------------------------------------------------------------------------------------------
def job_doc(i: int, rng: random.Random) -> dict:
    """One realistic ``ml.v1`` Job of a PyTorch runtime: varied machines, workers, labels and args."""
    workers = rng.choice((0, 1, 1, 2, 3, 4, 7))
    machine = rng.choice(MACHINES)
    training = {"pythonModule": rng.choice(("trainer.task", "train.main", "resnet.train")),
                "packageUris": [f"gs://ml-bucket-{i % 17}/pkgs/trainer-0.{i % 9}.tar.gz"],
                "runtimeVersion": rng.choice(("pytorch-2.5", "pytorch-2.3")),
                "scaleTier": "CUSTOM", "masterType": machine,
                "args": [f"--epochs={rng.randint(1, 90)}", f"--lr={rng.choice((0.1, 0.01, 0.001))}",
                         f"--batch-size={rng.choice((32, 64, 128, 256))}", f"--seed={i}"],
                "region": "us-central1"}
    if training["runtimeVersion"] == "pytorch-2.3":
        training["pythonVersion"] = "3.10"
    if workers:
        training.update(workerType=machine, workerCount=str(workers))
    if rng.random() < 0.3:
        training["scheduling"] = {"maxRunningTime": f"{rng.choice((3600, 7200, 86400))}s"}
    labels = {"team": rng.choice(TEAMS), "phase": rng.choice(PHASES)}
    if rng.random() < 0.5:
        labels["experiment"] = f"exp-{rng.randint(1, 300)}"
    return {"jobId": f"job_{i:05d}", "labels": labels, "trainingInput": training}


def owner(i: int) -> str:
    return f"user{i % 40:02d}@example.com"


def _stamp(when: dt.datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def job_status(types_: list[str], base: dt.datetime) -> dict:
    """A Training Operator-shaped ``.status`` with these condition types true (in order)."""
    out, when = [], base
    for t in types_:
        when += dt.timedelta(seconds=30)
        out.append({"type": t, "status": "True", "reason": f"PyTorchJob{t}", "message": f"PyTorchJob is {t.lower()}",
                    "lastUpdateTime": _stamp(when), "lastTransitionTime": _stamp(when)})
    status: dict = {"conditions": out}
    if "Running" in types_:
        status["startTime"] = _stamp(base + dt.timedelta(seconds=60))
    if "Succeeded" in types_ or "Failed" in types_:
        status["completionTime"] = _stamp(when)
    return status


async def bounded(coros, limit: int = CONCURRENCY) -> list:
    """Run the coroutines, at most `limit` at a time, in order of their results."""
    gate = asyncio.Semaphore(limit)

    async def one(coro):
        async with gate:
            return await coro
    return await asyncio.gather(*(one(c) for c in coros))


async def fill_jobs(rest, namespace: str, n: int, seed: int = 7) -> dict[str, int]:
    """Create `n` PyTorchJobs in `namespace` through the API (`rest`: a `tests.cluster.rest.Rest`),
    each with its status written through ``/status``; how many were written per state."""
    from tests.cluster.cluster import api_path

    rng = random.Random(seed)
    weights = [w for _, _, w in STATES]
    group, version, plural = API["PyTorchJob"]
    path = api_path(group, version, plural, namespace)
    counts: dict[str, int] = {}
    base = dt.datetime(2026, 1, 5, tzinfo=dt.timezone.utc)
    work = []
    for i in range(n):  # every random choice first, in order: the same jobs whatever the concurrency
        manifest = job_manifest(plan(job_doc(i, rng), namespace, owner(i)), SETTINGS)
        label, conds, _ = rng.choices(STATES, weights)[0]
        counts[label] = counts.get(label, 0) + 1
        work.append((manifest, job_status(conds, base + dt.timedelta(minutes=i)) if conds else None))

    async def write(manifest, status):
        obj = await rest.post(path, manifest)
        if status:
            await rest.patch(f"{path}/{obj['metadata']['name']}/status", {"status": status}, MERGE)
    await bounded(write(m, s) for m, s in work)
    return counts


# ---- the server process --------------------------------------------------------------------------------
def _cpu_seconds(pid: int) -> float:
    import os

    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _fill(cluster, args) -> dict:
    from tests.cluster.rest import ApiError, Rest

    rest = Rest(cluster.write_kubeconfig(cluster.dir / "filler.kubeconfig", direct=True))
    filled = {}
    try:
        for ns in dict.fromkeys(args.namespace + [f.split("=")[0] for f in args.fill + args.sweep]):
            try:
                await rest.post("/api/v1/namespaces", {"metadata": {"name": ns}})
            except ApiError as e:
                if e.status != 409:
                    raise
        for f in args.fill:
            ns, n = f.split("=")
            filled[ns] = await fill_jobs(rest, ns, int(n))
        for f in args.sweep:
            from tests.bench.sweep_status import fill_sweep  # one Katib Experiment with N Trials

            ns, n = f.split("=")
            filled[f"{ns}/sweep"] = await fill_sweep(rest, ns, int(n))
    finally:
        await rest.close()
    return filled


async def _serve(args) -> None:
    from aiohttp import web

    from tests.cluster.cluster import Cluster
    from tests.cluster.identities import hub_kubeconfig

    workdir = pathlib.Path(tempfile.mkdtemp(prefix="bench-cluster-"))
    cluster = await asyncio.to_thread(lambda: Cluster(workdir).start())
    runner, kueue = None, []
    try:
        if args.kubelet:
            nodes = json.loads(pathlib.Path(args.nodes).read_text()) if args.nodes else None
            await asyncio.to_thread(cluster.kubelet, args.kubelet, nodes=nodes, workdir=workdir / "pods")
        filled = await _fill(cluster, args)
        cluster.write_kubeconfig(pathlib.Path(args.kubeconfig))
        if args.hub_kubeconfig:
            await asyncio.to_thread(hub_kubeconfig, cluster, pathlib.Path(args.hub_kubeconfig))
        cluster.clear_requests()

        async def requests(request):
            if request.method == "DELETE":
                cluster.clear_requests()
                return web.json_response({})
            return web.json_response([{"method": r.method, "path": r.path, "query": r.query, "at": r.at}
                                      for r in cluster.requests()])

        async def cpu(_request):
            seconds = {name: _cpu_seconds(p.pid) for name, p in cluster.cp.procs.items()}
            if kueue:
                seconds["kueue-manager"] = _cpu_seconds(kueue[0].process.proc.pid)
            return web.json_response(seconds)

        async def start_kueue(_request):
            from tests.controllers.kueue_system import Kueue

            if not kueue:
                kueue.append(await asyncio.to_thread(lambda: Kueue(cluster, workdir / "kueue").start()))
            return web.json_response({})

        app = web.Application()
        app.router.add_route("*", "/requests", requests)
        app.router.add_get("/cpu", cpu)
        app.router.add_post("/kueue", start_kueue)
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, reuse_address=True)
        await site.start()
        control = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"
        print(f"serving on {cluster.url}; control: {control}; filled: {json.dumps(filled)}", flush=True)
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            asyncio.get_running_loop().add_signal_handler(sig, stop.set)
        await stop.wait()
    finally:
        if runner is not None:
            await runner.cleanup()
        if kueue:
            await asyncio.to_thread(kueue[0].stop)
        await asyncio.to_thread(cluster.stop)
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)


class Server:
    """The cluster process, pre-filled; `url` (the proxy), `kubeconfig` (admin), `hub_kubeconfig`
    (the hub's ServiceAccount, with `hub=True`), `filled` (state → count per namespace)."""

    def __init__(self, fill: dict[str, int] | None = None, namespaces: tuple[str, ...] = (),
                 kubeconfig: pathlib.Path | None = None, sweeps: dict[str, int] | None = None,
                 hub_kubeconfig: pathlib.Path | None = None, kubelet: str | None = None,
                 nodes: list[dict] | None = None):
        tmp = pathlib.Path(tempfile.mkdtemp(prefix="jobs-bench-"))
        self.kubeconfig = kubeconfig or tmp / "kubeconfig"
        self.hub_kubeconfig = hub_kubeconfig
        cmd = [sys.executable, "-m", "tests.bench.jobs_env", "--kubeconfig", str(self.kubeconfig)]
        cmd += [a for ns, n in (fill or {}).items() for a in ("--fill", f"{ns}={n}")]
        cmd += [a for ns in namespaces for a in ("--namespace", ns)]
        cmd += [a for ns, n in (sweeps or {}).items() for a in ("--sweep", f"{ns}={n}")]
        if hub_kubeconfig:
            cmd += ["--hub-kubeconfig", str(hub_kubeconfig)]
        if kubelet:
            cmd += ["--kubelet", kubelet]
        if nodes:
            (tmp / "nodes.json").write_text(json.dumps(nodes))
            cmd += ["--nodes", str(tmp / "nodes.json")]
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if "serving on " not in line:
            self.proc.kill()
            raise RuntimeError(f"the test cluster did not start: {line!r}")
        self.url, rest = line.strip().split("serving on ")[1].split("; control: ")
        self.control, filled = rest.split("; filled: ")
        self.filled = json.loads(filled)

    async def requests(self) -> list:
        """The proxy's request log so far (records with method, path, query, at)."""
        async with aiohttp.ClientSession() as s, s.get(f"{self.control}/requests") as r:
            return [types.SimpleNamespace(**x) for x in await r.json()]

    async def clear_requests(self) -> None:
        async with aiohttp.ClientSession() as s, s.delete(f"{self.control}/requests") as r:
            await r.read()

    async def cpu(self) -> dict[str, float]:
        """CPU seconds (user + system) each control-plane process has used so far."""
        async with aiohttp.ClientSession() as s, s.get(f"{self.control}/cpu") as r:
            return await r.json()

    async def start_kueue(self) -> None:
        """Start the real kueue-manager against the cluster (once; it runs until `stop`)."""
        async with aiohttp.ClientSession() as s, s.post(f"{self.control}/kueue",
                                                         timeout=aiohttp.ClientTimeout(total=300)) as r:
            r.raise_for_status()

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(60)


async def new_kube(kubeconfig: pathlib.Path, timeout: float = 120) -> Kube:
    api = await kubernetes_asyncio.config.new_client_from_config(config_file=str(kubeconfig))
    return Kube(api, timeout=timeout)


def is_watch(record) -> bool:
    return (record.query.get("watch") or "").lower() in ("true", "1")


__all__ = ["SETTINGS", "STATES", "Server", "fill_jobs", "is_watch", "new_kube"]

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="a pre-filled test cluster for the benchmarks")
    parser.add_argument("--kubeconfig", required=True, help="write an admin kubeconfig (through the proxy) here")
    parser.add_argument("--hub-kubeconfig", help="write a kubeconfig acting as the hub's ServiceAccount here")
    parser.add_argument("--fill", action="append", default=[], help="NAMESPACE=N PyTorchJobs")
    parser.add_argument("--namespace", action="append", default=[], help="an empty namespace to create")
    parser.add_argument("--sweep", action="append", default=[], help="NAMESPACE=N: one Katib Experiment with N "
                                                                     "Trials (tests.bench.sweep_status)")
    parser.add_argument("--kubelet", choices=["status", "process"], help="run a test kubelet in this mode")
    parser.add_argument("--nodes", help="a JSON file listing the kubelet's nodes")
    asyncio.run(_serve(parser.parse_args()))
