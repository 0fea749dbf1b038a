"""Deleting test namespaces without waiting out the namespace controller's start delay.

`delete_namespaces(cluster, names)` deletes namespaces and returns once they and their claims'
volumes are gone. The namespace controller starts on a deleted namespace only 5 seconds after it
sees the deletion (a grace period for other API servers and etcd members to see it; there is one
of each here), so every test that deleted projects waited that long. This does what the
controller then does, at once, with its rule and its identity: delete every namespaced resource
of the namespace (DELETE of each collection), wait until none is left (finalizers honoured: a
claim's pvc-protection finalizer still waits for its pods), then drop the namespace's
``kubernetes`` finalizer (its finalize subresource), which removes it.

**Only while the controller cannot have begun.** Once its own pass has begun it goes on deleting
collections by namespace *name*; had we removed the namespace meanwhile, a test that made a
namespace of the same name again would see its new objects deleted under it (seen: a project's
RoleBinding gone between read and replace). The controller queues a namespace 5 s after *every*
event of it, not only its deletion, and its queue keeps the earliest time: a namespace created
(or labelled) 2 s before its DELETE is looked at 3 s after it. So the window ends `MARGIN` seconds
before 5 s after the earliest of the DELETE and the namespace's events of the 5 s before it (its
creation and ``managedFields`` times, whole seconds, rounded down: never later than the real
ones). A pass that starts after the window finds the namespace gone or made anew (not
terminating) and does nothing. A namespace not emptied within the window is left to the
controller, and this waits until it is gone. Something that never goes fails the caller, naming it.
"""

from __future__ import annotations

import asyncio
import datetime
import time

from .rest import ApiError, Rest

NAMESPACE_CONTROLLER = "system:serviceaccount:kube-system:namespace-controller"
CONTROLLER_DELAY = 5.0  # the namespace controller's namespaceDeletionGracePeriod
MARGIN = 1.5  # seconds kept between our last finalize and the controller's earliest start


def delete_namespaces(cluster, names, timeout: float = 90) -> None:
    """Delete the namespaces `names` (on `cluster`, a `tests.cluster.Cluster`) and return once they
    and their claims' volumes are gone; TimeoutError naming what is left after `timeout` seconds."""
    names = list(names)
    if names:
        cluster.run(_delete(cluster, names, timeout), timeout + 30)


