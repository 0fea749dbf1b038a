"""The Kubernetes job backend on the real control plane: batch/v1 Jobs run by its Job controller,
PyTorchJobs and TFJobs by the real Kubeflow Training Operator v1.9.4 (the `training_operator`
fixture), pods bound by the real scheduler and run by the test kubelet on the test's command; faults, cut watches and 410 Gone from the fault proxy. States through a job's
life, reads from the watch caches, duplicates, projects, cancel, logs, quota, faults and 410."""

from __future__ import annotations

import asyncio
import contextlib
import json

import pytest

from hub_ext.core.errors import UpstreamError, UserInputError
from hub_ext.kube.watchcache import WatchCache
from server_ext.errors import JobExists, JobFinished, JobNotFound
from server_ext.jobs.kube.kubeflow import job_manifest, resource_path
from server_ext.jobs.kube.status import job_json
from server_ext.runtimes.kube.backend import KubeBackend
from server_ext.runtimes.kube.project_caches import SELECTOR
from tests.kube.job_env import SETTINGS, lists, plan, pod, pods, pytorch_doc, single_doc, state, tf_doc, until

pytestmark = pytest.mark.kube
JOB_LABEL = "training.kubeflow.org/job-name"
TYPE_LABEL = "training.kubeflow.org/replica-type"
INDEX_LABEL = "training.kubeflow.org/replica-index"


@pytest.fixture
async def other_project(kube, kube_target):
    name = f"{kube_target.namespace}-b"
    await kube.request("POST", "/api/v1/namespaces", {"metadata": {"name": name}})
    yield name
    await kube.delete(f"/api/v1/namespaces/{name}")


def kept(sent, stored) -> bool:
    """Everything `sent` holds is in `stored` as it was sent (which may add server-side defaults)."""
    if isinstance(sent, dict):
        return isinstance(stored, dict) and all(k in stored and kept(v, stored[k]) for k, v in sent.items())
    if isinstance(sent, list):
        return isinstance(stored, list) and len(sent) == len(stored) and all(map(kept, sent, stored))
    return sent == stored


def env_of(p: dict) -> dict:
    return {e["name"]: e.get("value") for e in p["spec"]["containers"][0].get("env") or []}


async def replica(kube_cluster, ns, name, rtype, index=0):
    return await pod(kube_cluster, ns, **{JOB_LABEL: name, TYPE_LABEL: rtype, INDEX_LABEL: str(index)})


async def test_pytorch_job_queued_preparing_running_succeeded(backend, cluster, kube_cluster, kube_target):
    ns = kube_target.namespace
    p = plan(pytorch_doc("resnet_ddp"), ns)
    job = await backend.submit(p)
    assert job["jobId"] == "resnet_ddp" and job["state"] == "QUEUED" and job["labels"] == {"team": "vision"}
    seen = ["QUEUED"]
    await state(backend, ns, "resnet_ddp", "PREPARING", seen)
    master = await replica(kube_cluster, ns, p.name, "master")
    worker = await replica(kube_cluster, ns, p.name, "worker")
    for x, rank in ((master, "0"), (worker, "1")):
        env = env_of(x)
        assert {k: env.get(k) for k in ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "CLOUD_ML_JOB_ID")} == {
            "MASTER_ADDR": f"{p.name}-master-0", "MASTER_PORT": "23456", "WORLD_SIZE": "2", "RANK": rank,
            "CLOUD_ML_JOB_ID": "resnet_ddp"}
    for x in (master, worker):
        cluster.run(ns, x["metadata"]["name"])
    await state(backend, ns, "resnet_ddp", "RUNNING", seen)
    cluster.finish(ns, worker["metadata"]["name"])
    cluster.finish(ns, master["metadata"]["name"])
    job = await state(backend, ns, "resnet_ddp", "SUCCEEDED", seen)
    assert seen == ["QUEUED", "PREPARING", "RUNNING", "SUCCEEDED"]
    assert job["createTime"] <= job["startTime"] <= job["endTime"]
    stored = kube_cluster.get("kubeflow.org", "v1", "pytorchjobs", ns, p.name)
    sent = job_manifest(p, SETTINGS)["spec"]
    assert kept(sent, stored["spec"])  # valid for the CRD: nothing pruned (its defaults added)
    assert stored["spec"]["runPolicy"] == {**sent["runPolicy"], "suspend": False}


