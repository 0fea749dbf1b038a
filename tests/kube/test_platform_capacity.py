"""PlatformSpawner's quota and capacity on the real control plane, acting as the hub's
ServiceAccount of `helm-values/hub-rbac.yaml`: the project's ResourceQuota holds for servers and
jobs alike (enforced by the API server's quota admission, and said in words when it refuses);
its accounting lagging a deleted pod is waited out; free capacity per accelerator comes from the
test kubelet's nodes (their `allocatable`) and the pods the real scheduler bound to them, from
two watch caches (no request per page view), or is unknown when the hub's RBAC refuses nodes; a
full accelerator is refused or waited for (the real scheduler's FailedScheduling, in words); two
concurrent spawns never both get the last slice, and a started pod is never counted twice."""

from __future__ import annotations

import asyncio

import pytest
from tornado import web

from tests.cluster.rest import ApiError
from tests.kube.platform_env import (NODES, create, make_spawner, make_user, platform_cluster, restart_hub,
                                     stop_as_hub, until, use_kubeconfig,
                                     wait_default_service_account, watch_progress, whoami)

pytestmark = pytest.mark.kube

ALICE = "alice@example.com"


@pytest.fixture
async def cluster(kube_cluster, tmp_path, monkeypatch):
    async with platform_cluster(kube_cluster, tmp_path, monkeypatch) as c:
        yield c


async def test_quota_holds_for_servers_and_jobs_alike(cluster):
    alice, carol = make_user(ALICE, ["vision"], uid=1), make_user("carol", ["vision"], uid=2)
    first = make_spawner(alice, {"project": "vision", "profile": "mig-1g"})
    await first.start()
    # a training job's pod in the project takes the second slice (created as the operator would)
    job_pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "train-worker-0", "namespace": "vision"},
               "spec": {"serviceAccountName": "mlplatform-runner", "containers": [{"name": "w", "image": "pytorch",
                                        "resources": {"limits": {"nvidia.com/mig-1g.5gb": "1"}}}],
                        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}}
    wait_default_service_account(cluster, "vision")
    create(cluster, job_pod)
    await until(lambda: _usage_is(first, "vision", 2), "the hub saw the job's pod")
    second = make_spawner(carol, {"project": "vision", "profile": "mig-1g"})
    with pytest.raises(web.HTTPError) as e:
        await second.start()
    assert e.value.status_code == 403 and "may use 2 1g.5gb at once and 2 are in use" in e.value.log_message
    assert cluster.get("", "v1", "pods", "vision", second.pod_name) is None
    # Kubernetes itself refuses a third slice in the project, whoever asks
    with pytest.raises(ApiError) as quota:
        create(cluster, {**job_pod, "metadata": {"name": "train-worker-1", "namespace": "vision"}})
    assert quota.value.status == 403 and "exceeded quota" in str(quota.value)
    await first.stop()


async def _usage_is(spawner, ns, n):
    return ((await spawner.usage(ns)) or {}).get("1g.5gb") == n


async def test_a_quota_refusal_from_kubernetes_is_said_in_words(cluster):
    carol = make_user("carol", ["vision"])
    sp = make_spawner(carol, {"project": "vision", "profile": "mig-1g"})
    await sp.provision()
    # another hub (or a race) used the quota up after this hub's caches last looked; the quota
    # admission enforces what the quota controller has put into status.hard
    cluster.patch("", "v1", "resourcequotas", "vision", "mlplatform-accelerators",
                  {"spec": {"hard": {"requests.nvidia.com/mig-1g.5gb": "0"}}})

    async def enforced():
        quota = cluster.get("", "v1", "resourcequotas", "vision", "mlplatform-accelerators")
        return (quota.get("status") or {}).get("hard", {}).get("requests.nvidia.com/mig-1g.5gb") == "0"
    await until(enforced, "the quota controller took the new limit")
    with pytest.raises(web.HTTPError) as e:
        await sp.start()
    assert e.value.status_code == 403 and "no accelerator quota left" in e.value.log_message
    await stop_as_hub(sp)  # JupyterHub stops a server whose start failed
    assert cluster.get("", "v1", "secrets", "vision", f"{sp.pod_name}-hub-token") is None


