"""A private writable copy of a dataset as a Kubernetes claim: made from the VolumeSnapshot of the
dataset's current load (`hub_ext.manifests.mounts.dataset_snapshot`, the operator's), in the dataset's
StorageClass and at least its size, labelled ``mlplatform.io/dataset-copy-of: <dataset>`` (what the
ValidatingAdmissionPolicy mlplatform-dataset-copies lets members make). Pure: who makes it, owns it
and deletes it is the jobs service's (`server_ext.runtimes.kube.dataset_copies`) or the spawner's
(`hub_ext.spawners.server_copies`) business."""

from __future__ import annotations

import dataclasses
from typing import Iterable, Mapping

from hub_ext.core.credentials import MANAGED_BY
from hub_ext.core.mounts import Dataset

COPY_OF_LABEL = "mlplatform.io/dataset-copy-of"
MAX_NAME = 253


def claim_name(owner: str, dataset: str) -> str:
    """``<owner>-<dataset>-copy`` (a job's or a server pod's name), cut to a claim name's length."""
    return f"{owner}-{dataset}"[:MAX_NAME - len("-copy")].rstrip("-.") + "-copy"


def with_claims(datasets: Iterable[Dataset], owner: str) -> tuple[Dataset, ...]:
    """`datasets` with each copy's claim named for `owner` (before the pod's volumes are made)."""
    return tuple(dataclasses.replace(d, claim=claim_name(owner, d.name)) if d.copy else d for d in datasets)


def copy_manifest(name: str, namespace: str, dataset: str, snapshot: str, source: Mapping,
                  labels: Mapping[str, str] | None = None, owner: Mapping | None = None) -> dict:
    """The claim `name` copying `dataset` from `snapshot`; `source`: the dataset's claim as read."""
    spec = source.get("spec") or {}
    size = (((source.get("status") or {}).get("capacity") or {}).get("storage")
            or ((spec.get("resources") or {}).get("requests") or {}).get("storage"))
    meta = {"name": name, "namespace": namespace, "labels": {**MANAGED_BY, **(labels or {}), COPY_OF_LABEL: dataset}}
    if owner is not None:
        meta["ownerReferences"] = [dict(owner)]
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta,
            "spec": {"accessModes": ["ReadWriteMany" if "ReadWriteMany" in (spec.get("accessModes") or ())
                                     else "ReadWriteOnce"],  # writable, as the dataset's storage allows
                     "storageClassName": spec.get("storageClassName"),
                     "resources": {"requests": {"storage": size}},
                     "dataSource": {"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot",
                                    "name": snapshot}}}
