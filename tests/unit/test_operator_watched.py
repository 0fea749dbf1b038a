"""The operator's memory of what its watches delivered (hub_ext.operator.watched)."""

from __future__ import annotations

import pytest

from hub_ext.operator.watched import Watched, claim_part, job_part

pytestmark = pytest.mark.unit


def test_the_newest_copy_is_kept_and_a_deletion_forgets_it():
    w = Watched()
    w.event("ADDED", {"metadata": {"namespace": "a", "name": "x", "resourceVersion": "1"}})
    w.event("MODIFIED", {"metadata": {"namespace": "a", "name": "x", "resourceVersion": "2"}})
    w.event(None, {"metadata": {"namespace": "b", "name": "x", "resourceVersion": "3"}})  # kopf's initial listing
    assert w.get("a", "x")["metadata"]["resourceVersion"] == "2" and len(w) == 2
    w.event("DELETED", {"metadata": {"namespace": "a", "name": "x"}})
    assert w.get("a", "x") is None and w.get("b", "x") is not None and w.get("c", "x") is None


def test_only_what_the_webhook_reads_is_kept():
    pvc = {"metadata": {"namespace": "a", "name": "d", "uid": "u", "labels": {"l": "1"}, "annotations": {"s": "x"},
                        "managedFields": [{"big": True}]},
           "spec": {"resources": {}}, "status": {"phase": "Bound", "conditions": [{"type": "Loaded"}]}}
    assert claim_part(pvc) == {"metadata": {"namespace": "a", "name": "d", "uid": "u", "labels": {"l": "1"},
                                            "annotations": {"s": "x"}},
                               "status": {"conditions": [{"type": "Loaded"}]}}
    job = {"metadata": {"namespace": "a", "name": "j", "uid": "v", "ownerReferences": [{"uid": "u"}]},
           "spec": {"template": {"spec": {"containers": [{"name": "loader"}]}}}}
    w = Watched(job_part)
    w.event("ADDED", job)
    assert w.get("a", "j") == {"metadata": {"namespace": "a", "name": "j", "uid": "v", "ownerReferences": [{"uid": "u"}]}}