async def test_a_refusal_while_the_quota_catches_up_is_waited_out(cluster):
    """The ResourceQuota controller releases a deleted pod's accelerator a moment after the pod is
    gone (more under load): a server started again at once finds `status.used` still counting it.
    Here that moment is held open: the quota says one 3g.20gb slice is used while no pod uses it,
    until a pod deletion in the project makes the controller recount. The hub, whose own view
    shows room under the limit, retries instead of reporting that the project has no quota left."""
    bob = make_user("bob", ["research"])  # research may use one 3g.20gb slice
    sp = make_spawner(bob, {"profile": "mig-3g"})
    await sp.provision()
    ns = sp.namespace
    wait_default_service_account(cluster, ns)
    create(cluster, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "other", "namespace": ns},
                     "spec": {"serviceAccountName": "mlplatform-runner",
                              "containers": [{"name": "c", "image": "busybox"}]}})

    async def quota_status(key="hard"):
        quota = cluster.get("", "v1", "resourcequotas", ns, "mlplatform-accelerators")
        return ((quota.get("status") or {}).get(key) or {}).get("requests.nvidia.com/mig-3g.20gb")
    await until(lambda: _is(quota_status(), "1"), "the quota controller filled in the quota's status")
    cluster.patch("", "v1", "resourcequotas", ns, "mlplatform-accelerators",
                  {"status": {"used": {"requests.nvidia.com/mig-3g.20gb": "1"}}}, subresource="status")
    start = sp.start()
    await asyncio.sleep(2)
    assert not start.done() and cluster.get("", "v1", "pods", ns, sp.pod_name) is None  # refused, retrying
    cluster.delete("", "v1", "pods", ns, "other")  # the controller recounts the project's pods
    await asyncio.wait_for(start, 30)
    assert cluster.get("", "v1", "pods", ns, sp.pod_name)["status"]["phase"] == "Running"
    assert await quota_status("used") == "1"
    await sp.stop()


async def _is(awaitable, value):
    return await awaitable == value


async def test_capacity_from_nodes_and_pods_without_api_requests(cluster):
    sp = make_spawner(make_user("bob", ["research"]))
    assert await sp.capacity() == {"a100": (2, 2), "1g.5gb": (2, 2), "3g.20gb": (1, 1)}
    await asyncio.sleep(0.3)  # the two caches open their watches
    before = len(cluster.requests())
    for _ in range(20):
        await sp.capacity()
        await sp.get_options_form()
    assert [r for r in cluster.requests()[before:] if "nodes" in r.path or r.path == "/api/v1/pods"] == []
    assert sp.shared.view.nodes.lists == 1 and sp.shared.view.pods.lists == 1
    running = make_spawner(make_user("bob", ["research"]), {"profile": "gpu"})
    await running.start()
    for _ in range(50):
        if (await sp.capacity())["a100"] == (1, 2):
            break
        await asyncio.sleep(0.1)
    assert await sp.capacity() == {"a100": (1, 2), "1g.5gb": (2, 2), "3g.20gb": (1, 1)}
    await running.stop()


async def test_capacity_unknown_when_the_hub_may_not_read_nodes(cluster, tmp_path, monkeypatch):
    """A hub whose ClusterRole is hub-rbac.yaml's without the nodes rule: the API server refuses
    its node list, and capacity is unknown (never a guess)."""
    from tests.cluster.identities import manifests

    await make_spawner(make_user("bob", ["research"])).provision()  # by the hub: this identity is not it
    await restart_hub()
    (role,) = [d for d in manifests() if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "mlplatform-hub"]
    name = "mlplatform-hub-without-nodes"
    rules = [r for r in role["rules"] if "nodes" not in r["resources"]]
    assert len(rules) == len(role["rules"]) - 1
    rbac = "rbac.authorization.k8s.io"
    cluster.create(rbac, "v1", "clusterroles", None, {"metadata": {"name": name}, "rules": rules})
    cluster.create(rbac, "v1", "clusterrolebindings", None, {
        "metadata": {"name": name}, "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": name},
        "subjects": [{"apiGroup": rbac, "kind": "User", "name": name}]})
    # what the hub holds in its projects (bound there to its ServiceAccount, which this identity is not)
    cluster.create(rbac, "v1", "clusterrolebindings", None, {
        "metadata": {"name": f"{name}-projects"},
        "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": "mlplatform-hub-project"},
        "subjects": [{"apiGroup": rbac, "kind": "User", "name": name}]})
    try:
        use_kubeconfig(cluster.write_kubeconfig(tmp_path / "no-nodes.kubeconfig", user=name, groups=()), monkeypatch)
        sp = make_spawner(make_user("bob", ["research"]))
        assert await whoami(sp.api.api_client) == name
        assert await sp.capacity() == {}
        assert sp.shared.view.nodes.state == "forbidden" and "403" in sp.shared.view.nodes.error
        form = await sp.get_options_form()
        assert "free capacity unknown" in form
    finally:
        cluster.delete(rbac, "v1", "clusterrolebindings", None, name)
        cluster.delete(rbac, "v1", "clusterrolebindings", None, f"{name}-projects")
        cluster.delete(rbac, "v1", "clusterroles", None, name)


