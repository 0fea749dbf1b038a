"""A job's Kubernetes object back to the ml.v1 Job JSON: state for each condition combination, times,
errorMessage, etag, and Google's GoogleCloudMlV1__Job schema."""

import base64
import copy
import re

import pytest

from server_ext.jobs.backend import STATES
from server_ext.jobs.kube.kubeflow import CANCEL_ANNOTATION, SPEC_ANNOTATION, job_manifest
from server_ext.jobs.model import JOB_ID_ANNOTATION
from server_ext.jobs.kube.status import job_json, rfc3339
from tests.unit.test_job_kubeflow import SETTINGS, make_plan
from tests.unit.test_job_model import PLATFORM_JOB_SCHEMA as JOB_SCHEMA

pytestmark = pytest.mark.unit


RFC3339_Z = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")
CREATED, STARTED, ENDED = "2026-12-02T10:00:00Z", "2026-12-02T10:01:30Z", "2026-12-02T11:00:00Z"


def stored(name: str, conditions=(), status=None, cancel=False, deleting=False, job_id=None) -> dict:
    """The object as the API server answers it: the manifest with metadata and status filled in."""
    obj = job_manifest(make_plan(name, job_id), SETTINGS)
    obj["metadata"].update(creationTimestamp=CREATED, resourceVersion="4711", uid="0b1c")
    if cancel:
        obj["metadata"]["annotations"][CANCEL_ANNOTATION] = "2026-12-02T10:30:00Z"
    if deleting:
        obj["metadata"]["deletionTimestamp"] = "2026-12-02T10:31:00Z"
    obj["status"] = {**(status or {}), "conditions": [
        {"type": t, "status": s, "reason": f"{t}Reason", "message": f"job is {t.lower()}",
         "lastTransitionTime": when, "lastUpdateTime": when} for t, s, when in conditions]}
    return obj


def C(kind, status="True", when=STARTED):
    return kind, status, when


OPERATOR_TABLE = [
    ([], {}, "QUEUED"),
    ([C("Created", when=CREATED)], {}, "PREPARING"),
    ([C("Created", when=CREATED), C("Running", "False")], {}, "PREPARING"),
    ([C("Created", when=CREATED), C("Running", "Unknown")], {}, "PREPARING"),
    ([C("Created", when=CREATED), C("Running")], {}, "RUNNING"),
    ([C("Created", when=CREATED), C("Running", "False"), C("Restarting")], {}, "RUNNING"),
    ([C("Created", when=CREATED), C("Running", "False"), C("Succeeded", when=ENDED)], {}, "SUCCEEDED"),
    ([C("Created", when=CREATED), C("Running", "False"), C("Failed", when=ENDED)], {}, "FAILED"),
    ([C("Created", when=CREATED), C("Suspended")], {}, "QUEUED"),  # held by a queue (Kueue), not cancelled
    ([C("Created", when=CREATED), C("Running")], {"cancel": True}, "CANCELLING"),
    ([], {"cancel": True}, "CANCELLING"),
    ([C("Created", when=CREATED), C("Running", "False"), C("Suspended", when=ENDED)], {"cancel": True}, "CANCELLED"),
    ([C("Created", when=CREATED), C("Suspended", "False")], {"cancel": True}, "CANCELLING"),
    ([C("Created", when=CREATED), C("Failed", when=ENDED)], {"cancel": True}, "CANCELLED"),
    ([C("Created", when=CREATED), C("Succeeded", when=ENDED)], {"cancel": True}, "SUCCEEDED"),  # finished first
    ([C("Created", when=CREATED), C("Running")], {"deleting": True}, "CANCELLING"),
    ([C("Created", when=CREATED), C("Succeeded", when=ENDED)], {"deleting": True}, "SUCCEEDED"),
]


@pytest.mark.parametrize("name", ["pytorchjob-mig", "tfjob-chief-worker-ps"])
@pytest.mark.parametrize("conditions, flags, state", OPERATOR_TABLE)
def test_operator_conditions_to_state(name, conditions, flags, state):
    status = {"startTime": STARTED} if conditions else {}
    out = job_json(stored(name, conditions, status, **flags))
    assert out["state"] == state
    assert ("endTime" in out) == (state in ("SUCCEEDED", "FAILED", "CANCELLED"))
    assert list(JOB_SCHEMA.iter_errors(out)) == []


BATCH_TABLE = [
    ([], {}, {}, "QUEUED"),
    ([], {"startTime": STARTED}, {}, "PREPARING"),
    ([], {"startTime": STARTED, "active": 1, "ready": 0}, {}, "PREPARING"),  # pod pending: pulling the image
    ([], {"startTime": STARTED, "active": 1, "ready": 1}, {}, "RUNNING"),
    ([], {"startTime": STARTED, "active": 1}, {}, "RUNNING"),  # a cluster that does not count ready pods
    ([C("Complete", when=ENDED)], {"startTime": STARTED, "succeeded": 1, "completionTime": ENDED}, {}, "SUCCEEDED"),
    ([C("Failed", when=ENDED)], {"startTime": STARTED, "failed": 1}, {}, "FAILED"),
    # Kubernetes >= 1.31 decides the outcome first, then adds Complete/Failed once the pods are gone
    ([C("SuccessCriteriaMet", when=ENDED)], {"startTime": STARTED, "succeeded": 1}, {}, "SUCCEEDED"),
    ([C("FailureTarget", when=ENDED)], {"startTime": STARTED, "failed": 1}, {}, "FAILED"),
    ([C("FailureTarget", when=ENDED)], {"startTime": STARTED, "failed": 1}, {"cancel": True}, "CANCELLED"),
    ([C("Suspended")], {}, {}, "QUEUED"),
    ([], {"startTime": STARTED, "active": 1, "ready": 1}, {"cancel": True}, "CANCELLING"),
    ([C("Suspended", when=ENDED)], {"startTime": STARTED}, {"cancel": True}, "CANCELLED"),
    ([C("Failed", when=ENDED)], {"startTime": STARTED, "failed": 1}, {"cancel": True}, "CANCELLED"),
    ([], {"startTime": STARTED, "active": 1}, {"deleting": True}, "CANCELLING"),
]


