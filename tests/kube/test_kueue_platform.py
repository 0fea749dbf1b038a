"""PlatformSpawner under the real Kueue (`kueue` fixture: kueue-manager v0.17.0 built from its Go
module, with helm-values/kueue.yaml's configuration) on the real control plane, acting as the
hub's ServiceAccount of `helm-values/hub-rbac.yaml`: the hub finds Kueue and makes the project's
ResourceFlavors, ClusterQueue and LocalQueue (the accelerator ResourceQuota then counts nothing);
a notebook that does not fit is not refused but queued: its pod waits behind Kueue's scheduling
gate, the progress says where it stands and why, in words, and it starts once the server holding
the slices stops; the start may wait `queue_start_timeout`, and meanwhile another member's spawn
form says one start waits ahead in the project. A member's plain pod in the project
asking for a slice is queued the same way (no queue name needed), and members cannot make or
change queues."""

from __future__ import annotations

import asyncio
import html

import pytest

from hub_ext.manifests.tenancy import member_binding_name
from tests.cluster.identities import service_account_kubeconfig
from tests.cluster.rest import ApiError, Rest
from tests.kube.platform_env import (create, make_spawner, make_user, platform_cluster, stop_as_hub, until,
                                     wait_default_service_account, watch_progress)

pytestmark = pytest.mark.kube

KUEUE = "kueue.x-k8s.io"


@pytest.fixture
async def cluster(kube_cluster, kueue, tmp_path, monkeypatch):
    async with platform_cluster(kube_cluster, tmp_path, monkeypatch) as c:
        yield c


def _gated(cluster, ns: str, pod: str) -> bool:
    found = cluster.get("", "v1", "pods", ns, pod)
    return bool(found and (found["spec"].get("schedulingGates") or []))


async def test_a_notebook_that_does_not_fit_waits_in_the_queue_and_starts_when_room_is_made(cluster):
    alice, carol = make_user("alice", ["vision"], uid=1), make_user("carol", ["vision"], uid=2)
    # no borrowing here: the members' personal projects (2 slices each, idle) would lend theirs
    first = make_spawner(alice, {"project": "vision", "profile": "mig-1g"}, queue_borrowing_limit=0)
    await first.run_pre_spawn_hook()
    assert first.start_timeout == 3600  # queue_start_timeout: a queued start may wait
    await first.provision()
    for name in ("mlp-vision", "mlp-vision-servers"):  # the jobs' queue and the servers'
        cq = cluster.get(KUEUE, "v1beta2", "clusterqueues", None, name)
        assert [f["name"] for g in cq["spec"]["resourceGroups"] for f in g["flavors"]] == ["mlp-1g.5gb"], name
        assert cq["spec"]["cohortName"] == "mlp-vision"
    assert cluster.get(KUEUE, "v1beta2", "cohorts", None, "mlp-vision")["spec"]["parentName"] == "mlplatform"
    assert cluster.get(KUEUE, "v1beta2", "localqueues", "vision", "default")["spec"]["clusterQueue"] == "mlp-vision"
    assert cluster.get(KUEUE, "v1beta2", "localqueues", "vision", "servers")["spec"]["clusterQueue"] == \
        "mlp-vision-servers"
    assert cluster.get("", "v1", "resourcequotas", "vision", "mlplatform-accelerators")["spec"].get("hard", {}) == {}

    await first.start()  # admitted at once: the project's 2 slices are free
    pod = cluster.get("", "v1", "pods", "vision", first.pod_name)
    assert pod["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "servers"
    # a member's job pod takes the second slice, without naming a queue: queued all the same
    wait_default_service_account(cluster, "vision")
    job_pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "train-worker-0", "namespace": "vision"},
               "spec": {"serviceAccountName": "mlplatform-runner", "containers": [{"name": "w", "image": "pytorch",
                                        "resources": {"limits": {"nvidia.com/mig-1g.5gb": "1"}}}],
                        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}}
    created = create(cluster, job_pod)
    assert created["metadata"]["labels"].get("kueue.x-k8s.io/queue-name") == "default"
    await until(lambda: _admitted(cluster, "vision", "train-worker-0"), "the job pod was admitted")

    # carol's notebook does not fit: queued, not refused
    second = make_spawner(carol, {"project": "vision", "profile": "mig-1g"}, queue_borrowing_limit=0)
    await second.run_pre_spawn_hook()
    messages, collecting = watch_progress(second)
    starting = asyncio.ensure_future(second.start())
    await until(lambda: _async(_gated(cluster, "vision", second.pod_name)), "carol's pod is held by Kueue's gate")
    try:
        await until(lambda: _async(any("queued:" in m and "is in use (1 more needed)" in m for m in messages)),
                    "the progress says where carol's server stands in the queue", timeout=30)
    finally:
        print("progress:", messages)
        print("workloads:", [(w["metadata"]["name"], w["metadata"].get("ownerReferences"), w.get("status"))
                             for w in cluster.items(KUEUE, "v1beta2", "workloads", "vision")])
    print("queued progress:", [m for m in messages if "queued" in m])
    assert not starting.done()
    # the form as another member sees it now: the slice profile is offered, one start waits ahead of theirs
    bob = make_spawner(make_user("bob", ["vision"], uid=3), queue_borrowing_limit=0)
    form = html.unescape(await bob.get_options_form())
    assert ("0 of 2 free — queue: 0 ahead in Personal, 1 in Vision team — your server would wait in the "
            "project's queue (up to 60 min)") in form, form
    # what the hub's projects API gives the widget's and the panel's submit forms (`queue_ahead`)
    assert (await bob.queue_ahead(["vision"]))[("vision", "1g.5gb")] == 1
    # alice stops: her slice goes back to the queue, carol's server is admitted and starts
    await first.stop()
    await asyncio.wait_for(starting, 60)
    assert not _gated(cluster, "vision", second.pod_name)
    await until(lambda: _async(any("admitted by the project's queue" in m for m in messages)),
                "the progress says the queue admitted it", timeout=10)
    collecting.cancel()
    await second.stop()
    cluster.delete("", "v1", "pods", "vision", "train-worker-0")


