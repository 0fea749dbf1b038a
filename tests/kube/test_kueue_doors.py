"""Per-type counts held by the cluster whatever door a workload comes through, under the real Kueue
v0.17.0: one project allowed one A100 and one H100 — both ``nvidia.com/gpu`` — on a node with two
A100s and a node with one H100 (a ResourceQuota on ``nvidia.com/gpu`` alone would let it run two A100
jobs; `hub_ext.manifests.queues` makes a flavor per type).

The project is made as the hub makes it (`tests.kube.kueue_env.queued_project`: its own cohort, no
borrowing), and every door acts as its member's own ServiceAccount: the notebook server's REST API
(a real ``jupyter server`` on the Kubernetes backend, `KubeNotebookServer`), ``kubectl ai-platform``,
and a plain batch Job created with the member's token (what ``kubectl`` in the notebook's terminal
does). An A100 job through REST runs; a second A100 job through the CLI waits (``QUEUED``, the A100
quota in use) though the A100 node has a free GPU; the member's own Job asking for an A100 is held
too (suspended by Kueue, no pod); an H100 job through the CLI runs at once on the H100 node. When
the first job ends, the CLI's A100 job runs, and the plain Job still waits (it came later).
"""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
import yaml

from hub_ext.core.catalog import parse_accelerators
from hub_ext.manifests.tenancy import TenancySettings, member_binding_name
from server_ext.client.notebook import Client
from tests.cluster.rest import Rest
from tests.kube.job_env import pods
from tests.kube.kueue_env import (A100, KUEUE, USER, message_check, poll, queued_project, situation,
                                  state_check)
from tests.kube.test_project_role import cli  # the plugin as the member, in a notebook terminal's environment
from tests.kube.test_widget_watches import KubeNotebookServer

pytestmark = pytest.mark.kube

H100 = "NVIDIA-H100-80GB-HBM3"
CATALOG = parse_accelerators({"a100": {"type": "gpu", "product": A100}, "h100": {"type": "gpu", "product": H100}})
JOB_NAME = "batch.kubernetes.io/job-name"


def gpu_node(name: str, product: str, gpus: int) -> dict:
    return {"name": name, "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": str(gpus)},
            "labels": {"nvidia.com/gpu.product": product},
            "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]}


def container_job(job_id: str, accelerator: str) -> dict:
    """One replica of a custom container with one GPU (a batch/v1 Job)."""
    return {"jobId": job_id, "trainingInput": {"scaleTier": "CUSTOM", "masterType": "n1-standard-4", "masterConfig": {
        "imageUri": "python:3.11-slim", "containerCommand": ["python", "train.py"],
        "acceleratorConfig": {"type": accelerator, "count": "1"}}}}


