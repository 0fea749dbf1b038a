"""Where a workload stands in its project's Kueue queue, in plain words. Pure.

From the Workloads of one project namespace as the API returns them (kueue.x-k8s.io/v1beta2; the
project's ClusterQueue serves that namespace alone, `hub_ext.manifests.queues`):

- `owned_by(workloads, kind, name)`: the Workload Kueue made for one object (a notebook pod, a Job);
- `waiting(wl)`: it has no quota reserved yet and has not finished;
- `ahead(wl, workloads)`: how many waiting Workloads of its queue (the project's servers' or jobs')
  Kueue considers before it (BestEffortFIFO: higher ``spec.priority`` first, then the older);
- `waiting_for(workloads, resource, node_labels)`: how many waiting Workloads ask for an accelerator
  (its resource name, and no node selector that rules out its nodes): the spawn form's "queue: N
  ahead" of a start made now;
- `queue_sentence(wl, workloads, project, wanted)`: "queued: 2 workloads ahead of you in the project
  'vision' for 1 A100 GPU; the project's quota of A100 GPU is in use (1 more needed)". Kueue's own reason
  (the QuotaReserved condition's message) is put in words where it is one Kueue is known to give,
  else quoted; once admitted, "admitted by the project's queue with 1 A100 GPU". A Workload Kueue
  evicted to make room (its Preempted condition) and waiting again is said so first: "preempted:
  another project took back the accelerators it had lent; queued: ...".
"""

from __future__ import annotations

import re
from typing import Iterable, Mapping

_QUOTA = re.compile(r"insufficient (?:unused )?quota for (?P<resource>\S+) in flavor (?P<flavor>[^,\s]+), "
                    r"(?:(?P<more>\d+) more needed|[^,]*> maximum capacity)")
_NO_FLAVOR = re.compile(r"flavor (?P<flavor>\S+) doesn't match node affinity|no flavor|couldn't assign flavors")


_PREEMPTED = {
    "InCohortReclamation": "another project took back the accelerators it had lent",
    "InCohortReclaimWhileBorrowing": "another project took back the accelerators it had lent",
    "InCohortFairSharing": "the cohort's fair sharing gave its accelerators to another project",
    "InClusterQueue": "a workload of the project with a higher priority needed its accelerators",
}


def _conditions(wl: Mapping) -> dict[str, Mapping]:
    return {c.get("type"): c for c in (wl.get("status") or {}).get("conditions") or []}


def _true(wl: Mapping, kind: str) -> bool:
    return (_conditions(wl).get(kind) or {}).get("status") == "True"


def owned_by(workloads: Iterable[Mapping], kind: str, name: str) -> Mapping | None:
    for wl in workloads:
        refs = (wl.get("metadata") or {}).get("ownerReferences") or []
        if any(r.get("kind") == kind and r.get("name") == name for r in refs):
            return wl
    return None


def waiting(wl: Mapping) -> bool:
    return not _true(wl, "QuotaReserved") and not _true(wl, "Admitted") and not _true(wl, "Finished")


def _order(wl: Mapping) -> tuple:
    meta = wl.get("metadata") or {}
    return -int((wl.get("spec") or {}).get("priority") or 0), meta.get("creationTimestamp") or "", meta.get("name", "")


def _queue(wl: Mapping) -> str | None:
    return (wl.get("spec") or {}).get("queueName")


def ahead(wl: Mapping, workloads: Iterable[Mapping]) -> int:
    mine = _order(wl)
    return sum(1 for other in workloads if waiting(other) and _queue(other) == _queue(wl) and _order(other) < mine)


def _asks(wl: Mapping, resource: str, node_labels: Mapping[str, str]) -> bool:
    for pod_set in (wl.get("spec") or {}).get("podSets") or []:
        spec = ((pod_set.get("template") or {}).get("spec")) or {}
        selector = spec.get("nodeSelector") or {}
        if any(k in node_labels and node_labels[k] != v for k, v in selector.items()):
            continue
        for c in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
            res = c.get("resources") or {}
            if resource in (res.get("limits") or {}) or resource in (res.get("requests") or {}):
                return True
    return False


def waiting_for(workloads: Iterable[Mapping], resource: str, node_labels: Mapping[str, str]) -> int:
    return sum(1 for wl in workloads if waiting(wl) and _asks(wl, resource, node_labels))


def reason_words(message: str, flavor_names: Mapping[str, str]) -> str:
    """Kueue's QuotaReserved message in words; `flavor_names`: flavor → the accelerator's display name."""
    m = _QUOTA.search(message or "")
    if m:
        what = flavor_names.get(m["flavor"], m["flavor"].removeprefix("mlp-"))
        if m["more"] is None:
            return f"it asks more {what} than the project may ever hold at once"
        return f"the project's quota of {what} is in use ({m['more']} more needed)"
    if message and _NO_FLAVOR.search(message):
        return "no accelerator type the project may use fits the request"
    if (message or "").startswith("Preempted to accommodate"):  # the eviction's message, until Kueue tries it again
        return "Kueue looks for room for it again"
    if "no longer fits after processing another workload" in (message or ""):
        return "another workload took the room first; Kueue tries again"
    return f"Kueue says: {message}" if message else "Kueue has not looked at it yet"


def admitted_sentence(wanted: str) -> str:
    return f"admitted by the project's queue with {wanted}"


def queue_sentence(wl: Mapping, workloads: Iterable[Mapping], project: str, wanted: str,
                   flavor_names: Mapping[str, str]) -> str | None:
    if not waiting(wl):
        return admitted_sentence(wanted)
    workloads = list(workloads)
    n = ahead(wl, workloads)
    place = "first in line" if n == 0 else f"{n} workload{'s' if n != 1 else ''} ahead of you"
    reason = reason_words((_conditions(wl).get("QuotaReserved") or {}).get("message", ""), flavor_names)
    return f"{preempted_words(wl)}queued: {place} in the project {project!r} for {wanted}; {reason}"


def preempted_words(wl: Mapping) -> str:
    """"preempted: <why>; " where Kueue evicted the Workload to make room for another, else ""."""
    if not _true(wl, "Preempted"):
        return ""
    reason = _conditions(wl)["Preempted"].get("reason") or ""
    return f"preempted: {_PREEMPTED.get(reason, f'Kueue says {reason}')}; "
