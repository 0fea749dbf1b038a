"""A job's Kubernetes object (``PyTorchJob``, ``TFJob`` or ``batch/v1`` Job, as
`server_ext.jobs.kube.kubeflow.job_manifest` made it, or a Trainer v2 ``TrainJob`` as
`server_ext.jobs.kube.trainjob` made it, and its controller updated it) back to the ``ml.v1``
Job JSON. Pure: `job_json(obj)` reads the object alone and never changes it.

Guarantees of `job_json`:

- ``jobId``, ``labels`` and ``trainingInput`` are those submitted (the ``mlplatform.io/job-spec``
  annotation); an object without it still answers, with the jobId annotation (or its name);
- times are RFC 3339 in UTC with ``Z``: ``createTime`` (creationTimestamp), ``startTime``
  (``status.startTime``), ``endTime`` (``status.completionTime``, else the time the final
  condition became true) only once the job has ended;
- ``etag`` is the base64 of the resourceVersion (it changes whenever the object does);
- ``state`` (only conditions with status ``"True"`` count; `STATE_RULES` in order):

  ====================================================  ==========
  ``Succeeded`` (operator) / ``Complete`` or             SUCCEEDED
  ``SuccessCriteriaMet`` (batch)
  ``Failed`` (or batch ``FailureTarget``), cancel        CANCELLED
  requested
  ``Failed`` (or batch ``FailureTarget``)                FAILED, ``errorMessage`` = the condition's
                                                         message (or reason)
  deletionTimestamp set                                  CANCELLING
  cancel requested and ``Suspended``                     CANCELLED
  cancel requested                                       CANCELLING
  ``Suspended`` (e.g. held by a queue such as Kueue)     QUEUED
  ``Running`` or ``Restarting``                          RUNNING
  ``Created``                                            PREPARING
  batch Job: a ready pod (or active, on clusters that    RUNNING
  do not count ready pods)
  batch Job: active or started                           PREPARING
  TrainJob: a ready pod in its JobSet's jobs             RUNNING
  TrainJob: an active pod                                PREPARING
  nothing                                                QUEUED
  ====================================================  ==========

A TrainJob's ``status.trainerStatus`` (what its trainer reported to Trainer's status server) is
the job's ``trainingOutput.progress`` (`server_ext.jobs.progress`), kept once the job has ended.

The batch Job controller (Kubernetes ≥ 1.31) first adds ``SuccessCriteriaMet`` or
``FailureTarget`` — the outcome is then decided — and ``Complete`` or ``Failed`` only once its pods
have terminated; meanwhile no pod is active, so reading the outcome from the first keeps a job
that ran from reading PREPARING again.

The output validates against the discovery document's ``GoogleCloudMlV1__Job`` (with the
platform's MIG names in ``acceleratorConfig.type``).
"""

from __future__ import annotations

import base64
import datetime
import json
from typing import Any

from server_ext.jobs.kube.kubeflow import CANCEL_ANNOTATION, SPEC_ANNOTATION
from server_ext.jobs.model import JOB_ID_ANNOTATION
from server_ext.jobs.progress import progress

FINAL = ("SUCCEEDED", "FAILED", "CANCELLED")


def rfc3339(text: str | None) -> str | None:
    """A Kubernetes timestamp as RFC 3339 UTC with ``Z`` (fractions kept); None stays None."""
    if not text:
        return None
    when = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)
    out = when.astimezone(datetime.timezone.utc).isoformat()
    return out.replace("+00:00", "Z")


def true_conditions(obj: dict) -> dict[str, dict]:
    """Condition type → condition, for those whose status is ``"True"``."""
    conditions = (obj.get("status") or {}).get("conditions") or []
    return {c["type"]: c for c in conditions if c.get("status") == "True" and c.get("type")}


def state_of(obj: dict) -> tuple[str, str]:
    """(state, errorMessage) of a job object; see the table in the module docstring."""
    conds = true_conditions(obj)
    meta = obj.get("metadata") or {}
    cancel = CANCEL_ANNOTATION in (meta.get("annotations") or {})
    if "Succeeded" in conds or "Complete" in conds or "SuccessCriteriaMet" in conds:
        return "SUCCEEDED", ""
    failed = conds.get("Failed") or conds.get("FailureTarget")
    if failed is not None:
        if cancel:
            return "CANCELLED", ""
        return "FAILED", failed.get("message") or failed.get("reason") or "the job failed"
    if meta.get("deletionTimestamp"):
        return "CANCELLING", ""
    if cancel:
        return ("CANCELLED" if "Suspended" in conds else "CANCELLING"), ""
    if "Suspended" in conds:
        return "QUEUED", ""
    if "Running" in conds or "Restarting" in conds:
        return "RUNNING", ""
    if "Created" in conds:
        return "PREPARING", ""
    status = obj.get("status") or {}
    if obj.get("kind") == "Job":
        if status.get("ready") or (status.get("active") and "ready" not in status):
            return "RUNNING", ""
        if status.get("active") or status.get("startTime"):
            return "PREPARING", ""
    if obj.get("kind") == "TrainJob":
        jobs = status.get("jobsStatus") or []
        if any(j.get("ready") for j in jobs):
            return "RUNNING", ""
        if any(j.get("active") for j in jobs):
            return "PREPARING", ""
    return "QUEUED", ""


def _end_time(obj: dict, state: str) -> str | None:
    if state not in FINAL:
        return None
    completion = (obj.get("status") or {}).get("completionTime")
    if completion:
        return rfc3339(completion)
    conds = true_conditions(obj)
    for kind in ("Succeeded", "Complete", "SuccessCriteriaMet", "Failed", "FailureTarget", "Suspended"):
        if kind in conds and conds[kind].get("lastTransitionTime"):
            return rfc3339(conds[kind]["lastTransitionTime"])
    return None


def submitted(obj: dict) -> dict[str, Any]:
    """The ``jobId``/``labels``/``trainingInput`` the job was submitted with."""
    meta = obj.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    try:
        spec = json.loads(annotations[SPEC_ANNOTATION])
    except (KeyError, ValueError):
        spec = {}
    if not isinstance(spec, dict):
        spec = {}
    out = {k: spec[k] for k in ("jobId", "labels", "trainingInput") if k in spec}
    out.setdefault("jobId", annotations.get(JOB_ID_ANNOTATION) or meta.get("name", ""))
    return out


def job_json(obj: dict) -> dict:
    """The ``ml.v1`` Job JSON of a job object (see the module docstring)."""
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    state, error = state_of(obj)
    out = submitted(obj)
    times = {"createTime": rfc3339(meta.get("creationTimestamp")), "startTime": rfc3339(status.get("startTime")),
             "endTime": _end_time(obj, state)}
    out.update({k: v for k, v in times.items() if v})
    out["state"] = state
    if error:
        out["errorMessage"] = error
    trainer = status.get("trainerStatus")
    reported = progress(trainer, rfc3339(trainer.get("lastUpdatedTime"))) if isinstance(trainer, dict) else None
    if reported:
        out["trainingOutput"] = {"progress": reported}
    if meta.get("resourceVersion"):
        out["etag"] = base64.b64encode(str(meta["resourceVersion"]).encode()).decode()
    return out
