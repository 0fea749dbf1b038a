"""Where a pod may run: node selectors, required node affinity, taints and tolerations, and
resource fit (cpu, memory, pods, and extended resources such as `nvidia.com/gpu` or
`nvidia.com/mig-1g.5gb`) against nodes' `status.allocatable` minus what bound pods request.

`place(pod, nodes, bound)` is pure: it returns the chosen node's name, or None and the
"0/N nodes are available: ..." message kube-scheduler would put in the FailedScheduling event.
"""

from __future__ import annotations

from collections import Counter
from decimal import Decimal

from .quantity import parse_quantity


def pod_requests(pod: dict) -> dict[str, Decimal]:
    total: dict[str, Decimal] = {"pods": Decimal(1)}
    for c in pod["spec"].get("containers") or []:
        for res, q in ((c.get("resources") or {}).get("requests") or {}).items():
            total[res] = total.get(res, Decimal(0)) + parse_quantity(q)
    return total


def _expr_ok(expr: dict, labels: dict) -> bool:
    key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
    if op == "In":
        return labels.get(key) in values
    if op == "NotIn":
        return labels.get(key) not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt") and key in labels:
        try:
            a, b = int(labels[key]), int(values[0])
        except (ValueError, IndexError):
            return False
        return a > b if op == "Gt" else a < b
    return False


def _selector_ok(pod: dict, node: dict) -> bool:
    labels = node["metadata"].get("labels") or {}
    spec = pod["spec"]
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = required.get("nodeSelectorTerms") or []
    if terms and not any(all(_expr_ok(e, labels) for e in t.get("matchExpressions") or []) for t in terms):
        return False
    return True


def _tolerates(tol: dict, taint: dict) -> bool:
    if tol.get("effect") and tol["effect"] != taint.get("effect"):
        return False
    if tol.get("operator") == "Exists":
        return not tol.get("key") or tol["key"] == taint.get("key")
    return tol.get("key") == taint.get("key") and (tol.get("value") or "") == (taint.get("value") or "")


def _untolerated(pod: dict, node: dict) -> dict | None:
    tolerations = pod["spec"].get("tolerations") or []
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if not any(_tolerates(t, taint) for t in tolerations):
            return taint
    return None


def place(pod: dict, nodes: list[dict], bound: dict[str, list[dict]]) -> tuple[str | None, str]:
    want = pod_requests(pod)
    reasons: Counter = Counter()
    for node in sorted(nodes, key=lambda n: n["metadata"]["name"]):
        name = node["metadata"]["name"]
        if (node.get("spec") or {}).get("unschedulable"):
            reasons["node(s) were unschedulable"] += 1
            continue
        if not _selector_ok(pod, node):
            reasons["node(s) didn't match Pod's node affinity/selector"] += 1
            continue
        taint = _untolerated(pod, node)
        if taint:
            reasons[f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value', '')}}}"] += 1
            continue
        allocatable = {r: parse_quantity(q) for r, q in ((node.get("status") or {}).get("allocatable") or {}).items()}
        used: dict[str, Decimal] = {}
        for other in bound.get(name, []):
            for r, q in pod_requests(other).items():
                used[r] = used.get(r, Decimal(0)) + q
        short = [r for r, q in want.items() if q > 0 and used.get(r, Decimal(0)) + q > allocatable.get(r, Decimal(0))
                 and (r in allocatable or r not in ("cpu", "memory", "pods", "ephemeral-storage"))]
        if short:
            for r in sorted(short):
                reasons["Too many pods" if r == "pods" else f"Insufficient {r}"] += 1
            continue
        return name, ""
    detail = ", ".join(f"{n} {why}" for why, n in sorted(reasons.items()))
    return None, f"0/{len(nodes)} nodes are available: {detail}." if detail else f"0/{len(nodes)} nodes are available."