async def test_full_accelerator_is_refused_or_waited_for(cluster):
    bob = make_user("bob", ["research"])
    holder = make_spawner(bob, {"profile": "mig-3g"}, when_full="refuse")
    await holder.start()
    dave = make_user("dave", ["research"], uid=2)
    await asyncio.sleep(0.3)
    refused = make_spawner(dave, {"profile": "mig-3g"})
    with pytest.raises(web.HTTPError) as e:
        await refused.start()
    assert e.value.status_code == 409 and "0 of 1 free" in e.value.log_message
    waiting = make_spawner(dave, {"profile": "mig-3g"}, when_full="wait", start_timeout=60)
    waiting.start()
    messages, collector = watch_progress(waiting)
    # the real scheduler's FailedScheduling ("0/3 nodes are available: 1 Insufficient
    # nvidia.com/mig-3g.20gb, ...") in words
    for _ in range(100):
        if any("waiting for a free 3g.20gb MIG slice" in m for m in messages):
            break
        await asyncio.sleep(0.1)
    assert any("waiting for a free 3g.20gb MIG slice" in m for m in messages), messages
    await holder.stop()
    await asyncio.wait_for(waiting._start_future, 30)
    await asyncio.wait_for(collector, 10)
    assert "assigned to node dgx-mig" in messages and "starting the notebook server" in messages
    assert not any("[Warning]" in m or "Insufficient" in m for m in messages)
    await waiting.stop()


async def test_two_spawns_for_the_last_slice_one_wins(cluster):
    first = make_spawner(make_user("bob", ["research"], uid=1), {"profile": "mig-3g"})
    second = make_spawner(make_user("dave", ["research"], uid=2), {"profile": "mig-3g"})
    results = await asyncio.gather(first.start(), second.start(), return_exceptions=True)
    refused = [r for r in results if isinstance(r, web.HTTPError)]
    assert len(refused) == 1 and refused[0].status_code == 409, results
    assert first.shared.claims == {}  # every claim released once its spawn ended
    winner = first if not isinstance(results[0], Exception) else second
    await winner.stop()


async def test_a_bound_pod_is_not_counted_twice_while_its_start_waits(cluster):
    """A start claims its accelerator until its pod runs, so that two starts never count the same
    free slice; once the real scheduler has bound the pod, the view counts it and the claim no
    longer does: the second of two whole GPUs is still free for another user meanwhile."""
    for handle in list(cluster.kubelets):
        handle.stop()
    kubelet = cluster.kubelet(nodes=NODES, auto_run=False)  # pods are bound, and run only when told
    first = make_spawner(make_user("bob", ["research"], uid=1), {"profile": "gpu"})
    second = make_spawner(make_user("dave", ["research"], uid=2), {"profile": "gpu"})
    started = first.start()

    async def bound():
        pod = cluster.get("", "v1", "pods", first.namespace, first.pod_name) if first.namespace else None
        return bool(pod and pod["spec"].get("nodeName")) and (await first.capacity())["a100"] == (1, 2)
    await until(bound, "the first pod was bound and the view counts it")
    also = second.start()

    async def created():
        if also.done():
            also.result()  # a refusal fails the test here
        return await _exists(cluster, second)
    await until(created, "dave's pod was created")
    assert not started.done()  # the first start still waits for its pod to run (its claim is held)
    for sp in (first, second):
        await asyncio.to_thread(kubelet.wait_pod, sp.namespace, sp.pod_name)
        await asyncio.to_thread(kubelet.run, sp.namespace, sp.pod_name)
    await asyncio.wait_for(asyncio.gather(started, also), 30)
    assert await first.capacity() == {"a100": (0, 2), "1g.5gb": (2, 2), "3g.20gb": (1, 1)}
    await first.stop()
    await second.stop()


async def _exists(cluster, spawner):
    return cluster.get("", "v1", "pods", spawner.namespace, spawner.pod_name) is not None
