"""PATCH by Content-Type (merge, JSON, strategic merge; what each client sends for which body) and
status-subresource isolation, through both real clients against the API server."""

import pytest

from tests.kube.client import Failure

pytestmark = pytest.mark.kube

MERGE = "application/merge-patch+json"
JSONP = "application/json-patch+json"
SMP = "application/strategic-merge-patch+json"


def pod(name="p", containers=None):
    return {"metadata": {"name": name, "labels": {"a": "1"}},
            "spec": {"containers": containers or [{"name": "main", "image": "busybox:1",
                                                   "env": [{"name": "A", "value": "1"}]}]}}


async def test_merge_patch_replaces_lists_and_deletes_with_null(k):
    await k.call("CoreV1Api", "create_namespaced_config_map", k.ns,
                 {"metadata": {"name": "c", "labels": {"a": "1", "b": "2"}}, "data": {"x": "1", "y": "2"}})
    out = await k.call("CoreV1Api", "patch_namespaced_config_map", "c", k.ns,
                       {"metadata": {"labels": {"b": None, "c": "3"}}, "data": {"x": "9"}}, _content_type=MERGE)
    assert out["metadata"]["labels"] == {"a": "1", "c": "3"} and out["data"] == {"x": "9", "y": "2"}


async def test_json_patch_operations(k):
    await k.call("CoreV1Api", "create_namespaced_config_map", k.ns, {"metadata": {"name": "c"}, "data": {"x": "1"}})
    ops = [{"op": "add", "path": "/data/y", "value": "2"}, {"op": "replace", "path": "/data/x", "value": "3"}]
    out = await k.call("CoreV1Api", "patch_namespaced_config_map", "c", k.ns, ops, _content_type=JSONP)
    assert out["data"] == {"x": "3", "y": "2"}
    with pytest.raises(Failure) as e:  # a failing test op
        await k.call("CoreV1Api", "patch_namespaced_config_map", "c", k.ns,
                     [{"op": "test", "path": "/data/x", "value": "nope"}], _content_type=JSONP)
    assert e.value.status == 422


async def test_strategic_merge_merges_containers_and_env_by_name(k):
    """Lists of containers and env are merged by `name` (a pod's spec is immutable: a Deployment's
    template is not)."""
    deployment = {"metadata": {"name": "d"}, "spec": {
        "replicas": 0, "selector": {"matchLabels": {"a": "1"}},
        "template": {"metadata": {"labels": {"a": "1"}}, "spec": pod()["spec"]}}}
    await k.call("AppsV1Api", "create_namespaced_deployment", k.ns, deployment)
    body = {"spec": {"template": {"spec": {"containers": [{"name": "main", "env": [{"name": "B", "value": "2"}]}]}}}}
    out = await k.call("AppsV1Api", "patch_namespaced_deployment", "d", k.ns, body, _content_type=SMP)
    (c,) = out["spec"]["template"]["spec"]["containers"]
    assert c["image"] == "busybox:1" and {e["name"]: e["value"] for e in c["env"]} == {"A": "1", "B": "2"}


async def test_strategic_merge_on_a_pod_changes_one_container_by_name(k):
    await k.call("CoreV1Api", "create_namespaced_pod", k.ns, pod(containers=[
        {"name": "main", "image": "busybox:1"}, {"name": "side", "image": "busybox:1"}]))
    out = await k.call("CoreV1Api", "patch_namespaced_pod", "p", k.ns,
                       {"spec": {"containers": [{"name": "side", "image": "busybox:2"}]}}, _content_type=SMP)
    assert [(c["name"], c["image"]) for c in out["spec"]["containers"]] == [("main", "busybox:1"),
                                                                            ("side", "busybox:2")]
    with pytest.raises(Failure) as e:  # anything but images (and a few fields) of a pod is immutable
        await k.call("CoreV1Api", "patch_namespaced_pod", "p", k.ns,
                     {"spec": {"containers": [{"name": "main", "env": [{"name": "B", "value": "2"}]}]}},
                     _content_type=SMP)
    assert e.value.status == 422 and e.value.reason == "Invalid"


