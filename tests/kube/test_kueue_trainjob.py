"""Kubeflow Trainer v2 TrainJobs queue like every other workload (issue 31.5): the real Trainer v2
and JobSet (`trainer_v2`, started first, so that Kueue finds the TrainJob API when it starts) and
the real Kueue v0.17.0 with the platform's configuration (its ``trainer.kubeflow.org/trainjob``
integration), the jobs API with ``training_api: auto`` acting as a member's ServiceAccount in a
project the hub made under Kueue (limit: 3 A100s, no borrowing).

A one-replica job holding one A100 runs as a TrainJob. A PyTorch job of a master and two workers,
one A100 each, is then a 3-node TrainJob that does not fit beside it: it reads QUEUED with its Workload's
words and not one pod of it is made, though the node has four A100s. When the holder ends, Kueue
admits it whole: its three pods are made together and it runs to SUCCEEDED. One Workload per
TrainJob: the Jobs its JobSet makes are not queued again."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hub_ext.manifests.tenancy import TenancySettings
from tests.kube.job_env import SETTINGS
from tests.kube.kueue_env import (KUEUE, USER, gpu_node, message_check, one_a100_doc, poll, queued_project, situation,
                                  state_check)
from tests.kube.test_kueue_jobs import ddp_doc

pytestmark = pytest.mark.kube
JOBSET = "jobset.sigs.k8s.io/jobset-name"


@pytest.fixture
async def project(platform_runtime, kueue, kube, kube_cluster, tmp_path):
    if kueue is None:
        pytest.skip("needs the built control plane's Kueue")
    async with queued_project(kube, kube_cluster, tmp_path, "tq", {"a100": 3}, TenancySettings(queue_borrowing_limit=0),
                              kube_settings=replace(SETTINGS, training_api="auto")) as made:
        yield made


def pods_of(kube_cluster, ns: str, name: str) -> list[dict]:
    return kube_cluster.items("", "v1", "pods", ns, labelSelector=f"{JOBSET}={name}")


async def test_a_trainjob_that_does_not_fit_waits_whole_and_runs_whole_when_admitted(project, kueue, kube,
                                                                                       kube_cluster):
    ns, jobs = project

    async def poll_(check, what: str, timeout: float = 90):
        return await poll(check, what, timeout, lambda: situation(kube, kueue, kube_cluster, ns))

    kubelet = kube_cluster.kubelet(nodes=[gpu_node(4)])  # status mode: a bound pod runs until `finish`
    await jobs.create(USER, ns, one_a100_doc("holder"))
    await poll_(state_check(jobs, ns, "holder", "RUNNING"), "the holder TrainJob running")
    assert [t["metadata"]["name"] for t in kube_cluster.items("trainer.kubeflow.org", "v1alpha1", "trainjobs", ns)] \
        == ["holder"]
    (holder_pod,) = pods_of(kube_cluster, ns, "holder")

    await jobs.create(USER, ns, ddp_doc("ddp"))
    await poll_(message_check(jobs, ns, "ddp", "quota of a100 is in use (1 more needed)"),
                "the 3-node TrainJob waiting with words")
    assert (await jobs.get(USER, ns, "ddp"))["state"] == "QUEUED"
    assert not pods_of(kube_cluster, ns, "ddp")

    kubelet.finish(ns, holder_pod["metadata"]["name"])
    await poll_(state_check(jobs, ns, "holder", "SUCCEEDED"), "the holder succeeded")
    await poll_(state_check(jobs, ns, "ddp", "RUNNING"), "the 3-node TrainJob admitted and running")
    running = pods_of(kube_cluster, ns, "ddp")
    assert len(running) == 3 and all(p["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
                                     for p in running)
    assert "statusMessage" not in await jobs.get(USER, ns, "ddp")
    for pod in running:
        kubelet.finish(ns, pod["metadata"]["name"])
    await poll_(state_check(jobs, ns, "ddp", "SUCCEEDED"), "the 3-node TrainJob succeeded")
    owners = sorted({w["metadata"]["ownerReferences"][0]["kind"]
                     for w in (await kube.get(f"/apis/{KUEUE}/v1beta2/namespaces/{ns}/workloads"))["items"]})
    assert owners == ["TrainJob"], owners  # one Workload per TrainJob, none for its JobSet's Jobs
