"""Project objects, capacity arithmetic, pod volumes and progress sentences (all pure)."""

import json

import pytest

from hub_ext.core.catalog import parse_accelerators
from hub_ext.core.entitlements import Project
from hub_ext.core.errors import ConfigError, UpstreamError, UserInputError, http_answer
from hub_ext.manifests.capacity import free_capacity, usage
from hub_ext.manifests.mounts import MountSettings, credential_from_secret, dataset_from_pvc, volumes
from hub_ext.manifests.progress_text import describe
from hub_ext.manifests.tenancy import TenancySettings, project_objects, quota_hard

pytestmark = pytest.mark.unit

ACCS = parse_accelerators({
    "a100": {"type": "gpu", "product": "NVIDIA-A100-SXM4-40GB"},
    "1g.5gb": {"type": "mig", "profile": "1g.5gb"},
    "3g.20gb-single": {"type": "mig", "profile": "3g.20gb", "strategy": "single", "product": "NVIDIA-A100-SXM4-40GB"},
})
TEAM = Project("vision", "Vision", False, frozenset({"cpu"}), {"1g.5gb": 2, "a100": 1})
ADMIN = Project("user-root", "Personal", True, frozenset({"cpu"}), None)


def test_quota_per_resource_adds_up_shared_resources_and_zeroes_the_rest():
    assert quota_hard(TEAM, ACCS) == {"requests.nvidia.com/gpu": "1", "requests.nvidia.com/mig-1g.5gb": "2"}
    assert quota_hard(ADMIN, ACCS) == {}
    both = Project("p", "p", False, frozenset(), {"a100": 1, "3g.20gb-single": 2})
    assert quota_hard(both, ACCS)["requests.nvidia.com/gpu"] == "3"


