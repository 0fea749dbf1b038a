"""Benchmark (prints figures, asserts nothing): handing out 10 writable copies of a loaded dataset
from its snapshot, beside 10 fresh loads of the same data, in one run.

    .venv/bin/python -m tests.bench.dataset_copies [--copies 10] [--objects 200] [--object-kb 100]   (or: make bench)

The real control plane (tests/cluster), Kubernetes' real snapshot-controller, `mlplatform operator`
as the kube tier runs it, and moto's S3 server:

1. **loads**: ``--copies`` dataset claims of the same ``s3://`` prefix made at once; each is
   loaded by its own loader Job. Figures: create → ``Loaded`` (p50, max), the wall time of all, and
   the bytes read from the object store.
2. **copies**: one dataset claim in the snapshot-capable class, loaded; the operator's snapshot of
   the load (``Loaded`` → the claim names its ready snapshot); then ``--copies`` claims made at once
   from it, shaped as the jobs service makes them (`server_ext.runtimes.kube.dataset_copies`). Figures:
   create → ``Bound`` (p50, max), the wall time of all, and the bytes written (the snapshot and the
   copies' directories).

What the copies cost here is the tests' CSI class (`tests/cluster/snapshots.py` copies directories:
a snapshot and each restore are full copies on the same disk). A CSI driver with copy-on-write
snapshots (most cloud block stores, ZFS, Ceph RBD) hands a copy out without copying the data, so
the copy side here is an upper bound; the load side is what every pod would otherwise wait for.
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

from hub_ext.manifests.mounts import dataset_snapshot
from hub_ext.operator.rules import datasets as ds
from tests.cluster.cluster import Cluster
from tests.cluster.identities import install_platform
from tests.controllers.snapshots import SnapshotController
from tests.kube.dataset_env import aws_secret, dataset, put_many
from tests.kube.operator_env import make_project, running_operator

NODES = [{"name": "bench-node", "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "200"}}]


def spread(values: list[float]) -> str:
    ordered = sorted(values)
    return f"p50 {statistics.median(ordered):.2f} s, max {ordered[-1]:.2f} s (n={len(ordered)})" if ordered else "none"


def tree_bytes(path: pathlib.Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


def copy_claim(ns: str, name: str, snapshot: str) -> dict:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": ns, "labels": {"mlplatform.io/dataset-copy-of": "data"}},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "csi-hostpath",
                     "resources": {"requests": {"storage": "1Gi"}},
                     "dataSource": {"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot",
                                    "name": snapshot}}}


async def until_each(admin, ns: str, names: list[str], done, timeout: float) -> dict[str, float]:
    """Poll the claims every 50 ms: name → when `done(pvc)` first held (monotonic)."""
    at: dict[str, float] = {}
    deadline = time.monotonic() + timeout
    while len(at) < len(names) and time.monotonic() < deadline:
        now = time.monotonic()
        for pvc in (await admin.list(f"/api/v1/namespaces/{ns}/persistentvolumeclaims"))["items"]:
            name = pvc["metadata"]["name"]
            if name in names and name not in at and done(pvc):
                at[name] = now
        await asyncio.sleep(0.05)
    return at


def loaded(pvc: dict) -> bool:
    return (ds.condition_of(pvc) or {}).get("status") == "True"


def bound(pvc: dict) -> bool:
    return (pvc.get("status") or {}).get("phase") == "Bound"


async def main(n: int, objects: int, object_kb: int, timeout: float) -> None:
    from tests.local.object_stores import s3_server

    work = pathlib.Path(tempfile.mkdtemp(prefix="bench-dataset-copies-"))
    cluster = Cluster(work / "cluster").start()
    try:
        install_platform(cluster)
        snapshots = SnapshotController(cluster, work).start()
        try:
            with s3_server() as s3:
                async with running_operator(cluster, work, [f"--s3-endpoint={s3.endpoint}"]) as op:
                    admin, ns = op.kube, f"bench-copies-{uuid.uuid4().hex[:4]}"
                    await make_project(admin, ns)
                    await admin.create({"apiVersion": "v1", "kind": "ServiceAccount",  # the loaders run as it
                                        "metadata": {"name": "mlplatform-runner", "namespace": ns}})
                    cluster.kubelet(mode="process", nodes=NODES)
                    prefix = f"copies-{uuid.uuid4().hex[:6]}"
                    put_many(s3, prefix, objects, size=lambda _i: object_kb * 1024)
                    source = f"s3://{s3.bucket}/{prefix}"
                    size = objects * object_kb * 1024
                    await admin.create(aws_secret(ns, "s3-reader", s3.key_id, s3.secret))

                    # 1. n fresh loads of the same data
                    names = [f"load-{i:02}" for i in range(n)]
                    began = time.monotonic()
                    await asyncio.gather(*(admin.create(dataset(ns, name, source, "s3-reader")) for name in names))
                    made = time.monotonic()
                    done = await until_each(admin, ns, names, loaded, timeout)
                    loads = [done[x] - began for x in done]

                    # 2. one load, its snapshot, n copies from it
                    claim = dataset(ns, "data", source, "s3-reader")
                    claim["spec"]["storageClassName"] = "csi-hostpath"
                    await admin.create(claim)
                    at = await until_each(admin, ns, ["data"], loaded, timeout)
                    offered = await until_each(admin, ns, ["data"], lambda p: bool(dataset_snapshot(p)), timeout)
                    pvc = await admin.get(f"/api/v1/namespaces/{ns}/persistentvolumeclaims/data")
                    snapshot = dataset_snapshot(pvc)
                    copies = [f"copy-{i:02}" for i in range(n)]
                    copy_began = time.monotonic()
                    await asyncio.gather(*(admin.create(copy_claim(ns, name, snapshot)) for name in copies))
                    handed = await until_each(admin, ns, copies, bound, timeout)
                    copy_times = [handed[x] - copy_began for x in handed]
                    written = tree_bytes(cluster.dir / "snapshots") + sum(
                        tree_bytes(cluster.dir / "volumes" / p["spec"]["volumeName"])
                        for p in (await admin.list(f"/api/v1/namespaces/{ns}/persistentvolumeclaims",
                                                   labelSelector="mlplatform.io/dataset-copy-of=data"))["items"]
                        if p["spec"].get("volumeName"))

                    mb = size / 1e6
                    print(f"\n{n} copies of one dataset ({objects} objects x {object_kb} KB = {mb:.1f} MB) beside {n} "
                          f"fresh loads of it: real control plane, snapshot-controller and operator, moto S3")
                    print(f"  {n} fresh loads:  create -> Loaded {spread(loads)}; all in "
                          f"{max(loads, default=0):.1f} s (claims made in {made - began:.2f} s); "
                          f"{n * mb:.1f} MB read from the object store")
                    if "data" in at and "data" in offered:
                        print(f"  the dataset for copies: its load took as one of the above; Loaded -> snapshot "
                              f"ready and offered {offered['data'] - at['data']:.2f} s")
                    print(f"  {n} copies:       create -> Bound {spread(copy_times)}; all in "
                          f"{max(copy_times, default=0):.1f} s; 0 MB read from the object store, "
                          f"{written / 1e6:.1f} MB written on the node (the snapshot + {len(handed)} restores: "
                          "this CSI class copies directories; copy-on-write storage writes ~0)")
                    print(f"  (poll interval 50 ms; the operator's log: {op.log_path}; snapshot-controller's: "
                          f"{snapshots.process.log if snapshots.process else '-'})")
        finally:
            snapshots.stop()
    finally:
        cluster.stop()
        shutil.rmtree(work / "cluster", ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=10)
    parser.add_argument("--objects", type=int, default=200)
    parser.add_argument("--object-kb", type=int, default=100)
    parser.add_argument("--timeout", type=float, default=300)
    args = parser.parse_args()
    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)
    asyncio.run(main(args.copies, args.objects, args.object_kb, args.timeout))
