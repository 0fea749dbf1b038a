"""Real Kueue v0.17.0 (`kueue` fixture, `tests/controllers/kueue_system.py`, the platform's
configuration of `helm-values/kueue.yaml`) queueing GPU work on the test cluster's nodes:
ResourceFlavors `a100` and `h100` (by the NVIDIA product label the GPU nodes carry), a ClusterQueue
with a nominal quota of one `nvidia.com/gpu` per flavor, and a LocalQueue in a namespace labelled as
the platform labels its projects (Kueue manages pods only there).

- A plain pod with the queue label is created with Kueue's scheduling gate, gets a Workload, is
  admitted on the first flavor with room, and only then loses the gate, with the flavor's node
  labels as its nodeSelector (and the flavor's toleration): the scheduler then binds it.
- A second pod that needs the same flavor stays gated, its Workload saying why, until the first
  pod finishes.
- A batch Job of three 1-GPU pods does not fit the queue as a whole and stays suspended with no
  pod at all, though two GPUs of quota are free: all or nothing.
The nodes have four GPUs each, so it is Kueue's quota, not the scheduler, that holds the pods."""

from __future__ import annotations

import asyncio
import time

import pytest

from hub_ext.core.credentials import MANAGED_BY
from tests.kube.platform_env import NODES, NVIDIA_TAINT

pytestmark = pytest.mark.kube

KUEUE = "kueue.x-k8s.io"
QUEUE_LABEL = f"{KUEUE}/queue-name"
GATE = f"{KUEUE}/admission"
PRODUCT = "nvidia.com/gpu.product"
A100, H100 = "NVIDIA-A100-SXM4-40GB", "NVIDIA-H100-80GB-HBM3"
GPU_NODES = [{**n, "allocatable": {**n["allocatable"], "nvidia.com/gpu": "4"}} if n["name"] == "dgx-full" else n
             for n in NODES] + [
    {"name": "dgx-h100", "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "4"},
     "labels": {PRODUCT: H100}, "taints": NVIDIA_TAINT}]
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
CLUSTER_QUEUE, LOCAL_QUEUE = "gpu", "team-gpu"
RUNNER = "mlplatform-runner"  # the project pods' ServiceAccount (helm-values/project-policies.yaml)


def flavor(name: str, product: str) -> dict:
    return {"apiVersion": f"{KUEUE}/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": name},
            "spec": {"nodeLabels": {PRODUCT: product}, "tolerations": [GPU_TOLERATION]}}