def plain_job(ns: str, runner: str) -> dict:
    """What a member writes for ``kubectl create -f``: a batch Job asking for one A100, no queue named."""
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "by-hand", "namespace": ns},
            "spec": {"backoffLimit": 0, "template": {"spec": {
                "restartPolicy": "Never", "serviceAccountName": runner,
                "nodeSelector": {"nvidia.com/gpu.product": A100},
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                "containers": [{"name": "train", "image": "python:3.11-slim", "command": ["python", "train.py"],
                                "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}}


def submit_argv(job_id: str, accelerator: str) -> list[str]:
    return ["jobs", "submit", "training", job_id, "--region", "us-central1", "--scale-tier", "custom",
            "--master-machine-type", "n1-standard-4", "--master-image-uri", "python:3.11-slim",
            "--master-accelerator", f"type={accelerator},count=1", "--", "--epochs=1"]


@pytest.fixture
async def project(request, kueue, kube, kube_cluster, tmp_path):
    """(name, the jobs service as its member) of a project with the limits and catalogue the test's
    ``entitled`` mark names, in a cohort of its own, borrowing nothing."""
    if kueue is None:
        pytest.skip("needs the built control plane's Kueue")
    limits, catalog = request.node.get_closest_marker("entitled").args
    settings = TenancySettings(queue_cohort=f"types-{uuid.uuid4().hex[:6]}", queue_borrowing_limit=0)
    async with queued_project(kube, kube_cluster, tmp_path, "types", limits, settings, accelerators=catalog) as made:
        yield made


@pytest.mark.entitled({"a100": 1, "h100": 1}, CATALOG)
async def test_one_a100_and_one_h100_are_held_per_type_through_rest_cli_and_kubectl(
        project, kueue, kube, kube_cluster, tmp_path):
    ns, jobs = project
    kubeconfig = tmp_path / f"{ns}.kubeconfig"  # the member's ServiceAccount (queued_project made it)

    async def poll_(check, what: str, timeout: float = 90):
        return await poll(check, what, timeout, lambda: situation(kube, kueue, kube_cluster, ns))

    kubelet = kube_cluster.kubelet(nodes=[gpu_node("dgx-a100", A100, 2), gpu_node("dgx-h100", H100, 1)])
    server = KubeNotebookServer(tmp_path / "server", str(kubeconfig), ns)
    await asyncio.to_thread(server.start)
    member = Rest(kubeconfig)
    try:
        # the REST API: one A100 job runs
        client = Client(server.url, server.token, project=ns)
        await asyncio.to_thread(client.submit, container_job("a100_rest", "NVIDIA_TESLA_A100"))
        await poll_(state_check(jobs, ns, "a100_rest", "RUNNING"), "the REST API's A100 job running")

        # the CLI: a second A100 waits, though the A100 node has a GPU free
        code, out, err = await cli(kubeconfig, ns, *submit_argv("a100_cli", "nvidia-tesla-a100"))
        assert code == 0 and yaml.safe_load(out)["state"] == "QUEUED", (out, err)
        waiting = await poll_(message_check(jobs, ns, "a100_cli", "is in use (1 more needed)"),
                              "the CLI's A100 job waiting for the project's A100")
        code, out, err = await cli(kubeconfig, ns, "jobs", "describe", "a100_cli", "--format", "json")
        described = json.loads(out)
        assert (described["state"], described["statusMessage"]) == ("QUEUED", waiting["statusMessage"]), err
        assert "a100" in described["statusMessage"], described

        # kubectl with the member's token: a plain Job asking for an A100, no queue named, is held too
        await member.post(f"/apis/batch/v1/namespaces/{ns}/jobs", plain_job(ns, member_binding_name(USER)))

        # the CLI: an H100 job runs at once, on the H100 node
        code, out, err = await cli(kubeconfig, ns, *submit_argv("h100_cli", "nvidia-tesla-h100"))
        assert code == 0, err
        await poll_(state_check(jobs, ns, "h100_cli", "RUNNING"), "the CLI's H100 job running")
        (h100_pod,) = pods(kube_cluster, ns, **{JOB_NAME: "h100-cli"})
        assert h100_pod["spec"]["nodeName"] == "dgx-h100"

        async def by_hand_held():
            job = await kube.get(f"/apis/batch/v1/namespaces/{ns}/jobs/by-hand")
            return job if job["spec"].get("suspend") and not pods(kube_cluster, ns, **{JOB_NAME: "by-hand"}) else None

        held = await poll_(by_hand_held, "the member's own A100 Job held by Kueue, no pod")
        assert held["metadata"]["labels"][f"{KUEUE}/queue-name"] == "default"  # queued all the same
        assert (await jobs.get(USER, ns, "a100_cli"))["state"] == "QUEUED"
        assert not pods(kube_cluster, ns, **{JOB_NAME: "a100-cli"})

        # the first A100 job ends: the CLI's runs (first in line); the one by hand still waits
        (first,) = pods(kube_cluster, ns, **{JOB_NAME: "a100-rest"})
        kubelet.finish(ns, first["metadata"]["name"])
        await poll_(state_check(jobs, ns, "a100_rest", "SUCCEEDED"), "the REST API's job succeeded")
        await poll_(state_check(jobs, ns, "a100_cli", "RUNNING"), "the CLI's A100 job running")
        assert (await kube.get(f"/apis/batch/v1/namespaces/{ns}/jobs/by-hand"))["spec"]["suspend"] is True
    finally:
        await member.close()
        await asyncio.to_thread(server.stop)


SINGLE = parse_accelerators({"a100": {"type": "gpu", "product": A100},
                             "3g.20gb": {"type": "mig", "profile": "3g.20gb", "strategy": "single", "product": A100}})


@pytest.mark.entitled({"a100": 1, "3g.20gb": 1}, SINGLE)
async def test_a_mig_slice_of_the_single_strategy_is_its_own_type_on_the_cluster(
        project, kueue, kube, kube_cluster, tmp_path):
    """The single strategy's slice is ``nvidia.com/gpu`` on ``<product>-MIG-<profile>`` nodes, like a
    whole A100 on its own nodes: a slice job lands on the MIG node and a second waits though that
    node has another slice, while a whole-A100 job runs on the A100 node."""
    ns, jobs = project
    kubeconfig = tmp_path / f"{ns}.kubeconfig"

    async def poll_(check, what: str, timeout: float = 90):
        return await poll(check, what, timeout, lambda: situation(kube, kueue, kube_cluster, ns))

    kube_cluster.kubelet(nodes=[gpu_node("dgx-mig-single", f"{A100}-MIG-3g.20gb", 2), gpu_node("dgx-a100", A100, 1)])
    for job_id in ("slice_1", "slice_2"):
        code, out, err = await cli(kubeconfig, ns, *submit_argv(job_id, "nvidia-a100-3g-20gb"))
        assert code == 0, err
        if job_id == "slice_1":
            await poll_(state_check(jobs, ns, job_id, "RUNNING"), "the first slice job running")
    (slice_pod,) = pods(kube_cluster, ns, **{JOB_NAME: "slice-1"})
    assert slice_pod["spec"]["nodeName"] == "dgx-mig-single"
    assert slice_pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    job = await poll_(message_check(jobs, ns, "slice_2", "is in use (1 more needed)"),
                      "the second slice job waiting for the project's slice")
    assert job["state"] == "QUEUED" and "3g.20gb" in job["statusMessage"], job
    code, out, err = await cli(kubeconfig, ns, *submit_argv("whole", "nvidia-tesla-a100"))
    assert code == 0, err
    await poll_(state_check(jobs, ns, "whole", "RUNNING"), "the whole-A100 job running")
    (whole_pod,) = pods(kube_cluster, ns, **{JOB_NAME: "whole"})
    assert whole_pod["spec"]["nodeName"] == "dgx-a100"
    assert not pods(kube_cluster, ns, **{JOB_NAME: "slice-2"})