@contextlib.asynccontextmanager
async def every_state(kube, ns: str, kind: str = "Job"):
    """The states read from every version of the namespace's one job of `kind` that a watch
    delivers (each change once, however briefly it lasted), filled while in the block; the block
    ends once the watch has delivered the version with the controller's final condition."""
    states: list[str] = []

    def record() -> None:
        for obj in cache.items():
            if not states or states[-1] != job_json(obj)["state"]:
                states.append(job_json(obj)["state"])

    def completed() -> bool:  # Complete or Failed: written after SuccessCriteriaMet or FailureTarget
        return any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
                   for obj in cache.items() for c in (obj.get("status") or {}).get("conditions") or [])

    cache = WatchCache(kube, resource_path(kind, ns), on_change=record,
                       transform=lambda obj: {"kind": kind, **obj}).start()
    assert await cache.wait_loaded(10), cache.error
    try:
        yield states
        await until(completed)
    finally:
        await cache.stop()


async def test_single_replica_job_queued_preparing_running_succeeded(backend, cluster, kube_cluster, kube, kube_target):
    """The control plane's Job controller runs it; every version of the Job it writes reads as a
    state no earlier than the one before (its SuccessCriteriaMet comes before Complete)."""
    ns = kube_target.namespace
    p = plan(single_doc("census_v2"), ns)
    assert p.kind == "Job"
    async with every_state(kube, ns) as states:
        seen = [(await backend.submit(p))["state"]]
        await state(backend, ns, "census_v2", "PREPARING", seen)
        x = await pod(kube_cluster, ns, **{"batch.kubernetes.io/job-name": p.name})
        assert x["metadata"]["name"].startswith(f"{p.name}-")
        cluster.run(ns, x["metadata"]["name"])
        await state(backend, ns, "census_v2", "RUNNING", seen)
        cluster.finish(ns, x["metadata"]["name"])
        job = await state(backend, ns, "census_v2", "SUCCEEDED", seen)
    assert seen == ["QUEUED", "PREPARING", "RUNNING", "SUCCEEDED"]
    assert states == ["QUEUED", "PREPARING", "RUNNING", "SUCCEEDED"]
    assert job["createTime"] <= job["startTime"] <= job["endTime"]


async def test_a_failed_batch_job_fails_with_the_job_controllers_message(backend, cluster, kube_cluster, kube,
                                                                          kube_target):
    ns = kube_target.namespace
    p = plan(single_doc("census_bad"), ns)
    async with every_state(kube, ns) as states:
        await backend.submit(p)
        x = await pod(kube_cluster, ns, **{"batch.kubernetes.io/job-name": p.name})
        cluster.run(ns, x["metadata"]["name"])
        await state(backend, ns, "census_bad", "RUNNING")
        cluster.finish(ns, x["metadata"]["name"], exit_code=1)
        job = await state(backend, ns, "census_bad", "FAILED")
    assert states == ["QUEUED", "PREPARING", "RUNNING", "FAILED"]
    assert job["errorMessage"] == "Job has reached the specified backoff limit"  # backoffLimit 0: never retried
    assert kube_cluster.get("batch", "v1", "jobs", ns, p.name)["status"]["failed"] == 1
    assert len(pods(kube_cluster, ns, **{"batch.kubernetes.io/job-name": p.name})) == 1


async def test_a_failed_worker_fails_the_job_with_the_operators_message(backend, cluster, kube_cluster, kube_target):
    ns = kube_target.namespace
    p = plan(pytorch_doc("flaky"), ns)
    await backend.submit(p)
    master = await replica(kube_cluster, ns, p.name, "master")
    worker = await replica(kube_cluster, ns, p.name, "worker")
    for x in (master, worker):
        cluster.run(ns, x["metadata"]["name"])
    await state(backend, ns, "flaky", "RUNNING")
    cluster.finish(ns, worker["metadata"]["name"], exit_code=1)
    job = await state(backend, ns, "flaky", "FAILED")
    # backoffLimit 0 (nothing is retried): the operator's backoff message comes before its per-replica one
    assert job["errorMessage"] == f"Job {p.name} has failed because it has reached the specified backoff limit"
    with pytest.raises(JobFinished):
        await backend.cancel(ns, "flaky")


