"""Create/read/update/list semantics our code relies on (status codes, reasons, fields of the
`kind: Status` errors, selectors, paging, resourceVersions), checked through both real clients
against the API server."""

import pytest

from tests.kube.client import Failure

pytestmark = pytest.mark.kube


def cm(name, **labels):
    return {"metadata": {"name": name, "labels": labels}, "data": {"k": "v"}}


async def test_create_fills_metadata_and_answers_201(k):
    status, _, obj = await k.raw("CoreV1Api", "create_namespaced_config_map", k.ns, cm("a"))
    assert status == 201
    meta = obj["metadata"]
    assert meta["namespace"] == k.ns and meta["name"] == "a"
    assert meta["uid"] and meta["resourceVersion"].isdigit() and meta["creationTimestamp"].endswith("Z")
    got = await k.call("CoreV1Api", "read_namespaced_config_map", "a", k.ns)
    assert got["metadata"]["uid"] == meta["uid"] and got["data"] == {"k": "v"}


async def test_generate_name(k):
    body = {"metadata": {"generateName": "job-"}, "data": {}}
    first = await k.call("CoreV1Api", "create_namespaced_config_map", k.ns, body)
    second = await k.call("CoreV1Api", "create_namespaced_config_map", k.ns, body)
    for obj in (first, second):
        assert obj["metadata"]["name"].startswith("job-") and len(obj["metadata"]["name"]) == 9
    assert first["metadata"]["name"] != second["metadata"]["name"]


async def test_not_found_and_already_exists_are_status_objects(k):
    with pytest.raises(Failure) as e:
        await k.call("CoreV1Api", "read_namespaced_config_map", "nope", k.ns)
    assert e.value.status == 404 and e.value.reason == "NotFound"
    assert e.value.body["kind"] == "Status" and e.value.body["details"]["name"] == "nope"
    await k.call("CoreV1Api", "create_namespaced_config_map", k.ns, cm("dup"))
    with pytest.raises(Failure) as e:
        await k.call("CoreV1Api", "create_namespaced_config_map", k.ns, cm("dup"))
    assert e.value.status == 409 and e.value.reason == "AlreadyExists"


@pytest.mark.parametrize("name", ["Upper", "under_score", "-lead", "trail-", "a" * 254, "dots..twice"])
async def test_invalid_names_are_422(k, name):
    with pytest.raises(Failure) as e:
        await k.call("CoreV1Api", "create_namespaced_config_map", k.ns, cm(name))
    assert e.value.status == 422 and e.value.reason == "Invalid"
    assert e.value.fields[0] == "metadata.name"


async def test_namespace_names_are_dns_labels(k):
    with pytest.raises(Failure) as e:
        await k.call("CoreV1Api", "create_namespace", {"metadata": {"name": "has.dot"}})
    assert e.value.status == 422


async def test_invalid_label_value_is_422(k):
    with pytest.raises(Failure) as e:
        await k.call("CoreV1Api", "create_namespaced_config_map", k.ns, cm("x", app="bad value!"))
    assert e.value.status == 422 and e.value.reason == "Invalid"
    assert e.value.fields == ["metadata.labels"]


async def test_create_in_missing_namespace_is_404(k):
    with pytest.raises(Failure) as e:
        await k.call("CoreV1Api", "create_namespaced_config_map", "no-such-ns", cm("a"))
    assert e.value.status == 404 and e.value.reason == "NotFound"
    assert e.value.body["details"] == {"name": "no-such-ns", "kind": "namespaces"}


async def test_namespace_mismatch_is_400(k):
    body = {"metadata": {"name": "a", "namespace": "default"}}
    with pytest.raises(Failure) as e:
        await k.call("CoreV1Api", "create_namespaced_config_map", k.ns, body)
    assert e.value.status == 400 and e.value.reason == "BadRequest"


