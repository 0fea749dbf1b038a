"""The test cluster's storage: a default StorageClass and an external provisioner for it that makes
each claim a directory (a hostPath PersistentVolume), as a CSI driver's external-provisioner would.

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

from .rest import ApiError, Rest

log = logging.getLogger("tests.cluster.provisioner")
NAME = "mlplatform.test/hostpath"
STORAGE_CLASS = {
    "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
    "metadata": {"name": "standard", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
    "provisioner": NAME, "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate",
}


class Provisioner:
    def __init__(self, rest: Rest, root: pathlib.Path):
        self.rest, self.root = rest, pathlib.Path(root)
        self._tasks: list[asyncio.Task] = []

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._loop("/api/v1/persistentvolumeclaims", self._claim)),
                       loop.create_task(self._loop("/api/v1/persistentvolumes", self._volume))]

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _loop(self, path: str, handle) -> None:
        rv = None
        while True:
            try:
                if rv is None:
                    listing = await self.rest.get(path)
                    rv = listing["metadata"]["resourceVersion"]
                    for obj in listing["items"]:
                        await handle(obj)
                async for ev in self.rest.watch(path, rv, timeoutSeconds="60"):
                    if ev["type"] == "ERROR":
                        rv = None
                        break
                    rv = ev["object"]["metadata"]["resourceVersion"]
                    if ev["type"] in ("ADDED", "MODIFIED"):
                        await handle(ev["object"])
            except asyncio.CancelledError:
                raise
            except Exception as e:  # a cut watch, a 5xx: resume after a pause
                log.info("provisioner watch of %s ended (%s); resuming", path, e)
                await asyncio.sleep(0.5)

    async def _claim(self, pvc: dict) -> None:
        meta, spec = pvc["metadata"], pvc["spec"]
        annotations = meta.get("annotations") or {}
        if (annotations.get("volume.kubernetes.io/storage-provisioner") != NAME or spec.get("volumeName")
                or meta.get("deletionTimestamp")):
            return
        name = f"pvc-{meta['uid']}"
        directory = self.root / name
        directory.mkdir(parents=True, exist_ok=True)
        pv = {
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name, "annotations": {"pv.kubernetes.io/provisioned-by": NAME}},
            "spec": {"capacity": {"storage": ((spec.get("resources") or {}).get("requests") or {}).get("storage",
                                                                                                       "1Gi")},
                     "accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
                     "persistentVolumeReclaimPolicy": "Delete", "storageClassName": spec.get("storageClassName"),
                     "volumeMode": spec.get("volumeMode", "Filesystem"),
                     "hostPath": {"path": str(directory), "type": "DirectoryOrCreate"},
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
        if ((meta.get("annotations") or {}).get("pv.kubernetes.io/provisioned-by") != NAME
                or (pv.get("status") or {}).get("phase") != "Released"
                or pv["spec"].get("persistentVolumeReclaimPolicy") != "Delete"):
            return
        shutil.rmtree(self.root / meta["name"], ignore_errors=True)
        try:
            await self.rest.delete(f"/api/v1/persistentvolumes/{meta['name']}")
        except ApiError as e:
            if e.status != 404:
                raise