CLUSTER_QUEUE_BODY = {
    "apiVersion": f"{KUEUE}/v1beta2", "kind": "ClusterQueue", "metadata": {"name": CLUSTER_QUEUE},
    "spec": {"namespaceSelector": {}, "resourceGroups": [{
        "coveredResources": ["nvidia.com/gpu"],
        "flavors": [{"name": f, "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 1}]}
                    for f in ("a100", "h100")]}]}}


def gpu_pod(name: str, node_selector: dict | None = None) -> dict:
    spec = {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0, "serviceAccountName": RUNNER,
            "containers": [{"name": "main", "image": "python:3.11", "command": ["sleep", "600"],
                            "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}
    if node_selector:
        spec["nodeSelector"] = node_selector
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {QUEUE_LABEL: LOCAL_QUEUE}},
            "spec": spec}


@pytest.fixture
def queue(kueue, kube_cluster, kube_target):
    """The flavors, the ClusterQueue and a LocalQueue in the test's namespace (labelled as a
    project's), the GPU nodes; all removed afterwards while Kueue still runs (its finalizers)."""
    if kueue is None:
        pytest.skip("needs the built control plane's Kueue")
    ns, c = kube_target.namespace, kube_cluster
    # a project as the platform's admission policies see it too (installed once any test needs them):
    # its pods run as the runner and may use any accelerator
    c.patch("", "v1", "namespaces", None, ns, {"metadata": {"labels": dict(MANAGED_BY),
                                                            "annotations": {"mlplatform.io/accelerators": "all"}}})
    c.create("", "v1", "serviceaccounts", ns, {"metadata": {"name": RUNNER}})
    c.create(KUEUE, "v1beta2", "resourceflavors", None, flavor("a100", A100))
    c.create(KUEUE, "v1beta2", "resourceflavors", None, flavor("h100", H100))
    c.create(KUEUE, "v1beta2", "clusterqueues", None, CLUSTER_QUEUE_BODY)
    c.create(KUEUE, "v1beta2", "localqueues", ns, {
        "apiVersion": f"{KUEUE}/v1beta2", "kind": "LocalQueue", "metadata": {"name": LOCAL_QUEUE},
        "spec": {"clusterQueue": CLUSTER_QUEUE}})
    kubelet = c.kubelet(nodes=GPU_NODES)  # status mode: a bound pod runs until `finish`
    try:
        yield kubelet
    finally:
        c.run(c.rest.request("DELETE", f"/apis/batch/v1/namespaces/{ns}/jobs",
                             params={"propagationPolicy": "Background"}))
        c.run(c.rest.request("DELETE", f"/api/v1/namespaces/{ns}/pods", params={"gracePeriodSeconds": "0"}))
        # the Workloads too: the garbage collector would take them (their owners are gone) only once it
        # has discovered the new CRDs, up to 30 s; until then the ClusterQueue stays in use
        c.run(c.rest.request("DELETE", f"/apis/{KUEUE}/v1beta2/namespaces/{ns}/workloads"))
        c.delete(KUEUE, "v1beta2", "localqueues", ns, LOCAL_QUEUE)
        c.delete(KUEUE, "v1beta2", "clusterqueues", None, CLUSTER_QUEUE)
        for name in ("a100", "h100"):
            c.delete(KUEUE, "v1beta2", "resourceflavors", None, name)
        for name in ("a100", "h100"):  # gone once Kueue sees nothing uses them any more
            _wait_sync(lambda: c.get(KUEUE, "v1beta2", "resourceflavors", None, name) is None, 30)


def _wait_sync(check, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not check():
        time.sleep(0.1)


async def until(kueue, check, what: str, timeout: float = 30):
    """Poll `check` until it answers something true; on timeout fail with Kueue's recent log."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        result = check()
        if result:
            return result
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out ({timeout} s) waiting for {what}\n--- kueue-manager log:\n"
                         f"{kueue.process.tail(6000)}")


def workload_of(c, ns: str, uid: str) -> dict | None:
    return next((w for w in c.items(KUEUE, "v1beta2", "workloads", ns)
                 if any(o["uid"] == uid for o in w["metadata"].get("ownerReferences") or [])), None)


def condition(obj: dict | None, kind: str) -> dict:
    return next((c for c in ((obj or {}).get("status") or {}).get("conditions") or [] if c["type"] == kind), {})


def pod(c, ns: str, name: str) -> dict:
    return c.get("", "v1", "pods", ns, name)


def admitted(c, ns: str, uid: str) -> dict | None:
    wl = workload_of(c, ns, uid)
    return wl if condition(wl, "Admitted").get("status") == "True" else None


def pending_message(c, ns: str, uid: str) -> str | None:
    """The message of the Workload's QuotaReserved=False condition (why it waits), once it has one."""
    cond = condition(workload_of(c, ns, uid), "QuotaReserved")
    return cond.get("message") if cond.get("status") == "False" and cond.get("message") else None


async def test_gpu_pods_wait_behind_kueues_gate_until_the_flavor_has_quota(kueue, queue, kube_cluster, kube_target):
    c, ns = kube_cluster, kube_target.namespace
    # (a) created gated, a Workload, admitted on the first flavor with room, then ungated and bound
    first = c.create("", "v1", "pods", ns, gpu_pod("first"))
    assert {"name": GATE} in first["spec"].get("schedulingGates", []), first["spec"]
    assert first["metadata"]["labels"].get(f"{KUEUE}/managed") == "true"
    wl = await until(kueue, lambda: admitted(c, ns, first["metadata"]["uid"]), "the first pod's Workload admitted")
    assert wl["status"]["admission"]["clusterQueue"] == CLUSTER_QUEUE
    assert wl["status"]["admission"]["podSetAssignments"][0]["flavors"] == {"nvidia.com/gpu": "a100"}
    p = await until(kueue, lambda: (lambda p: p if not p["spec"].get("schedulingGates") and p["spec"].get("nodeName")
                                    else None)(pod(c, ns, "first")), "the first pod ungated and bound")
    assert p["spec"]["nodeSelector"] == {PRODUCT: A100}
    assert GPU_TOLERATION in p["spec"]["tolerations"]
    assert p["spec"]["nodeName"] == "dgx-full"
    print(f"\nfirst pod: Workload {wl['metadata']['name']} admitted to flavor a100, "
          f"nodeSelector {p['spec']['nodeSelector']}, bound to {p['spec']['nodeName']}")

    # (b) one more A100 pod: the a100 quota is used, h100 does not match its nodeSelector
    second = c.create("", "v1", "pods", ns, gpu_pod("second", {PRODUCT: A100}))
    uid = second["metadata"]["uid"]
    message = await until(kueue, lambda: pending_message(c, ns, uid), "the second pod's Workload to say why it waits")
    print(f"second pod waits: {message}")
    assert "nvidia.com/gpu" in message and "a100" in message, message
    await asyncio.sleep(1)  # Kueue has looked at it: still gated, not bound
    p = pod(c, ns, "second")
    assert {"name": GATE} in p["spec"].get("schedulingGates", []) and not p["spec"].get("nodeName"), p["spec"]
    assert condition(workload_of(c, ns, uid), "Admitted").get("status") != "True"

    queue.finish(ns, "first")  # Succeeded: its Workload finishes and gives the quota back
    wl = await until(kueue, lambda: admitted(c, ns, uid), "the second pod admitted once the first finished")
    assert wl["status"]["admission"]["podSetAssignments"][0]["flavors"] == {"nvidia.com/gpu": "a100"}
    await until(kueue, lambda: pod(c, ns, "second")["spec"].get("nodeName") == "dgx-full",
                "the second pod bound to the A100 node")
    finished = workload_of(c, ns, first["metadata"]["uid"])
    assert condition(finished, "Finished").get("status") == "True", finished.get("status")


async def test_a_job_that_does_not_fit_whole_stays_suspended_without_any_pod(kueue, queue, kube_cluster,
                                                                             kube_target):
    c, ns = kube_cluster, kube_target.namespace
    job = c.create("batch", "v1", "jobs", ns, {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "three-gpus", "labels": {QUEUE_LABEL: LOCAL_QUEUE}},
        "spec": {"parallelism": 3, "completions": 3, "backoffLimit": 0, "template": {"spec": {
            "restartPolicy": "Never", "serviceAccountName": RUNNER,
            "containers": [{"name": "main", "image": "python:3.11", "command": ["sleep", "600"],
                            "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}})
    assert job["spec"]["suspend"] is True  # Kueue's webhook suspends it at creation
    uid = job["metadata"]["uid"]
    message = await until(kueue, lambda: pending_message(c, ns, uid), "the Job's Workload to say why it waits")
    print(f"\nJob of 3 x 1 GPU waits (2 GPUs of quota free, 1 per flavor): {message}")
    assert "nvidia.com/gpu" in message, message
    wl = workload_of(c, ns, uid)
    assert wl["spec"]["podSets"][0]["count"] == 3
    await asyncio.sleep(2)  # the Job controller and Kueue have had time: still nothing runs
    assert c.get("batch", "v1", "jobs", ns, "three-gpus")["spec"]["suspend"] is True
    assert c.items("", "v1", "pods", ns, labelSelector="batch.kubernetes.io/job-name=three-gpus") == []
    assert condition(workload_of(c, ns, uid), "QuotaReserved").get("status") == "False"