async def test_global_resource_version_across_kinds(k):
    a = await k.call("CoreV1Api", "create_namespaced_config_map", k.ns, cm("a"))
    s = await k.call("CoreV1Api", "create_namespaced_secret", k.ns, {"metadata": {"name": "s"},
                                                                     "stringData": {"x": "y"}})
    lst = await k.call("CoreV1Api", "list_namespaced_config_map", k.ns)
    assert int(s["metadata"]["resourceVersion"]) > int(a["metadata"]["resourceVersion"])
    assert int(lst["metadata"]["resourceVersion"]) >= int(s["metadata"]["resourceVersion"])
    assert s["type"] == "Opaque" and s["data"] == {"x": "eQ=="} and "string_data" not in s


@pytest.mark.parametrize("selector, expected", [
    ("app=web", {"w1", "w2"}),
    ("app==web", {"w1", "w2"}),
    ("app!=web", {"d1", "none"}),
    ("app in (web, db)", {"w1", "w2", "d1"}),
    ("app notin (web)", {"d1", "none"}),
    ("tier", {"w1", "d1"}),
    ("!tier", {"w2", "none"}),
    ("app=web,tier=front", {"w1"}),
])
async def test_label_selectors(k, selector, expected):
    for name, labels in {"w1": {"app": "web", "tier": "front"}, "w2": {"app": "web"},
                         "d1": {"app": "db", "tier": "back"}, "none": {}}.items():
        await k.call("CoreV1Api", "create_namespaced_config_map", k.ns, cm(name, grp="sel", **labels))
    lst = await k.call("CoreV1Api", "list_namespaced_config_map", k.ns, label_selector=f"grp=sel,{selector}")
    assert {i["metadata"]["name"] for i in lst["items"]} == expected


async def test_field_selectors(k):
    await k.call("CoreV1Api", "create_namespaced_config_map", k.ns, cm("one"))
    await k.call("CoreV1Api", "create_namespaced_config_map", k.ns, cm("two"))
    lst = await k.call("CoreV1Api", "list_namespaced_config_map", k.ns, field_selector="metadata.name=two")
    assert [i["metadata"]["name"] for i in lst["items"]] == ["two"]
    lst = await k.call("CoreV1Api", "list_namespaced_config_map", k.ns, field_selector="metadata.name!=two")
    assert "two" not in {i["metadata"]["name"] for i in lst["items"]}
    lst = await k.call("CoreV1Api", "list_config_map_for_all_namespaces", field_selector=f"metadata.namespace={k.ns}")
    assert {i["metadata"]["namespace"] for i in lst["items"]} == {k.ns}


async def test_bad_selectors_are_400(k):
    with pytest.raises(Failure) as e:
        await k.call("CoreV1Api", "list_namespaced_config_map", k.ns, field_selector="data.k=v")
    assert e.value.status == 400 and e.value.reason == "BadRequest" and '"data.k"' in e.value.message
    for selector in ("app=bad value!", "a,,b", "=x"):  # ("a in ()" is accepted: it selects nothing)
        with pytest.raises(Failure) as e:
            await k.call("CoreV1Api", "list_namespaced_config_map", k.ns, label_selector=selector)
        assert e.value.status == 400 and e.value.reason == "BadRequest"


async def test_pod_field_selector_on_phase(k):
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    created = await k.call("CoreV1Api", "create_namespaced_pod", k.ns, pod)
    assert created["status"]["phase"] == "Pending"
    if not k.target.real:  # a real cluster may have scheduled it already
        lst = await k.call("CoreV1Api", "list_namespaced_pod", k.ns, field_selector="status.phase=Pending")
        assert [i["metadata"]["name"] for i in lst["items"]] == ["p"]
    lst = await k.call("CoreV1Api", "list_namespaced_pod", k.ns, field_selector="status.phase=Succeeded")
    assert lst["items"] == []


