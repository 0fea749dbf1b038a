"""ResourceQuota enforced on pod create for extended resources (403 exceeded quota)."""

import asyncio

import pytest

from tests.kube.client import Failure

pytestmark = pytest.mark.kube


def gpu_pod(name, gpus=1, resource="nvidia.com/gpu"):
    return {"metadata": {"name": name}, "spec": {"restartPolicy": "Never", "containers": [{
        "name": "c", "image": "cuda", "resources": {"limits": {resource: str(gpus)}}}]}}


async def test_gpu_quota_refuses_the_pod_past_the_limit(k):
    await k.call("CoreV1Api", "create_namespaced_resource_quota", k.ns, {
        "metadata": {"name": "gpus"}, "spec": {"hard": {"requests.nvidia.com/gpu": "2"}}})
    await asyncio.sleep(0.5 if k.target.real else 0)
    await k.call("CoreV1Api", "create_namespaced_pod", k.ns, gpu_pod("a"))
    await k.call("CoreV1Api", "create_namespaced_pod", k.ns, gpu_pod("b"))
    with pytest.raises(Failure) as e:
        await k.call("CoreV1Api", "create_namespaced_pod", k.ns, gpu_pod("c"))
    assert e.value.status == 403 and e.value.reason == "Forbidden"
    assert "exceeded quota: gpus" in e.value.message and "requests.nvidia.com/gpu=1" in e.value.message
    q = await k.call("CoreV1Api", "read_namespaced_resource_quota", "gpus", k.ns)
    assert q["status"]["used"]["requests.nvidia.com/gpu"] == "2"


async def test_mig_slice_quota_is_per_resource(k):
    await k.call("CoreV1Api", "create_namespaced_resource_quota", k.ns, {
        "metadata": {"name": "mig"}, "spec": {"hard": {"requests.nvidia.com/mig-1g.5gb": "1"}}})
    await asyncio.sleep(0.5 if k.target.real else 0)
    await k.call("CoreV1Api", "create_namespaced_pod", k.ns, gpu_pod("s1", 1, "nvidia.com/mig-1g.5gb"))
    await k.call("CoreV1Api", "create_namespaced_pod", k.ns, gpu_pod("full", 1, "nvidia.com/gpu"))
    with pytest.raises(Failure) as e:
        await k.call("CoreV1Api", "create_namespaced_pod", k.ns, gpu_pod("s2", 1, "nvidia.com/mig-1g.5gb"))
    assert e.value.status == 403 and "requests.nvidia.com/mig-1g.5gb" in e.value.message


async def test_cpu_quota_requires_pods_to_say_what_they_use(k):
    await k.call("CoreV1Api", "create_namespaced_resource_quota", k.ns, {
        "metadata": {"name": "compute"}, "spec": {"hard": {"requests.cpu": "1", "pods": "5"}}})
    await asyncio.sleep(0.5 if k.target.real else 0)
    with pytest.raises(Failure) as e:
        await k.call("CoreV1Api", "create_namespaced_pod", k.ns, {
            "metadata": {"name": "x"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    assert e.value.status == 403 and "failed quota" in e.value.message and "requests.cpu" in e.value.message


@pytest.mark.standin_only
async def test_finished_pods_do_not_count(k, standin):
    kubelet = standin.kubelet(auto_run=True, nodes=[{"name": "gpu-node", "allocatable": {
        "cpu": "8", "memory": "32Gi", "pods": "10", "nvidia.com/gpu": "4"}}])
    await k.call("CoreV1Api", "create_namespaced_resource_quota", k.ns, {
        "metadata": {"name": "gpus"}, "spec": {"hard": {"requests.nvidia.com/gpu": "1"}}})
    await k.call("CoreV1Api", "create_namespaced_pod", k.ns, gpu_pod("a"))
    await asyncio.sleep(0.2)
    kubelet.finish(k.ns, "a", exit_code=0)
    await k.call("CoreV1Api", "create_namespaced_pod", k.ns, gpu_pod("b"))
