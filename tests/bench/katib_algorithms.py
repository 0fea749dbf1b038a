"""Benchmark (prints figures, asserts nothing): each sweep algorithm the platform offers, on real Katib
v0.19.0's own services, beside the local runtime's Optuna sweep of the same config; in one run.

    .venv/bin/python -m tests.bench.katib_algorithms [--trials 12] [--parallel 3]   (or: make bench)

The example trainer's ``hptuning_config.yaml`` (``learning_rate`` on a log scale, ``batch_size``
DISCRETE, ``--epochs=5 --sleep=0.1``), ``--trials`` trials, ``--parallel`` at a time, as:

- the default algorithm with ``enableTrialEarlyStopping`` as the file has it (Katib's skopt and
  medianstop services);
- RANDOM_SEARCH (Katib's hyperopt service);
- GRID_SEARCH over ``learning_rate`` as DISCRETE [0.001, 0.01, 0.1, 0.3] × ``batch_size`` (optuna's
  grid; AI Platform grids only DISCRETE, CATEGORICAL and INTEGER parameters).

Each through `KubeBackend.submit` on the real control plane with the process kubelet (each trial a
batch Job of one replica, as `tests.bench.katib_sweep` runs them; Katib's collector in each pod), timed from the submit to
the first trial pod Running and to the sweep's end; then the same configs through `LocalBackend`
(Optuna, one process per trial), from the submit to the first trial's start and to the end.

The platform's operator runs as deployed (`mlplatform operator`, each sweep's namespace a project
of the platform): it writes the observation of each trial medianstop stops, which Katib v0.19.0
leaves out and without which it asks for no new trial (docs/sweeps.md, "Early stopping"). A kube
sweep whose trials neither change nor grow for two minutes is still reported STALLED (its "end" is
when it last moved) and cancelled.
"""

from __future__ import annotations

import argparse
import asyncio
import pathlib
import sys
import time

import yaml

from hub_ext.core.credentials import MANAGED_BY
from server_ext.jobs.backend import FINAL
from server_ext.runtimes.kube.backend import KubeBackend
from tests.bench.jobs_env import SETTINGS, new_kube
from tests.bench.katib_sweep import TRAINER, TRIAL_LABEL, namespace, run_on_katib
from tests.cluster.cluster import Cluster
from tests.kube.job_env import plan
from tests.kube.operator_env import operator_binding, running_operator

STALL_S = 120.0  # a sweep whose trials neither change nor grow for this long is reported stalled
CONFIG = yaml.safe_load((TRAINER / "hptuning_config.yaml").read_text())["trainingInput"]


def configs(trials: int, parallel: int) -> dict[str, dict]:
    """name → the hyperparameters of each algorithm's sweep (see the module docstring)."""
    base = {**CONFIG["hyperparameters"], "maxTrials": trials, "maxParallelTrials": parallel}
    grid = {**base, "algorithm": "GRID_SEARCH", "enableTrialEarlyStopping": False, "params": [
        {"parameterName": "learning_rate", "type": "DISCRETE", "discreteValues": [0.001, 0.01, 0.1, 0.3]},
        *[p for p in base["params"] if p["parameterName"] != "learning_rate"]]}
    return {"default + medianstop (skopt)": base,
            "RANDOM_SEARCH (hyperopt)": {**base, "algorithm": "RANDOM_SEARCH", "enableTrialEarlyStopping": False},
            "GRID_SEARCH (optuna)": grid}


