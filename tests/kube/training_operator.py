"""What is left of the retired Training Operator helper (a test helper, not product code): the
condition and path helpers that the Katib helper (`tests.kube.katib_controller`, a debt until the
real Katib runs in the kube tier, issue 15) still imports; it goes with that helper.

PyTorchJobs and TFJobs are run by the real Kubeflow Training Operator v1.9.4 in every kube test
(`tests.controllers.outofcluster.TrainingOperator`, the `training_operator` fixture of
tests/kube/conftest.py).
"""

from __future__ import annotations

import datetime as dt

# kind → (collection path, replica specs field, default container, operator name)
KINDS = {"PyTorchJob": ("/apis/kubeflow.org/v1/namespaces/{ns}/pytorchjobs", "pytorchReplicaSpecs", "pytorch",
                        "pytorchjob-controller"),
         "TFJob": ("/apis/kubeflow.org/v1/namespaces/{ns}/tfjobs", "tfReplicaSpecs", "tensorflow", "tfjob-controller"),
         "Job": ("/apis/batch/v1/namespaces/{ns}/jobs", None, None, "job-controller")}
MERGE = "application/merge-patch+json"


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def set_condition(conds: list[dict], type_: str, status: str, reason_: str, message: str) -> list[dict]:
    """The conditions with one set (times change only when the status does)."""
    old = next((c for c in conds if c["type"] == type_), None)
    if old and old["status"] == status and old.get("reason") == reason_:
        return conds
    ts = now()
    cond = {"type": type_, "status": status, "reason": reason_, "message": message, "lastUpdateTime": ts,
            "lastTransitionTime": old["lastTransitionTime"] if old and old["status"] == status else ts}
    return [cond if c["type"] == type_ else c for c in conds] if old else [*conds, cond]


def is_true(obj: dict, type_: str) -> bool:
    return any(c["type"] == type_ and c["status"] == "True" for c in (obj.get("status") or {}).get("conditions") or [])
