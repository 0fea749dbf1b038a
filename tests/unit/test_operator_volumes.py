"""Which volume a dataset's load is written to and which one a new pod mounts
(hub_ext.operator.rules.volumes). The whole flow (a reader keeps its data through a reload, the volume
deleted after its last reader) is proven on the real control plane by tests/kube/test_dataset_reload.py."""

from __future__ import annotations

import re

import jsonpatch
import pytest

from hub_ext.operator.rules import gates, volumes

pytestmark = pytest.mark.unit


def _dataset(**annotations) -> dict:
    return {"metadata": {"name": "frames", "namespace": "vision", "uid": "d1", "annotations": annotations},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "fast",
                     "resources": {"requests": {"storage": "200Gi"}}}}


def _pod(claim: str, phase: str = "Running", held: bool = False, labels: dict | None = None) -> dict:
    spec = {"volumes": [{"name": "home", "emptyDir": {}},
                        {"name": "data", "persistentVolumeClaim": {"claimName": claim}}],
            "containers": [{"name": "main"}]}
    if held:
        spec["schedulingGates"] = [{"name": gates.GATE}]
    return {"metadata": {"name": "p", "labels": labels or {}}, "spec": spec, "status": {"phase": phase}}


def test_a_load_goes_in_place_unless_pods_read_there():
    assert volumes.choose("frames", "frames", set()) == "frames"
    assert volumes.choose("frames", "frames", {"frames"}) is None  # a new one
    # the current volume is a newer one: in place when free; else the dataset's own claim when
    # nobody reads it any longer; else a new one
    assert volumes.choose("frames", "frames-vol-L2", {"frames"}) == "frames-vol-L2"
    assert volumes.choose("frames", "frames-vol-L2", {"frames-vol-L2"}) == "frames"
    assert volumes.choose("frames", "frames-vol-L2", {"frames", "frames-vol-L2"}) is None


def test_readers_are_pods_that_run_unheld_and_are_not_the_loader():
    assert volumes.in_use([_pod("frames"), _pod("other", phase="Pending")], "mlplatform.io/dataset-loader",
                          "frames") == {"frames", "other"}
    for pod in (_pod("frames", phase="Succeeded"), _pod("frames", phase="Failed"),
                _pod("frames", held=True),  # waits for the load under way, on its volume
                _pod("frames", labels={"mlplatform.io/dataset-loader": "frames"})):
        assert volumes.in_use([pod], "mlplatform.io/dataset-loader", "frames") == set()
    # another dataset's loader reads nothing of ours, but is a pod like any other here
    assert volumes.in_use([_pod("frames", labels={"mlplatform.io/dataset-loader": "coco"})],
                          "mlplatform.io/dataset-loader", "frames") == {"frames"}


def test_a_new_volume_is_the_datasets_shape_and_owned_by_it():
    claim = volumes.volume_claim(_dataset(), "abc123")
    # a random part: nobody can name it in a pod before it exists (and get it writable)
    assert re.fullmatch(r"frames-vol-abc123-[0-9a-f]{8}", claim["metadata"]["name"])
    assert claim["metadata"]["name"] != volumes.volume_claim(_dataset(), "abc123")["metadata"]["name"]
    assert claim["metadata"]["labels"] == {volumes.VOLUME_OF_LABEL: "frames", "mlplatform.io/dataset-load": "abc123"}
    assert claim["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                                     "name": "frames", "uid": "d1", "controller": True}]
    assert claim["spec"] == {"accessModes": ["ReadWriteOnce"], "storageClassName": "fast",
                             "resources": {"requests": {"storage": "200Gi"}}}
    assert volumes.is_volume_of(claim, _dataset())
    assert len(volumes.volume_name("x" * 63, "0123456789", "abcdef01")) == 63


def test_a_volume_made_for_the_load_before_a_restart_is_taken_again():
    dataset = _dataset()
    made, older = volumes.volume_claim(dataset, "L2"), volumes.volume_claim(dataset, "L1")
    going = volumes.volume_claim(dataset, "L2")
    going["metadata"]["deletionTimestamp"] = "2026-12-05T00:00:00Z"  # the same load id, from before: going
    assert volumes.adoptable([older, going, made], dataset, "L2") == made["metadata"]["name"]
    assert volumes.adoptable([older, going], dataset, "L2") is None


def test_only_a_claim_the_dataset_controls_is_its_volume():
    claim = volumes.volume_claim(_dataset(), "abc")
    other_owner = {**claim, "metadata": {**claim["metadata"], "ownerReferences": [
        {**claim["metadata"]["ownerReferences"][0], "uid": "someone"}]}}
    not_controller = {**claim, "metadata": {**claim["metadata"], "ownerReferences": [
        {**claim["metadata"]["ownerReferences"][0], "controller": False}]}}
    unlabelled = {**claim, "metadata": {**claim["metadata"], "labels": {}}}
    elsewhere = {**claim, "metadata": {**claim["metadata"], "namespace": "other"}}
    for fake in (other_owner, not_controller, unlabelled, elsewhere, None):
        assert not volumes.is_volume_of(fake, _dataset())


def test_new_pods_are_pointed_at_the_current_volume():
    assert volumes.current(_dataset()) == "frames"
    assert volumes.current(_dataset(**{volumes.VOLUME_ANNOTATION: "frames-vol-L2"})) == "frames-vol-L2"
    pod = _pod("frames")
    moved = jsonpatch.apply_patch(pod, volumes.rewrite_ops(pod, {"frames": "frames-vol-L2"}))
    assert moved["spec"]["volumes"][1]["persistentVolumeClaim"] == {"claimName": "frames-vol-L2"}
    assert moved["spec"]["volumes"][0] == pod["spec"]["volumes"][0]
    assert volumes.rewrite_ops(moved, {"frames-vol-L2": "frames-vol-L2"}) == []  # reinvoked: nothing more
    assert volumes.rewrite_ops(pod, {}) == []


def test_older_volumes_go_once_a_load_has_ended():
    dataset = _dataset(**{volumes.VOLUME_ANNOTATION: "frames-vol-L3-n3"})
    old, now = volumes.volume_claim(dataset, "L2", "n2"), volumes.volume_claim(dataset, "L3", "n3")
    going = volumes.volume_claim(dataset, "L1")
    going["metadata"]["deletionTimestamp"] = "2026-12-05T00:00:00Z"
    foreign = {**volumes.volume_claim(dataset, "L0"), "metadata": {
        **volumes.volume_claim(dataset, "L0")["metadata"], "ownerReferences": []}}
    assert volumes.stale([old, now, going, foreign], dataset) == ["frames-vol-L2-n2"]


def test_a_held_pod_on_a_volume_that_is_no_longer_current_stays_held_and_is_told():
    assert gates.verdict({"frames": (gates.MOVED, gates.MOVED_MESSAGE)}) == ("hold", ["frames"])
    pod = {"metadata": {"name": "p", "namespace": "vision", "uid": "u"}}
    event = gates.failed_event(pod, "frames", gates.MOVED_MESSAGE, "T", moved=True)
    assert event["reason"] == gates.MOVED_REASON and "delete the pod" in event["message"]
