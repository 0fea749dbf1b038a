"""Watches through both real clients against the API server: resourceVersion, selectors,
timeoutSeconds, bookmarks, and a stream the server ends. (A too-old resourceVersion, 410, is the
fault proxy's to produce on demand: see test_fault_proxy.py.)"""

import asyncio

import pytest

pytestmark = pytest.mark.kube


def cm(name, **labels):
    return {"metadata": {"name": name, "labels": labels}, "data": {}}


async def test_watch_from_resource_version_sends_only_newer_events(k):
    await k.call("CoreV1Api", "create_namespaced_config_map", k.ns, cm("old", w="1"))
    lst = await k.call("CoreV1Api", "list_namespaced_config_map", k.ns, label_selector="w=1")
    rv = lst["metadata"]["resourceVersion"]
    await k.call("CoreV1Api", "create_namespaced_config_map", k.ns, cm("new", w="1"))
    await k.call("CoreV1Api", "patch_namespaced_config_map", "new", k.ns, {"data": {"a": "b"}})
    await k.call("CoreV1Api", "delete_namespaced_config_map", "new", k.ns)
    events = await k.watch("CoreV1Api", "list_namespaced_config_map", namespace=k.ns, label_selector="w=1",
                           resource_version=rv, max_events=3, timeout_seconds=10)
    assert [(t, o["metadata"]["name"]) for t, o in events] == [("ADDED", "new"), ("MODIFIED", "new"),
                                                              ("DELETED", "new")]
    rvs = [int(o["metadata"]["resourceVersion"]) for _, o in events]
    assert rvs == sorted(rvs) and rvs[0] > int(rv)


async def test_watch_without_resource_version_starts_with_current_objects(k):
    await k.call("CoreV1Api", "create_namespaced_config_map", k.ns, cm("a", w="2"))
    await k.call("CoreV1Api", "create_namespaced_config_map", k.ns, cm("b", w="2"))
    events = await k.watch("CoreV1Api", "list_namespaced_config_map", namespace=k.ns, label_selector="w=2",
                           max_events=2, timeout_seconds=10)
    assert sorted((t, o["metadata"]["name"]) for t, o in events) == [("ADDED", "a"), ("ADDED", "b")]


async def test_label_selector_transitions_become_added_and_deleted(k):
    await k.call("CoreV1Api", "create_namespaced_config_map", k.ns, cm("x", sel="no"))
    rv = (await k.call("CoreV1Api", "list_namespaced_config_map", k.ns))["metadata"]["resourceVersion"]
    await k.call("CoreV1Api", "patch_namespaced_config_map", "x", k.ns, {"metadata": {"labels": {"sel": "yes"}}})
    await k.call("CoreV1Api", "patch_namespaced_config_map", "x", k.ns, {"metadata": {"labels": {"sel": "no"}}})
    events = await k.watch("CoreV1Api", "list_namespaced_config_map", namespace=k.ns, label_selector="sel=yes",
                           resource_version=rv, max_events=2, timeout_seconds=10)
    assert [t for t, _ in events] == ["ADDED", "DELETED"]


async def test_field_selector_on_watch(k):
    rv = (await k.call("CoreV1Api", "list_namespaced_config_map", k.ns))["metadata"]["resourceVersion"]
    for name in ("one", "two", "three"):
        await k.call("CoreV1Api", "create_namespaced_config_map", k.ns, cm(name))
    events = await k.watch("CoreV1Api", "list_namespaced_config_map", namespace=k.ns,
                           field_selector="metadata.name=two", resource_version=rv, timeout_seconds=2)
    assert [(t, o["metadata"]["name"]) for t, o in events] == [("ADDED", "two")]


async def test_timeout_seconds_ends_the_stream(k):
    loop = asyncio.get_running_loop()
    start = loop.time()
    rv = (await k.call("CoreV1Api", "list_namespaced_config_map", k.ns))["metadata"]["resourceVersion"]
    events = await k.watch("CoreV1Api", "list_namespaced_config_map", namespace=k.ns, resource_version=rv,
                           timeout_seconds=1)
    assert events == [] and loop.time() - start < 8


async def test_bookmarks_when_allowed(k):
    """With allowWatchBookmarks the server sends BOOKMARK events (the object's kind, only a
    resourceVersion, newer than the watch's start, to resume from) before the watch times out; the
    API server sends one only once the kind's resourceVersion moved past the watch's start, so
    something changes during the watch."""
    rv = (await k.call("CoreV1Api", "list_namespaced_config_map", k.ns))["metadata"]["resourceVersion"]

    async def change():
        await asyncio.sleep(0.3)
        await k.call("CoreV1Api", "create_namespaced_config_map", k.ns, cm("during"))

    changer = asyncio.ensure_future(change())
    events = await _raw_watch_lines(k, rv, timeout=3)
    await changer
    assert [e["object"]["metadata"]["name"] for e in events if e["type"] == "ADDED"] == ["during"]
    marks = [e for e in events if e["type"] == "BOOKMARK"]
    assert marks and all(int(m["object"]["metadata"]["resourceVersion"]) > int(rv) for m in marks)
    assert all(m["object"]["kind"] == "ConfigMap" and "name" not in m["object"]["metadata"] for m in marks)


async def _raw_watch_lines(k, rv, timeout=2):
    """The watch body as the server sent it (both clients' Watch helpers consume bookmarks)."""
    import json

    kwargs = dict(namespace=k.ns, watch=True, allow_watch_bookmarks=True, resource_version=rv,
                  timeout_seconds=timeout, _preload_content=False)
    fn = k.api("CoreV1Api").list_namespaced_config_map
    if k.is_async:
        resp = await fn(**kwargs)
        body = await resp.read()
        resp.release()
    else:
        resp = await asyncio.to_thread(fn, **kwargs)
        body = await asyncio.to_thread(resp.read)
        resp.release_conn()
    return [json.loads(line) for line in body.decode().splitlines() if line.strip()]


async def test_cut_watches_end_open_streams_cleanly(k, kube_cluster):
    """A watch the server ends (here the proxy, as a restarting API server would) ends the client's
    stream without an error; the client resumes or re-lists on its own terms."""
    rv = (await k.call("CoreV1Api", "list_namespaced_config_map", k.ns))["metadata"]["resourceVersion"]
    task = asyncio.ensure_future(k.watch("CoreV1Api", "list_namespaced_config_map", namespace=k.ns,
                                         resource_version=rv, timeout_seconds=30))
    for _ in range(200):
        if any(w.path.endswith(f"/namespaces/{k.ns}/configmaps") for w in kube_cluster.proxy.open_watches()):
            break
        await asyncio.sleep(0.05)
    assert kube_cluster.cut_watches() >= 1
    assert await asyncio.wait_for(task, 10) == []


async def test_custom_object_watch_with_bookmarks(k):
    args = ("kubeflow.org", "v1beta1", k.ns, "trials")
    lst = await k.call("CustomObjectsApi", "list_namespaced_custom_object", *args)
    rv = lst["metadata"]["resourceVersion"]
    await k.call("CustomObjectsApi", "create_namespaced_custom_object", *args,
                 {"apiVersion": "kubeflow.org/v1beta1", "kind": "Trial", "metadata": {"name": "t1"}, "spec": {}})
    events = await k.watch("CustomObjectsApi", "list_namespaced_custom_object", group="kubeflow.org",
                           version="v1beta1", namespace=k.ns, plural="trials", resource_version=rv,
                           allow_watch_bookmarks=True, max_events=1, timeout_seconds=10)
    assert events[0][0] == "ADDED" and events[0][1]["metadata"]["name"] == "t1"