async def test_tfjob_pods_get_tf_config(backend, cluster, kube_cluster, kube_target):
    ns = kube_target.namespace
    p = plan(tf_doc("wide_deep"), ns)
    assert p.kind == "TFJob"
    await backend.submit(p)
    worker = await replica(kube_cluster, ns, p.name, "worker", 1)
    config = json.loads(env_of(worker)["TF_CONFIG"])
    assert config == {"cluster": {"chief": [f"{p.name}-chief-0.{ns}.svc:2222"],
                                  "worker": [f"{p.name}-worker-{i}.{ns}.svc:2222" for i in range(2)]},
                      "task": {"type": "worker", "index": 1}, "environment": "cloud"}
    await state(backend, ns, "wide_deep", "PREPARING")


async def test_get_and_list_read_the_cache_zero_lists_after_the_first(backend, kube_cluster, kube_target):
    ns = kube_target.namespace
    await backend.submit(plan(pytorch_doc("first"), ns))
    first = lists(kube_cluster, SELECTOR)
    assert sorted(first) == sorted(f"{base}/namespaces/{ns}/{plural}" for base, plural in (
        ("/apis/kubeflow.org/v1", "pytorchjobs"), ("/apis/kubeflow.org/v1", "tfjobs"), ("/apis/batch/v1", "jobs"),
        ("/apis/kubeflow.org/v1beta1", "experiments")))  # sweeps (kube_sweeps)
    since = len(kube_cluster.requests())
    for _ in range(20):
        assert [j["jobId"] for j in await backend.list(ns)] == ["first"]
        assert (await backend.get(ns, "first"))["jobId"] == "first"
    await backend.submit(plan(single_doc("second"), ns))
    # seen at once, from the answer to the create (the controller-manager may already have made its pod)
    assert (await backend.get(ns, "second"))["state"] in ("QUEUED", "PREPARING")
    assert sorted(j["jobId"] for j in await backend.list(ns)) == ["first", "second"]
    made = [(r.method, r.path) for r in kube_cluster.requests()[since:] if r.query.get("watch") is None]
    assert made == [("POST", f"/apis/batch/v1/namespaces/{ns}/jobs")]
    assert lists(kube_cluster, SELECTOR) == first


async def test_list_sees_a_job_created_elsewhere_through_the_watch(backend, kube, kube_target):
    ns = kube_target.namespace
    assert await backend.list(ns) == []
    elsewhere = KubeBackend(kube, SETTINGS)  # another notebook server of the project
    try:
        await elsewhere.submit(plan(pytorch_doc("from_elsewhere"), ns, owner="bob@example.com"))
    finally:
        await elsewhere.close()
    unmanaged = job_manifest(plan(pytorch_doc("not_ours"), ns), SETTINGS)
    unmanaged["metadata"]["labels"] = {}
    await kube.request("POST", f"/apis/kubeflow.org/v1/namespaces/{ns}/pytorchjobs", unmanaged)
    for _ in range(200):
        if [j["jobId"] for j in await backend.list(ns)] == ["from_elsewhere"]:
            break
        await asyncio.sleep(0.05)
    assert [j["jobId"] for j in await backend.list(ns)] == ["from_elsewhere"]
    with pytest.raises(JobNotFound):
        await backend.get(ns, "not_ours")
    await kube.delete(f"/apis/kubeflow.org/v1/namespaces/{ns}/pytorchjobs/from-elsewhere")
    for _ in range(200):
        if not await backend.list(ns):
            break
        await asyncio.sleep(0.05)
    assert await backend.list(ns) == []


async def test_a_taken_job_id_is_job_exists(backend, kube, kube_target):
    ns = kube_target.namespace
    await backend.submit(plan(pytorch_doc("taken"), ns))
    with pytest.raises(JobExists):
        await backend.submit(plan(pytorch_doc("taken"), ns))
    with pytest.raises(JobExists):  # another kind: no 409 from the API, the cache knows the jobId
        await backend.submit(plan(single_doc("taken"), ns))
    rival = KubeBackend(kube, SETTINGS)  # two servers racing for one jobId: exactly one wins
    try:
        await rival.list(ns)
        results = await asyncio.gather(backend.submit(plan(pytorch_doc("race"), ns)),
                                       rival.submit(plan(pytorch_doc("race"), ns)), return_exceptions=True)
    finally:
        await rival.close()
    assert sorted(type(r).__name__ for r in results) == ["JobExists", "dict"]
    for _ in range(200):  # the rival's job reaches this backend's cache through its watch
        listed = sorted(j["jobId"] for j in await backend.list(ns))
        if listed == ["race", "taken"]:
            break
        await asyncio.sleep(0.05)
    assert listed == ["race", "taken"]


