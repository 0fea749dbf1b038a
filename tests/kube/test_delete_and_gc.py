"""Finalizers, deletionTimestamp, ownerReference garbage collection (the real collector, so removal
is asynchronous: polled with a bounded wait), propagation policies, delete preconditions and
namespace deletion, through both real clients."""

import asyncio

import pytest

from tests.kube.client import Failure

pytestmark = pytest.mark.kube


async def _gone(k, api, method, *args, tries=100):
    for _ in range(tries):
        try:
            await k.call(api, method, *args)
        except Failure as e:
            if e.status == 404:
                return True
            raise
        await asyncio.sleep(0.1)
    return False


async def test_finalizer_holds_the_object_until_removed(k):
    await k.call("CoreV1Api", "create_namespaced_config_map", k.ns,
                 {"metadata": {"name": "f", "finalizers": ["example.com/hold"]}})
    out = await k.call("CoreV1Api", "delete_namespaced_config_map", "f", k.ns)
    held = await k.call("CoreV1Api", "read_namespaced_config_map", "f", k.ns)
    assert held["metadata"]["deletionTimestamp"]
    with pytest.raises(Failure) as e:  # no new finalizers while deleting
        await k.call("CoreV1Api", "patch_namespaced_config_map", "f", k.ns,
                     {"metadata": {"finalizers": ["example.com/hold", "example.com/more"]}},
                     _content_type="application/merge-patch+json")
    assert e.value.status == 422 and e.value.fields == ["metadata.finalizers"]
    await k.call("CoreV1Api", "patch_namespaced_config_map", "f", k.ns, {"metadata": {"finalizers": None}},
                 _content_type="application/merge-patch+json")
    assert await _gone(k, "CoreV1Api", "read_namespaced_config_map", "f", k.ns)
    assert out is not None


async def _owner_and_children(k):
    owner = await k.call("CoreV1Api", "create_namespaced_config_map", k.ns, {"metadata": {"name": "owner"}})
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}
    for name in ("child-1", "child-2"):
        await k.call("CoreV1Api", "create_namespaced_secret", k.ns,
                     {"metadata": {"name": name, "ownerReferences": [ref]}})
    return ref


async def test_owner_deletion_collects_dependents(k):
    await _owner_and_children(k)
    await k.call("CoreV1Api", "delete_namespaced_config_map", "owner", k.ns)
    for name in ("child-1", "child-2"):
        assert await _gone(k, "CoreV1Api", "read_namespaced_secret", name, k.ns)


async def test_orphan_propagation_keeps_dependents(k):
    await _owner_and_children(k)
    await k.call("CoreV1Api", "delete_namespaced_config_map", "owner", k.ns, propagation_policy="Orphan")
    assert await _gone(k, "CoreV1Api", "read_namespaced_config_map", "owner", k.ns)
    # the collector's orphan finalizer removes the references before the owner goes
    child = await k.call("CoreV1Api", "read_namespaced_secret", "child-1", k.ns)
    assert not child["metadata"].get("ownerReferences")


async def test_a_dependent_created_after_its_owner_went_is_collected(k):
    """A controller that makes a pod for a job deleted a moment before leaves a dangling owner
    reference: the collector deletes the object. A reference to a kind the cluster does not know is
    left alone."""
    owner = await k.call("CoreV1Api", "create_namespaced_config_map", k.ns, {"metadata": {"name": "gone"}})
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "gone", "uid": owner["metadata"]["uid"]}
    await k.call("CoreV1Api", "delete_namespaced_config_map", "gone", k.ns)
    assert await _gone(k, "CoreV1Api", "read_namespaced_config_map", "gone", k.ns)
    await k.call("CoreV1Api", "create_namespaced_secret", k.ns,
                 {"metadata": {"name": "late", "ownerReferences": [ref]}})
    assert await _gone(k, "CoreV1Api", "read_namespaced_secret", "late", k.ns)
    unknown = {"apiVersion": "example.com/v1", "kind": "Widget", "name": "w", "uid": "0000"}
    await k.call("CoreV1Api", "create_namespaced_secret", k.ns,
                 {"metadata": {"name": "kept", "ownerReferences": [unknown]}})
    await asyncio.sleep(0.3)
    assert (await k.call("CoreV1Api", "read_namespaced_secret", "kept", k.ns))["metadata"]["name"] == "kept"


async def test_dependent_with_another_live_owner_survives(k):
    ref = await _owner_and_children(k)
    other = await k.call("CoreV1Api", "create_namespaced_config_map", k.ns, {"metadata": {"name": "other"}})
    ref2 = {"apiVersion": "v1", "kind": "ConfigMap", "name": "other", "uid": other["metadata"]["uid"]}
    await k.call("CoreV1Api", "create_namespaced_secret", k.ns,
                 {"metadata": {"name": "shared", "ownerReferences": [ref, ref2]}})
    await k.call("CoreV1Api", "delete_namespaced_config_map", "owner", k.ns)
    assert await _gone(k, "CoreV1Api", "read_namespaced_secret", "child-1", k.ns)
    assert (await k.call("CoreV1Api", "read_namespaced_secret", "shared", k.ns))["metadata"]["name"] == "shared"


async def test_custom_object_owns_pods(k):
    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "pt"},
           "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": {
               "containers": [{"name": "pytorch", "image": "pytorch"}]}}}}}}
    args = ("kubeflow.org", "v1", k.ns, "pytorchjobs")
    owner = await k.call("CustomObjectsApi", "create_namespaced_custom_object", *args, job)
    ref = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "pt", "uid": owner["metadata"]["uid"],
           "controller": True, "blockOwnerDeletion": True}
    # not the operator's pod name (pt-master-0): the kube tier's real Training Operator, cluster-wide,
    # makes that one for this job too (and a cluster of yours may run one)
    await k.call("CoreV1Api", "create_namespaced_pod", k.ns, {
        "metadata": {"name": "pt-dependent", "ownerReferences": [ref]},
        "spec": {"containers": [{"name": "pytorch", "image": "pytorch"}]}})
    await k.call("CustomObjectsApi", "delete_namespaced_custom_object", *args, "pt")
    assert await _gone(k, "CoreV1Api", "read_namespaced_pod", "pt-dependent", k.ns, tries=300)


async def test_namespace_deletion_removes_its_contents(k):
    name = f"{k.ns}-x"
    await k.call("CoreV1Api", "create_namespace", {"metadata": {"name": name}})
    await k.call("CoreV1Api", "create_namespaced_config_map", name, {"metadata": {"name": "c"}})
    await k.call("CoreV1Api", "delete_namespace", name)
    ns = None
    try:
        ns = await k.call("CoreV1Api", "read_namespace", name)
    except Failure as e:
        assert e.status == 404
    if ns is not None:
        assert ns["status"]["phase"] == "Terminating"
        with pytest.raises(Failure) as e:
            await k.call("CoreV1Api", "create_namespaced_config_map", name, {"metadata": {"name": "late"}})
        assert e.value.status in (403, 404)
    assert await _gone(k, "CoreV1Api", "read_namespace", name, tries=600)


async def test_delete_precondition_on_uid(k):
    await k.call("CoreV1Api", "create_namespaced_config_map", k.ns, {"metadata": {"name": "p"}})
    with pytest.raises(Failure) as e:
        await k.call("CoreV1Api", "delete_namespaced_config_map", "p", k.ns,
                     body={"preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}})
    assert e.value.status == 409 and e.value.reason == "Conflict"