@pytest.mark.parametrize("conditions, status, flags, state", BATCH_TABLE)
def test_batch_job_conditions_and_counts_to_state(conditions, status, flags, state):
    out = job_json(stored("job-python-module", conditions, status, **flags))
    assert out["state"] == state
    assert list(JOB_SCHEMA.iter_errors(out)) == []


def test_every_state_is_reachable():
    states = {s for _, _, s in OPERATOR_TABLE} | {s for *_, s in BATCH_TABLE}
    assert states == set(STATES)


def test_a_failed_job_says_why():
    out = job_json(stored("job-python-module", [C("Failed", when=ENDED)], {"startTime": STARTED}))
    assert (out["state"], out["errorMessage"]) == ("FAILED", "job is failed")
    obj = stored("pytorchjob-mig", [C("Created"), C("Failed", when=ENDED)])
    obj["status"]["conditions"][-1].pop("message")
    assert job_json(obj)["errorMessage"] == "FailedReason"
    obj["status"]["conditions"][-1].pop("reason")
    assert job_json(obj)["errorMessage"] == "the job failed"
    for conditions, flags in [([C("Created"), C("Running")], {}), ([C("Failed")], {"cancel": True})]:
        assert "errorMessage" not in job_json(stored("pytorchjob-mig", conditions, **flags))


def test_times_are_rfc3339_utc():
    out = job_json(stored("pytorchjob-mig", [C("Created", when=CREATED), C("Succeeded", when=ENDED)],
                          {"startTime": STARTED, "completionTime": "2026-12-02T10:59:00Z"}))
    assert (out["createTime"], out["startTime"], out["endTime"]) == (CREATED, STARTED, "2026-12-02T10:59:00Z")
    # no completionTime (a failed batch Job, a cancelled one): the final condition's time
    out = job_json(stored("job-python-module", [C("Failed", when=ENDED)], {"startTime": STARTED}))
    assert out["endTime"] == ENDED
    out = job_json(stored("job-python-module", [C("Suspended", when="2026-12-02T10:31:00Z")], {}, cancel=True))
    assert out["endTime"] == "2026-12-02T10:31:00Z" and "startTime" not in out
    queued = job_json(stored("pytorchjob-mig"))
    assert queued["createTime"] == CREATED and "startTime" not in queued and "endTime" not in queued
    for value in (*out.values(), *queued.values()):
        if isinstance(value, str) and value[:4] == "2026":
            assert RFC3339_Z.fullmatch(value)


@pytest.mark.parametrize("text, expected", [
    ("2026-12-02T10:00:00Z", "2026-12-02T10:00:00Z"), ("2026-12-02T11:00:00+01:00", "2026-12-02T10:00:00Z"),
    ("2026-12-02T10:00:00.250000Z", "2026-12-02T10:00:00.250000Z"), ("2026-12-02T10:00:00", "2026-12-02T10:00:00Z"),
    (None, None), ("", None),
])
def test_rfc3339(text, expected):
    assert rfc3339(text) == expected


def test_the_submitted_job_comes_back_exactly():
    plan = make_plan("job-python-module", job_id="Census__V2")
    out = job_json(stored("job-python-module", job_id="Census__V2"))
    assert out["jobId"] == "Census__V2" and out["labels"] == {"team": "vision"}
    assert out["trainingInput"] == plan.job.doc["trainingInput"]
    assert set(out) == {"jobId", "labels", "trainingInput", "createTime", "state", "etag"}


def test_etag_follows_the_resource_version():
    obj = stored("pytorchjob-mig")
    first = job_json(obj)["etag"]
    assert base64.b64decode(first) == b"4711"
    obj["metadata"]["resourceVersion"] = "4712"
    assert job_json(obj)["etag"] != first


def test_an_object_without_the_spec_annotation_still_answers():
    obj = stored("pytorchjob-mig", job_id="ResNet_X")
    del obj["metadata"]["annotations"][SPEC_ANNOTATION]
    assert job_json(obj)["jobId"] == "ResNet_X" and "trainingInput" not in job_json(obj)
    obj["metadata"]["annotations"] = {SPEC_ANNOTATION: "{not json"}
    assert job_json(obj)["jobId"] == obj["metadata"]["name"]
    assert list(JOB_SCHEMA.iter_errors(job_json(obj))) == []
    assert job_json({"kind": "Job", "metadata": {"name": "bare",
                                                  "annotations": {JOB_ID_ANNOTATION: "bare_1"}}}) == {
        "jobId": "bare_1", "state": "QUEUED"}


def test_the_object_is_not_changed():
    obj = stored("tfjob-chief-worker-ps", [C("Created"), C("Running")], {"startTime": STARTED}, cancel=True)
    before = copy.deepcopy(obj)
    job_json(obj)
    assert obj == before
