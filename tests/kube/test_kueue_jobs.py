"""ml.v1 jobs under the real Kueue v0.17.0 (`kueue` fixture, helm-values/kueue.yaml's configuration)
and the real Kubeflow Training Operator v1.9.4, through the platform's own jobs API (`JobService`
on `KubeBackend`, what the REST API, the CLI and the widgets call) acting as a team member's own
ServiceAccount. The project is provisioned as the hub provisions it where it finds Kueue
(`tests.kube.kueue_env.queued_project`, with the hub's own identity): a ResourceFlavor `mlp-a100`,
the ClusterQueue `mlp-<project>` with the project's limit of 2 A100s as nominal quota and no
borrowing, the LocalQueue `default`.

A member holds one A100 with a 1-GPU job. A PyTorchJob of a master and two workers, 1 A100 each,
then does not fit: it reads QUEUED with a ``statusMessage`` from its Workload, in words ("... more
a100 than the project may ever hold at once"), and not one pod of it is made. An administrator raises
the quota to 3: two A100s are now free, still not the three it needs whole, so still no pod, and
the words say so ("... quota of a100 is in use (1 more needed)"). The job object names the queue
itself (the backend's label: Kueue's defaulting of queue-less jobs misses a LocalQueue its manager
has not seen yet, here one made moments after Kueue started). Once the holder finishes, Kueue
admits the job whole: its three pods are made together, it runs to SUCCEEDED, the words gone. The
test kubelet's GPU node has four A100s: it is Kueue's quota, not the scheduler, that holds the job."""

from __future__ import annotations

import asyncio

import pytest

from hub_ext.manifests.tenancy import TenancySettings
from tests.kube.job_env import MODULE, pods
from tests.kube.kueue_env import (A100, KUEUE, ONE_A100, USER, gpu_node, message_check, one_a100_doc, poll,
                                  queued_project, situation, state_check)

pytestmark = pytest.mark.kube

JOB_LABEL = "training.kubeflow.org/job-name"


def ddp_doc(job_id: str) -> dict:
    """A PyTorchJob: master and two workers, one A100 each."""
    return {"jobId": job_id, "trainingInput": {
        **MODULE, "scaleTier": "CUSTOM", "runtimeVersion": "pytorch-2.5", "masterType": "n1-standard-4",
        "workerType": "n1-standard-4", "workerCount": 2, "masterConfig": ONE_A100, "workerConfig": ONE_A100}}


@pytest.fixture
async def project(training_operator, kueue, kube, kube_cluster, _operator_log, tmp_path):
    """A team project made as the hub makes it under Kueue (limit: 2 A100s, no borrowing), with the
    member `USER`; yields (project name, the jobs service acting as the member's ServiceAccount)."""
    if kueue is None:
        pytest.skip("needs the built control plane's Kueue")
    async with queued_project(kube, kube_cluster, tmp_path, "kq", {"a100": 2},
                              TenancySettings(queue_borrowing_limit=0)) as made:
        yield made


def pods_of(kube_cluster, ns: str, job_name: str) -> list[str]:
    return sorted(p["metadata"]["name"] for p in pods(kube_cluster, ns, **{JOB_LABEL: job_name}))


