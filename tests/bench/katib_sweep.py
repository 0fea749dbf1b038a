"""Benchmark (prints figures, asserts nothing) of P6 on real Katib v0.19.0: the time from a sweep's
creation to its first trial running, beside the local runtime's Optuna sweep of the same config,
and sweep status (`KubeBackend.get`) of an Experiment with real Trials; in one run.

    .venv/bin/python -m tests.bench.katib_sweep [--rounds 5] [--trials 40] [--parallel 8] [--calls 200]
                                                 (or: make bench)

The real control plane (tests/cluster), real Katib as the kube tier runs it
(`tests.controllers.katib_system`: katib-controller, db-manager on Postgres, goptuna's ``random``
service as a pod, Katib's file-metrics-collector in each trial pod) and the process kubelet.

1. **first trial**, ``--rounds`` times: one AI Platform sweep (RANDOM_SEARCH, one DOUBLE, 2 trials,
   2 in parallel; the example trainer, ``--epochs=1``) submitted through `KubeBackend.submit` in a
   fresh namespace labelled for Katib's injection; timed from the submit to the first trial pod
   ``Running`` (Katib's pod label), with on the way: the suggestion's goptuna pod Running and the
   first Trial made. The same config through `LocalBackend` (Optuna, one process per trial): submit
   → the first trial's ``startTime``. The kube path has a suggestion pod to start and a Job, a
   pod and a collector per trial; the local one none of those.
2. **status with real Trials**: one sweep of ``--trials`` trials, ``--parallel`` at a time, of a
   trivial trainer (``--epochs=1 --sleep=0.3``; Katib's collector fails a trial whose process ended
   before it looked); once every trial ended, ``get`` is timed ``--calls`` times with nothing
   changed, counting the API requests the fault proxy saw besides the shared watches.
   The 1,000-trial figure is `tests.bench.sweep_status` (Katib-shaped Trials written through the
   API: 1,000 real trials of this kind take tens of minutes on 2 cores, see the printed rate).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import pathlib
import statistics
import sys
import tempfile
import time
import uuid

from server_ext.runtimes.kube.backend import KubeBackend
from tests.bench.jobs_env import SETTINGS, is_watch, new_kube
from tests.cluster.cluster import Cluster
from tests.controllers.katib_system import Katib
from tests.kube.job_env import NODES, plan

ROOT = pathlib.Path(__file__).resolve().parents[2]
TRAINER = ROOT / "examples" / "trainer"
INJECTION = {"katib.kubeflow.org/metrics-collector-injection": "enabled"}
TRIAL_LABEL = "katib.kubeflow.org/trial"


def hyperparameters(trials: int, parallel: int) -> dict:
    return {"goal": "MINIMIZE", "hyperparameterMetricTag": "rmse", "maxTrials": trials, "maxParallelTrials": parallel,
            "algorithm": "RANDOM_SEARCH",
            "params": [{"parameterName": "learning_rate", "type": "DOUBLE", "minValue": 0.01, "maxValue": 0.2}]}


def kube_doc(job_id: str, trials: int, parallel: int, args: list[str]) -> dict:
    return {"jobId": job_id, "trainingInput": {
        "scaleTier": "CUSTOM", "masterType": "n1-standard-4", "args": args,
        "masterConfig": {"imageUri": "python:3.11-slim", "containerCommand": [
            "env", f"PYTHONPATH={TRAINER}", "python", "-m", "trainer.task"]},
        "hyperparameters": hyperparameters(trials, parallel)}}


def quantiles(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    p95 = statistics.quantiles(ordered, n=20, method="inclusive")[18] if len(ordered) > 1 else ordered[0]
    return statistics.median(ordered), p95


async def namespace(kube, cluster: Cluster, labels: dict | None = None) -> str:
    """A namespace for one sweep (Katib's injection label, and `labels`), with the runner account."""
    ns = f"bench-{uuid.uuid4().hex[:6]}"
    await kube.request("POST", "/api/v1/namespaces", {"metadata": {"name": ns, "labels": {**INJECTION, **(labels or {})}}})
    await kube.request("POST", f"/api/v1/namespaces/{ns}/serviceaccounts",
                       {"metadata": {"name": SETTINGS.service_account}})
    while not cluster.get("", "v1", "serviceaccounts", ns, "default"):
        await asyncio.sleep(0.05)
    return ns


async def first_trial(backend, kube, cluster: Cluster, i: int) -> dict[str, float]:
    ns = await namespace(kube, cluster)
    p = plan(kube_doc(f"first_{i}", 2, 2, ["--epochs=1", "--sleep=0.5"]), ns)
    marks: dict[str, float] = {}
    start = time.perf_counter()
    await backend.submit(p)
    while "trial pod Running" not in marks:
        now = time.perf_counter() - start
        pods = cluster.items("", "v1", "pods", ns)
        if "suggestion pod Running" not in marks and any(
                x["status"].get("phase") == "Running" and TRIAL_LABEL not in x["metadata"].get("labels", {})
                for x in pods):
            marks["suggestion pod Running"] = now
        if "Trial made" not in marks and cluster.items("kubeflow.org", "v1beta1", "trials", ns):
            marks["Trial made"] = now
        if any(x["status"].get("phase") == "Running" and TRIAL_LABEL in x["metadata"].get("labels", {})
               for x in pods):
            marks["trial pod Running"] = now
        if now > 300:
            raise TimeoutError(f"no trial pod Running after 300 s in {ns}")
        await asyncio.sleep(0.02)
    await backend.cancel(ns, f"first_{i}")
    return marks


async def local_first_trial(work: pathlib.Path, i: int) -> float:
    from server_ext.jobs.backend import FINAL
    from server_ext.jobs.machines import Machines
    from server_ext.jobs.model import parse_job
    from server_ext.jobs.plan import PlanSettings, plan_job
    from server_ext.runtimes.local.backend import LocalBackend
    from tests.bench.local_trials import stamp

    doc = {"jobId": f"first_{i}", "trainingInput": {
        "pythonModule": "trainer.task", "packageUris": [str(TRAINER / "trainer")], "region": "local",
        "args": ["--epochs=1", "--sleep=0.5"], "hyperparameters": hyperparameters(2, 2)}}
    p = plan_job(parse_job(doc), PlanSettings(Machines(accelerators={})), project="bench", owner="bench")
    backend = await LocalBackend.create(work / f"local-{i}")
    try:
        job = await backend.submit(p)
        while job["state"] not in FINAL:
            await asyncio.sleep(0.01)
            job = await backend.get("bench", f"first_{i}")
        starts = [stamp(t["startTime"]) for t in job["trainingOutput"].get("trials", []) if t.get("startTime")]
        return min(starts) - stamp(job["createTime"])
    finally:
        await backend.close()


async def status(backend, kube, cluster: Cluster, trials: int, parallel: int, calls: int) -> dict:
    ns = await namespace(kube, cluster)
    p = plan(kube_doc("status_sweep", trials, parallel, ["--epochs=1", "--sleep=0.3"]), ns)
    start = time.perf_counter()
    await backend.submit(p)
    job = await backend.get(ns, "status_sweep")
    while job["state"] not in ("SUCCEEDED", "FAILED", "CANCELLED"):
        await asyncio.sleep(1)
        job = await backend.get(ns, "status_sweep")
        if time.perf_counter() - start > 3600:
            break
    ran = time.perf_counter() - start
    for _ in range(3):
        await backend.get(ns, "status_sweep")
    before = len(cluster.requests())
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        job = await backend.get(ns, "status_sweep")
        times.append((time.perf_counter() - t) * 1000)
    extra = [r for r in cluster.requests()[before:] if not is_watch(r)]
    states: dict[str, int] = {}
    for t in job["trainingOutput"].get("trials", []):
        states[t["state"]] = states.get(t["state"], 0) + 1
    return {"state": job["state"], "states": states, "ran": ran, "times": times, "extra": len(extra),
            "trials": len(cluster.items("kubeflow.org", "v1beta1", "trials", ns))}


async def run(args, cluster: Cluster, work: pathlib.Path) -> None:
    kube = await new_kube(cluster.write_kubeconfig(work / "kubeconfig"))
    backend = KubeBackend(kube, SETTINGS, load_timeout=120)
    try:
        kube_marks = [await first_trial(backend, kube, cluster, i) for i in range(args.rounds)]
        import optuna  # noqa: F401  (loaded before timing, as in a running notebook server)
        local = [await local_first_trial(work, i) for i in range(args.rounds)]
        result = await status(backend, kube, cluster, args.trials, args.parallel, args.calls)
    finally:
        await backend.close()
        await kube.api_client.close()
    print(f"\nP6, real Katib v0.19.0 (goptuna random) on the test cluster vs the local runtime (Optuna), "
          f"{args.rounds} rounds each; 2 trials, 2 in parallel, the example trainer, --epochs=1")
    print(f"\n{'creation -> ...':44} {'p50 s':>8} {'p95 s':>8} {'max s':>8}")
    for mark in ("suggestion pod Running", "Trial made", "trial pod Running"):
        values = [m[mark] for m in kube_marks if mark in m]
        if values:
            p50, p95 = quantiles(values)
            print(f"{'kube: ' + mark:44} {p50:8.2f} {p95:8.2f} {max(values):8.2f}")
    p50, p95 = quantiles(local)
    print(f"{'local: first trial started':44} {p50:8.2f} {p95:8.2f} {max(local):8.2f}")
    p50, p95 = quantiles(result["times"])
    rate = result["trials"] / result["ran"] if result["ran"] else float("nan")
    print(f"\nsweep status with {result['trials']} real Trials ({args.parallel} in parallel; {result['state']}; "
          + ", ".join(f"{k} {v}" for k, v in sorted(result["states"].items()))
          + f"): ran in {result['ran']:.0f} s = {rate:.2f} trials/s, so 1,000 would take ~{1000 / rate / 60:.0f} min")
    print(f"get (KubeBackend.get -> sweep_json), nothing changed: {len(result['times'])} calls, p50 {p50:.2f} ms, "
          f"p95 {p95:.2f} ms, max {max(result['times']):.2f} ms; API requests beyond the shared watches: "
          f"{result['extra']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tests.bench.katib_sweep", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--trials", type=int, default=40, help="real trials of the status sweep")
    parser.add_argument("--parallel", type=int, default=8)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args(argv)
    return run_on_katib("bench-katib-", lambda cluster, work, _: run(args, cluster, work))


def run_on_katib(prefix: str, body) -> int:
    """``body(cluster, work, katib)`` (a coroutine) on a fresh test cluster with real Katib and a
    process kubelet with the kube tier's nodes, in a temporary directory `prefix`…; all stopped after."""
    logging.basicConfig(level=logging.WARNING)
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        work = pathlib.Path(tmp)
        work.chmod(0o755)
        cluster = Cluster(work / "cluster").start()
        katib = None
        try:
            if not cluster.network.dns:
                print("the test cluster has no pod network/DNS here (not root?): real Katib cannot run")
                return 0
            katib = Katib(cluster, work / "katib").start()
            cluster.kubelet(mode="process", nodes=NODES)
            asyncio.run(body(cluster, work, katib))
        finally:
            cluster.reset()
            if katib is not None:
                katib.stop()
            cluster.stop()
    return 0

if __name__ == "__main__":
    sys.exit(main())
