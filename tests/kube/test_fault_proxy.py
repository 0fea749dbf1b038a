"""The fault proxy (tests/cluster/proxy.py) in front of the real API server, as the tests use it:
faults chosen by method, path regex (with the query) and count, with a delay or a hang; the
request log; the caller's identity preserved (a client certificate's user and groups, a
ServiceAccount token), so RBAC sees the caller and not the proxy; watches cut cleanly or abruptly;
`expire_watches` and `force_gone` answering a resumed watch as the API server answers a too-old
resourceVersion — and what the clients and our WatchCache do about each (resume without a list,
or exactly one re-list).
"""

import asyncio
import time

import pytest

from tests.kube.client import Failure, Kube
from tests.kube.job_env import until

pytestmark = pytest.mark.kube

SSR = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}


def cm(name, **labels):
    return {"metadata": {"name": name, "labels": labels}, "data": {}}


async def client(kubeconfig, ns) -> Kube:
    import kubernetes_asyncio

    k = Kube("async", await kubernetes_asyncio.config.new_client_from_config(config_file=str(kubeconfig)))
    k.ns = ns
    return k


# ---- faults and the request log -----------------------------------------------------------------

async def test_faults_match_method_path_query_and_count(k, kube_cluster):
    kube_cluster.inject_fault("POST", f"/namespaces/{k.ns}/configmaps$", status=409, count=2)
    kube_cluster.inject_fault("GET", r"/configmaps\?.*limit=1", status=500)
    assert (await k.call("CoreV1Api", "list_namespaced_config_map", k.ns))["items"] is not None  # not a POST
    for _ in range(2):
        with pytest.raises(Failure) as e:
            await k.call("CoreV1Api", "create_namespaced_config_map", k.ns, cm("c"))
        assert (e.value.status, e.value.reason) == (409, "Conflict")
    await k.call("CoreV1Api", "create_namespaced_config_map", k.ns, cm("c"))  # the count is spent
    with pytest.raises(Failure) as e:  # the regex sees the query
        await k.call("CoreV1Api", "list_namespaced_config_map", k.ns, limit=1)
    assert e.value.status == 500 and e.value.reason == "InternalError"
    assert len((await k.call("CoreV1Api", "list_namespaced_config_map", k.ns, limit=1))["items"]) == 1


async def test_a_delayed_fault_and_a_hang(k, kube_cluster):
    kube_cluster.inject_fault("GET", f"/namespaces/{k.ns}/configmaps$", status=503, delay=0.5)
    start = time.monotonic()
    with pytest.raises(Failure) as e:
        await k.call("CoreV1Api", "list_namespaced_config_map", k.ns)
    assert e.value.status == 503 and time.monotonic() - start >= 0.5
    # a hang: the client gives up (the sync client retries a read timeout itself: hang them all)
    kube_cluster.inject_fault("GET", f"/namespaces/{k.ns}/secrets$", status=None, count=10)
    start = time.monotonic()
    with pytest.raises(Exception) as e:
        await k.call("CoreV1Api", "list_namespaced_secret", k.ns, _request_timeout=0.5)
    assert not isinstance(e.value, Failure) and time.monotonic() - start < 10
    kube_cluster.clear_faults()
    assert (await k.call("CoreV1Api", "list_namespaced_secret", k.ns))["items"] is not None


async def test_the_request_log_records_every_request_in_order(k, kube_cluster):
    kube_cluster.clear_requests()
    kube_cluster.inject_fault("GET", f"/namespaces/{k.ns}/configmaps/x$", status=404)
    await k.call("CoreV1Api", "create_namespaced_config_map", k.ns, cm("x"))
    with pytest.raises(Failure):
        await k.call("CoreV1Api", "read_namespaced_config_map", "x", k.ns)
    await k.call("CoreV1Api", "list_namespaced_config_map", k.ns, label_selector="a=b", limit=5)
    log = kube_cluster.requests(path=f"/api/v1/namespaces/{k.ns}/configmaps")
    assert [(r.method, r.path) for r in log] == [
        ("POST", f"/api/v1/namespaces/{k.ns}/configmaps"), ("GET", f"/api/v1/namespaces/{k.ns}/configmaps/x"),
        ("GET", f"/api/v1/namespaces/{k.ns}/configmaps")]
    assert log[2].query == {"labelSelector": "a=b", "limit": "5"}
    assert log[0].at <= log[1].at <= log[2].at
    assert kube_cluster.requests("DELETE") == []
    kube_cluster.clear_requests()
    assert kube_cluster.requests() == []