async def test_list_paging_with_limit_and_continue(k):
    for i in range(5):
        await k.call("CoreV1Api", "create_namespaced_config_map", k.ns, cm(f"page-{i}", paged="yes"))
    names, token = [], None
    while True:
        kw = {"label_selector": "paged=yes", "limit": 2}
        if token:
            kw["_continue"] = token
        lst = await k.call("CoreV1Api", "list_namespaced_config_map", k.ns, **kw)
        names += [i["metadata"]["name"] for i in lst["items"]]
        token = lst["metadata"].get("continue")
        if not token:
            break
    assert names == [f"page-{i}" for i in range(5)]


async def test_put_with_stale_resource_version_conflicts(k):
    obj = await k.call("CoreV1Api", "create_namespaced_config_map", k.ns, cm("a"))
    fresh = dict(obj, data={"k": "2"})
    updated = await k.call("CoreV1Api", "replace_namespaced_config_map", "a", k.ns, fresh)
    assert updated["data"] == {"k": "2"}
    assert int(updated["metadata"]["resourceVersion"]) > int(obj["metadata"]["resourceVersion"])
    stale = dict(obj, data={"k": "3"})
    with pytest.raises(Failure) as e:
        await k.call("CoreV1Api", "replace_namespaced_config_map", "a", k.ns, stale)
    assert e.value.status == 409 and e.value.reason == "Conflict"


