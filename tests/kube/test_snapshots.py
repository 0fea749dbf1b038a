"""The test cluster's volume snapshots, which the platform's dataset copies stand on: the real
snapshot-controller binds a VolumeSnapshot of a CSI claim, the class's driver (played by the tests,
`tests.cluster.snapshots`) copies the volume, and a claim made from the snapshot starts with its
files and is its own: what one pod writes there no other claim sees."""

from __future__ import annotations

import asyncio

import pytest

from tests.kube.job_env import NODES

pytestmark = pytest.mark.kube

SNAPS = "/apis/snapshot.storage.k8s.io/v1"
WRITE = """
import pathlib, sys
root = pathlib.Path(sys.argv[1])
print(sorted(p.name for p in root.iterdir()), flush=True)
(root / sys.argv[2]).write_text(sys.argv[3])
"""


def claim(ns: str, name: str, snapshot: str | None = None) -> dict:
    spec = {"accessModes": ["ReadWriteOnce"], "storageClassName": "csi-hostpath",
            "resources": {"requests": {"storage": "1Gi"}}}
    if snapshot:
        spec["dataSource"] = {"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": snapshot}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": ns},
            "spec": spec}


def writer(ns: str, name: str, claim_name: str, file: str, text: str) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": ns},
            "spec": {"backoffLimit": 0, "template": {"spec": {
                "restartPolicy": "Never",
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}],
                "containers": [{"name": "main", "image": "python:3.12-slim",
                                "command": ["python", "-c", WRITE, "/data", file, text],
                                "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]}}}}


async def eventually(check, what: str, timeout: float = 60):
    for _ in range(int(timeout / 0.2)):
        result = await check()
        if result:
            return result
        await asyncio.sleep(0.2)
    raise AssertionError(f"never: {what}")


async def run_writer(kube, kubelet, ns: str, name: str, claim_name: str, file: str, text: str) -> str:
    """Run the writer Job to completion; what its pod saw in the claim before writing."""
    await kube.create(writer(ns, name, claim_name, file, text))

    async def done():
        job = await kube.get(f"/apis/batch/v1/namespaces/{ns}/jobs/{name}")
        status = job.get("status") or {}
        assert not status.get("failed"), f"{name} failed"
        return status.get("succeeded")

    await eventually(done, f"the Job {name} succeeded", 90)
    (pod,) = (await kube.list(f"/api/v1/namespaces/{ns}/pods", labelSelector=f"job-name={name}"))["items"]
    return "\n".join(t for _, t in kubelet.kubelet.logs.container(ns, pod["metadata"]["name"], "main").lines)


async def test_a_claim_from_a_snapshot_starts_with_its_files_and_is_its_own(snapshots, kube, kube_target,
                                                                             kube_cluster):
    ns = kube_target.namespace
    kubelet = kube_cluster.kubelet(mode="process", nodes=NODES)
    await kube.create(claim(ns, "source"))
    await run_writer(kube, kubelet, ns, "fill", "source", "a.txt", "original")
    await kube.create({"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
                       "metadata": {"name": "snap", "namespace": ns},
                       "spec": {"source": {"persistentVolumeClaimName": "source"}}})

    async def ready():
        snap = await kube.get(f"{SNAPS}/namespaces/{ns}/volumesnapshots/snap")
        return snap if (snap.get("status") or {}).get("readyToUse") else None

    snap = await eventually(ready, "the snapshot is ready to use")
    assert snap["spec"]["volumeSnapshotClassName"] == "csi-hostpath-snapclass"  # the default class, set by the controller
    assert int(snap["status"]["restoreSize"]) >= len("original")
    content = await kube.get(f"{SNAPS}/volumesnapshotcontents/{snap['status']['boundVolumeSnapshotContentName']}")
    assert content["spec"]["driver"] == "hostpath.csi.mlplatform.test"

    await run_writer(kube, kubelet, ns, "after", "source", "b.txt", "written after the snapshot")
    await kube.create(claim(ns, "copy-1", "snap"))
    await kube.create(claim(ns, "copy-2", "snap"))
    seen_1 = await run_writer(kube, kubelet, ns, "w1", "copy-1", "one.txt", "1")
    seen_2 = await run_writer(kube, kubelet, ns, "w2", "copy-2", "two.txt", "2")
    assert seen_1.strip() == seen_2.strip() == "['a.txt']"  # the snapshot's files, not what came later
    again_1 = await run_writer(kube, kubelet, ns, "r1", "copy-1", "x", "")
    assert again_1.strip() == "['a.txt', 'one.txt']"  # its own write, not the other copy's
    source = await run_writer(kube, kubelet, ns, "r0", "source", "y", "")
    assert source.strip() == "['a.txt', 'b.txt']"  # the copies' writes never reach the source

    # deleting the snapshot deletes its content (policy Delete) and the copies keep their files
    await kube.delete(f"{SNAPS}/namespaces/{ns}/volumesnapshots/snap")

    async def content_gone():
        return await kube.get(f"{SNAPS}/volumesnapshotcontents/{content['metadata']['name']}") is None

    await eventually(content_gone, "the snapshot's content is deleted")
    assert (await run_writer(kube, kubelet, ns, "r2", "copy-2", "z", "")).strip() == "['a.txt', 'two.txt']"
