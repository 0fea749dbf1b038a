"""Pod logs through the API server (served by the test kubelet's HTTPS port): container choice,
tailLines, sinceTime/sinceSeconds, timestamps, follow until the container ends, and what a pod that
has not started answers; and how both real clients surface the fault proxy's injected errors (the
statuses our retry and error-translation code expects). Hangs, the request log and the proxy's
other controls: test_fault_proxy.py."""

import asyncio
import datetime as dt

import aiohttp
import pytest

from tests.cluster.rest import ssl_context
from tests.kube.client import Failure

pytestmark = pytest.mark.kube


def two_container_pod(name="p"):
    return {"metadata": {"name": name}, "spec": {"containers": [
        {"name": "main", "image": "busybox"}, {"name": "sidecar", "image": "busybox"}]}}


async def _running(k, name):
    for _ in range(400):
        pod = await k.call("CoreV1Api", "read_namespaced_pod", name, k.ns)
        if pod["status"].get("phase") == "Running":
            return pod
        await asyncio.sleep(0.05)
    raise AssertionError(f"pod {name} never ran")


async def _log_over_http(kube_target, name, **params) -> tuple[int, str]:
    """pods/log with parameters neither client's generated signature has (sinceTime)."""
    server, ctx, headers = ssl_context(kube_target.kubeconfig)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx), headers=headers) as session:
        async with session.get(f"{server}/api/v1/namespaces/{kube_target.namespace}/pods/{name}/log",
                               params=params) as r:
            return r.status, await r.text()


async def test_logs_by_container_tail_since_and_timestamps(k, kube_cluster):
    kubelet = kube_cluster.kubelet()
    await k.call("CoreV1Api", "create_namespaced_pod", k.ns, two_container_pod())
    await _running(k, "p")
    await asyncio.to_thread(kubelet.log, k.ns, "p", "one\ntwo\nthree", "main")
    await asyncio.to_thread(kubelet.log, k.ns, "p", "side", "sidecar")
    with pytest.raises(Failure) as e:  # two containers: the API server asks which
        await k.call("CoreV1Api", "read_namespaced_pod_log", "p", k.ns)
    assert e.value.status == 400 and e.value.reason == "BadRequest"
    assert "choose one of: [main sidecar]" in e.value.message
    text = await k.call("CoreV1Api", "read_namespaced_pod_log", "p", k.ns, container="main")
    assert text == "one\ntwo\nthree\n"
    assert await k.call("CoreV1Api", "read_namespaced_pod_log", "p", k.ns, container="main", tail_lines=1) == "three\n"
    assert await k.call("CoreV1Api", "read_namespaced_pod_log", "p", k.ns, container="sidecar") == "side\n"
    stamped = await k.call("CoreV1Api", "read_namespaced_pod_log", "p", k.ns, container="main", timestamps=True)
    stamp, _, line = stamped.splitlines()[0].partition(" ")
    assert line == "one" and dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).tzinfo is not None
    assert await k.call("CoreV1Api", "read_namespaced_pod_log", "p", k.ns, container="main",
                        since_seconds=3600) == text

    await asyncio.sleep(1.1)
    cutoff = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    await asyncio.sleep(1.1)
    await asyncio.to_thread(kubelet.log, k.ns, "p", "four", "main")
    assert await _log_over_http(k.target, "p", container="main", sinceTime=cutoff) == (200, "four\n")
    status, _ = await _log_over_http(k.target, "p", container="main", sinceTime="yesterday")
    assert status == 400
    with pytest.raises(Failure) as e:
        await k.call("CoreV1Api", "read_namespaced_pod_log", "p", k.ns, container="nope")
    assert e.value.status == 400 and e.value.reason == "BadRequest"


async def test_follow_streams_until_the_container_ends(k, kube_cluster):
    kubelet = kube_cluster.kubelet()
    await k.call("CoreV1Api", "create_namespaced_pod", k.ns, {"metadata": {"name": "f"}, "spec": {
        "containers": [{"name": "main", "image": "busybox"}]}})
    await _running(k, "f")
    await asyncio.to_thread(kubelet.log, k.ns, "f", "first")

    async def feed():
        await asyncio.sleep(0.3)
        await asyncio.to_thread(kubelet.log, k.ns, "f", "second")
        await asyncio.sleep(0.3)
        await asyncio.to_thread(kubelet.finish, k.ns, "f", 0)

    feeder = asyncio.ensure_future(feed())
    fn = k.api("CoreV1Api").read_namespaced_pod_log
    if k.is_async:
        resp = await fn("f", k.ns, follow=True, _preload_content=False)
        body = (await resp.read()).decode()
        resp.release()
    else:
        resp = await asyncio.to_thread(fn, "f", k.ns, follow=True, _preload_content=False)
        body = (await asyncio.to_thread(resp.read)).decode()
    await feeder
    assert body == "first\nsecond\n"


async def test_logs_of_a_pod_that_has_not_started(k, kube_cluster):
    """Not scheduled yet: an empty log. Bound to a node, its container not started: 400 with the
    kubelet's "waiting to start" (the log streamers wait and retry on exactly that)."""
    pod = {"metadata": {"name": "w"}, "spec": {"containers": [{"name": "main", "image": "busybox"}]}}
    await k.call("CoreV1Api", "create_namespaced_pod", k.ns, pod)
    assert not await k.call("CoreV1Api", "read_namespaced_pod_log", "w", k.ns)
    kubelet = kube_cluster.kubelet(auto_run=False)
    await asyncio.to_thread(kubelet.wait_pod, k.ns, "w")
    with pytest.raises(Failure) as e:
        await k.call("CoreV1Api", "read_namespaced_pod_log", "w", k.ns)
    assert e.value.status == 400 and e.value.reason == "BadRequest" and "waiting to start" in e.value.message


@pytest.mark.parametrize("code, reason", [(409, "Conflict"), (429, "TooManyRequests"), (500, "InternalError")])
async def test_injected_faults_reach_both_clients_as_status_errors(k, kube_cluster, code, reason):
    await k.call("CoreV1Api", "create_namespaced_config_map", k.ns, {"metadata": {"name": "c"}})
    path = f"/api/v1/namespaces/{k.ns}/configmaps/c"
    kube_cluster.inject_fault("GET", f"{path}$", status=code, count=2)
    kube_cluster.clear_requests()
    if code == 429 and not k.is_async:
        # the sync client's urllib3 retries a 429 that carries Retry-After by itself
        got = await k.call("CoreV1Api", "read_namespaced_config_map", "c", k.ns, _request_timeout=5)
        assert got["metadata"]["name"] == "c" and len(kube_cluster.requests("GET", path)) == 3
        return
    for _ in range(2):
        with pytest.raises(Failure) as e:
            await k.call("CoreV1Api", "read_namespaced_config_map", "c", k.ns, _request_timeout=5)
        assert e.value.status == code and e.value.reason == reason and e.value.body["kind"] == "Status"
        if code == 429:
            assert {h.lower(): v for h, v in e.value.headers.items()}.get("retry-after") == "1"
    assert (await k.call("CoreV1Api", "read_namespaced_config_map", "c", k.ns))["metadata"]["name"] == "c"
