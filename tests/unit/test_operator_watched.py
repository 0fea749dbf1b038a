"""The operator's memory of what its watches delivered (hub_ext.operator.watched)."""

from __future__ import annotations

import pytest

from hub_ext.operator.watched import Watched

pytestmark = pytest.mark.unit


def test_the_newest_copy_is_kept_and_a_deletion_forgets_it():
    w = Watched()
    w.event("ADDED", {"metadata": {"namespace": "a", "name": "x", "resourceVersion": "1"}})
    w.event("MODIFIED", {"metadata": {"namespace": "a", "name": "x", "resourceVersion": "2"}})
    w.event(None, {"metadata": {"namespace": "b", "name": "x", "resourceVersion": "3"}})  # kopf's initial listing
    assert w.get("a", "x")["metadata"]["resourceVersion"] == "2" and len(w) == 2
    w.event("DELETED", {"metadata": {"namespace": "a", "name": "x"}})
    assert w.get("a", "x") is None and w.get("b", "x") is not None and w.get("c", "x") is None