async def test_projects_are_separate(backend, kube_target, other_project):
    ns = kube_target.namespace
    await backend.submit(plan(pytorch_doc("mine"), ns))
    with pytest.raises(JobNotFound):
        await backend.get(other_project, "mine")
    with pytest.raises(JobNotFound):
        await backend.cancel(other_project, "mine")
    assert await backend.list(other_project) == []
    theirs = await backend.submit(plan(pytorch_doc("mine"), other_project))  # the same jobId there is free
    assert theirs["jobId"] == "mine"
    assert [j["jobId"] for j in await backend.list(ns)] == ["mine"]
    with pytest.raises(UserInputError) as e:
        await backend.list("Not/A/Namespace")
    assert e.value.field == "project"


@pytest.mark.parametrize("doc", [pytorch_doc, single_doc], ids=["pytorchjob", "batch-job"])
async def test_cancel_goes_cancelling_then_cancelled(backend, cluster, kube_cluster, kube_target, doc):
    ns = kube_target.namespace
    p = plan(doc("to_cancel"), ns)
    await backend.submit(p)
    first = await pod(kube_cluster, ns, **{"mlplatform.io/job": p.name, **({TYPE_LABEL: "master"}
                                                                       if p.kind != "Job" else {})})
    cluster.run(ns, first["metadata"]["name"])
    await state(backend, ns, "to_cancel", "RUNNING")
    assert (await backend.cancel(ns, "to_cancel"))["state"] == "CANCELLING"
    try:  # asking twice is fine while it is cancelling
        assert (await backend.cancel(ns, "to_cancel"))["state"] == "CANCELLING"
    except JobFinished as e:  # the Job controller was quicker than the second ask (seen under load)
        assert "is CANCELLED" in str(e), e
    job = await state(backend, ns, "to_cancel", "CANCELLED")
    assert job["endTime"]
    for _ in range(100):
        if not pods(kube_cluster, ns, **{"mlplatform.io/job": p.name}):
            break
        await asyncio.sleep(0.05)
    assert pods(kube_cluster, ns, **{"mlplatform.io/job": p.name}) == []
    with pytest.raises(JobFinished):
        await backend.cancel(ns, "to_cancel")
    with pytest.raises(JobNotFound):
        await backend.cancel(ns, "never_submitted")
    patches = [r for r in kube_cluster.requests("PATCH") if "/status" not in r.path]
    assert len(patches) == 1


async def collect(stream) -> list[tuple[int, str]]:
    return [(line.seq, line.text) async for line in stream]


async def test_logs_of_master_and_worker_follow_and_resume(backend, cluster, kube_cluster, kube_target):
    ns = kube_target.namespace
    p = plan(pytorch_doc("logged", workers=2), ns)
    await backend.submit(p)
    follower = asyncio.ensure_future(collect(backend.logs(ns, "logged", "master-replica-0", follow=True)))
    master = await replica(kube_cluster, ns, p.name, "master")
    worker1 = await replica(kube_cluster, ns, p.name, "worker", 1)
    kube_cluster.inject_fault("GET", f"/pods/{master['metadata']['name']}/log", 503, count=2)  # passing trouble
    await asyncio.sleep(0.5)  # the follower waits for the container to start
    assert not follower.done() and len(kube_cluster.requests("GET", f"/pods/{master['metadata']['name']}/log")) > 2
    cluster.run(ns, master["metadata"]["name"])
    cluster.run(ns, worker1["metadata"]["name"])
    cluster.log(ns, master["metadata"]["name"], "epoch 1\nepoch 2")
    cluster.log(ns, worker1["metadata"]["name"], "w1 a\nw1 b\nw1 c")
    await asyncio.sleep(0.3)
    cluster.log(ns, master["metadata"]["name"], "epoch 3")
    assert await collect(backend.logs(ns, "logged", "master-replica-0", after=1)) == [(2, "epoch 2"), (3, "epoch 3")]
    resumed = asyncio.ensure_future(collect(backend.logs(ns, "logged", "worker-1", follow=True, after=2)))
    await asyncio.sleep(0.3)
    cluster.log(ns, worker1["metadata"]["name"], "w1 d")
    cluster.finish(ns, worker1["metadata"]["name"])
    assert await asyncio.wait_for(resumed, 10) == [(3, "w1 c"), (4, "w1 d")]
    assert not follower.done()
    cluster.finish(ns, master["metadata"]["name"])
    assert await asyncio.wait_for(follower, 10) == [(1, "epoch 1"), (2, "epoch 2"), (3, "epoch 3")]
    assert [x.task for x in [line async for line in backend.logs(ns, "logged", "worker-1")]] == ["worker-replica-1"] * 4
    for bad in ("worker-5", "ps-0", "nonsense"):
        with pytest.raises(UserInputError) as e:
            await collect(backend.logs(ns, "logged", bad))
        assert e.value.field == "task"
    with pytest.raises(JobNotFound):
        await collect(backend.logs(ns, "nope"))


