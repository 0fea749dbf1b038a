"""The real Kubeflow Training Operator v1.9.4 (built by `make controllers`, run once per session by
the `training_operator` fixture) running the platform's PyTorchJobs and TFJobs of the example
trainer on the process kubelet. The replicas find each other as in a cluster: through the operator's
headless Services, their EndpointSlices and the cluster DNS (CoreDNS, `tests/cluster/network.py`),
and meet over TCP (the trainer's `--rendezvous`), workers of a PyTorchJob after the operator's own
`init-pytorch` init container has looked the master up. State and logs are read back through the
jobs service; cancel removes pods and Services; the operator's webhook refuses an invalid job."""

from __future__ import annotations

import asyncio
import re

import pytest

from hub_ext.core.errors import UserInputError
from hub_ext.kube.client import Forbidden
from server_ext.jobs.kube.kubeflow import job_manifest, resource_path
from server_ext.runtimes.kube import job_create
from tests.kube.job_env import NODES, SETTINGS, plan, pods, pytorch_doc, state, until
from tests.kube.test_job_packages import TRAINER, USER, service, shipped

pytestmark = pytest.mark.kube
JOB_LABEL = "training.kubeflow.org/job-name"
RENDEZVOUS = "--rendezvous=90"
IP = r"\d+\.\d+\.\d+\.\d+"


@pytest.fixture
def network(kube_cluster):
    if not kube_cluster.network.dns:
        pytest.skip("the test cluster has no pod network/DNS here (`ip addr add` refused, or not root): "
                    "replicas cannot resolve each other")
    return kube_cluster.network


def pytorch_body(job_id: str, workers: int = 2, *args: str) -> dict:
    return {"jobId": job_id, "trainingInput": {
        "pythonModule": "trainer.task", "runtimeVersion": "pytorch-2.5", "scaleTier": "CUSTOM",
        "masterType": "n1-standard-4", "workerType": "n1-standard-4", "workerCount": workers,
        "args": ["--epochs=2", "--sleep=0", RENDEZVOUS, *args]}}


def tf_body(job_id: str) -> dict:
    return {"jobId": job_id, "trainingInput": {
        "pythonModule": "trainer.task", "runtimeVersion": "2.11", "scaleTier": "CUSTOM",
        "masterType": "n1-standard-4", "workerType": "n1-standard-4", "workerCount": 2,
        "parameterServerType": "n1-standard-4", "parameterServerCount": 1,
        "args": ["--epochs=2", "--sleep=0", RENDEZVOUS]}}


def ips(kube_cluster, ns: str, job: str) -> dict[str, str]:
    """pod name → pod IP of the job's replicas."""
    return {p["metadata"]["name"]: p["status"].get("podIP") for p in pods(kube_cluster, ns, **{JOB_LABEL: job})}


async def logs(backend, ns: str, job_id: str, task: str) -> list[str]:
    return [line.text async for line in backend.logs(ns, job_id, task)]


async def first_pod(kube_cluster, ns: str, suffix: str) -> dict:
    """The first pod of `ns` whose name ends with `suffix`, as soon as it exists."""
    while True:
        found = [p for p in kube_cluster.items("", "v1", "pods", ns) if p["metadata"]["name"].endswith(suffix)]
        if found:
            return found[0]
        await asyncio.sleep(0.1)


async def following(backend, ns: str, job_id: str, task: str) -> list[str]:
    """A task's log followed until its container ends (or its pod goes): what was streamed."""
    return [line.text async for line in backend.logs(ns, job_id, task, follow=True)]


async def test_a_pytorchjob_of_three_meets_at_master_addr_and_succeeds(backend, network, kube_cluster, kube_target):
    ns = kube_target.namespace
    jobs = service(backend, ns)
    await jobs.create(USER, ns, shipped(pytorch_body("ddp"), TRAINER))
    # the workers' logs followed from the start: the job succeeds with its master, and the operator
    # (cleanPodPolicy Running) deletes a worker still running then, and its log with it (seen in CI)
    followed = {i: asyncio.ensure_future(following(backend, ns, "ddp", f"worker-replica-{i}")) for i in (0, 1)}
    worker_pod = asyncio.ensure_future(first_pod(kube_cluster, ns, "-worker-0"))  # read before it may go
    kube_cluster.kubelet(mode="process", nodes=NODES)
    job = await state(backend, ns, "ddp", "SUCCEEDED", timeout=120)
    name = job_name(kube_cluster, ns)
    addresses = ips(kube_cluster, ns, name)
    master_ip = addresses[f"{name}-master-0"]
    assert master_ip.startswith(network.prefix)
    master = await logs(backend, ns, "ddp", "master-replica-0")
    assert f"rendezvous: rank 0 listening on {name}-master-0={master_ip}:23456 for 2 replicas" in master, master
    # (the peers' source address is the pod network's first address, not their pod IP: pods share the
    # host's network namespace, where the kernel picks that source for 10.244.B.x; a debt)
    assert any(re.fullmatch(rf"rendezvous: met rank 1 from {IP}, rank 2 from {IP}", t) for t in master), master
    assert master[-1].startswith("done: rmse="), master
    for i in (0, 1):
        worker = await asyncio.wait_for(followed[i], 60)
        assert f"rendezvous: rank {i + 1} met the primary at {name}-master-0={master_ip}:23456 (ok 3)" in worker, worker
    # the operator's init container (released template: `nslookup <master>` until it answers) ran
    pod = await asyncio.wait_for(worker_pod, 10)
    assert pod["metadata"]["name"] == f"{name}-worker-0"
    assert "init-pytorch" in [c["name"] for c in pod["spec"]["initContainers"]]
    services = {s["metadata"]["name"]: s["spec"] for s in kube_cluster.items("", "v1", "services", ns)}
    assert services[f"{name}-master-0"]["clusterIP"] == "None"  # headless: DNS answers the pod IP