async def test_mismatched_patch_body_is_refused(k):
    await k.call("CoreV1Api", "create_namespaced_config_map", k.ns, {"metadata": {"name": "c"}, "data": {"x": "1"}})
    with pytest.raises(Failure) as e:  # both clients send a list body as it is
        await k.call("CoreV1Api", "patch_namespaced_config_map", "c", k.ns,
                     [{"op": "add", "path": "/data/y", "value": "2"}], _content_type=MERGE)
    assert e.value.status in (400, 422)
    if k.is_async:
        with pytest.raises(Failure) as e:  # kubernetes_asyncio sends an object body as json-patch: refused
            await k.call("CoreV1Api", "patch_namespaced_config_map", "c", k.ns, {"data": {"x": "2"}},
                         _content_type=JSONP)
        assert e.value.status in (400, 422)
    else:  # the sync client rewrites json-patch with an object body to strategic merge
        out = await k.call("CoreV1Api", "patch_namespaced_config_map", "c", k.ns, {"data": {"x": "2"}},
                           _content_type=JSONP)
        assert out["data"] == {"x": "2"}


async def test_object_body_as_json_patch_on_a_custom_object_is_refused(k):
    """The pitfall in the notes: a dict body for a custom object's status with the default content type."""
    args = ("kubeflow.org", "v1beta1", k.ns, "trials")
    await k.call("CustomObjectsApi", "create_namespaced_custom_object", *args,
                 {"apiVersion": "kubeflow.org/v1beta1", "kind": "Trial", "metadata": {"name": "t"}, "spec": {}})
    with pytest.raises(Failure) as e:
        await k.call("CustomObjectsApi", "patch_namespaced_custom_object_status", *args, "t",
                     {"status": {"x": 1}}, _content_type=JSONP)
    # async: json-patch with an object (422); sync: rewritten to strategic merge, which CRs refuse (415)
    assert e.value.status in ((400, 422) if k.is_async else (415,))


async def test_strategic_merge_is_unsupported_on_custom_resources(k):
    exp = {"apiVersion": "kubeflow.org/v1beta1", "kind": "Experiment", "metadata": {"name": "e"},
           "spec": {"maxTrialCount": 3}}
    await k.call("CustomObjectsApi", "create_namespaced_custom_object", "kubeflow.org", "v1beta1", k.ns,
                 "experiments", exp)
    with pytest.raises(Failure) as e:
        await k.call("CustomObjectsApi", "patch_namespaced_custom_object", "kubeflow.org", "v1beta1", k.ns,
                     "experiments", "e", {"spec": {"maxTrialCount": 4}}, _content_type=SMP)
    assert e.value.status == 415


async def test_status_subresource_isolation(k):
    body = {"metadata": {"name": "j"}, "spec": {"template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}},
            "status": {"succeeded": 5}}
    job = await k.call("BatchV1Api", "create_namespaced_job", k.ns, body)
    assert not (job.get("status") or {}).get("succeeded")  # status on create is ignored
    job = await k.call("BatchV1Api", "patch_namespaced_job_status", "j", k.ns,
                       {"status": {"active": 1}, "spec": {"parallelism": 7}}, _content_type=MERGE)
    assert job["status"]["active"] == 1 and job["spec"]["parallelism"] == 1  # status write leaves spec alone
    job = await k.call("BatchV1Api", "patch_namespaced_job", "j", k.ns,
                       {"status": {"active": 9}, "metadata": {"labels": {"x": "y"}}}, _content_type=MERGE)
    assert job["status"]["active"] == 1 and job["metadata"]["labels"]["x"] == "y"  # main write leaves status


async def test_custom_object_status_subresource(k):
    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "pt"},
           "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": {
               "containers": [{"name": "pytorch", "image": "pytorch"}]}}}}}}
    args = ("kubeflow.org", "v1", k.ns, "pytorchjobs")
    await k.call("CustomObjectsApi", "create_namespaced_custom_object", *args, job)
    cond = {"conditions": [{"type": "Running", "status": "True"}]}
    out = await k.call("CustomObjectsApi", "patch_namespaced_custom_object_status", *args, "pt",
                       {"status": cond}, _content_type=MERGE)
    assert out["status"]["conditions"][0]["type"] == "Running"
    out = await k.call("CustomObjectsApi", "patch_namespaced_custom_object", *args, "pt",
                       {"status": {"conditions": []}}, _content_type=MERGE)
    assert out["status"]["conditions"][0]["type"] == "Running"
