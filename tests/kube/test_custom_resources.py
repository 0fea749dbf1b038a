"""Custom resources by group/version/plural as the API server serves the CRDs the platform uses:
schema validation (422 naming the field), pruning of unknown fields (with a Warning header),
strict field validation, preserve-unknown-fields kinds, discovery, and a CRD created through the
API — through both real clients."""

import asyncio

import pytest

from tests.kube.client import Failure

pytestmark = pytest.mark.kube


def pytorchjob(name="pt", replicas=1, **extra_spec):
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name},
            "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": replicas, "restartPolicy": "OnFailure",
                                                        "template": {"spec": {"containers": [
                                                            {"name": "pytorch", "image": "pytorch:2"}]}}}},
                     **extra_spec}}


async def test_pytorchjob_create_get_list(k):
    args = ("kubeflow.org", "v1", k.ns, "pytorchjobs")
    created = await k.call("CustomObjectsApi", "create_namespaced_custom_object", *args, pytorchjob())
    assert created["metadata"]["uid"] and created["kind"] == "PyTorchJob"
    got = await k.call("CustomObjectsApi", "get_namespaced_custom_object", *args, "pt")
    assert got["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] == 1
    lst = await k.call("CustomObjectsApi", "list_namespaced_custom_object", *args)
    assert [i["metadata"]["name"] for i in lst["items"]] == ["pt"]


async def test_schema_violation_is_422_naming_the_field(k):
    args = ("kubeflow.org", "v1", k.ns, "pytorchjobs")
    with pytest.raises(Failure) as e:
        await k.call("CustomObjectsApi", "create_namespaced_custom_object", *args, pytorchjob(replicas="two"))
    assert e.value.status == 422 and e.value.reason == "Invalid"
    assert "spec.pytorchReplicaSpecs.Master.replicas" in e.value.fields
    bad = pytorchjob()
    del bad["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["name"]
    with pytest.raises(Failure) as e:
        await k.call("CustomObjectsApi", "create_namespaced_custom_object", *args, bad)
    assert e.value.status == 422
    assert "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].name" in e.value.fields


async def test_tfjob_resource_quantity_pattern(k):
    job = {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": "tf"},
           "spec": {"tfReplicaSpecs": {"Worker": {"replicas": 1, "template": {"spec": {"containers": [
               {"name": "tensorflow", "image": "tf", "resources": {"limits": {"cpu": "lots"}}}]}}}}}}
    with pytest.raises(Failure) as e:
        await k.call("CustomObjectsApi", "create_namespaced_custom_object", "kubeflow.org", "v1", k.ns,
                     "tfjobs", job)
    assert e.value.status == 422
    assert e.value.fields == ["spec.tfReplicaSpecs.Worker.template.spec.containers[0].resources.limits.cpu"]
    job["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] = 2
    out = await k.call("CustomObjectsApi", "create_namespaced_custom_object", "kubeflow.org", "v1", k.ns,
                       "tfjobs", job)
    assert out["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] == 1


async def test_unknown_fields_are_pruned_with_a_warning(k):
    status, headers, obj = await k.raw("CustomObjectsApi", "create_namespaced_custom_object", "kubeflow.org", "v1",
                                       k.ns, "pytorchjobs", pytorchjob(bogus={"x": 1}))
    assert status == 201 and "bogus" not in obj["spec"]
    warning = headers.get("Warning") or headers.get("warning") or ""
    assert "spec.bogus" in warning


async def test_strict_field_validation_refuses_unknown_fields(k):
    with pytest.raises(Failure) as e:
        await k.call("CustomObjectsApi", "create_namespaced_custom_object", "kubeflow.org", "v1", k.ns,
                     "pytorchjobs", pytorchjob(bogus=1), field_validation="Strict")
    assert e.value.status == 400 and "spec.bogus" in e.value.message


async def test_katib_kinds_preserve_unknown_fields(k):
    exp = {"apiVersion": "kubeflow.org/v1beta1", "kind": "Experiment", "metadata": {"name": "e"},
           "spec": {"objective": {"type": "maximize", "objectiveMetricName": "acc"}, "algorithm": {
               "algorithmName": "random"}, "parameters": [{"name": "lr", "parameterType": "double",
                                                           "feasibleSpace": {"min": "0.01", "max": "0.1"}}]}}
    for plural, kind in (("experiments", "Experiment"), ("trials", "Trial"), ("suggestions", "Suggestion")):
        body = dict(exp, kind=kind)
        out = await k.call("CustomObjectsApi", "create_namespaced_custom_object", "kubeflow.org", "v1beta1", k.ns,
                           plural, body)
        assert out["spec"] == exp["spec"]


async def test_wrong_kind_in_body_is_invalid(k):
    body = pytorchjob()
    body["kind"] = "TFJob"
    with pytest.raises(Failure) as e:
        await k.call("CustomObjectsApi", "create_namespaced_custom_object", "kubeflow.org", "v1", k.ns,
                     "pytorchjobs", body)
    assert e.value.status == 422 and e.value.reason == "Invalid"
    assert e.value.fields == ["kind"]


async def test_unknown_resource_is_404(k):
    with pytest.raises(Failure) as e:
        await k.call("CustomObjectsApi", "list_namespaced_custom_object", "kubeflow.org", "v1", k.ns, "mxjobs")
    assert e.value.status == 404


async def test_discovery_lists_core_groups_and_crds(k):
    core = await k.call("CoreApi", "get_api_versions")
    assert "v1" in core["versions"]
    resources = await k.call("CoreV1Api", "get_api_resources")
    names = {r["name"] for r in resources["resources"]}
    assert {"pods", "pods/log", "pods/status", "nodes", "events", "secrets", "persistentvolumeclaims",
            "configmaps", "services", "namespaces", "serviceaccounts", "resourcequotas"} <= names
    groups = await k.call("ApisApi", "get_api_versions")
    by_name = {g["name"]: {v["version"] for v in g["versions"]} for g in groups["groups"]}
    assert {"v1", "v1beta1"} <= by_name["kubeflow.org"] and "v1" in by_name["batch"]
    batch = await k.call("BatchV1Api", "get_api_resources")
    assert "jobs" in {r["name"] for r in batch["resources"]}


async def test_crd_created_through_the_api_is_served(k):
    group = f"{k.ns}.example.com"
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": f"widgets.{group}"},
           "spec": {"group": group, "scope": "Namespaced",
                    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                        "type": "object", "properties": {"spec": {"type": "object", "properties": {
                            "size": {"type": "integer", "minimum": 1}}}}}}}]}}
    await k.call("ApiextensionsV1Api", "create_custom_resource_definition", crd)
    try:
        for _ in range(200):  # served once Established (until then its paths answer 404)
            got = await k.call("ApiextensionsV1Api", "read_custom_resource_definition", f"widgets.{group}")
            if any(c["type"] == "Established" and c["status"] == "True"
                   for c in (got.get("status") or {}).get("conditions") or []):
                break
            await asyncio.sleep(0.05)
        w = {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 3, "x": 1}}
        out = await k.call("CustomObjectsApi", "create_namespaced_custom_object", group, "v1", k.ns, "widgets", w)
        assert out["spec"] == {"size": 3}
        w["metadata"]["name"], w["spec"]["size"] = "w2", 0
        with pytest.raises(Failure) as e:
            await k.call("CustomObjectsApi", "create_namespaced_custom_object", group, "v1", k.ns, "widgets", w)
        assert e.value.status == 422 and "spec.size" in e.value.fields
    finally:
        await k.call("ApiextensionsV1Api", "delete_custom_resource_definition", f"widgets.{group}")