def job_name(kube_cluster, ns: str) -> str:
    (obj,) = kube_cluster.items("kubeflow.org", "v1", "pytorchjobs", ns) or kube_cluster.items(
        "kubeflow.org", "v1", "tfjobs", ns)
    return obj["metadata"]["name"]


async def test_a_tfjob_chief_workers_and_ps_meet_at_the_chief_of_tf_config(backend, network, kube_cluster,
                                                                            kube_target):
    ns = kube_target.namespace
    jobs = service(backend, ns)
    await jobs.create(USER, ns, shipped(tf_body("tfd"), TRAINER))
    # followed from the start, as in the PyTorchJob test: the job succeeds with its chief, and a worker
    # still running then is deleted with its log (cleanPodPolicy Running; seen under load)
    followed = {t: asyncio.ensure_future(following(backend, ns, "tfd", t))
                for t in ("worker-replica-0", "worker-replica-1")}
    kube_cluster.kubelet(mode="process", nodes=NODES)
    await state(backend, ns, "tfd", "SUCCEEDED", timeout=120)
    name = job_name(kube_cluster, ns)
    addresses = ips(kube_cluster, ns, name)
    chief = await logs(backend, ns, "tfd", "master-replica-0")
    host = f"{name}-chief-0.{ns}.svc"
    chief_ip = addresses[f"{name}-chief-0"]
    assert f"rendezvous: chief 0 listening on {host}={chief_ip}:2222 for 3 replicas" in chief, chief
    assert any(re.fullmatch(rf"rendezvous: met ps 0 from {IP}, worker 0 from {IP}, worker 1 from {IP}", t)
               for t in chief), chief
    for task, who in (("worker-replica-0", "worker 0"), ("worker-replica-1", "worker 1")):  # (ps-0: deleted at the end)
        lines = await asyncio.wait_for(followed[task], 60)
        assert f"rendezvous: {who} met the primary at {host}={chief_ip}:2222 (ok 4)" in lines, lines


async def test_cancel_of_a_running_pytorchjob_removes_its_pods_and_services(backend, network, kube_cluster,
                                                                            kube_target):
    ns = kube_target.namespace
    jobs = service(backend, ns)
    await jobs.create(USER, ns, shipped(pytorch_body("long", 1, "--epochs=600", "--sleep=0.5"), TRAINER))
    kube_cluster.kubelet(mode="process", nodes=NODES)
    await state(backend, ns, "long", "RUNNING", timeout=60)
    name = job_name(kube_cluster, ns)
    await until(lambda: len(kube_cluster.items("", "v1", "services", ns)) == 2, what="the operator's Services")
    assert (await backend.cancel(ns, "long"))["state"] == "CANCELLING"
    await state(backend, ns, "long", "CANCELLED", timeout=30)
    await until(lambda: not pods(kube_cluster, ns, **{JOB_LABEL: name}), what="no pods of the job")
    await until(lambda: not kube_cluster.items("", "v1", "services", ns), what="no Services of the job")


async def test_an_invalid_pytorchjob_is_refused_by_the_operators_webhook(backend, kube, kube_cluster, kube_target):
    """Two masters (a plan never makes that; the manifest is edited): the operator's validating webhook,
    not the CRD schema, refuses it, and the platform's client says which webhook, field and why."""
    ns = kube_target.namespace
    manifest = job_manifest(plan(pytorch_doc("twomasters"), ns), SETTINGS)
    manifest["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = 2
    with pytest.raises(Forbidden) as e:  # a validating webhook's denial is a 403
        await kube.request("POST", resource_path("PyTorchJob", ns), manifest)
    text = str(e.value)
    assert 'admission webhook "validator.pytorchjob.training-operator.kubeflow.org" denied the request' in text, text
    assert re.search(r"spec\.pytorchReplicaSpecs\[Master\]\.replicas: Forbidden: must be 1", text), text
    assert kube_cluster.items("kubeflow.org", "v1", "pytorchjobs", ns) == []
    # through the jobs backend: the refusal named as the cluster's admission control, not the project's RBAC
    with pytest.raises(UserInputError) as refused:
        await job_create.create(backend.kube, resource_path("PyTorchJob", ns), manifest, ns, "twomasters")
    assert refused.value.field == "trainingInput" and refused.value.status == 403
    assert refused.value.message.startswith("the cluster's admission control refused this job (Kubernetes answered 403 "
                                            'Forbidden: admission webhook "validator.pytorchjob.training-operator.'
                                            'kubeflow.org" denied the request: spec.pytorchReplicaSpecs[Master]'), \
        refused.value.message
