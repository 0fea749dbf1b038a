"""Shared set-up for the job benchmarks (`tests.bench.jobs_list`, `tests.bench.idle_lists`): the
Kubernetes API stand-in in its own process, pre-filled with realistic ``PyTorchJob`` objects made
by `server_ext.jobs.kubeflow.job_manifest` (varied plans, labels, owners and states), and small
helpers over its request log. Not a test module: nothing here asserts.

    .venv/bin/python -m tests.bench.jobs_env --kubeconfig K [--fill NS=N ...] [--namespace NS ...]

The server process builds the stand-in (`tests.kubeapi.standin.build`), creates the namespaces,
and puts the jobs into its store through the stand-in's own create and ``/status`` write paths
(`Store.create`, then `Store.replace(..., subresource="status")`): the same validation,
resourceVersions and watch events an HTTP POST and a PUT of ``…/status`` make, without ten
thousand HTTP round trips. Only then does it serve (and print ``serving on URL``), so the
benchmark's own process holds nothing of the server's (its heap, its garbage collections and its
CPU are the hub's or notebook server's alone, as in production where the API server is remote).
The request log is read over HTTP (``/_standin/requests``).
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

from hub_ext.kube import Kube
from server_ext.jobs.kubeflow import API, job_manifest
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


def fill_store(store, namespace: str, n: int, seed: int = 7) -> dict[str, int]:
    """Put `n` PyTorchJobs into `namespace` of a stand-in store; how many were written per state."""
    rng = random.Random(seed)
    weights = [w for _, _, w in STATES]
    rt = store.rt(*API["PyTorchJob"])
    counts: dict[str, int] = {}
    base = dt.datetime(2026, 1, 5, tzinfo=dt.timezone.utc)
    for i in range(n):
        p = plan(job_doc(i, rng), namespace, owner(i))
        obj, _ = store.create(rt, namespace, job_manifest(p, SETTINGS))
        label, conds, _ = rng.choices(STATES, weights)[0]
        counts[label] = counts.get(label, 0) + 1
        if conds:
            status = job_status(conds, base + dt.timedelta(minutes=i))
            store.replace(rt, namespace, obj["metadata"]["name"], {**obj, "status": status}, subresource="status")
    return counts


# ---- the server process --------------------------------------------------------------------------------
async def _serve(args) -> None:
    from aiohttp import web

    from tests.kubeapi.standin import build, write_kubeconfig

    api = await build(history=max(20000, 3 * sum(int(f.split("=")[1]) for f in args.fill)),
                      bookmark_interval=args.bookmark_interval)
    store = api.store
    filled = {}
    for ns in dict.fromkeys(args.namespace + [f.split("=")[0] for f in args.fill + args.sweep]):
        store.create(store.rt("", "v1", "namespaces"), None, {"metadata": {"name": ns}})
    for f in args.fill:
        ns, n = f.split("=")
        filled[ns] = fill_store(store, ns, int(n))
    for f in args.sweep:
        from tests.bench.sweep_status import fill_sweep  # one Katib Experiment with N Trials

        ns, n = f.split("=")
        filled[f"{ns}/sweep"] = fill_sweep(store, ns, int(n))
    runner = web.AppRunner(api.app(), access_log=None, handle_signals=False, shutdown_timeout=1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, reuse_address=True)
    await site.start()
    url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"
    write_kubeconfig(args.kubeconfig, url)
    print(f"serving on {url}; filled: {json.dumps(filled)}", flush=True)
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    await stop.wait()
    api.cut_watches()
    await runner.cleanup()


class Server:
    """The stand-in process, pre-filled; `url`, `kubeconfig`, `filled` (state → count per namespace)."""

    def __init__(self, fill: dict[str, int] | None = None, namespaces: tuple[str, ...] = (),
                 bookmark_interval: float = 1.0, kubeconfig: pathlib.Path | None = None,
                 sweeps: dict[str, int] | None = None):
        self.kubeconfig = kubeconfig or pathlib.Path(tempfile.mkdtemp(prefix="jobs-bench-")) / "kubeconfig"
        cmd = [sys.executable, "-m", "tests.bench.jobs_env", "--kubeconfig", str(self.kubeconfig),
               "--bookmark-interval", str(bookmark_interval)]
        cmd += [a for ns, n in (fill or {}).items() for a in ("--fill", f"{ns}={n}")]
        cmd += [a for ns in namespaces for a in ("--namespace", ns)]
        cmd += [a for ns, n in (sweeps or {}).items() for a in ("--sweep", f"{ns}={n}")]
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if "serving on " not in line:
            self.proc.kill()
            raise RuntimeError(f"the stand-in did not start: {line!r}")
        self.url, filled = line.split("serving on ")[1].split("; filled: ")
        self.filled = json.loads(filled)

    async def requests(self) -> list:
        """The request log so far (records with method, path, query, at)."""
        async with aiohttp.ClientSession() as s, s.get(f"{self.url}/_standin/requests") as r:
            return [types.SimpleNamespace(**x) for x in await r.json()]

    async def clear_requests(self) -> None:
        async with aiohttp.ClientSession() as s, s.delete(f"{self.url}/_standin/requests") as r:
            await r.read()

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


async def new_kube(kubeconfig: pathlib.Path, timeout: float = 120) -> Kube:
    api = await kubernetes_asyncio.config.new_client_from_config(config_file=str(kubeconfig))
    return Kube(api, timeout=timeout)


def is_watch(record) -> bool:
    return (record.query.get("watch") or "").lower() in ("true", "1")


__all__ = ["SETTINGS", "STATES", "Server", "fill_store", "is_watch", "new_kube"]

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="a pre-filled stand-in for the job benchmarks")
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--fill", action="append", default=[], help="NAMESPACE=N PyTorchJobs")
    parser.add_argument("--namespace", action="append", default=[], help="an empty namespace to create")
    parser.add_argument("--sweep", action="append", default=[], help="NAMESPACE=N: one Katib Experiment with N "
                                                                     "Trials (tests.bench.sweep_status)")
    parser.add_argument("--bookmark-interval", type=float, default=1.0)
    asyncio.run(_serve(parser.parse_args()))
