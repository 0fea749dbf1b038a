"""Borrowing and reclaiming between projects under the real Kueue v0.17.0, through the platform's
jobs API as each project's member (`tests.kube.kueue_env`).

Two team projects made by the hub in one cohort of their own, each allowed one A100 (its servers'
queue's nominal quota 1, lent to its jobs' queue; borrowing whatever is idle), on a node with two
A100s. The borrower runs two 1-A100 jobs: one on its own share, one on the lender's idle A100 (its
jobs' ClusterQueue uses two). Then the
lender submits a 1-A100 job: Kueue reclaims (``reclaimWithinCohort: Any``) by evicting the
borrower's job that borrowed. That job is not lost and not reported FAILED: it goes back to QUEUED,
its statusMessage saying it was preempted and what it waits for, and no pod of it remains; the
lender's job runs. When the lender's job ends, the evicted job is admitted again and runs to
SUCCEEDED; every state either borrower job showed on the way is in order."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from hub_ext.manifests.queue_text import owned_by, waiting
from hub_ext.manifests.queues import QUEUE_LABEL, SERVERS_QUEUE
from hub_ext.manifests.tenancy import TenancySettings, member_binding_name
from tests.kube.job_env import pods
from tests.kube.kueue_env import (A100, KUEUE, USER, gpu_node, message_check, one_a100_doc, poll, queued_project,
                                  situation, state_check)

pytestmark = pytest.mark.kube

JOB_NAME = "batch.kubernetes.io/job-name"
ORDER = ["QUEUED", "PREPARING", "RUNNING", "SUCCEEDED"]


@pytest.fixture
async def projects(training_operator, kueue, kube, kube_cluster, _operator_log, tmp_path):
    """(lender, borrower): each (name, jobs service); one A100 each, in a cohort of their own (no
    other test's idle queues to borrow from)."""
    if kueue is None:
        pytest.skip("needs the built control plane's Kueue")
    settings = TenancySettings(queue_cohort=f"reclaim-{uuid.uuid4().hex[:6]}")
    async with queued_project(kube, kube_cluster, tmp_path, "lend", {"a100": 1}, settings) as lender:
        async with queued_project(kube, kube_cluster, tmp_path, "borrow", {"a100": 1}, settings) as borrower:
            yield lender, borrower


def jobs_queue_using(kube, project: str, total: int):
    """An async check: the project's jobs' ClusterQueue uses `total` A100s (all of them lent: its
    nominal quota is 0; Kueue writes the usage after it admits, not with it)."""
    async def check():
        cq = await kube.get(f"/apis/{KUEUE}/v1beta2/clusterqueues/mlp-{project}")
        (usage,) = cq.get("status", {}).get("flavorsUsage", [{}])[0].get("resources", [{}])
        return usage.get("total") == str(total) or None
    return check


class StateLog:
    """Every state each watched job showed, polled in the background until `stop`."""

    def __init__(self, jobs, ns: str, job_ids: list[str]):
        self.jobs, self.ns, self.seen, self.running = jobs, ns, {j: [] for j in job_ids}, True
        self.task = asyncio.ensure_future(self._run())

    async def _run(self):
        while True:
            stopping = not self.running
            for job_id, states in self.seen.items():
                state = (await self.jobs.get(USER, self.ns, job_id))["state"]
                if not states or states[-1] != state:
                    states.append(state)
            if stopping:
                return
            await asyncio.sleep(0.1)

    async def stop(self):
        """Stop polling after one more look."""
        self.running = False
        await asyncio.wait_for(self.task, 30)


async def test_a_lender_reclaims_its_a100_and_the_borrowers_job_is_requeued_then_completes(
        projects, kueue, kube, kube_cluster):
    (lender, lend_jobs), (borrower, borrow_jobs) = projects

    async def poll_(check, what: str, timeout: float = 90):
        return await poll(check, what, timeout, lambda: situation(kube, kueue, kube_cluster, lender, borrower))

    kubelet = kube_cluster.kubelet(nodes=[gpu_node(2)])  # status mode: a bound pod runs until `finish`
    for job_id in ("own", "extra"):
        await borrow_jobs.create(USER, borrower, one_a100_doc(job_id))
        await poll_(state_check(borrow_jobs, borrower, job_id, "RUNNING"), f"the borrower's {job_id!r} running")
    log = StateLog(borrow_jobs, borrower, ["own", "extra"])

    await poll_(jobs_queue_using(kube, borrower, 2), "the borrower's jobs' ClusterQueue using 2 A100s (1 the lender's)")

    # the lender wants its A100 back: one of the borrower's jobs is evicted and waits again
    await lend_jobs.create(USER, lender, one_a100_doc("mine"))

    async def evicted():
        for job_id in ("own", "extra"):
            job = await borrow_jobs.get(USER, borrower, job_id)
            if job["state"] == "QUEUED" and job.get("statusMessage"):
                return job
        return None

    job = await poll_(evicted, "a borrower's job back in the queue")
    print(f"\nevicted: {job['jobId']}: {job['state']}: {job['statusMessage']}")
    said = ("preempted: another project took back the accelerators it had lent; queued: first in line in the "
            f"project {borrower!r} for the job's accelerators; ")
    # then why it waits, in words that follow Kueue's passes (right after the eviction, "Kueue looks for
    # room for it again"; then e.g. "the project's quota of a100 is in use (1 more needed)"), never its UIDs
    assert job["statusMessage"].startswith(said) and "UID" not in job["statusMessage"], job
    other = "own" if job["jobId"] == "extra" else "extra"
    await poll_(state_check(lend_jobs, lender, "mine", "RUNNING"), "the lender's job running")

    async def no_pod_left():
        return not pods(kube_cluster, borrower, **{JOB_NAME: job["jobId"]}) or None

    await poll_(no_pod_left, "the evicted job's pod gone")
    assert (await borrow_jobs.get(USER, borrower, other))["state"] == "RUNNING"

    # the lender's job ends: the evicted job runs again, and both of the borrower's jobs complete
    (mine,) = pods(kube_cluster, lender, **{JOB_NAME: "mine"})
    kubelet.finish(lender, mine["metadata"]["name"])
    await poll_(state_check(lend_jobs, lender, "mine", "SUCCEEDED"), "the lender's job succeeded")
    await poll_(state_check(borrow_jobs, borrower, job["jobId"], "RUNNING"), "the evicted job running again")
    for job_id in ("own", "extra"):
        (p,) = [p for p in pods(kube_cluster, borrower, **{JOB_NAME: job_id}) if not p["metadata"].get(
            "deletionTimestamp")]
        kubelet.finish(borrower, p["metadata"]["name"])
        done = await poll_(state_check(borrow_jobs, borrower, job_id, "SUCCEEDED"), f"{job_id!r} succeeded")
        assert "statusMessage" not in done, done
    await log.stop()
    print("states seen:", log.seen)
    assert "FAILED" not in log.seen[job["jobId"]] and log.seen[job["jobId"]][-1] == "SUCCEEDED"
    assert "QUEUED" in log.seen[job["jobId"]], log.seen
    assert log.seen[other] == ["RUNNING", "SUCCEEDED"], log.seen


def server_pod(ns: str, name: str) -> dict:
    """A notebook server's pod as Kueue sees what the spawner makes: the servers' queue, one A100."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": {QUEUE_LABEL: SERVERS_QUEUE}},
            "spec": {"serviceAccountName": member_binding_name(USER),  # the member's own, as a team server's
                     "containers": [{"name": "notebook", "image": "quay.io/jupyter/base-notebook",
                                     "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
                     "nodeSelector": {"nvidia.com/gpu.product": A100},
                     "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}}


async def server_workload(kube, ns: str, pod: str) -> dict | None:
    return owned_by((await kube.list(f"/apis/{KUEUE}/v1beta2/namespaces/{ns}/workloads"))["items"], "Pod", pod)


async def test_a_server_runs_on_its_projects_share_only_and_is_never_preempted(projects, kueue, kube, kube_cluster):
    """Servers never borrow: a second server of the borrower waits although the lender's A100 is
    idle, while a job of the borrower's takes it. When the lender takes its A100 back, the borrower's
    job is preempted and requeued; its server runs on, and the waiting server still waits."""
    (lender, lend_jobs), (borrower, borrow_jobs) = projects

    async def poll_(check, what: str, timeout: float = 90):
        return await poll(check, what, timeout, lambda: situation(kube, kueue, kube_cluster, lender, borrower))

    def admitted(pod: str):
        async def check():
            wl = await server_workload(kube, borrower, pod)
            return wl if wl is not None and not waiting(wl) else None
        return check

    def waits(pod: str, words: str):
        async def check():
            wl = await server_workload(kube, borrower, pod)
            reason = next((c.get("message", "") for c in (wl or {}).get("status", {}).get("conditions", [])
                           if c["type"] == "QuotaReserved"), "")
            return wl if wl is not None and waiting(wl) and words in reason else None
        return check

    kube_cluster.kubelet(nodes=[gpu_node(2)])
    await kube.create(server_pod(borrower, "jupyter-first"))
    running = await poll_(admitted("jupyter-first"), "the borrower's first server admitted on its own A100")
    await kube.create(server_pod(borrower, "jupyter-second"))
    await poll_(waits("jupyter-second", "insufficient unused quota"),
                "the second server waiting: servers do not borrow the lender's idle A100")
    await borrow_jobs.create(USER, borrower, one_a100_doc("extra"))  # a job does borrow it
    await poll_(state_check(borrow_jobs, borrower, "extra", "RUNNING"), "the borrower's job running on the lent A100")

    await lend_jobs.create(USER, lender, one_a100_doc("mine"))  # the lender takes it back
    job = await poll_(message_check(borrow_jobs, borrower, "extra", "preempted: another project took back"),
                      "the borrower's job preempted and requeued")
    assert job["state"] == "QUEUED", job
    await poll_(state_check(lend_jobs, lender, "mine", "RUNNING"), "the lender's job running")
    now = await server_workload(kube, borrower, "jupyter-first")
    assert not waiting(now) and now["metadata"]["uid"] == running["metadata"]["uid"], now  # never evicted
    assert not [c for c in now["status"]["conditions"] if c["type"] in ("Evicted", "Preempted") and c["status"] == "True"]
    assert waiting(await server_workload(kube, borrower, "jupyter-second"))