# ---- identity -----------------------------------------------------------------------------------

async def test_a_client_certificate_identity_is_what_rbac_sees(kube_cluster, kube_target, tmp_path):
    kubeconfig = kube_cluster.write_kubeconfig(tmp_path / "alice", kube_target.namespace, user="alice",
                                               groups=("team-a",))
    alice = await client(kubeconfig, kube_target.namespace)
    try:
        review = await alice.call("AuthenticationV1Api", "create_self_subject_review", SSR)
        info = review["status"]["userInfo"]
        assert info["username"] == "alice" and "team-a" in info["groups"] and "system:masters" not in info["groups"]
        with pytest.raises(Failure) as e:
            await alice.call("CoreV1Api", "list_namespaced_secret", kube_target.namespace)
        assert e.value.status == 403 and e.value.reason == "Forbidden" and '"alice"' in e.value.message
        # headers of the caller's own asking to impersonate someone are dropped
        alice.api_client.set_default_header("Impersonate-User", "admin")
        alice.api_client.set_default_header("Impersonate-Group", "system:masters")
        review = await alice.call("AuthenticationV1Api", "create_self_subject_review", SSR)
        assert review["status"]["userInfo"]["username"] == "alice"
    finally:
        await alice.close()


async def test_a_service_account_token_passes_through(kube_cluster, kube_target, tmp_path):
    ns = kube_target.namespace
    kube_cluster.create("", "v1", "serviceaccounts", ns, {"metadata": {"name": "robot"}})
    token = kube_cluster.create("", "v1", "serviceaccounts/robot/token", ns, {
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}})["status"]["token"]
    robot = await client(kube_cluster.write_kubeconfig(tmp_path / "robot", ns, token=token), ns)
    try:
        review = await robot.call("AuthenticationV1Api", "create_self_subject_review", SSR)
        assert review["status"]["userInfo"]["username"] == f"system:serviceaccount:{ns}:robot"
        with pytest.raises(Failure) as e:
            await robot.call("CoreV1Api", "list_namespaced_config_map", ns)
        assert e.value.status == 403
    finally:
        await robot.close()


# ---- watches: cut, expired, gone ----------------------------------------------------------------

async def test_force_gone_is_what_a_too_old_resource_version_gets(k, kube_cluster):
    """A watch with timeoutSeconds raises ApiException(410) at the ERROR event; a watch without it
    (watching "forever") retries once from the same resourceVersion, then raises. An HTTP 410
    answer raises at once. A watch that does not resume (no resourceVersion) is never refused."""
    await k.call("CoreV1Api", "create_namespaced_config_map", k.ns, cm("a"))
    rv = (await k.call("CoreV1Api", "list_namespaced_config_map", k.ns))["metadata"]["resourceVersion"]
    path = f"/namespaces/{k.ns}/configmaps"

    def watches():
        return [r.query["resourceVersion"] for r in kube_cluster.requests("GET", path) if r.query.get("watch")]

    kube_cluster.proxy.force_gone(path, count=1)
    with pytest.raises(Failure) as e:
        await k.watch("CoreV1Api", "list_namespaced_config_map", namespace=k.ns, resource_version=rv,
                      timeout_seconds=5)
    assert e.value.status == 410 and watches() == [rv]

    kube_cluster.clear_requests()
    kube_cluster.proxy.force_gone(path, count=2)
    with pytest.raises(Failure) as e:
        await k.watch("CoreV1Api", "list_namespaced_config_map", namespace=k.ns, resource_version=rv)
    assert e.value.status == 410 and watches() == [rv, rv]

    kube_cluster.clear_requests()
    kube_cluster.proxy.force_gone(path, count=1)  # one 410: the client's own retry goes through
    await k.call("CoreV1Api", "create_namespaced_config_map", k.ns, cm("b"))
    events = await k.watch("CoreV1Api", "list_namespaced_config_map", namespace=k.ns, resource_version=rv,
                           max_events=1)
    assert [(t, o["metadata"]["name"]) for t, o in events] == [("ADDED", "b")] and watches() == [rv, rv]

    kube_cluster.proxy.force_gone(path, count=1, event=False)
    with pytest.raises(Failure) as e:
        await k.call("CoreV1Api", "list_namespaced_config_map", k.ns, watch=True, resource_version=rv,
                     timeout_seconds=5)
    assert e.value.status == 410 and e.value.reason == "Expired"
    kube_cluster.proxy.clear_gone()

    kube_cluster.proxy.force_gone(path, count=1)
    events = await k.watch("CoreV1Api", "list_namespaced_config_map", namespace=k.ns, timeout_seconds=5,
                           max_events=3)
    assert {o["metadata"]["name"] for _, o in events} == {"kube-root-ca.crt", "a", "b"}
    kube_cluster.proxy.clear_gone()