async def test_a_pytorchjob_that_does_not_fit_waits_whole_with_words_and_runs_whole_when_admitted(
        project, kueue, kube, kube_cluster):
    ns, jobs = project

    async def poll_(check, what: str, timeout: float = 90):
        return await poll(check, what, timeout, lambda: situation(kube, kueue, kube_cluster, ns))

    kubelet = kube_cluster.kubelet(nodes=[gpu_node(4)])  # status mode: a bound pod runs until `finish`
    cq_path = f"/apis/{KUEUE}/v1beta2/clusterqueues/mlp-{ns}-servers"  # the project's share is the servers' queue's
    cq = await kube.get(cq_path)
    (group,) = cq["spec"]["resourceGroups"]
    assert group["flavors"] == [{"name": "mlp-a100", "resources": [
        {"name": "nvidia.com/gpu", "nominalQuota": "2", "borrowingLimit": "0"}]}]
    jobs_queue = await kube.get(f"/apis/{KUEUE}/v1beta2/clusterqueues/mlp-{ns}")  # jobs run on what it lends
    assert jobs_queue["spec"]["resourceGroups"][0]["flavors"] == [{"name": "mlp-a100", "resources": [
        {"name": "nvidia.com/gpu", "nominalQuota": "0"}]}]
    local = await kube.get(f"/apis/{KUEUE}/v1beta2/namespaces/{ns}/localqueues/default")
    assert local["spec"]["clusterQueue"] == f"mlp-{ns}"

    # the member's 1-GPU job is admitted and runs: one of the project's two A100s is in use
    await jobs.create(USER, ns, one_a100_doc("holder"))
    await poll_(state_check(jobs, ns, "holder", "RUNNING"), "the holder job running")
    (holder_pod,) = pods(kube_cluster, ns, **{"batch.kubernetes.io/job-name": "holder"})

    # three A100s asked, two the most the project may hold: queued whole, in words, no pod
    await jobs.create(USER, ns, ddp_doc("ddp"))

    job = await poll_(message_check(jobs, ns, "ddp", "than the project may ever hold at once"),
                      "ddp's statusMessage")
    print(f"\nddp (3 x 1 A100, quota 2, 1 in use): {job['state']}: {job['statusMessage']}")
    assert job["state"] == "QUEUED"
    assert job["statusMessage"] == (f"queued: first in line in the project {ns!r} for the job's accelerators; "
                                    "it asks more a100 than the project may ever hold at once"), job
    stored = await kube.get(f"/apis/kubeflow.org/v1/namespaces/{ns}/pytorchjobs/ddp")
    assert stored["spec"]["runPolicy"]["suspend"] is True  # Kueue's webhook suspended it at creation
    # the backend names the project's queue itself (Kueue's own defaulting misses a LocalQueue it has
    # not seen yet, and such a job would never be admitted)
    assert stored["metadata"]["labels"][f"{KUEUE}/queue-name"] == "default"
    assert pods_of(kube_cluster, ns, "ddp") == []
    # one Workload for the whole job, owned by the PyTorchJob (what `queued.queue_messages` reads)
    (wl,) = [w for w in (await kube.list(f"/apis/{KUEUE}/v1beta2/namespaces/{ns}/workloads"))["items"]
             if any(o["kind"] == "PyTorchJob" and o["name"] == "ddp" for o in w["metadata"]["ownerReferences"])]
    assert sum(s["count"] for s in wl["spec"]["podSets"]) == 3, wl["spec"]["podSets"]
    listed = {j["jobId"]: j for j in (await jobs.list(USER, ns))["jobs"]}
    assert listed["ddp"]["statusMessage"] == job["statusMessage"] and "statusMessage" not in listed["holder"]

    # an administrator raises the quota to 3: two A100s free, the job needs three at once: still no pod
    cq = await kube.get(cq_path)
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "3"
    await kube.replace(cq)
    job = await poll_(message_check(jobs, ns, "ddp", "is in use (1 more needed)"),
                      "ddp's statusMessage after the raise")
    print(f"ddp (quota 3, 1 in use): {job['state']}: {job['statusMessage']}")
    assert job["state"] == "QUEUED"
    assert job["statusMessage"] == (f"queued: first in line in the project {ns!r} for the job's accelerators; "
                                    "the project's quota of a100 is in use (1 more needed)"), job
    await asyncio.sleep(1)  # Kueue, the operator and the scheduler have had the time: all or nothing
    assert pods_of(kube_cluster, ns, "ddp") == []
    assert (await jobs.get(USER, ns, "ddp"))["state"] == "QUEUED"

    # the holder ends: the job is admitted whole, its three pods made, and it runs to the end
    kubelet.finish(ns, holder_pod["metadata"]["name"])
    await poll_(state_check(jobs, ns, "holder", "SUCCEEDED"), "the holder job succeeded")
    async def three_pods():
        names = pods_of(kube_cluster, ns, "ddp")
        return names if len(names) == 3 else None

    names = await poll_(three_pods, "ddp's three pods")
    assert names == ["ddp-master-0", "ddp-worker-0", "ddp-worker-1"], names
    job = await poll_(state_check(jobs, ns, "ddp", "RUNNING"), "ddp running")
    assert "statusMessage" not in job, job
    for p in pods(kube_cluster, ns, **{JOB_LABEL: "ddp"}):  # on the flavor's nodes (Kueue's nodeSelector)
        assert p["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": A100} and p["spec"]["nodeName"] == "dgx-a100"
    for name in ("ddp-worker-0", "ddp-worker-1", "ddp-master-0"):
        kubelet.finish(ns, name)
    job = await poll_(state_check(jobs, ns, "ddp", "SUCCEEDED"), "ddp succeeded")
    assert "statusMessage" not in job, job
    print(f"ddp admitted whole and ran: {job['state']}")