async def _delete(cluster, names: list[str], timeout: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    eager_until = loop.time() + CONTROLLER_DELAY - MARGIN
    for ns in names:
        try:
            obj = await cluster.rest.get(f"/api/v1/namespaces/{ns}")
            deleted = time.time()
            await cluster.rest.delete(f"/api/v1/namespaces/{ns}")
        except ApiError as e:
            if e.status != 404:
                raise
            continue
        recent = [t for t in _event_times(obj) if t > deleted - CONTROLLER_DELAY]
        # loop time of the earliest event the controller may act on, plus its delay, less the margin
        eager_until = min(eager_until, loop.time() - (deleted - min([deleted, *recent])) + CONTROLLER_DELAY - MARGIN)
    # the content goes as the namespace controller's own identity (its RBAC; policies that let only
    # it delete some objects of a deleted namespace, e.g. the platform's reserved ConfigMaps)
    kubeconfig = cluster.cp.write_kubeconfig(cluster.dir / "namespace-controller.kubeconfig", user=NAMESPACE_CONTROLLER,
                                             groups=("system:serviceaccounts", "system:serviceaccounts:kube-system"))
    rest = Rest(kubeconfig)
    try:
        left = await _empty_and_finalize(cluster, rest, names, eager_until)
    finally:
        await rest.close()
    while left := [ns for ns in left if await _exists(cluster.rest, ns)]:  # the controller's now
        if loop.time() > deadline:
            raise TimeoutError(f"namespaces still terminating: {left}")
        await asyncio.sleep(0.2)
    # their claims' volumes gone too (the PV controller released them, the provisioner deleted them):
    # the next test starts on a cluster that has settled
    while volumes := [pv["metadata"]["name"] for pv in (await cluster.rest.get("/api/v1/persistentvolumes"))["items"]
                      if ((pv["spec"].get("claimRef") or {}).get("namespace") in names
                          and pv["spec"].get("persistentVolumeReclaimPolicy") == "Delete")]:
        if loop.time() > deadline:
            raise TimeoutError(f"volumes of the deleted namespaces {names} still there: {volumes}")
        await asyncio.sleep(0.1)


def _event_times(obj: dict) -> list[float]:
    """The times (epoch seconds) the API server recorded changes of `obj`: its creation and its
    ``managedFields`` entries (whole seconds)."""
    meta = obj.get("metadata") or {}
    stamps = [meta.get("creationTimestamp")] + [m.get("time") for m in meta.get("managedFields") or []]
    return [datetime.datetime.fromisoformat(t.replace("Z", "+00:00")).timestamp() for t in stamps if t]


async def _exists(rest: Rest, ns: str) -> bool:
    try:
        await rest.get(f"/api/v1/namespaces/{ns}")
        return True
    except ApiError as e:
        if e.status == 404:
            return False
        raise


async def _empty_and_finalize(cluster, rest: Rest, names: list[str], eager_until: float) -> list[str]:
    """Empty and finalize `names` until `eager_until`; the namespaces left to the controller."""
    loop = asyncio.get_running_loop()
    plurals = await _namespaced_collections(cluster.rest)
    limit = asyncio.Semaphore(8)

    async def call(method: str, path: str, **params) -> dict | None:
        async with limit:
            try:
                return await rest.request(method, path, params=params or None)
            except ApiError as e:
                if e.status in (404, 405):
                    return None
                raise

    async def delete_all(ns: str, base: str, plural: str, by_collection: bool) -> None:
        if by_collection:
            await call("DELETE", f"{base}/namespaces/{ns}/{plural}")
            return
        listed = await call("GET", f"{base}/namespaces/{ns}/{plural}")
        await asyncio.gather(*(call("DELETE", f"{base}/namespaces/{ns}/{plural}/{item['metadata']['name']}")
                               for item in (listed or {}).get("items") or []))

    async def left_in(ns: str, collections: list) -> list:
        """Delete what is in these collections of `ns`; the ones still holding something."""
        await asyncio.gather(*(delete_all(ns, *c) for c in collections))
        found = await asyncio.gather(*(call("GET", f"{base}/namespaces/{ns}/{plural}", limit="1")
                                       for base, plural, _ in collections))
        return [c for c, listed in zip(collections, found) if listed and listed.get("items")]

    remaining = {ns: plurals for ns in names}
    while remaining and loop.time() < eager_until:
        for ns, collections in zip(list(remaining), await asyncio.gather(*(left_in(ns, c)
                                                                           for ns, c in remaining.items()))):
            remaining[ns] = collections
            # finalize only while the controller cannot have begun (see the module docstring)
            if not collections and loop.time() < eager_until and await _finalize(rest, ns):
                del remaining[ns]
        if remaining:
            await asyncio.sleep(0.1)
    return list(remaining)


async def _finalize(rest: Rest, ns: str) -> bool:
    """Drop the ``kubernetes`` finalizer of an emptied, deleted namespace; True once it is gone."""
    try:
        obj = await rest.get(f"/api/v1/namespaces/{ns}")
    except ApiError as e:
        if e.status == 404:
            return True
        raise
    if not obj["metadata"].get("deletionTimestamp"):
        raise AssertionError(f"namespace {ns} was made again while it was being deleted")
    finalizers = (obj.get("spec") or {}).get("finalizers") or []
    if "kubernetes" in finalizers:
        obj["spec"]["finalizers"] = [f for f in finalizers if f != "kubernetes"]
        try:
            await rest.put(f"/api/v1/namespaces/{ns}/finalize", obj)
        except ApiError as e:
            if e.status not in (404, 409):
                raise
    return not await _exists(rest, ns)  # else other finalizers of its own (metadata.finalizers) remain


async def _namespaced_collections(rest: Rest) -> list[tuple[str, str, bool]]:
    """(API path, plural, deletable by collection) of every namespaced resource that can be listed
    and deleted, each in its group's preferred version among those that serve it (as the namespace
    controller finds them: a group's versions may serve different resources, e.g. kubeflow.org's v1
    PyTorchJobs and v1beta1 Experiments)."""
    lists = [("", "/api/v1", await rest.get("/api/v1"))]
    paths = []
    for g in (await rest.get("/apis"))["groups"]:
        preferred = g["preferredVersion"]["groupVersion"]
        paths += [(g["name"], f"/apis/{v}") for v in [preferred] + [v["groupVersion"] for v in g["versions"]
                                                                   if v["groupVersion"] != preferred]]
    lists += [(group, path, listed) for (group, path), listed
              in zip(paths, await asyncio.gather(*(rest.get(path) for _, path in paths)))]
    found: dict[tuple[str, str], tuple[str, str, bool]] = {}
    for group, path, listed in lists:
        for r in listed["resources"]:
            if (r["namespaced"] and "/" not in r["name"] and {"list", "delete"} <= set(r["verbs"])
                    and (group, r["name"]) not in found):
                found[(group, r["name"])] = (path, r["name"], "deletecollection" in r["verbs"])
    return list(found.values())
