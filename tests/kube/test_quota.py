"""ResourceQuota as the platform relies on it: admission refuses a pod past the quota of an extended
resource (a whole GPU or a MIG slice) with 403 Forbidden naming the quota, quotas are per resource,
a CPU quota requires pods to declare requests, and pods that finished stop counting once the quota
controller has seen them finish."""

import asyncio

import pytest

from tests.kube.client import Failure

pytestmark = pytest.mark.kube

GPU_NODE = {"name": "gpu-node", "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "10", "nvidia.com/gpu": "4"}}


def gpu_pod(name, gpus=1, resource="nvidia.com/gpu"):
    return {"metadata": {"name": name}, "spec": {"restartPolicy": "Never", "containers": [{
        "name": "c", "image": "cuda", "resources": {"limits": {resource: str(gpus)}}}]}}


async def quota(k, name, hard: dict) -> dict:
    """Create a quota and wait until the quota controller has filled its status (until then the
    admission plugin cannot count against it)."""
    await k.call("CoreV1Api", "create_namespaced_resource_quota", k.ns, {"metadata": {"name": name},
                                                                         "spec": {"hard": hard}})
    return await quota_status(k, name, lambda s: s.get("hard") == hard)


async def quota_status(k, name, pred, timeout=30) -> dict:
    status = None
    for _ in range(int(timeout / 0.05)):
        status = (await k.call("CoreV1Api", "read_namespaced_resource_quota", name, k.ns)).get("status") or {}
        if pred(status):
            return status
        await asyncio.sleep(0.05)
    raise AssertionError(f"quota {name} never reached the state; last status: {status}")


async def test_gpu_quota_refuses_the_pod_past_the_limit(k):
    await quota(k, "gpus", {"requests.nvidia.com/gpu": "2"})
    await k.call("CoreV1Api", "create_namespaced_pod", k.ns, gpu_pod("a"))
    await k.call("CoreV1Api", "create_namespaced_pod", k.ns, gpu_pod("b"))
    with pytest.raises(Failure) as e:
        await k.call("CoreV1Api", "create_namespaced_pod", k.ns, gpu_pod("c"))
    assert e.value.status == 403 and e.value.reason == "Forbidden"
    assert "exceeded quota: gpus" in e.value.message and "requests.nvidia.com/gpu=1" in e.value.message
    q = await k.call("CoreV1Api", "read_namespaced_resource_quota", "gpus", k.ns)
    assert q["status"]["used"]["requests.nvidia.com/gpu"] == "2"


async def test_mig_slice_quota_is_per_resource(k):
    await quota(k, "mig", {"requests.nvidia.com/mig-1g.5gb": "1"})
    await k.call("CoreV1Api", "create_namespaced_pod", k.ns, gpu_pod("s1", 1, "nvidia.com/mig-1g.5gb"))
    await k.call("CoreV1Api", "create_namespaced_pod", k.ns, gpu_pod("full", 1, "nvidia.com/gpu"))
    with pytest.raises(Failure) as e:
        await k.call("CoreV1Api", "create_namespaced_pod", k.ns, gpu_pod("s2", 1, "nvidia.com/mig-1g.5gb"))
    assert e.value.status == 403 and "requests.nvidia.com/mig-1g.5gb" in e.value.message


async def test_cpu_quota_requires_pods_to_say_what_they_use(k):
    await quota(k, "compute", {"requests.cpu": "1", "pods": "5"})
    with pytest.raises(Failure) as e:
        await k.call("CoreV1Api", "create_namespaced_pod", k.ns, {
            "metadata": {"name": "x"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    assert e.value.status == 403 and "failed quota" in e.value.message and "requests.cpu" in e.value.message


async def test_finished_pods_do_not_count(k, kube_cluster):
    kubelet = kube_cluster.kubelet(auto_run=True, nodes=[GPU_NODE])
    await quota(k, "gpus", {"requests.nvidia.com/gpu": "1"})
    await k.call("CoreV1Api", "create_namespaced_pod", k.ns, gpu_pod("a"))
    with pytest.raises(Failure) as e:
        await k.call("CoreV1Api", "create_namespaced_pod", k.ns, gpu_pod("b"))
    assert e.value.status == 403
    for _ in range(600):
        if (await k.call("CoreV1Api", "read_namespaced_pod", "a", k.ns))["status"].get("phase") == "Running":
            break
        await asyncio.sleep(0.05)
    await asyncio.to_thread(kubelet.finish, k.ns, "a", 0)
    # the quota controller recounts when the pod's phase changes: a Succeeded pod uses nothing
    await quota_status(k, "gpus", lambda s: (s.get("used") or {}).get("requests.nvidia.com/gpu") == "0")
    await k.call("CoreV1Api", "create_namespaced_pod", k.ns, gpu_pod("b"))
