"""The test cluster's storage: a default StorageClass and an external provisioner for it that makes
each claim a directory (a hostPath PersistentVolume), as a CSI driver's external-provisioner would.

A second class, `CSI_CLASS`, is the same directories as CSI PersistentVolumes of the driver
`CSI_DRIVER` (the kubelet reads the directory from ``volumeAttributes.path``), so Kubernetes' real
snapshot-controller can snapshot them (it snapshots CSI volumes only); `tests.cluster.snapshots`
plays that driver's snapshot side. A claim of this class made from a VolumeSnapshot
(``dataSource``) starts as a copy of the snapshot's directory, once the snapshot is ready, as
external-provisioner does.

The real PV controller (in kube-controller-manager) marks a claim of this class with
`volume.kubernetes.io/storage-provisioner`; this provisioner then creates a PV pre-bound to the
claim (`claimRef` with its uid), and the PV controller completes the binding. When a claim is
deleted its PV goes Released; with the Delete reclaim policy this provisioner removes the
directory and the PV. Test tooling, not a product part.
"""

from __future__ import annotations

import asyncio
import logging
import pathlib
import shutil

from tests.cluster.rest import ApiError, Rest

log = logging.getLogger("tests.cluster.provisioner")
NAME = "mlplatform.test/hostpath"
STORAGE_CLASS = {
    "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
    "metadata": {"name": "standard", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
    "provisioner": NAME, "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate",
}
CSI_DRIVER = "hostpath.csi.mlplatform.test"
CSI_CLASS = {
    "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "csi-hostpath"},
    "provisioner": CSI_DRIVER, "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate",
}
CSI_DRIVER_OBJECT = {  # no attach step (the attach-detach controller would wait for an external-attacher)
    "apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": CSI_DRIVER},
    "spec": {"attachRequired": False, "podInfoOnMount": False},
}
SNAPSHOT_RESTORE_TIMEOUT = 60  # seconds a claim from a snapshot waits for it to be ready


def snapshot_dir(root: pathlib.Path, handle: str) -> pathlib.Path:
    """Where the snapshot with this handle keeps its files (`tests.cluster.snapshots` writes them)."""
    return pathlib.Path(root) / "snapshots" / handle


class Provisioner:
    def __init__(self, rest: Rest, root: pathlib.Path, snapshots: pathlib.Path | None = None):
        self.rest, self.root = rest, pathlib.Path(root)
        self.snapshots = pathlib.Path(snapshots) if snapshots else self.root.parent
        self._tasks: list[asyncio.Task] = []
        self._restoring: set[str] = set()

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self.rest.follow("/api/v1/persistentvolumeclaims", self._claim, "provisioner")),
                       loop.create_task(self.rest.follow("/api/v1/persistentvolumes", self._volume, "provisioner"))]

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _claim(self, pvc: dict) -> None:
        meta, spec = pvc["metadata"], pvc["spec"]
        annotations = meta.get("annotations") or {}
        driver = annotations.get("volume.kubernetes.io/storage-provisioner")
        if driver not in (NAME, CSI_DRIVER) or spec.get("volumeName") or meta.get("deletionTimestamp"):
            return
        source = spec.get("dataSource") or {}
        if driver == CSI_DRIVER and source.get("kind") == "VolumeSnapshot":
            if meta["uid"] not in self._restoring:  # its own task: it waits for the snapshot to be ready
                self._restoring.add(meta["uid"])
                self._tasks.append(asyncio.get_running_loop().create_task(self._restore(pvc, source["name"])))
            return
        await self._provision(pvc, driver)

    async def _restore(self, pvc: dict, snapshot: str) -> None:
        meta = pvc["metadata"]
        ns = meta["namespace"]
        try:
            for _ in range(SNAPSHOT_RESTORE_TIMEOUT * 4):
                try:
                    snap = await self.rest.get(f"/apis/snapshot.storage.k8s.io/v1/namespaces/{ns}/volumesnapshots/"
                                               f"{snapshot}")
                    content = (snap.get("status") or {}).get("boundVolumeSnapshotContentName")
                    if (snap.get("status") or {}).get("readyToUse") and content:
                        handle = (await self.rest.get(f"/apis/snapshot.storage.k8s.io/v1/volumesnapshotcontents/"
                                                      f"{content}"))["status"]["snapshotHandle"]
                        await self._provision(pvc, CSI_DRIVER, snapshot_dir(self.snapshots, handle))
                        return
                except ApiError as e:
                    if e.status != 404:
                        log.info("restoring %s/%s: %s", ns, meta["name"], e)
                await asyncio.sleep(0.25)
            log.warning("claim %s/%s: its snapshot %s was not ready in %s s", ns, meta["name"], snapshot,
                        SNAPSHOT_RESTORE_TIMEOUT)
        finally:
            self._restoring.discard(meta["uid"])

    async def _provision(self, pvc: dict, driver: str, copy_of: pathlib.Path | None = None) -> None:
        meta, spec = pvc["metadata"], pvc["spec"]
        name = f"pvc-{meta['uid']}"
        directory = self.root / name
        if copy_of is not None and not directory.exists():
            await asyncio.to_thread(shutil.copytree, copy_of, directory, symlinks=True)
        directory.mkdir(parents=True, exist_ok=True)
        where = ({"hostPath": {"path": str(directory), "type": "DirectoryOrCreate"}} if driver == NAME else
                 {"csi": {"driver": CSI_DRIVER, "volumeHandle": name, "volumeAttributes": {"path": str(directory)}}})
        pv = {
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name, "annotations": {"pv.kubernetes.io/provisioned-by": driver}},
            "spec": {"capacity": {"storage": ((spec.get("resources") or {}).get("requests") or {}).get("storage",
                                                                                                       "1Gi")},
                     "accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
                     "persistentVolumeReclaimPolicy": "Delete", "storageClassName": spec.get("storageClassName"),
                     "volumeMode": spec.get("volumeMode", "Filesystem"), **where,
                     "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": meta["namespace"],
                                  "name": meta["name"], "uid": meta["uid"]}},
        }
        try:
            await self.rest.post("/api/v1/persistentvolumes", pv)
        except ApiError as e:
            if e.status != 409:
                log.warning("provisioning %s/%s failed: %s", meta["namespace"], meta["name"], e)

    async def _volume(self, pv: dict) -> None:
        meta = pv["metadata"]
        if ((meta.get("annotations") or {}).get("pv.kubernetes.io/provisioned-by") not in (NAME, CSI_DRIVER)
                or (pv.get("status") or {}).get("phase") != "Released"
                or pv["spec"].get("persistentVolumeReclaimPolicy") != "Delete"):
            return
        shutil.rmtree(self.root / meta["name"], ignore_errors=True)
        try:
            await self.rest.delete(f"/api/v1/persistentvolumes/{meta['name']}")
        except ApiError as e:
            if e.status != 404:
                raise