async def test_generation_bumps_on_spec_change_only(k):
    body = {"metadata": {"name": "gen"}, "spec": {"template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}
    job = await k.call("BatchV1Api", "create_namespaced_job", k.ns, body)
    assert job["metadata"]["generation"] == 1
    job = await k.call("BatchV1Api", "patch_namespaced_job", "gen", k.ns, {"metadata": {"labels": {"a": "b"}}})
    assert job["metadata"]["generation"] == 1
    job = await k.call("BatchV1Api", "patch_namespaced_job", "gen", k.ns, {"spec": {"activeDeadlineSeconds": 60}})
    assert job["metadata"]["generation"] == 2


async def test_cluster_scoped_kinds(k):
    name = f"{k.ns}-node"
    node = await k.call("CoreV1Api", "create_node", {"metadata": {"name": name, "labels": {"pool": k.ns}}})
    assert "namespace" not in node["metadata"]
    lst = await k.call("CoreV1Api", "list_node", label_selector=f"pool={k.ns}")
    assert [n["metadata"]["name"] for n in lst["items"]] == [name]
    await k.call("CoreV1Api", "delete_node", name)
    nss = await k.call("CoreV1Api", "list_namespace", field_selector=f"metadata.name={k.ns}")
    assert nss["items"][0]["status"]["phase"] == "Active"


async def test_rbac_and_quota_kinds_are_stored(k):
    rules = [{"apiGroups": ["kubeflow.org"], "resources": ["pytorchjobs"], "verbs": ["get", "list", "create"]}]
    await k.call("CoreV1Api", "create_namespaced_service_account", k.ns, {"metadata": {"name": "runner"}})
    await k.call("RbacAuthorizationV1Api", "create_namespaced_role", k.ns, {"metadata": {"name": "jobs"},
                                                                             "rules": rules})
    await k.call("RbacAuthorizationV1Api", "create_namespaced_role_binding", k.ns, {
        "metadata": {"name": "jobs"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                                   "name": "jobs"},
        "subjects": [{"kind": "ServiceAccount", "name": "runner", "namespace": k.ns}]})
    await k.call("CoreV1Api", "create_namespaced_resource_quota", k.ns, {
        "metadata": {"name": "gpu"}, "spec": {"hard": {"requests.nvidia.com/gpu": "2"}}})
    role = await k.call("RbacAuthorizationV1Api", "read_namespaced_role", "jobs", k.ns)
    assert role["rules"] == rules
    sas = await k.call("CoreV1Api", "list_namespaced_service_account", k.ns)
    assert {"default", "runner"} <= {s["metadata"]["name"] for s in sas["items"]}
    q = await k.call("CoreV1Api", "read_namespaced_resource_quota", "gpu", k.ns)
    assert q["spec"]["hard"] == {"requests.nvidia.com/gpu": "2"}


async def test_delete_collection_by_label(k):
    for name, app in (("a", "x"), ("b", "x"), ("c", "y")):
        await k.call("CoreV1Api", "create_namespaced_config_map", k.ns, cm(name, app=app))
    await k.call("CoreV1Api", "delete_collection_namespaced_config_map", k.ns, label_selector="app=x")
    lst = await k.call("CoreV1Api", "list_namespaced_config_map", k.ns, label_selector="app")
    assert [i["metadata"]["name"] for i in lst["items"]] == ["c"]


async def test_dry_run_stores_nothing(k):
    await k.call("CoreV1Api", "create_namespaced_config_map", k.ns, cm("dry"), dry_run="All")
    with pytest.raises(Failure) as e:
        await k.call("CoreV1Api", "read_namespaced_config_map", "dry", k.ns)
    assert e.value.status == 404


async def test_secret_data_must_be_base64_and_is_not_echoed(k):
    """The body cannot be decoded (400 BadRequest, not 422), and the refusal does not quote the value."""
    with pytest.raises(Failure) as e:
        await k.call("CoreV1Api", "create_namespaced_secret", k.ns, {"metadata": {"name": "s"},
                                                                     "data": {"k": "not base64!"}})
    assert e.value.status == 400 and e.value.reason == "BadRequest"
    assert "base64" in e.value.message and "not base64!" not in e.value.message


async def test_extended_resources_need_equal_requests_and_limits(k):
    pod = {"metadata": {"name": "gpu"}, "spec": {"containers": [{
        "name": "c", "image": "cuda", "resources": {"requests": {"nvidia.com/gpu": "1"},
                                                     "limits": {"nvidia.com/gpu": "2"}}}]}}
    with pytest.raises(Failure) as e:
        await k.call("CoreV1Api", "create_namespaced_pod", k.ns, pod)
    assert e.value.status == 422 and e.value.fields == ["spec.containers[0].resources.requests"]
    pod["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
    created = await k.call("CoreV1Api", "create_namespaced_pod", k.ns, pod)
    assert created["spec"]["containers"][0]["resources"]["requests"] == {"nvidia.com/gpu": "1"}


async def test_services_and_pvcs(k):
    svc = await k.call("CoreV1Api", "create_namespaced_service", k.ns, {
        "metadata": {"name": "hub"}, "spec": {"selector": {"app": "hub"}, "ports": [{"port": 8081}]}})
    assert svc["metadata"]["uid"]
    with pytest.raises(Failure) as e:  # service names are DNS-1123 labels: no dots
        await k.call("CoreV1Api", "create_namespaced_service", k.ns, {
            "metadata": {"name": "a.b"}, "spec": {"ports": [{"port": 80}]}})
    assert e.value.status == 422
    pvc = await k.call("CoreV1Api", "create_namespaced_persistent_volume_claim", k.ns, {
        "metadata": {"name": "data", "labels": {"mlplatform/dataset": "imagenet"}},
        "spec": {"accessModes": ["ReadOnlyMany"], "resources": {"requests": {"storage": "10Gi"}}}})
    assert pvc["status"]["phase"] == "Pending"
    with pytest.raises(Failure) as e:
        await k.call("CoreV1Api", "create_namespaced_persistent_volume_claim", k.ns, {
            "metadata": {"name": "bad"}, "spec": {"accessModes": ["ReadWriteOnce"]}})
    assert e.value.status == 422 and e.value.fields == ["spec.resources[storage]"]
    lst = await k.call("CoreV1Api", "list_namespaced_persistent_volume_claim", k.ns,
                       label_selector="mlplatform/dataset")
    assert [p["metadata"]["name"] for p in lst["items"]] == ["data"]
