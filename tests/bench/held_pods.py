"""Benchmark (prints figures, asserts nothing): how soon pods held for a dataset run once it is loaded,
beside pods that were never held, in one run.

    .venv/bin/python -m tests.bench.held_pods [--pods 20] [--objects 400] [--delay 0.2]   (or: make bench)

The real control plane (tests/cluster), `mlplatform operator` as the kube tier runs it (its own
ServiceAccount and the shipped RBAC: the pod webhook, the dataset loader, the gate keeper), the
tests' kubelet in process mode (each container a local process) and moto's S3 server behind
`SlowS3` (each object read held ``--delay`` s, so the load lasts long enough to hold the pods:
``--objects`` objects, 8 read at a time).

1. **held**: a dataset PVC is made, then at once ``--pods`` pods that mount it (plain pods, 20 at a
   time, as a Job or a PyTorchJob's replicas would be made); each is checked held (the scheduling
   gate) at creation. Polled every 50 ms: when the PVC's ``Loaded`` condition is True, and for each
   pod when its gate is gone (the gate keeper's patch) and when it is Running (scheduled, started
   by the kubelet). Figures: Loaded → gate lifted, Loaded → Running (p50, p95, max).
2. **never held** (the baseline): ``--pods`` more pods made once the dataset is loaded: create →
   Running. The difference between the two is what holding costs after the load.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import pathlib
import shutil
import statistics
import tempfile
import time
import uuid

from hub_ext.manifests.mounts import MountSettings, dataset_from_pvc, volumes
from hub_ext.operator.rules import datasets as ds
from hub_ext.operator.rules import gates
from tests.cluster.cluster import Cluster
from tests.cluster.identities import install_platform
from tests.kube.dataset_env import SlowS3, aws_secret, dataset, put_many
from tests.kube.operator_env import make_project, running_operator

RUNNER = "mlplatform-runner"
MOUNTS = MountSettings({"gcp-credential": "gcp-credential", "aws-credential": "aws-credential"})
NODES = [{"name": "bench-node", "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "200"}}]


def pod(pvc: dict, name: str) -> dict:
    d = dataset_from_pvc(pvc, MOUNTS)
    vols, mounts = volumes([], [d], MOUNTS)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": pvc["metadata"]["namespace"]},
            "spec": {"restartPolicy": "Never", "serviceAccountName": RUNNER, "volumes": vols,
                     "containers": [{"name": "main", "image": "busybox", "command": ["sleep", "120"],
                                     "volumeMounts": mounts}]}}


def spread(values: list[float]) -> str:
    if not values:
        return "none"
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"p50 {statistics.median(ordered):.2f} s, p95 {p95:.2f} s, max {ordered[-1]:.2f} s (n={len(ordered)})"


async def make_pods(admin, pvc: dict, names: list[str]) -> dict[str, float]:
    """Create the pods at once; name → when its create returned (monotonic), the made pod checked."""
    made: dict[str, float] = {}

    async def one(name: str) -> None:
        obj = await admin.create(pod(pvc, name))
        made[name] = time.monotonic()
        made[f"{name}:held"] = gates.is_held(obj)

    await asyncio.gather(*(one(n) for n in names))
    return made


async def watch(admin, ns: str, names: list[str], timeout: float) -> tuple[float | None, dict, dict]:
    """Poll every 50 ms: (when the PVC read Loaded True, name → when its gate was gone, name → Running)."""
    loaded_at, released, running = None, {}, {}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and len(running) < len(names):
        now = time.monotonic()
        if loaded_at is None:
            cond = ds.condition_of(await admin.get(f"/api/v1/namespaces/{ns}/persistentvolumeclaims/data") or {})
            if cond and cond.get("status") == "True":
                loaded_at = now
        for p in (await admin.list(f"/api/v1/namespaces/{ns}/pods"))["items"]:
            name = p["metadata"]["name"]
            if name not in names:
                continue
            if name not in released and not gates.is_held(p):
                released[name] = now
            if name not in running and (p.get("status") or {}).get("phase") == "Running":
                running[name] = now
        await asyncio.sleep(0.05)
    return loaded_at, released, running


async def main(n: int, objects: int, delay: float, timeout: float) -> None:
    from tests.local.object_stores import s3_server

    work = pathlib.Path(tempfile.mkdtemp(prefix="bench-held-pods-"))
    cluster = Cluster(work / "cluster").start()
    try:
        install_platform(cluster)
        with s3_server() as s3:
            slow = SlowS3(s3.endpoint).start()
            try:
                async with running_operator(cluster, work, [f"--s3-endpoint={slow.url}"]) as op:
                    admin, ns = op.kube, f"bench-held-{uuid.uuid4().hex[:4]}"
                    await make_project(admin, ns)
                    await admin.create({"apiVersion": "v1", "kind": "ServiceAccount",
                                        "metadata": {"name": RUNNER, "namespace": ns}})
                    cluster.kubelet(mode="process", nodes=NODES)
                    prefix = f"held-{uuid.uuid4().hex[:6]}"
                    put_many(s3, prefix, objects)
                    await admin.create(aws_secret(ns, "s3-reader", s3.key_id, s3.secret))
                    slow.delay = delay
                    began = time.monotonic()
                    pvc = await admin.create(dataset(ns, "data", f"s3://{s3.bucket}/{prefix}", "s3-reader"))
                    held_names = [f"held-{i:02}" for i in range(n)]
                    made = await make_pods(admin, pvc, held_names)
                    held = sum(1 for name in held_names if made[f"{name}:held"])
                    loaded_at, released, running = await watch(admin, ns, held_names, timeout)
                    if loaded_at is None:
                        print(f"the dataset did not load within {timeout} s; the operator's log: {op.log_path}")
                        return
                    slow.delay = 0.0
                    fresh_names = [f"fresh-{i:02}" for i in range(n)]
                    fresh_made = await make_pods(admin, await admin.get(
                        f"/api/v1/namespaces/{ns}/persistentvolumeclaims/data"), fresh_names)
                    _, _, fresh_running = await watch(admin, ns, fresh_names, timeout)

                    print(f"\n{n} pods mounting one dataset ({objects} objects from S3, {delay:.2f} s per object read, "
                          f"8 at a time): process kubelet, real control plane and operator")
                    print(f"  the load took {loaded_at - began:.1f} s from the PVC's create; the {n} pods were "
                          f"made in {max(made[x] for x in held_names) - began:.1f} s; held at creation: {held} of {n}")
                    print(f"  held pods, Loaded -> gate lifted: {spread([released[x] - loaded_at for x in released])}")
                    print(f"  held pods, Loaded -> Running:     {spread([running[x] - loaded_at for x in running])}")
                    print(f"  never-held pods (made once Loaded), create -> Running: "
                          f"{spread([fresh_running[x] - fresh_made[x] for x in fresh_running])}")
                    print(f"  (poll interval 50 ms; the operator's log: {op.log_path})")
            finally:
                slow.stop()
    finally:
        cluster.stop()
        shutil.rmtree(work / "cluster", ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=20)
    parser.add_argument("--objects", type=int, default=400)
    parser.add_argument("--delay", type=float, default=0.2, help="seconds each object read is held")
    parser.add_argument("--timeout", type=float, default=300)
    args = parser.parse_args()
    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)
    asyncio.run(main(args.pods, args.objects, args.delay, args.timeout))