@pytest.fixture
async def cache(kube_cluster, kube_target):
    """hub_ext's WatchCache of the test namespace's ConfigMaps, through the proxy."""
    import kubernetes_asyncio

    from hub_ext.kube.client import Kube as HubKube
    from hub_ext.kube.watchcache import WatchCache

    api = await kubernetes_asyncio.config.new_client_from_config(config_file=kube_target.kubeconfig)
    wc = WatchCache(HubKube(api), f"/api/v1/namespaces/{kube_target.namespace}/configmaps", retry_delay=0.05)
    assert await wc.wait_loaded()
    yield wc
    await wc.stop()
    await api.close()


def names(cache):
    return {o["metadata"]["name"] for o in cache.items()}


async def open_watch(kube_cluster, ns):
    path = f"/api/v1/namespaces/{ns}/configmaps"
    await until(lambda: any(w.path == path for w in kube_cluster.proxy.open_watches()), what="the watch")


async def test_watch_cache_resumes_a_cut_watch_without_listing(cache, kube_cluster, kube_target):
    ns = kube_target.namespace
    for abrupt in (False, True):
        await open_watch(kube_cluster, ns)
        kube_cluster.clear_requests()
        assert kube_cluster.proxy.cut_watches(abrupt=abrupt) == 1
        await open_watch(kube_cluster, ns)
        name = f"after-{'abrupt' if abrupt else 'clean'}-cut"
        kube_cluster.create("", "v1", "configmaps", ns, cm(name))
        await until(lambda: name in names(cache), what=f"{name} in the cache")
        gets = kube_cluster.requests("GET", f"/api/v1/namespaces/{ns}/configmaps")
        assert gets and all(r.query.get("watch") == "true" and r.query.get("resourceVersion") for r in gets)
    assert cache.lists == 1


async def test_expire_watches_costs_the_watch_cache_exactly_one_re_list(cache, kube_cluster, kube_target):
    ns = kube_target.namespace
    kube_cluster.create("", "v1", "configmaps", ns, cm("before"))
    await until(lambda: "before" in names(cache), what="the first object")
    await open_watch(kube_cluster, ns)
    kube_cluster.clear_requests()
    assert kube_cluster.expire_watches() == 1
    await until(lambda: cache.lists == 2, what="the re-list")
    kube_cluster.create("", "v1", "configmaps", ns, cm("after"))
    await until(lambda: "after" in names(cache), what="an object made after the expiry")
    await asyncio.sleep(0.3)
    assert cache.lists == 2 and cache.state == "ready"
    gets = kube_cluster.requests("GET", f"/api/v1/namespaces/{ns}/configmaps")
    kinds = ["watch" if r.query.get("watch") else "list" for r in gets]
    # the resumed watch is refused (410), the cache lists once and watches on from the list
    assert kinds[:3] == ["watch", "list", "watch"] and kinds.count("list") == 1, kinds