async def kube_sweep(backend, kube, cluster: Cluster, job_id: str, hyper: dict) -> dict[str, float]:
    ns = await namespace(kube, cluster, dict(MANAGED_BY))
    await operator_binding(kube, ns)
    doc = {"jobId": job_id, "trainingInput": {
        "scaleTier": "CUSTOM", "masterType": "n1-standard-4", "args": CONFIG["args"],
        "masterConfig": {"imageUri": "python:3.11-slim", "containerCommand": [
            "env", f"PYTHONPATH={TRAINER}", "python", "-m", "trainer.task"]},
        "hyperparameters": hyper}}
    marks: dict[str, float] = {}
    start = time.perf_counter()
    await backend.submit(plan(doc, ns))
    progress, moved = None, 0.0
    while True:
        now = time.perf_counter() - start
        if "first trial Running" not in marks and any(
                x["status"].get("phase") == "Running" and TRIAL_LABEL in x["metadata"].get("labels", {})
                for x in cluster.items("", "v1", "pods", ns)):
            marks["first trial Running"] = now
        job = await backend.get(ns, job_id)
        trials = job["trainingOutput"].get("trials", [])
        marks["early"] = sum(bool(t.get("isTrialStoppedEarly")) for t in trials)
        if job["state"] in FINAL:
            marks["end"], marks["state"] = now, job["state"]
            return marks
        seen = [(t["trialId"], t["state"]) for t in trials]
        if seen != progress:
            progress, moved = seen, now
        elif now - moved > STALL_S:  # no trial made or changed for STALL_S: stalled (see the module docstring)
            marks["end"] = moved
            marks["state"] = f"STALLED after {sum(t['state'] in FINAL for t in trials)} trials ended"
            await backend.cancel(ns, job_id)
            return marks
        await asyncio.sleep(0.05)


async def local_sweep(work: pathlib.Path, job_id: str, hyper: dict) -> dict[str, float]:
    from server_ext.jobs.machines import Machines
    from server_ext.jobs.model import parse_job
    from server_ext.jobs.plan import PlanSettings, plan_job
    from server_ext.runtimes.local.backend import LocalBackend
    from tests.bench.local_trials import stamp

    doc = {"jobId": job_id, "trainingInput": {
        "pythonModule": "trainer.task", "packageUris": [str(TRAINER / "trainer")], "region": "local",
        "args": CONFIG["args"], "hyperparameters": hyper}}
    p = plan_job(parse_job(doc), PlanSettings(Machines(accelerators={})), project="bench", owner="bench")
    backend = await LocalBackend.create(work / f"local-{job_id}")
    try:
        start = time.perf_counter()
        job = await backend.submit(p)
        while job["state"] not in FINAL:
            await asyncio.sleep(0.01)
            job = await backend.get("bench", job_id)
        end = time.perf_counter() - start
        starts = [stamp(t["startTime"]) for t in job["trainingOutput"].get("trials", []) if t.get("startTime")]
        return {"first trial Running": min(starts) - stamp(job["createTime"]), "end": end, "state": job["state"],
                "early": sum(bool(t.get("isTrialStoppedEarly")) for t in job["trainingOutput"].get("trials", []))}
    finally:
        await backend.close()


async def run(args, cluster: Cluster, work: pathlib.Path, katib) -> None:
    kube = await new_kube(cluster.write_kubeconfig(work / "kubeconfig"))
    backend = KubeBackend(kube, SETTINGS, load_timeout=120)
    rows = []
    (work / "operator").mkdir()
    try:
        async with running_operator(cluster, work / "operator", [f"--katib-db-manager={katib.db_address}"]):
            for i, (name, hyper) in enumerate(configs(args.trials, args.parallel).items()):
                rows.append((f"kube: {name}", await kube_sweep(backend, kube, cluster, f"algo_{i}", hyper)))
        import optuna  # noqa: F401  (loaded before timing, as in a running notebook server)
        for i, (name, hyper) in enumerate(configs(args.trials, args.parallel).items()):
            rows.append((f"local: {name.split(' (')[0]} (Optuna)", await local_sweep(work, f"algo_{i}", hyper)))
    finally:
        await backend.close()
        await kube.api_client.close()
    print(f"\nSweeps per algorithm: the example trainer's config, {args.trials} trials, {args.parallel} in parallel; "
          "real Katib v0.19.0's services on the test cluster vs the local runtime (Optuna)")
    print(f"\n{'':46} {'first trial s':>14} {'end s':>8}  state (early-stopped)")
    for name, m in rows:
        first = m.get("first trial Running", float("nan"))
        print(f"{name:46} {first:14.1f} {m['end']:8.1f}  {m['state']} ({m['early']})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tests.bench.katib_algorithms", description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--parallel", type=int, default=3)
    args = parser.parse_args(argv)
    return run_on_katib("bench-katib-algorithms-", lambda cluster, work, katib: run(args, cluster, work, katib))

if __name__ == "__main__":
    sys.exit(main())