async def _async(value):
    return value


async def _admitted(cluster, ns: str, pod: str) -> bool:
    return not _gated(cluster, ns, pod) and cluster.get("", "v1", "pods", ns, pod) is not None


async def test_members_cannot_make_or_change_queues(cluster, tmp_path):
    alice = make_user("alice", ["vision"], uid=1)
    sp = make_spawner(alice, {"project": "vision", "profile": "mig-1g"})
    await sp.provision()
    member = Rest(service_account_kubeconfig(cluster, tmp_path / "alice.kubeconfig", "vision",
                                             member_binding_name("alice")))
    api = f"/apis/{KUEUE}/v1beta2"
    try:
        # reading where work stands is allowed; making a queue or pointing one elsewhere is not
        assert [q["metadata"]["name"] for q in (await member.get(f"{api}/namespaces/vision/localqueues"))["items"]] \
            == ["default", "servers"]
        attempts = {
            "a queue of her own": member.post(f"{api}/namespaces/vision/localqueues", {
                "apiVersion": f"{KUEUE}/v1beta2", "kind": "LocalQueue", "metadata": {"name": "mine"},
                "spec": {"clusterQueue": "mlp-research"}}),
            "the project's queue pointed elsewhere": member.patch(
                f"{api}/namespaces/vision/localqueues/default", {"spec": {"clusterQueue": "mlp-research"}}),
            "the project's ClusterQueue": member.patch(f"{api}/clusterqueues/mlp-vision",
                                                       {"spec": {"cohortName": "mine"}}),
            "the servers' queue made to borrow": member.patch(f"{api}/clusterqueues/mlp-vision-servers",
                                                              {"spec": {"preemption": None}}),
            "the project's Cohort": member.patch(f"{api}/cohorts/mlp-vision", {"spec": {"parentName": "mine"}}),
            "a ClusterQueue of her own": member.post(f"{api}/clusterqueues", {
                "apiVersion": f"{KUEUE}/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "alice"},
                "spec": {"namespaceSelector": {}}}),
        }
        for what, attempt in attempts.items():
            with pytest.raises(ApiError) as e:
                await attempt
            assert e.value.status == 403, what
    finally:
        await member.close()
    await stop_as_hub(sp)
