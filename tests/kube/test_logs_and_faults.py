"""Pod logs (tailLines, sinceTime, container, follow) and the stand-in's test controls (fault
injection, request log), through both real clients."""

import asyncio
import datetime as dt

import pytest

from tests.kube.client import Failure

pytestmark = [pytest.mark.kube, pytest.mark.standin_only]


def two_container_pod(name="p"):
    return {"metadata": {"name": name}, "spec": {"containers": [
        {"name": "main", "image": "busybox"}, {"name": "sidecar", "image": "busybox"}]}}


async def _running(k, name):
    for _ in range(100):
        pod = await k.call("CoreV1Api", "read_namespaced_pod", name, k.ns)
        if pod["status"]["phase"] == "Running":
            return pod
        await asyncio.sleep(0.05)
    raise AssertionError(f"pod {name} never ran")


async def test_logs_by_container_tail_and_since(k, standin):
    kubelet = standin.kubelet()
    await k.call("CoreV1Api", "create_namespaced_pod", k.ns, two_container_pod())
    await _running(k, "p")
    kubelet.log(k.ns, "p", "one\ntwo\nthree", container="main")
    kubelet.log(k.ns, "p", "side", container="sidecar")
    with pytest.raises(Failure) as e:
        await k.call("CoreV1Api", "read_namespaced_pod_log", "p", k.ns)
    assert e.value.status == 400 and "choose one of: [main sidecar]" in e.value.message
    text = await k.call("CoreV1Api", "read_namespaced_pod_log", "p", k.ns, container="main")
    assert text == "one\ntwo\nthree\n"
    assert await k.call("CoreV1Api", "read_namespaced_pod_log", "p", k.ns, container="main", tail_lines=1) == "three\n"
    assert await k.call("CoreV1Api", "read_namespaced_pod_log", "p", k.ns, container="sidecar") == "side\n"
    stamped = await k.call("CoreV1Api", "read_namespaced_pod_log", "p", k.ns, container="main", timestamps=True)
    stamp = stamped.splitlines()[0].split(" ")[0]
    assert stamp.endswith("Z") and stamped.splitlines()[0].endswith(" one")

    assert await k.call("CoreV1Api", "read_namespaced_pod_log", "p", k.ns, container="main",
                        since_seconds=3600) == text
    # sinceTime (RFC 3339) is not in either client's generated signature: ask over plain HTTP
    await asyncio.sleep(1.1)
    cutoff = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    await asyncio.sleep(1.1)
    kubelet.log(k.ns, "p", "four", container="main")
    import aiohttp

    async with aiohttp.ClientSession() as session:
        async with session.get(f"{standin.url}/api/v1/namespaces/{k.ns}/pods/p/log",
                               params={"container": "main", "sinceTime": cutoff}) as r:
            assert r.status == 200 and await r.text() == "four\n"
        async with session.get(f"{standin.url}/api/v1/namespaces/{k.ns}/pods/p/log",
                               params={"container": "main", "sinceTime": "yesterday"}) as r:
            assert r.status == 400
    with pytest.raises(Failure) as e:
        await k.call("CoreV1Api", "read_namespaced_pod_log", "p", k.ns, container="nope")
    assert e.value.status == 400


async def test_follow_streams_until_the_container_ends(k, standin):
    kubelet = standin.kubelet()
    await k.call("CoreV1Api", "create_namespaced_pod", k.ns, {"metadata": {"name": "f"}, "spec": {
        "containers": [{"name": "main", "image": "busybox"}]}})
    await _running(k, "f")
    kubelet.log(k.ns, "f", "first")

    async def feed():
        await asyncio.sleep(0.3)
        kubelet.log(k.ns, "f", "second")
        await asyncio.sleep(0.3)
        kubelet.finish(k.ns, "f", exit_code=0)

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


async def test_logs_of_a_pending_pod_say_it_is_waiting(k, standin):
    await k.call("CoreV1Api", "create_namespaced_pod", k.ns, {"metadata": {"name": "w"}, "spec": {
        "containers": [{"name": "main", "image": "busybox"}]}})
    with pytest.raises(Failure) as e:
        await k.call("CoreV1Api", "read_namespaced_pod_log", "w", k.ns)
    assert e.value.status == 400 and "waiting to start" in e.value.message


@pytest.mark.parametrize("code, reason", [(409, "Conflict"), (429, "TooManyRequests"), (500, "InternalError")])
async def test_injected_faults_answer_the_next_matching_requests(k, standin, code, reason):
    await k.call("CoreV1Api", "create_namespaced_config_map", k.ns, {"metadata": {"name": "c"}})
    standin.inject_fault("GET", f"/namespaces/{k.ns}/configmaps/c", status=code, count=2)
    for _ in range(2):
        with pytest.raises(Failure) as e:
            await k.call("CoreV1Api", "read_namespaced_config_map", "c", k.ns, _request_timeout=5)
        assert e.value.status == code and e.value.reason == reason
    assert (await k.call("CoreV1Api", "read_namespaced_config_map", "c", k.ns))["metadata"]["name"] == "c"


async def test_injected_timeout_hangs_until_the_client_gives_up(k, standin):
    # the sync client retries read timeouts itself (urllib3 Retry), so every attempt must hang
    standin.inject_fault("GET", f"/namespaces/{k.ns}/configmaps$", status=None, count=10)
    with pytest.raises(Exception) as e:
        await k.call("CoreV1Api", "list_namespaced_config_map", k.ns, _request_timeout=1)
    assert not isinstance(e.value, Failure)  # a client-side timeout, not an HTTP answer
    standin.clear_faults()
    assert (await k.call("CoreV1Api", "list_namespaced_config_map", k.ns))["items"] is not None


async def test_request_log_counts_api_calls(k, standin):
    standin.clear_requests()
    for _ in range(3):
        await k.call("CoreV1Api", "list_namespaced_pod", k.ns)
    await k.call("CoreV1Api", "create_namespaced_config_map", k.ns, {"metadata": {"name": "c"}})
    assert len(standin.requests("GET", f"/api/v1/namespaces/{k.ns}/pods")) == 3
    assert len(standin.requests("POST")) == 1
