"""One VolumeSnapshot per dataset load, the source of its users' writable copies.

Where the dataset claim's storage can be snapshotted (a VolumeSnapshotClass whose driver is the
provisioner of the claim's StorageClass; the class marked default first), the dataset controller
asks `Snapshots.ensure` once the load is ``Loaded``:

- the VolumeSnapshot ``<claim>-snap-<load id>`` (`snapshot_name`) of the volume that holds the load
  (`volumes.current`: the claim itself, or one of its volumes, made by a reload while pods read the
  data) is made, owned by the claim (it goes with the dataset), labelled
  ``mlplatform.io/dataset-snapshot: <claim>``;
- once it is ``readyToUse`` the claim's annotation ``mlplatform.io/snapshot`` names it
  (`SNAPSHOT_ANNOTATION`: what the hub lists as "copies possible"), and the snapshots of earlier
  loads are deleted (copies already made from them are volumes of their own and stay);
- a snapshot that failed (its ``status.error``) is logged and looked at again later.

Without snapshot support (no such class, the snapshot API not installed, or not allowed to read
it) nothing is made and copies are not offered. Copies themselves are made by the jobs service and
the spawner in the project, from the snapshot the annotation names.
"""

from __future__ import annotations

import logging
import time
from typing import Mapping

from hub_ext.kube.client import MERGE_PATCH, Conflict, Forbidden, Kube, KubeError, NotFound
from hub_ext.manifests.mounts import SNAPSHOT, snapshot_suffix
from hub_ext.operator.rules import datasets as ds
from hub_ext.operator.rules import volumes

log = logging.getLogger("mlplatform.operator")
SNAPSHOT_ANNOTATION = SNAPSHOT
SNAPSHOT_LABEL = "mlplatform.io/dataset-snapshot"
SNAPSHOTS = "/apis/snapshot.storage.k8s.io/v1"
DEFAULT_CLASS = "snapshot.storage.kubernetes.io/is-default-class"
CLASSES_TTL_S = 60.0
READY_POLL_S = 1.0
FAILED_POLL_S = 30.0


def snapshot_name(spec: ds.DatasetSpec) -> str:
    suffix = snapshot_suffix(spec.load_id)
    return spec.name.replace(".", "-")[:ds.MAX_NAME - len(suffix)].rstrip("-") + suffix


def snapshot_manifest(pvc: Mapping, spec: ds.DatasetSpec, snapshot_class: str) -> dict:
    meta = pvc["metadata"]
    return {"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
            "metadata": {"name": snapshot_name(spec), "namespace": spec.namespace,
                         "labels": {SNAPSHOT_LABEL: spec.name, ds.LOAD_LABEL: spec.load_id},
                         "ownerReferences": [{"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                              "name": meta["name"], "uid": meta["uid"]}]},
            "spec": {"volumeSnapshotClassName": snapshot_class,
                     "source": {"persistentVolumeClaimName": volumes.current(pvc)}}}


def class_for(classes: list[dict], driver: str) -> str | None:
    """The VolumeSnapshotClass to use for volumes of `driver` (a default one first), if any."""
    fitting = [c for c in classes if c.get("driver") == driver]
    fitting.sort(key=lambda c: ((c["metadata"].get("annotations") or {}).get(DEFAULT_CLASS) != "true",
                                c["metadata"]["name"]))
    return fitting[0]["metadata"]["name"] if fitting else None


class Snapshots:
    def __init__(self, kube: Kube):
        self.kube = kube
        self._classes: tuple[float, list[dict]] = (0.0, [])
        self._drivers: dict[str, str] = {}

    async def _snapshot_class(self, pvc: Mapping) -> str | None:
        storage_class = (pvc.get("spec") or {}).get("storageClassName")
        if not storage_class:
            return None
        if storage_class not in self._drivers:
            sc = await self.kube.get(f"/apis/storage.k8s.io/v1/storageclasses/{storage_class}")
            if sc is None:
                return None
            self._drivers[storage_class] = sc.get("provisioner", "")
        at, classes = self._classes
        if time.monotonic() - at > CLASSES_TTL_S:
            try:
                classes = (await self.kube.list(f"{SNAPSHOTS}/volumesnapshotclasses"))["items"]
            except (NotFound, Forbidden):  # no snapshot API here, or not ours to read: no copies
                classes = []
            self._classes = (time.monotonic(), classes)
        return class_for(classes, self._drivers[storage_class])

    async def ensure(self, pvc: Mapping, spec: ds.DatasetSpec) -> float | None:
        """Make or follow the snapshot of this load; None when nothing is left to do, else when to
        look again (seconds)."""
        name = snapshot_name(spec)
        if ((pvc["metadata"].get("annotations") or {}).get(SNAPSHOT_ANNOTATION)) == name:
            return None
        ns = spec.namespace
        try:
            snapshot_class = await self._snapshot_class(pvc)
            if snapshot_class is None:
                return None
            path = f"{SNAPSHOTS}/namespaces/{ns}/volumesnapshots"
            snap = await self.kube.get(f"{path}/{name}")
            if snap is None:
                try:
                    await self.kube.request("POST", path, snapshot_manifest(pvc, spec, snapshot_class))
                    log.info("dataset %s/%s: snapshot %s of load %s requested", ns, spec.name, name, spec.load_id)
                except Conflict:
                    pass
                return READY_POLL_S
            status = snap.get("status") or {}
            if status.get("error"):
                log.warning("dataset %s/%s: snapshot %s failed: %s", ns, spec.name, name,
                            (status["error"].get("message") or "")[:300])
                return FAILED_POLL_S
            if not status.get("readyToUse"):
                return READY_POLL_S
            await self.kube.request("PATCH", f"/api/v1/namespaces/{ns}/persistentvolumeclaims/{spec.name}",
                                    {"metadata": {"annotations": {SNAPSHOT_ANNOTATION: name}}},
                                    content_type=MERGE_PATCH)
            log.info("dataset %s/%s: snapshot %s ready; copies offered", ns, spec.name, name)
            older = await self.kube.list(path, labelSelector=f"{SNAPSHOT_LABEL}={spec.name}")
            for old in older["items"]:
                if old["metadata"]["name"] != name:
                    await self.kube.delete(f"{path}/{old['metadata']['name']}")
            return None
        except KubeError as e:
            log.warning("dataset %s/%s: could not snapshot it: %s", ns, spec.name, e.reason)
            return FAILED_POLL_S