async def test_quota_exceeded_at_pod_creation_keeps_the_job_queued(backend, cluster, kube_cluster, kube, kube_target):
    """The operator writes no status (no Created condition) while its pod creates fail, so the job
    reads QUEUED; its FailedCreatePod events say why."""
    ns = kube_target.namespace
    await kube.request("POST", f"/api/v1/namespaces/{ns}/resourcequotas",
                       {"metadata": {"name": "compute"}, "spec": {"hard": {"requests.cpu": "2"}}})
    # until the quota controller has counted the namespace, admission answers "status unknown"
    await until(lambda: (kube_cluster.get("", "v1", "resourcequotas", ns, "compute").get("status") or {}).get("used"))
    p = plan(pytorch_doc("too_big"), ns)
    assert (await backend.submit(p))["state"] == "QUEUED"  # the CR itself uses no quota
    follower = asyncio.ensure_future(collect(backend.logs(ns, "too_big", follow=True)))
    events = []
    for _ in range(600):  # the operator's event recorder sends in the background: up to 30 s on a busy machine
        body = await kube.list(f"/api/v1/namespaces/{ns}/events")
        events = [e for e in body["items"] if e["reason"] == "FailedCreatePod"]
        if events:
            break
        await asyncio.sleep(0.05)
    assert events and "exceeded quota: compute" in events[0]["message"]
    assert events[0]["involvedObject"]["name"] == p.name and pods(kube_cluster, ns) == []
    await asyncio.sleep(0.3)
    assert (await backend.get(ns, "too_big"))["state"] == "QUEUED" and not follower.done()
    await backend.cancel(ns, "too_big")
    await state(backend, ns, "too_big", "CANCELLED")
    assert await asyncio.wait_for(follower, 10) == []  # a follower ends when the job ends without a pod


async def test_create_refused_or_failing(backend, kube_cluster, kube_target):
    ns = kube_target.namespace
    await backend.list(ns)
    kube_cluster.inject_fault("POST", "/pytorchjobs", 403)
    with pytest.raises(UserInputError) as e:
        await backend.submit(plan(pytorch_doc("refused"), ns))
    assert e.value.status == 403 and e.value.field == "project"
    kube_cluster.inject_fault("POST", "/pytorchjobs", 500)
    with pytest.raises(UpstreamError) as e:
        await backend.submit(plan(pytorch_doc("refused"), ns))
    assert "500" in e.value.reason
    with pytest.raises(JobNotFound):
        await backend.get(ns, "refused")
    assert len(kube_cluster.requests("POST", "/pytorchjobs")) == 2  # a create is never sent twice


async def test_410_gone_relists_exactly_once(backend, kube_cluster, kube_target):
    ns = kube_target.namespace
    await backend.submit(plan(pytorch_doc("before"), ns))
    assert len(lists(kube_cluster, SELECTOR)) == 4  # three job kinds and Katib Experiments
    kube_cluster.create("", "v1", "configmaps", ns, {"metadata": {"name": "bump"}})  # a newer resourceVersion
    assert kube_cluster.expire_watches() >= 4  # history compacted and the watches cut: resuming is 410
    for _ in range(200):
        if len(lists(kube_cluster, SELECTOR)) == 8:
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(1.2)  # a loop of re-lists would show by now
    assert len(lists(kube_cluster, SELECTOR)) == 8
    gone = [r for r in kube_cluster.requests() if r.query.get("watch") and r.query.get("labelSelector") == SELECTOR]
    assert len(gone) >= 6  # first watches, then resumes answered 410 (and the watches after the re-list)
    assert [j["jobId"] for j in await backend.list(ns)] == ["before"]
    elsewhere = KubeBackend(backend.kube, SETTINGS)
    await elsewhere.submit(plan(single_doc("after"), ns))
    await elsewhere.close()
    for _ in range(200):
        if len(await backend.list(ns)) == 2:
            break
        await asyncio.sleep(0.05)
    assert sorted(j["jobId"] for j in await backend.list(ns)) == ["after", "before"]
