"""Holding pods until their datasets are loaded: what is written on a pod, and when it is let go. Pure.

A PVC's ``Loaded`` condition means nothing to Kubernetes, so a pod that mounts a dataset still
loading would start and read half of it. The platform's pod webhook (`webhooks`) holds such a pod
before scheduling instead of refusing it, so a Job, a PyTorchJob's replicas or a Katib trial simply
start later:

- `gate_ops`: the scheduling gate ``mlplatform.io/datasets-loaded`` (`GATE`; the scheduler leaves
  a gated pod alone: its ``PodScheduled`` condition says ``SchedulingGated``), the label
  ``mlplatform.io/dataset-gated`` (`GATED_LABEL`: what the controller watches and lists by) and the
  annotation ``mlplatform.io/waiting-for-datasets: a,b`` (`WAITING_ANNOTATION`: for people and the
  platform's faces) on a pod created with a dataset that is not ready (`hub_ext.manifests.mounts.
  dataset_state`). A loader's own pod is never held (the webhook knows it by its Job).
- `verdict`: the leader's gate keeper (`gate_keeper`) lets a held pod go (`release_patch`: the gate
  and the label removed; Kubernetes allows removing a gate, never adding one) once every dataset
  it mounts is ready. A dataset whose load failed keeps it held, and a Warning Event on the pod
  (`failed_event`, once per dataset and failure) says which and why; a later successful load lets
  it go.
"""

from __future__ import annotations

import hashlib
from typing import Iterable, Mapping

GATE = "mlplatform.io/datasets-loaded"
GATED_LABEL = "mlplatform.io/dataset-gated"
WAITING_ANNOTATION = "mlplatform.io/waiting-for-datasets"
FAILED_REASON = "DatasetLoadFailed"
MOVED_REASON = "DatasetMoved"
MOVED = "moved"  # a held pod's state of a dataset it mounts on a volume that is no longer current
MOVED_MESSAGE = ("it was reloaded onto a new volume while this pod was held, and this pod mounts the old one; "
                 "delete the pod so that it is made again on the new one")


def _pointer(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _set_key(path: str, current: Mapping | None, key: str, value: str) -> list[dict]:
    if current is None:
        return [{"op": "add", "path": path, "value": {key: value}}]
    if current.get(key) == value:
        return []
    return [{"op": "add", "path": f"{path}/{_pointer(key)}", "value": value}]


def gate_ops(pod: Mapping, waiting: Iterable[str]) -> list[dict]:
    """The JSON Patch operations that hold `pod` for the datasets `waiting` ([] for none; a pod
    already held gets nothing twice)."""
    waiting = sorted(set(waiting))
    if not waiting:
        return []
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    gates = spec.get("schedulingGates")
    ops = []
    if not any(g.get("name") == GATE for g in gates or []):
        ops.append({"op": "add", "path": "/spec/schedulingGates", "value": [{"name": GATE}]} if gates is None else
                   {"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": GATE}})
    ops += _set_key("/metadata/labels", meta.get("labels"), GATED_LABEL, "true")
    ops += _set_key("/metadata/annotations", meta.get("annotations"), WAITING_ANNOTATION, ",".join(waiting))
    return ops


def is_held(pod: Mapping) -> bool:
    return any(g.get("name") == GATE for g in (pod.get("spec") or {}).get("schedulingGates") or [])


def verdict(states: Mapping[str, tuple[str, str]]) -> tuple[str, list[str]]:
    """What to do with a held pod, given (state, message) of each dataset it mounts (a claim that
    is gone or no longer a dataset is left out): ("release", []) when every one is ready, else
    ("hold", the datasets to tell about: whose load failed, or which moved to a new volume while
    the pod was held (`MOVED`: it mounts an older one, which it would read stale))."""
    if all(state == "ready" for state, _ in states.values()):
        return "release", []
    return "hold", sorted(name for name, (state, _) in states.items() if state in ("failed", MOVED))


def release_patch() -> dict:
    """A strategic merge patch that lets a held pod go: the gate (merged by name) and the label."""
    return {"metadata": {"labels": {GATED_LABEL: None}},
            "spec": {"schedulingGates": [{"$patch": "delete", "name": GATE}]}}


def failed_event(pod: Mapping, dataset: str, message: str, now: str, moved: bool = False) -> dict:
    """The Warning Event on a held pod for a dataset whose load failed; its name is the pod's, the
    dataset's and the failure's words, so it is made once however often the pod is looked at. The
    words come from the claim's ``Loaded`` condition, written in one request; the load id is not
    used, as the operator writes it in a second request and a check between the two would name
    one failure twice (seen in CI)."""
    meta = pod["metadata"]
    digest = hashlib.sha256(f"{dataset}/{message}".encode()).hexdigest()[:10]
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{meta['name'][:200]}.{digest}", "namespace": meta["namespace"]},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": meta["namespace"],
                               "name": meta["name"], "uid": meta.get("uid", "")},
            "type": "Warning", "reason": MOVED_REASON if moved else FAILED_REASON,
            "message": (f"held: the dataset {dataset} {MOVED_MESSAGE}" if moved else
                        f"held until the dataset {dataset} is loaded; its load failed: {message}")[:1024],
            "source": {"component": "mlplatform-operator"}, "reportingComponent": "mlplatform-operator",
            "firstTimestamp": now, "lastTimestamp": now, "count": 1}
