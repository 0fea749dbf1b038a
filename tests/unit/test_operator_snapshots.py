"""The operator's snapshot of a dataset load (`hub_ext.operator.snapshots`) and how the hub reads
which snapshot copies come from (`hub_ext.manifests.mounts.dataset_snapshot`). Pure parts."""

import pytest

from hub_ext.manifests.mounts import dataset_snapshot
from hub_ext.operator.rules import datasets as ds
from hub_ext.operator.snapshots import class_for, snapshot_manifest, snapshot_name

pytestmark = pytest.mark.unit


def _class(name: str, driver: str, default: bool = False) -> dict:
    annotations = {"snapshot.storage.kubernetes.io/is-default-class": "true"} if default else {}
    return {"metadata": {"name": name, "annotations": annotations}, "driver": driver}


def test_the_class_is_one_of_the_claims_driver_the_default_first():
    classes = [_class("a", "ebs.csi.aws.com"), _class("z", "pd.csi.storage.gke.io", default=True),
               _class("b", "pd.csi.storage.gke.io")]
    assert class_for(classes, "pd.csi.storage.gke.io") == "z"
    assert class_for(classes, "ebs.csi.aws.com") == "a"
    assert class_for(classes, "kubernetes.io/no-provisioner") is None  # no snapshots: no copies offered


def test_one_snapshot_per_load_owned_by_the_claim():
    spec = ds.DatasetSpec("vision", "x" * 63, "uid-1", ds.parse_source("s3://bucket/frames"), "s3-reader")
    name = snapshot_name(spec)
    assert len(name) <= 63 and name.endswith(f"-snap-{spec.load_id}")
    pvc = {"metadata": {"name": spec.name, "uid": "uid-1"}}
    snap = snapshot_manifest(pvc, spec, "csi-snapclass")
    assert snap["spec"] == {"volumeSnapshotClassName": "csi-snapclass", "source": {"persistentVolumeClaimName": spec.name}}
    assert snap["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                                    "name": spec.name, "uid": "uid-1"}]


def test_copies_come_only_from_the_snapshot_of_the_load_the_claim_says_is_loaded():
    def pvc(**annotations):
        return {"metadata": {"annotations": annotations}}

    assert dataset_snapshot(pvc(**{"mlplatform.io/load-id": "abc", "mlplatform.io/snapshot": "frames-snap-abc"})) == \
        "frames-snap-abc"
    # reloaded: the annotation still names the previous load's snapshot until the new one is ready
    assert dataset_snapshot(pvc(**{"mlplatform.io/load-id": "def", "mlplatform.io/snapshot": "frames-snap-abc"})) == ""
    assert dataset_snapshot(pvc(**{"mlplatform.io/load-id": "abc"})) == ""
