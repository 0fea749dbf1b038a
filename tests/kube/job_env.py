"""Shared set-up for the Kubernetes job backend tests: plan settings, job plans of each kind, and
small reads and waits on the test cluster (`tests.cluster.Cluster`, read as its tooling identity:
pods by label, states as the backend reads them, the fault proxy's request log)."""

from __future__ import annotations

import asyncio

from hub_ext.core.catalog import parse_accelerators
from hub_ext.manifests.mounts import MountSettings
from server_ext.jobs.kube.kubeflow import KubeSettings
from server_ext.jobs.machines import Machines
from server_ext.jobs.model import parse_job
from server_ext.jobs.plan import PlanSettings, Runtime, Runtimes, plan_job

CATALOG = parse_accelerators({"a100": {"type": "gpu", "product": "NVIDIA-A100-SXM4-40GB"}})
RUNTIMES = Runtimes({**Runtimes().table, "python-3.11": {"3.11": Runtime("python:3.11-slim")}})
PLAN_SETTINGS = PlanSettings(Machines(CATALOG), RUNTIMES)
# the v1 path (Training Operator, batch Jobs): its tests run as before where a module starts Trainer v2 too;
# Trainer's modules ask for ``auto`` themselves
SETTINGS = KubeSettings(MountSettings({"gcp-credential": "mlplatform.io/gcp-credential",
                                       "aws-credential": "mlplatform.io/aws-credential"}), training_api="v1")
NODES = [{"name": "cpu-1", "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110"}}]
MODULE = {"pythonModule": "trainer.task", "packageUris": ["gs://bucket/trainer-0.1.tar.gz"]}


def pytorch_doc(job_id: str, workers: int = 1) -> dict:
    return {"jobId": job_id, "labels": {"team": "vision"}, "trainingInput": {
        **MODULE, "scaleTier": "CUSTOM", "runtimeVersion": "pytorch-2.5", "masterType": "n1-standard-4",
        "workerType": "n1-standard-4", "workerCount": workers, "args": ["--epochs=1"]}}


def single_doc(job_id: str) -> dict:
    """One replica, no framework: a batch/v1 Job."""
    return {"jobId": job_id, "trainingInput": {**MODULE, "runtimeVersion": "python-3.11"}}


def tf_doc(job_id: str) -> dict:
    return {"jobId": job_id, "trainingInput": {
        "scaleTier": "CUSTOM", "masterType": "n1-standard-4", "workerType": "n1-standard-4", "workerCount": 2,
        "masterConfig": {"imageUri": "tensorflow/tensorflow:2.11.0", "containerCommand": ["python", "train.py"]},
        "workerConfig": {"imageUri": "tensorflow/tensorflow:2.11.0", "containerCommand": ["python", "train.py"]}}}


def plan(doc: dict, project: str, owner: str = "alice@example.com"):
    return plan_job(parse_job(doc), PLAN_SETTINGS, project=project, owner=owner)


def selector(labels: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in labels.items())


def pods(kube_cluster, ns: str, **labels) -> list[dict]:
    """The namespace's pods with these labels (those being deleted included)."""
    return kube_cluster.items("", "v1", "pods", ns, **({"labelSelector": selector(labels)} if labels else {}))


async def pod(kube_cluster, ns: str, timeout: float = 10, **labels) -> dict:
    """The one pod with these labels, once it exists."""
    for _ in range(int(timeout / 0.05)):
        found = pods(kube_cluster, ns, **labels)
        if found:
            assert len(found) == 1, [p["metadata"]["name"] for p in found]
            return found[0]
        await asyncio.sleep(0.05)
    raise AssertionError(f"no pod with {labels} in {ns}")


async def state(backend, project: str, job_id: str, want: str, seen: list | None = None, timeout: float = 10) -> dict:
    """Wait until the backend reads `want`; every state read on the way is appended to `seen`."""
    for _ in range(int(timeout / 0.02)):
        job = await backend.get(project, job_id)
        if seen is not None and (not seen or seen[-1] != job["state"]):
            seen.append(job["state"])
        if job["state"] == want:
            return job
        await asyncio.sleep(0.02)
    raise AssertionError(f"{job_id} never became {want} (last: {job['state']})")


def lists(kube_cluster, label_selector: str, since: int = 0) -> list[str]:
    """Paths of the LIST requests (not watches) made through the fault proxy with this label selector."""
    return [r.path for r in kube_cluster.requests()[since:]
            if r.method == "GET" and r.query.get("labelSelector") == label_selector and
            r.query.get("watch", "").lower() not in ("true", "1")]


async def until(check, timeout: float = 20, what: str = ""):
    """Poll the plain function `check` until it answers something true, and return that; fail
    naming `what` (or the function) after `timeout` seconds."""
    for _ in range(int(timeout / 0.05)):
        result = check()
        if result:
            return result
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what or check}")
