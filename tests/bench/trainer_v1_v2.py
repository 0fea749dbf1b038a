"""Benchmark (prints figures, asserts nothing, exits 0): the same ml.v1 job on the Kubeflow Training
Operator v1 (a PyTorchJob) and on Kubeflow Trainer v2 (a TrainJob on JobSet), in one run on one
cluster: submit → first pod Running, submit → first log line, and the API requests the platform's
jobs backend makes per job.

    .venv/bin/python -m tests.bench.trainer_v1_v2 [--rounds 5] [--workers 1]   (or: make bench)

The tests' control plane (`tests.cluster`: the real API server, scheduler and controller-manager),
its process kubelet (each container a local process), the real Training Operator v1.9.4 and the
real Trainer v2.3.0 with JobSet v0.12.0 (`tests.controllers`), the platform's runtime
(``helm-values/trainer-runtimes.yaml``); one `KubeBackend` per API (``training_api`` ``v1``,
``v2``), as a notebook server runs it. A round submits the job on v1, then on v2, each a PyTorch
job of a master and ``--workers`` workers, a custom container (``python -c``: one line at once,
then a second's sleep; no package to fetch, so the figures are the APIs' own) and follows its
master's log from the submit; rounds alternate so that a warm cache favours neither. The
cluster runs in this process (its proxy and kubelet share the CPU with the backend: the figures
compare the two APIs, they are not a production latency). Requests are the backend's, counted by
the tests' fault proxy between the submit and the job's end (``during``); ``idle`` counts those in
`IDLE_S` seconds after every job ended, with the caches open (list and watch requests per kind, so
per project, not per job).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import kubernetes_asyncio

from hub_ext.kube.client import Kube
from server_ext.runtimes.kube.backend import KubeBackend
from tests.bench.figures import table
from tests.kube.job_env import NODES, SETTINGS
from tests.kube.test_job_packages import USER, service

ROOT = Path(__file__).resolve().parents[2]
RUNTIMES = ROOT / "helm-values" / "trainer-runtimes.yaml"
IDLE_S = 10
LINE = "bench: first line"
PROGRAM = f"import time; print({LINE!r}, flush=True); time.sleep(1)"


def job_doc(job_id: str, workers: int) -> dict:
    replica = {"imageUri": "python:3.11-slim", "containerCommand": ["python", "-c", PROGRAM]}
    return {"jobId": job_id, "trainingInput": {
        "scaleTier": "CUSTOM", "masterType": "n1-standard-4", "workerType": "n1-standard-4", "workerCount": workers,
        "runtimeVersion": "pytorch-2.5", "masterConfig": replica, "workerConfig": replica}}


async def first_running(cluster, ns: str, name: str, t0: float) -> float:
    while True:
        pods = cluster.items("", "v1", "pods", ns, labelSelector=f"mlplatform.io/job={name}")
        if any((p.get("status") or {}).get("phase") == "Running" for p in pods):
            return time.perf_counter() - t0
        await asyncio.sleep(0.02)


async def first_line(backend, ns: str, job_id: str, t0: float) -> float:
    while True:
        with contextlib.suppress(Exception):  # the job or its pod may not be there yet
            async for line in backend.logs(ns, job_id, "master-replica-0", follow=True):
                if LINE in line.text:
                    return time.perf_counter() - t0
        await asyncio.sleep(0.05)


async def ended(jobs, ns: str, job_id: str) -> str:
    while True:
        state = (await jobs.get(USER, ns, job_id))["state"]
        if state in ("SUCCEEDED", "FAILED", "CANCELLED"):
            return state
        await asyncio.sleep(0.05)


async def one(cluster, backend, jobs, ns: str, job_id: str, workers: int) -> tuple[float, float, int, str]:
    cluster.proxy.clear_requests()
    t0 = time.perf_counter()
    await jobs.create(USER, ns, job_doc(job_id, workers))
    running, line = await asyncio.gather(first_running(cluster, ns, job_id.replace("_", "-"), t0),
                                         first_line(backend, ns, job_id, t0))
    state = await ended(jobs, ns, job_id)
    return running, line, len(cluster.proxy.requests()), state


async def run(cluster, ns: str, rounds: int, workers: int) -> dict:
    api = await kubernetes_asyncio.config.new_client_from_config(
        config_file=str(cluster.write_kubeconfig(cluster.dir / "bench.kubeconfig", ns)))
    backends = {api_: KubeBackend(Kube(api), replace(SETTINGS, training_api=api_), poll_interval=0.1)
                for api_ in ("v1", "v2")}
    figures: dict = {api_: {"running": [], "line": [], "requests": [], "states": []} for api_ in backends}
    try:
        for i in range(rounds):
            for api_, backend in backends.items():
                running, line, requests, state = await one(cluster, backend, service(backend, ns), ns,
                                                           f"{api_}_{i}", workers)
                for key, value in (("running", running), ("line", line), ("requests", requests),
                                   ("states", state)):
                    figures[api_][key].append(value)
        cluster.proxy.clear_requests()
        await asyncio.sleep(IDLE_S)
        idle = len(cluster.proxy.requests())
    finally:
        for backend in backends.values():
            await backend.close()
        await api.close()
    return {"figures": figures, "idle": idle}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="jobs per API")
    parser.add_argument("--workers", type=int, default=1, help="workers beside each job's master")
    args = parser.parse_args(argv)
    from tests.cluster.cluster import Cluster
    from tests.controllers.outofcluster import TrainingOperator
    from tests.controllers.trainer_system import TrainerV2

    with tempfile.TemporaryDirectory(prefix="bench-trainer-") as tmp:
        tmp = Path(tmp)
        cluster = Cluster(tmp / "cluster").start()
        parts = []
        try:
            cluster.kubelet("process", nodes=NODES, workdir=tmp / "kubelet")
            parts.append(TrainingOperator(cluster, tmp / "training-operator").start())
            trainer = TrainerV2(cluster, tmp / "trainer-v2").start()
            parts.append(trainer)
            trainer.apply_runtimes(RUNTIMES)
            ns = "bench"
            cluster.run(cluster.rest.post("/api/v1/namespaces", {"metadata": {"name": ns}}))
            cluster.run(cluster.rest.post(f"/api/v1/namespaces/{ns}/serviceaccounts",
                                          {"metadata": {"name": SETTINGS.service_account}}))
            result = asyncio.run(run(cluster, ns, args.rounds, args.workers))
        finally:
            for part in reversed(parts):
                with contextlib.suppress(Exception):
                    part.stop()
            cluster.stop()
    figures = result["figures"]
    print(f"the same PyTorch job (master + {args.workers} worker(s), custom container) on v1 (PyTorchJob, "
          f"Training Operator v1.9.4) and v2 (TrainJob, Trainer v2.3.0 on JobSet v0.12.0), "
          f"{args.rounds} rounds each, alternating")
    print(table({f"{api_} submit → first pod Running": f["running"] for api_, f in figures.items()}
                | {f"{api_} submit → first log line": f["line"] for api_, f in figures.items()}, ""))
    for api_, f in figures.items():
        print(f"{api_}: backend API requests per job (submit to end): median {statistics.median(f['requests'])}, "
              f"max {max(f['requests'])}; states {sorted(set(f['states']))}")
    print(f"idle: {result['idle']} backend requests in {IDLE_S} s after every job ended (both backends' caches open)")


if __name__ == "__main__":
    main()
