"""Free accelerator capacity, from nodes and pods as the API returns them (plain dicts). Pure.

For each accelerator: the nodes that carry it are the Ready, schedulable nodes whose labels
include the accelerator's node selector and whose ``status.allocatable`` has its resource;
total = the sum of their allocatable; free = total minus what non-terminated pods bound to those
nodes request (a pod's request of a resource is the larger of its containers' sum and any one
init container's, as the scheduler counts it; an extended resource's request defaults to its
limit). Pods that are not bound to a node yet use nothing.

`usage` counts what one namespace's non-terminated pods hold, per accelerator: a pod is counted
against the accelerator whose resource it requests and whose node selector its own node
selector includes (the most specific one wins). `quota_has_room` says whether a ResourceQuota's
``status.hard`` leaves room for `count` more of an accelerator's resource beyond that usage.

When a spawn is refused for want of an accelerator, the user is told if their own servers hold it:
`servers_holding` finds, among the notebook server pods of one hub user (KubeSpawner's
``hub.jupyter.org/username`` and ``…/servername`` annotations), how many of an accelerator's
resource each server holds, and `own_servers_note` says it ("your server 'gpu2' holds the only
one: stop it or pick another profile").
"""

from __future__ import annotations

from typing import Iterable, Mapping

from hub_ext.core.catalog import Accelerator

TERMINATED = ("Succeeded", "Failed")


def _int(value) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0


def _container_request(c: dict, resource: str) -> int:
    res = c.get("resources") or {}
    value = (res.get("requests") or {}).get(resource, (res.get("limits") or {}).get(resource))
    return _int(value) if value is not None else 0


def pod_request(pod: dict, resource: str) -> int:
    spec = pod.get("spec") or {}
    main = sum(_container_request(c, resource) for c in spec.get("containers") or [])
    init = max((_container_request(c, resource) for c in spec.get("initContainers") or []), default=0)
    return max(main, init)


def active(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") not in TERMINATED


def node_usable(node: dict) -> bool:
    if (node.get("spec") or {}).get("unschedulable"):
        return False
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def carries(node: dict, acc: Accelerator) -> bool:
    labels = (node.get("metadata") or {}).get("labels") or {}
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    return acc.resource in allocatable and all(labels.get(k) == v for k, v in acc.node_selector)


def free_capacity(accelerators: Mapping[str, Accelerator], nodes: Iterable[dict],
                  pods: Iterable[dict]) -> dict[str, tuple[int, int]]:
    """Accelerator name → (free, total)."""
    nodes = [n for n in nodes if node_usable(n)]
    used_on: dict[tuple[str, str], int] = {}  # (node, resource) → requested
    resources = {a.resource for a in accelerators.values()}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or not active(pod):
            continue
        for resource in resources:
            n = pod_request(pod, resource)
            if n:
                used_on[(node, resource)] = used_on.get((node, resource), 0) + n
    out = {}
    for name, acc in accelerators.items():
        total = free = 0
        for node in nodes:
            if not carries(node, acc):
                continue
            alloc = _int(node["status"]["allocatable"][acc.resource])
            total += alloc
            free += max(alloc - used_on.get((node["metadata"]["name"], acc.resource), 0), 0)
        out[name] = (free, total)
    return out


def accelerator_of(pod: dict, accelerators: Mapping[str, Accelerator]) -> tuple[Accelerator, int] | None:
    selector = (pod.get("spec") or {}).get("nodeSelector") or {}
    best = None
    for acc in accelerators.values():
        n = pod_request(pod, acc.resource)
        if n and all(selector.get(k) == v for k, v in acc.node_selector):
            if best is None or len(acc.node_selector) > len(best[0].node_selector):
                best = (acc, n)
    return best


def usage(accelerators: Mapping[str, Accelerator], pods: Iterable[dict], namespace: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for pod in pods:
        if (pod.get("metadata") or {}).get("namespace") != namespace or not active(pod):
            continue
        found = accelerator_of(pod, accelerators)
        if found:
            out[found[0].name] = out.get(found[0].name, 0) + found[1]
    return out


def quota_has_room(quota: dict | None, used: Mapping[str, int], accelerators: Mapping[str, Accelerator],
                   acc: Accelerator, count: int) -> bool:
    """Whether `quota` (a ResourceQuota) caps `acc`'s resource at no less than what `used` (per
    accelerator, as `usage` counts) holds of that resource plus `count`."""
    hard = str(((quota or {}).get("status") or {}).get("hard", {}).get(f"requests.{acc.resource}", ""))
    in_use = sum(n for name, n in used.items() if accelerators[name].resource == acc.resource)
    return hard.isdigit() and in_use + count <= int(hard)


def servers_holding(pods: Iterable[dict], accelerators: Mapping[str, Accelerator], username: str,
                    acc: Accelerator, namespace: str | None = None, but: str | None = None) -> dict[str, int]:
    """Server name ('' for the default server) → how many of `acc`'s resource the active server
    pod holds, for `username`'s servers (in `namespace`, if given; not the pod named `but`)."""
    out: dict[str, int] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        notes = meta.get("annotations") or {}
        if notes.get("hub.jupyter.org/username") != username or not active(pod) or meta.get("name") == but:
            continue
        if namespace is not None and meta.get("namespace") != namespace:
            continue
        found = accelerator_of(pod, accelerators)
        if found and found[0].resource == acc.resource:
            name = notes.get("hub.jupyter.org/servername", "")
            out[name] = out.get(name, 0) + found[1]
    return out


def _server(name: str) -> str:
    return repr(name) if name else "the default one"


def own_servers_note(held: Mapping[str, int], of: int) -> str:
    """"your server 'gpu2' holds the only one: stop it or pick another profile" (`held`: server name
    → how many it holds of the `of` there are); "" when the user's servers hold none."""
    held = {name: n for name, n in held.items() if n}
    if not held:
        return ""
    total = sum(held.values())
    names = sorted(held)
    if len(names) == 1:
        who = f"your server {names[0]!r}" if names[0] else "your default server"
        verb, action = "holds", "stop it"
    else:
        listed = ", ".join(_server(n) for n in names[:-1]) + f" and {_server(names[-1])}"
        who, verb, action = f"your servers {listed}", "hold", "stop one of them"
    what = "the only one" if of <= 1 and total >= 1 else (f"all {of}" if total >= of else f"{total} of the {of}")
    return f"{who} {verb} {what}: {action} or pick another profile"
