"""ResourceQuota, as the quota admission plugin and the quota controller enforce it.

On pod create, every quota in the namespace is checked against the pods that are not yet
terminal: a pod that would push `requests.*`, `limits.*`, bare `cpu`/`memory` or `pods` past
`spec.hard` is refused with 403 Forbidden "exceeded quota", and a pod that leaves a quota'd
compute resource unspecified is refused with "failed quota". Extended resources such as
`nvidia.com/gpu` are counted by `requests.<name>` only, as in Kubernetes. After every pod or
quota change, `status.hard`/`status.used` are brought up to date.
"""

from __future__ import annotations

from decimal import Decimal

from . import errors
from .quantity import format_quantity, parse_quantity
from .store import Event, Store

_COMPUTE = ("cpu", "memory")


def pod_usage(pod: dict) -> dict[str, Decimal]:
    """Quota resource name → amount for one pod (requests.X, limits.X, bare cpu/memory, pods)."""
    use: dict[str, Decimal] = {"pods": Decimal(1), "count/pods": Decimal(1)}
    spec = pod.get("spec") or {}
    for section in ("requests", "limits"):
        total: dict[str, Decimal] = {}
        for c in spec.get("containers") or []:
            for res, q in ((c.get("resources") or {}).get(section) or {}).items():
                total[res] = total.get(res, Decimal(0)) + parse_quantity(q)
        for c in spec.get("initContainers") or []:  # init containers run one at a time: max, not sum
            for res, q in ((c.get("resources") or {}).get(section) or {}).items():
                total[res] = max(total.get(res, Decimal(0)), parse_quantity(q))
        for res, q in total.items():
            use[f"{section}.{res}"] = q
            if section == "requests" and res in _COMPUTE:
                use[res] = q
    return use


def _terminal(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _used(store: Store, ns: str, exclude: str | None = None) -> dict[str, Decimal]:
    total: dict[str, Decimal] = {}
    for pod in store.items(store.rt("", "v1", "pods"), ns):
        if _terminal(pod) or pod["metadata"]["name"] == exclude:
            continue
        for res, q in pod_usage(pod).items():
            total[res] = total.get(res, Decimal(0)) + q
    return total


def admit(store: Store):
    pods_rt = store.rt("", "v1", "pods")
    quotas_rt = store.rt("", "v1", "resourcequotas")

    def check(rt, ns, obj, old):
        if rt.key != pods_rt.key or old is not None:
            return
        quotas = store.items(quotas_rt, ns)
        if not quotas:
            return
        name = obj["metadata"]["name"]
        want = pod_usage(obj)
        used = _used(store, ns)
        for quota in quotas:
            hard = (quota.get("spec") or {}).get("hard") or {}
            qname = quota["metadata"]["name"]
            missing = [r for r in hard if r in ("requests.cpu", "requests.memory", "limits.cpu", "limits.memory",
                                                "cpu", "memory") and r not in want]
            if missing:
                raise errors.forbidden(rt, name, f"failed quota: {qname}: must specify {','.join(sorted(missing))}")
            over = [r for r, h in hard.items() if r in want and used.get(r, Decimal(0)) + want[r] > parse_quantity(h)]
            if over:
                over.sort()
                req = ",".join(f"{r}={format_quantity(want[r])}" for r in over)
                cur = ",".join(f"{r}={format_quantity(used.get(r, Decimal(0)))}" for r in over)
                lim = ",".join(f"{r}={hard[r]}" for r in over)
                raise errors.forbidden(rt, name, f"exceeded quota: {qname}, requested: {req}, used: {cur}, "
                                       f"limited: {lim}")

    return check


def status_controller(store: Store):
    """Keeps ResourceQuota status.hard/status.used current (the quota controller's job)."""
    pods_rt = store.rt("", "v1", "pods")
    quotas_rt = store.rt("", "v1", "resourcequotas")

    def refresh(ns: str) -> None:
        quotas = store.items(quotas_rt, ns)
        if not quotas:
            return
        used = _used(store, ns)
        for quota in quotas:
            hard = (quota.get("spec") or {}).get("hard") or {}
            status = {"hard": dict(hard), "used": {r: format_quantity(used.get(r, Decimal(0))) for r in hard}}
            if quota.get("status") != status:
                store.replace(quotas_rt, ns, quota["metadata"]["name"], {**quota, "status": status},
                              subresource="status")

    def on_event(ev: Event) -> None:
        if ev.rt.key == pods_rt.key or (ev.rt.key == quotas_rt.key and ev.type != "DELETED"):
            ns = ev.obj["metadata"].get("namespace")
            if ns and store.find(store.rt("", "v1", "namespaces"), None, ns):
                refresh(ns)

    return on_event
