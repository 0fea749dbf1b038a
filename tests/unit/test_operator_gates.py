"""What the pod webhook writes on a pod held for its datasets, and when the gate keeper lets it go
(hub_ext.operator.rules.gates). The API server's side (the scheduler leaves a gated pod alone, a gate
may be removed and never added) is proven by tests/kube/test_operator_datasets.py."""

from __future__ import annotations

import jsonpatch
import pytest

from hub_ext.operator.rules import gates

pytestmark = pytest.mark.unit


def _pod(**meta) -> dict:
    return {"metadata": {"name": "trainer-0", "namespace": "vision", "uid": "u1", **meta},
            "spec": {"containers": [{"name": "main"}]}}


def test_a_pod_waiting_for_datasets_is_held_once():
    pod = _pod()
    held = jsonpatch.apply_patch(pod, gates.gate_ops(pod, ["mnist", "coco", "coco"]))
    assert held["spec"]["schedulingGates"] == [{"name": gates.GATE}]
    assert held["metadata"]["labels"] == {gates.GATED_LABEL: "true"}
    assert held["metadata"]["annotations"] == {gates.WAITING_ANNOTATION: "coco,mnist"}
    assert gates.is_held(held) and not gates.is_held(pod)
    assert gates.gate_ops(held, ["coco", "mnist"]) == []  # reinvoked: nothing more
    assert gates.gate_ops(pod, []) == []


def test_a_pods_own_gates_labels_and_annotations_stay():
    pod = _pod(labels={"app": "x"}, annotations={"a/b": "c"})
    pod["spec"]["schedulingGates"] = [{"name": "example.com/quota"}]
    held = jsonpatch.apply_patch(pod, gates.gate_ops(pod, ["coco"]))
    assert held["spec"]["schedulingGates"] == [{"name": "example.com/quota"}, {"name": gates.GATE}]
    assert held["metadata"]["labels"] == {"app": "x", gates.GATED_LABEL: "true"}
    assert held["metadata"]["annotations"] == {"a/b": "c", gates.WAITING_ANNOTATION: "coco"}


def test_let_go_when_every_dataset_is_ready_and_held_while_one_is_not():
    assert gates.verdict({"coco": ("ready", ""), "mnist": ("ready", "")}) == ("release", [])
    assert gates.verdict({}) == ("release", [])  # its claims are gone or no longer datasets
    assert gates.verdict({"coco": ("ready", ""), "mnist": ("loading", "3 of 9 objects")}) == ("hold", [])
    assert gates.verdict({"coco": ("failed", "AccessDenied"), "mnist": ("loading", "")}) == ("hold", ["coco"])


def test_the_release_removes_the_gate_by_name_and_the_label():
    assert gates.release_patch() == {"metadata": {"labels": {gates.GATED_LABEL: None}},
                                     "spec": {"schedulingGates": [{"$patch": "delete", "name": gates.GATE}]}}


def test_the_failure_event_names_the_dataset_and_the_reason_once_per_failure():
    pod = _pod()
    e = gates.failed_event(pod, "coco", "AccessDenied: the credential s3-reader may not read", "T")
    assert e["type"] == "Warning" and e["reason"] == gates.FAILED_REASON
    assert e["involvedObject"] == {"apiVersion": "v1", "kind": "Pod", "namespace": "vision", "name": "trainer-0",
                                   "uid": "u1"}
    assert e["message"] == ("held until the dataset coco is loaded; its load failed: AccessDenied: the credential "
                            "s3-reader may not read")
    again = gates.failed_event(pod, "coco", "AccessDenied: the credential s3-reader may not read", "T2")
    assert e["metadata"]["name"] == again["metadata"]["name"]  # looked at again: the same Event (a 409)
    assert e["metadata"]["name"] != gates.failed_event(pod, "coco", "NoSuchBucket", "T")["metadata"]["name"]
    assert e["metadata"]["name"] != gates.failed_event(pod, "mnist", "AccessDenied: the credential s3-reader may not read", "T")["metadata"]["name"]
