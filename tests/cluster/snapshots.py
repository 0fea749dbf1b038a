"""The snapshot side of the test cluster's CSI driver (`tests.cluster.provisioner.CSI_DRIVER`): what
the csi-snapshotter sidecar and a driver's CreateSnapshot/DeleteSnapshot do, for directories.

TEST DEBT: this plays a real component. Kubernetes' own snapshot-controller (built from its Go
module, `tests.controllers.outofcluster.SnapshotController`) binds VolumeSnapshots to the
VolumeSnapshotContents it makes; a cluster's csi-snapshotter sidecar then asks the CSI driver for
the snapshot over gRPC. No CSI driver runs here (the tests' kubelet mounts directories), so this
loop does both halves, as `pkg/sidecar-controller` of external-snapshotter v8 does them:

- a content of this driver with a source volume and no status: the volume's directory is copied to
  `provisioner.snapshot_dir(root, handle)` (handle ``snapshot-<VolumeSnapshot uid>``, as the
  sidecar names it), then the status says ``readyToUse`` with the handle, the time and the size;
  the ``volumesnapshot-being-created`` annotation is set before the copy and removed after;
- a content being deleted whose snapshot is being deleted (the controller's
  ``volumesnapshot-being-deleted`` annotation): the directory is removed (deletion policy
  ``Delete``), then the content's finalizer.
Restoring (a claim with a VolumeSnapshot ``dataSource``) is the provisioner's part.
"""

from __future__ import annotations

import asyncio
import os
import pathlib
import shutil
import time

from tests.cluster.provisioner import CSI_DRIVER, snapshot_dir
from tests.cluster.rest import ApiError, Rest

CONTENTS = "/apis/snapshot.storage.k8s.io/v1/volumesnapshotcontents"
BEING_CREATED = "snapshot.storage.kubernetes.io/volumesnapshot-being-created"
BEING_DELETED = "snapshot.storage.kubernetes.io/volumesnapshot-being-deleted"
FINALIZER = "snapshot.storage.kubernetes.io/volumesnapshotcontent-bound-protection"
SNAPSHOT_CLASS = {
    "apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotClass",
    "metadata": {"name": "csi-hostpath-snapclass",
                 "annotations": {"snapshot.storage.kubernetes.io/is-default-class": "true"}},
    "driver": CSI_DRIVER, "deletionPolicy": "Delete",
}


def _size(directory: pathlib.Path) -> int:
    return sum(f.stat().st_size for f in directory.rglob("*") if f.is_file() and not f.is_symlink())


def _pointer(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


class SnapshotDriver:
    """The loop above, on the cluster's event loop (`start`/`stop` from it)."""

    def __init__(self, rest: Rest, cluster_dir: pathlib.Path):
        self.rest, self.dir = rest, pathlib.Path(cluster_dir)
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self.rest.follow(CONTENTS, self._content,
                                                                             "snapshot driver"))

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _content(self, content: dict) -> None:
        meta, spec, status = content["metadata"], content["spec"], content.get("status")
        if spec.get("driver") != CSI_DRIVER:
            return
        path = f"{CONTENTS}/{meta['name']}"
        annotations = meta.get("annotations") or {}
        if meta.get("deletionTimestamp"):
            if BEING_CREATED in annotations or BEING_DELETED not in annotations:
                return
            handle = (status or {}).get("snapshotHandle")
            if handle and spec.get("deletionPolicy") == "Delete":
                await asyncio.to_thread(shutil.rmtree, snapshot_dir(self.dir, handle), True)
            finalizers = meta.get("finalizers") or []
            if FINALIZER in finalizers:
                await self._patch(path, [{"op": "test", "path": "/metadata/finalizers", "value": finalizers},
                                         {"op": "replace", "path": "/metadata/finalizers",
                                          "value": [f for f in finalizers if f != FINALIZER]}])
            return
        volume = (spec.get("source") or {}).get("volumeHandle")
        if not volume or status is not None:
            if status and status.get("readyToUse") and BEING_CREATED in annotations:
                await self._patch(path, [{"op": "remove", "path": f"/metadata/annotations/{_pointer(BEING_CREATED)}"}])
            return
        handle = f"snapshot-{spec['volumeSnapshotRef']['uid']}"
        await self._patch(path, [{"op": "add", "path": "/metadata/annotations", "value": {**annotations,
                                                                                         BEING_CREATED: "yes"}}])
        target = snapshot_dir(self.dir, handle)
        if not target.exists():
            tmp = target.with_name(f".{handle}.tmp")
            await asyncio.to_thread(shutil.rmtree, tmp, True)
            await asyncio.to_thread(shutil.copytree, self.dir / "volumes" / volume, tmp, symlinks=True)
            os.replace(tmp, target)
        await self._patch(f"{path}/status", [{"op": "add", "path": "/status", "value": {
            "snapshotHandle": handle, "readyToUse": True, "creationTime": time.time_ns(),
            "restoreSize": await asyncio.to_thread(_size, target)}}])
        await self._patch(path, [{"op": "remove", "path": f"/metadata/annotations/{_pointer(BEING_CREATED)}"}])

    async def _patch(self, path: str, ops: list[dict]) -> None:
        try:
            await self.rest.patch(path, ops, content_type="application/json-patch+json")
        except ApiError as e:
            if e.status not in (404, 409, 422):
                raise