def test_project_objects_in_order_with_member_bindings():
    objs = project_objects(TEAM, ACCS, (), [("alice@example.com", "oidc:alice@example.com")])
    assert [(o["kind"], o["metadata"]["name"]) for o in objs] == [
        ("Namespace", "vision"), ("RoleBinding", "mlplatform-hub"), ("RoleBinding", "mlplatform-operator"),
        ("ServiceAccount", "mlplatform-runner"),
        ("Role", "mlplatform-project"), ("RoleBinding", "mlplatform-project"),
        ("ServiceAccount", "mlplatform-member-alice-example-com---ff8d9819"),
        ("RoleBinding", "mlplatform-member-alice-example-com---ff8d9819"),
        ("ResourceQuota", "mlplatform-accelerators"), ("ResourceQuota", "mlplatform-resources"),
        ("LimitRange", "mlplatform-defaults"), ("NetworkPolicy", "mlplatform-default-deny"),
        ("NetworkPolicy", "mlplatform-notebooks"), ("NetworkPolicy", "mlplatform-jobs"),
        ("NetworkPolicy", "mlplatform-suggestions"), ("NetworkPolicy", "mlplatform-egress"),
        ("ConfigMap", "mlplatform-catalog")]
    assert all(o["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "jupyterhub-mlplatform" for o in objs)
    # in a team project a member's pods run as their own account: it and their identity are bound
    assert objs[6]["metadata"]["annotations"] == {"mlplatform.io/member": "alice@example.com",
                                                  "mlplatform.io/identity": "oidc:alice@example.com"}
    assert objs[7]["subjects"] == [
        {"kind": "ServiceAccount", "name": "mlplatform-member-alice-example-com---ff8d9819", "namespace": "vision"},
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "oidc:alice@example.com"}]
    # without a member identity template, the account alone; in a personal project, no account
    alone = project_objects(TEAM, ACCS, (), [("bob", "")])
    assert [o["subjects"] for o in alone if o["metadata"]["name"] == "mlplatform-member-bob"
            and o["kind"] == "RoleBinding"] == [[{"kind": "ServiceAccount", "name": "mlplatform-member-bob",
                                                  "namespace": "vision"}]]
    personal = project_objects(ADMIN, ACCS, (), [("root", "")])
    assert not [o for o in personal if o["metadata"]["name"].startswith("mlplatform-member-")]
    assert objs[1]["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                  "name": "mlplatform-hub-project"}
    verbs = {(g, r): set(rule["verbs"]) for rule in objs[4]["rules"] for g in rule["apiGroups"] for r in rule["resources"]}
    assert ("", "secrets") not in verbs and "create" not in verbs[("", "pods")]
    assert {"create", "delete"} <= verbs[("kubeflow.org", "pytorchjobs")] and verbs[("", "pods/log")] == {"get", "list", "watch"}
    assert verbs[("kubeflow.org", "trials")] == verbs[("kubeflow.org", "suggestions")] == {"get", "list", "watch"}
    catalog = json.loads(objs[-1]["data"]["catalog.json"])
    assert catalog["project"] == {"name": "vision", "display_name": "Vision", "personal": False,
                                  "limits": {"1g.5gb": 2, "a100": 1}}


def test_the_namespace_records_owner_pod_security_and_entitled_accelerators():
    team = Project("vision", "Vision", False, frozenset(), {"1g.5gb": 2, "a100": 0}, "group:vision")
    ns = project_objects(team, ACCS, ())[0]["metadata"]
    assert ns["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"
    assert ns["labels"]["pod-security.kubernetes.io/warn"] == ns["labels"]["pod-security.kubernetes.io/audit"] == "restricted"
    assert ns["annotations"] == {
        "mlplatform.io/owner": "group:vision",
        "mlplatform.io/accelerator-resources": "nvidia.com/gpu,nvidia.com/mig-1g.5gb",
        "accelerators.mlplatform.io/1g.5gb": "nvidia.com/mig-1g.5gb;",  # a100: 0 is not entitled
        "mlplatform.io/priority-classes": ""}  # no PriorityClass by default
    classes = TenancySettings.from_config({"priority_classes": ["batch-default", "mlplatform-batch"]})
    named = project_objects(team, ACCS, (), (), classes)[0]["metadata"]["annotations"]
    assert named["mlplatform.io/priority-classes"] == "batch-default,mlplatform-batch"
    admin = project_objects(ADMIN, ACCS, ())[0]["metadata"]["annotations"]
    assert admin["mlplatform.io/accelerators"] == "all"
    a100 = project_objects(TEAM, ACCS, ())[0]["metadata"]["annotations"]["accelerators.mlplatform.io/a100"]
    assert a100 == "nvidia.com/gpu;nvidia.com/gpu.product=NVIDIA-A100-SXM4-40GB"


def test_tenancy_settings_from_config_refuse_unknown_levels():
    strict = TenancySettings.from_config({"pod_security_enforce": "restricted", "hub_namespace": "hubs",
                                          "project_quota": {"pods": "5"}, "hub_service_account": ""})
    objs = project_objects(TEAM, ACCS, (), (), strict)
    assert objs[0]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert objs[1]["subjects"] == [{"kind": "ServiceAccount", "name": "hub", "namespace": "hubs"}]
    assert next(o for o in objs if o["metadata"]["name"] == "mlplatform-resources")["spec"]["hard"] == {"pods": "5"}
    with pytest.raises(ConfigError, match="pod_security_enforce: must be one of privileged, baseline, restricted"):
        TenancySettings.from_config({"pod_security_enforce": "strict"})


def node(name, labels, allocatable, ready=True, unschedulable=False):
    return {"metadata": {"name": name, "labels": labels}, "spec": {"unschedulable": unschedulable},
            "status": {"allocatable": allocatable, "conditions": [{"type": "Ready", "status": str(ready)}]}}


def pod(ns, node_name, resources, phase="Running", selector=None, init=None):
    spec = {"nodeName": node_name, "containers": [{"resources": r} for r in resources]}
    if selector:
        spec["nodeSelector"] = selector
    if init:
        spec["initContainers"] = [{"resources": init}]
    return {"metadata": {"namespace": ns, "name": "p"}, "spec": spec, "status": {"phase": phase}}


GPU_LABELS = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}
NODES = [
    node("full-1", GPU_LABELS, {"nvidia.com/gpu": "2"}),
    node("full-2", GPU_LABELS, {"nvidia.com/gpu": "2"}, ready=False),
    node("full-3", GPU_LABELS, {"nvidia.com/gpu": "2"}, unschedulable=True),
    node("mig-1", {}, {"nvidia.com/mig-1g.5gb": "7"}),
    node("single-1", {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-3g.20gb"}, {"nvidia.com/gpu": "2"}),
]


def test_free_capacity_counts_ready_matching_nodes_and_active_bound_pods():
    pods = [
        pod("a", "full-1", [{"limits": {"nvidia.com/gpu": "1"}}]),
        pod("a", "full-1", [{"limits": {"nvidia.com/gpu": "1"}}], phase="Succeeded"),
        pod("b", "mig-1", [{"requests": {"nvidia.com/mig-1g.5gb": "2"}}, {"limits": {"nvidia.com/mig-1g.5gb": "1"}}]),
        pod("b", "mig-1", [{}], init={"limits": {"nvidia.com/mig-1g.5gb": "4"}}),
        pod("c", None, [{"limits": {"nvidia.com/mig-1g.5gb": "1"}}], phase="Pending"),
        pod("d", "single-1", [{"limits": {"nvidia.com/gpu": "1"}}]),
    ]
    assert free_capacity(ACCS, NODES, pods) == {"a100": (1, 2), "1g.5gb": (0, 7), "3g.20gb-single": (1, 2)}
    assert free_capacity(ACCS, [], []) == {"a100": (0, 0), "1g.5gb": (0, 0), "3g.20gb-single": (0, 0)}


def test_usage_attributes_pods_to_the_most_specific_accelerator():
    pods = [pod("vision", "single-1", [{"limits": {"nvidia.com/gpu": "1"}}],
                selector={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-3g.20gb"}),
            pod("vision", "full-1", [{"limits": {"nvidia.com/gpu": "1"}}], selector=GPU_LABELS),
            pod("vision", "mig-1", [{"limits": {"nvidia.com/mig-1g.5gb": "2"}}]),
            pod("vision", "mig-1", [{"limits": {"nvidia.com/mig-1g.5gb": "2"}}], phase="Failed"),
            pod("other", "mig-1", [{"limits": {"nvidia.com/mig-1g.5gb": "1"}}])]
    assert usage(ACCS, pods, "vision") == {"3g.20gb-single": 1, "a100": 1, "1g.5gb": 2}


SETTINGS = MountSettings({"gcp-credential": "gcp-credential", "aws-credential": "example.com/aws"})


def test_secrets_pvcs_and_their_volumes():
    gcp = {"type": "gcp-credential", "metadata": {"name": "sa"}, "data": {"key.json": "e30="}}
    aws = {"type": "example.com/aws", "metadata": {"name": "s3", "annotations": {"mlplatform.io/description": "raw"}},
           "data": {"credentials": "x", "config": "y"}}
    assert credential_from_secret({"type": "Opaque", "metadata": {"name": "x"}}, SETTINGS) is None
    c1, c2 = credential_from_secret(gcp, SETTINGS), credential_from_secret(aws, SETTINGS)
    assert (c1.path, c1.config_path) == ("/etc/mlplatform/credentials/sa/key.json", None)
    assert (c2.type, c2.path, c2.config_path, c2.description) == (
        "aws-credential", "/etc/mlplatform/credentials/s3/credentials", "/etc/mlplatform/credentials/s3/config", "raw")
    pvc = {"metadata": {"name": "coco", "annotations": {"mlplatform.io/source": "s3://b/coco"}},
           "spec": {"resources": {"requests": {"storage": "5Gi"}}},
           "status": {"capacity": {"storage": "8Gi"},
                      "conditions": [{"type": "Loaded", "status": "False", "reason": "Loading", "message": "40%"}]}}
    d = dataset_from_pvc(pvc, SETTINGS)
    assert (d.path, d.state, d.message, d.source, d.size) == ("/datasets/coco", "loading", "40%", "s3://b/coco", "8Gi")
    failed = {**pvc, "status": {"conditions": [{"type": "Loaded", "status": "False", "reason": "Failed"}]}}
    assert dataset_from_pvc(failed, SETTINGS).state == "failed"
    assert dataset_from_pvc({"metadata": {"name": "plain"}}, SETTINGS).state == "ready"
    vols, mounts = volumes([c1], [d], SETTINGS)
    assert vols == [{"name": "credential-sa", "secret": {"secretName": "sa", "defaultMode": 0o440}},
                    {"name": "dataset-coco", "persistentVolumeClaim": {"claimName": "coco", "readOnly": True}}]
    assert mounts == [{"name": "credential-sa", "mountPath": "/etc/mlplatform/credentials/sa", "readOnly": True},
                      {"name": "dataset-coco", "mountPath": "/datasets/coco", "readOnly": True}]
    assert volumes([c1], [], SETTINGS, run_as_root=True)[0][0]["secret"]["defaultMode"] == 0o400


@pytest.mark.parametrize("event, text", [
    ({"reason": "FailedScheduling", "message": "0/3 nodes are available: 3 Insufficient nvidia.com/mig-1g.5gb."},
     "waiting for a free 1g.5gb MIG slice (0 of 2 free)"),
    ({"reason": "FailedScheduling", "message": "0/3 nodes are available: 2 Insufficient cpu, 1 Insufficient memory."},
     "waiting for a node with enough CPU and memory"),
    ({"reason": "FailedScheduling", "message": "0/3 nodes are available: 3 node(s) didn't match Pod's node "
                                               "affinity/selector."}, "no node offers MIG 1g.5gb slice now; waiting"),
    ({"reason": "Scheduled", "message": "Successfully assigned vision/jupyter-alice to dgx-03"},
     "assigned to node dgx-03"),
    ({"reason": "Pulling", "message": 'Pulling image "quay.io/jupyter/pytorch-notebook:cuda12"'},
     "pulling the image quay.io/jupyter/pytorch-notebook:cuda12 (the first start on a node can take minutes)"),
    ({"reason": "Started", "message": "Started container notebook"}, "starting the notebook server"),
    ({"reason": "Created", "message": "Created container notebook"}, None),
    ({"reason": "FailedMount", "message": "MountVolume.SetUp failed"}, "waiting for a volume to be attached"),
])
def test_progress_in_plain_words(event, text):
    assert describe(event, ACCS["1g.5gb"], 1, {"1g.5gb": (0, 2)}) == text


def test_http_answers():
    assert http_answer(UserInputError("profile", "no 100% slices", 403)) == (403, "profile: no 100%% slices")
    assert http_answer(UpstreamError("prepare the project 'x'", "Kubernetes answered 500")) == (
        502, "could not prepare the project 'x': Kubernetes answered 500")
