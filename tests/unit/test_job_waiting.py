"""`server_ext.jobs.kube.waiting`: a held job's ``statusMessage`` from its held pods and the dataset PVCs;
the backend's copy of a shared view; ``statusMessage`` refused on create, dropped when read back."""

from __future__ import annotations

import json

import pytest

from hub_ext.core.errors import UserInputError, errors_of
from hub_ext.operator.rules import gates
from server_ext.jobs.kube import waiting
from server_ext.jobs.kube.kubeflow import JOB_LABEL
from server_ext.jobs.model import parse_job

pytestmark = pytest.mark.unit


def pod(job: str | None, datasets: str, held: bool = True, name: str = "p") -> dict:
    labels = {JOB_LABEL: job} if job else {}
    return {"metadata": {"name": name, "labels": labels, "annotations": {gates.WAITING_ANNOTATION: datasets}},
            "spec": {"schedulingGates": [{"name": gates.GATE}] if held else []}}


def pvc(name: str, loaded: str | None = None, reason: str = "", message: str = "", progress: dict | None = None,
        deleting: bool = False) -> dict:
    meta = {"name": name, "annotations": {"mlplatform.io/source": f"s3://b/{name}"}}
    if progress is not None:
        meta["annotations"]["mlplatform.io/progress"] = json.dumps(progress)
    if deleting:
        meta["deletionTimestamp"] = "2026-12-04T00:00:00Z"
    status = {"conditions": [{"type": "Loaded", "status": loaded, "reason": reason, "message": message}]} \
        if loaded else {}
    return {"metadata": meta, "status": status}


def test_held_pods_are_indexed_by_their_job():
    pods = [pod("a", "x", name="a-0"), pod("a", "y", name="a-1"), pod("b", "x"), pod(None, "x"),
            pod("c", "x", held=False)]
    by_job = waiting.held_by_job(pods)
    assert sorted(by_job) == ["a", "b"] and len(by_job["a"]) == 2
    assert waiting.waited_for(by_job["a"]) == ["x", "y"]
    assert waiting.waited_for([pod("a", " y , x,,x ")]) == ["x", "y"]


@pytest.mark.parametrize("claim, words", [
    (pvc("frames", "False", "Loading", "12 of 1000 objects",
         {"bytes_done": 42, "bytes_total": 100, "objects_done": 12, "objects_total": 1000}),
     "waiting for the dataset 'frames' to finish loading (42%)"),
    (pvc("frames", "False", "Loading", "12 of 1000 objects"),
     "waiting for the dataset 'frames' to finish loading (12 of 1000 objects)"),
    (pvc("frames"), "waiting for the dataset 'frames' to finish loading (waiting for the loader to start)"),
    (pvc("frames", "False", "Failed", "AccessDenied: s3://b/frames"),
     "waiting for the dataset 'frames', whose load failed: AccessDenied: s3://b/frames"),
    (pvc("frames", "True", "Loaded"), "waiting for the dataset 'frames' (loaded; starting)"),
    (pvc("frames", "True", deleting=True), "waiting for the dataset 'frames', which no longer exists"),
    (None, "waiting for the dataset 'frames', which no longer exists"),
])
def test_the_words_for_one_dataset(claim, words):
    assert waiting.dataset_words("frames", claim) == words


def test_several_datasets_are_told_in_name_order():
    held = [pod("j", "zoo,frames")]
    message = waiting.status_message(held, {"frames": pvc("frames", "False", "Failed", "gone"),
                                            "zoo": pvc("zoo", "False", "Loading", "", {"objects_done": 1,
                                                                                      "objects_total": 4})})
    assert message == ("waiting for the dataset 'frames', whose load failed: gone; "
                       "waiting for the dataset 'zoo' to finish loading (25%)")
    assert waiting.status_message([], {}) is None
    assert waiting.status_message([pod("j", "")], {}) is None


def test_a_shared_view_is_copied_and_only_while_the_job_has_not_ended():
    obj = {"metadata": {"name": "train-1"}}
    view = {"jobId": "train_1", "state": "PREPARING"}
    out = waiting.with_message(view, obj, {"train-1": "waiting for the dataset 'x' to finish loading (5%)"})
    assert out[waiting.FIELD].endswith("(5%)") and waiting.FIELD not in view
    assert waiting.with_message(view, obj, {"other": "…"}) is view
    ended = {"jobId": "train_1", "state": "CANCELLED"}
    assert waiting.with_message(ended, obj, {"train-1": "…"}) is ended


def test_status_message_is_output_only_and_dropped_when_read_back():
    body = {"jobId": "j", "trainingInput": {"region": "us-central1", "masterConfig": {"imageUri": "x"}},
            "statusMessage": "waiting"}
    with pytest.raises(UserInputError) as e:
        parse_job(body)
    assert [(v.field, v.message) for v in errors_of(e.value)] == [("statusMessage", "is output only: the service sets it")]
    assert "statusMessage" not in parse_job(body, create=False).to_json()
