"""PlatformSpawner on the real control plane, acting as the hub's ServiceAccount of
`helm-values/hub-rbac.yaml` (so a call the hub's ClusterRole does not allow fails the test that
makes it): the pod it makes (whole object as the API server stores it, and valid for the
Kubernetes OpenAPI), provisioning, credentials and datasets (PVCs bound by the real PV
controller, the loader's condition in their status), faults from the proxy, secrets. Set-up the
hub does not do (other people's objects, the dataset loader's status) is made as admin through
the `Cluster` API. Quota and capacity: `test_platform_capacity.py`."""

from __future__ import annotations

import asyncio
import json
import logging
import pathlib

import kubernetes_validate
import pytest
from tornado import web

from tests.cluster.identities import HUB_USER
from tests.kube.platform_env import (
    CANARY,
    GCP_KEY,
    IMAGE,
    create,
    dataset_pvc,
    delete_projects,
    make_spawner,
    make_user,
    platform_cluster,
    restart_hub,
    secret_body,
    set_loaded,
    stop_as_hub,
    until,
    wait_bound,
    wait_default_service_account,
    watch_progress,
    whoami,
)

pytestmark = pytest.mark.kube

ALICE = "alice@example.com"


@pytest.fixture
async def cluster(kube_cluster, tmp_path, monkeypatch):
    async with platform_cluster(kube_cluster, tmp_path, monkeypatch) as c:
        yield c


async def provisioned(user):
    """A project exists as the hub makes it (used to add credentials/datasets before a spawn)."""
    sp = make_spawner(user)
    await sp.provision()
    return sp


async def seen(spawner, ns, credentials=(), datasets=()):
    """Wait until the hub's watch caches have the objects a test just created behind its back."""
    for _ in range(100):
        files = await spawner.project_files(ns)
        if set(credentials) <= {c.name for c in files.credentials} and \
                set(datasets) <= {d.name for d in files.datasets}:
            return files
        await asyncio.sleep(0.05)
    raise AssertionError(f"the hub never saw {credentials} {datasets} in {ns}")


async def dataset_state(spawner, name, state, ns="vision"):
    for _ in range(100):
        if any(d.name == name and d.state == state for d in (await spawner.project_files(ns)).datasets):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"the dataset {name} never became {state}")


def writes(cluster, since=0):
    return [(r.method, r.path) for r in cluster.requests()[since:] if r.method in ("POST", "PUT", "PATCH", "DELETE")]


def normalised_env(container):
    out = {}
    for e in container["env"]:
        if e["name"].startswith("JUPYTERHUB_") and e["name"] not in ("JUPYTERHUB_API_TOKEN", "JUPYTERHUB_USER"):
            continue
        out[e["name"]] = e.get("value", e.get("valueFrom"))
    return out


SA_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
# what the API server adds to every pod: defaults, and admission's (DefaultTolerationSeconds)
SPEC_DEFAULTS = ("schedulerName", "dnsPolicy", "terminationGracePeriodSeconds", "serviceAccount", "enableServiceLinks",
                 "preemptionPolicy", "priority")
CONTAINER_DEFAULTS = ("terminationMessagePath", "terminationMessagePolicy")
NOT_READY_TOLERATIONS = [{"key": f"node.kubernetes.io/{t}", "operator": "Exists", "effect": "NoExecute",
                          "tolerationSeconds": 300} for t in ("not-ready", "unreachable")]


def split_token_volume(spec, container):
    """The ServiceAccount admission's projected token volume and mount, and the rest."""
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == SA_MOUNT]
    (volume,) = [v for v in spec["volumes"] if v["name"] == mount["name"]]
    return ([v for v in spec["volumes"] if v is not volume], [m for m in container["volumeMounts"] if m is not mount],
            volume)


async def test_pod_is_the_plan_whole_object_and_valid(cluster):
    alice = make_user(ALICE, ["vision"])
    hub = await provisioned(alice)
    create(cluster, secret_body("vision", "training-sa", "gcp-credential", {"key.json": GCP_KEY}))
    create(cluster, dataset_pvc("vision", "imagenet", "gs://vision-data/imagenet"))
    set_loaded(cluster, "vision", "imagenet", "True", "Loaded")
    await seen(hub, "vision", ["training-sa"], ["imagenet"])
    sp = make_spawner(alice, {"project": "vision", "profile": "mig-1g", "credentials": ["training-sa"],
                              "datasets": ["imagenet"]})
    assert await whoami(sp.api.api_client) == HUB_USER  # not admin: hub-rbac.yaml's ServiceAccount
    await sp.start()
    pod = cluster.get("", "v1", "pods", "vision", sp.pod_name)
    token_secret = f"{sp.pod_name}-hub-token"
    (c,) = pod["spec"]["containers"]
    assert normalised_env(c) == {
        "JUPYTERHUB_API_TOKEN": {"secretKeyRef": {"name": token_secret, "key": "token"}},
        "JPY_API_TOKEN": {"secretKeyRef": {"name": token_secret, "key": "token"}},
        "JUPYTERHUB_USER": ALICE, "JUPYTER_IMAGE": IMAGE, "JUPYTER_IMAGE_SPEC": IMAGE,
        "CPU_LIMIT": "4.0", "MEM_LIMIT": "17179869184",
        "GOOGLE_APPLICATION_CREDENTIALS": "/etc/mlplatform/credentials/training-sa/key.json",
        "MLPLATFORM_DATASETS": json.dumps({"imagenet": "/datasets/imagenet"}),
        "MLPLATFORM_PROJECT": "vision", "MLPLATFORM_PROFILE": "mig-1g", "MLPLATFORM_BACKEND": "kubernetes",
    }
    volumes, mounts, token_volume = split_token_volume(pod["spec"], c)
    # the project's ServiceAccount token, projected by the ServiceAccount admission
    assert [s for s in token_volume["projected"]["sources"] if "serviceAccountToken" in s]
    c = {**{k: v for k, v in c.items() if k not in ("env", *CONTAINER_DEFAULTS)}, "volumeMounts": mounts}
    assert c == {
        "name": "notebook", "image": IMAGE, "imagePullPolicy": "IfNotPresent", "args": ["jupyterhub-singleuser"],
        "lifecycle": {}, "ports": [{"containerPort": 8888, "name": "notebook-port", "protocol": "TCP"}],
        # the API server stores quantities in canonical form (4.0 CPUs: "4")
        "resources": {"limits": {"cpu": "4", "memory": "17179869184", "nvidia.com/mig-1g.5gb": "1"},
                      "requests": {"cpu": "4", "memory": "17179869184", "nvidia.com/mig-1g.5gb": "1"}},
        # Pod Security "restricted" as far as the image allows (the project warns at that level)
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "volumeMounts": mounts,
    }
    assert mounts == [
        {"name": "credential-training-sa", "mountPath": "/etc/mlplatform/credentials/training-sa", "readOnly": True},
        {"name": "dataset-imagenet", "mountPath": "/datasets/imagenet", "readOnly": True}]
    spec = {**{k: v for k, v in pod["spec"].items() if k not in ("containers", "nodeName", *SPEC_DEFAULTS)},
            "volumes": volumes}
    assert spec == {
        # in a team project a member's pod runs as their own ServiceAccount (gone when they leave)
        "automountServiceAccountToken": True, "serviceAccountName": "mlplatform-member-alice-example-com---ff8d9819",
        "restartPolicy": "OnFailure", "securityContext": {"fsGroup": 100},
        "tolerations": [{"effect": "NoSchedule", "key": "nvidia.com/gpu", "operator": "Exists"},
                        *NOT_READY_TOLERATIONS],
        "volumes": volumes,
    }
    assert volumes == [
        {"name": "credential-training-sa", "secret": {"secretName": "training-sa", "defaultMode": 0o440}},
        {"name": "dataset-imagenet", "persistentVolumeClaim": {"claimName": "imagenet", "readOnly": True}}]
    assert pod["spec"]["nodeName"] == "dgx-mig"  # the real scheduler: the only node with MIG 1g.5gb slices
    labels = pod["metadata"]["labels"]
    assert labels["mlplatform.io/project"] == "vision" and labels["mlplatform.io/profile"] == "mig-1g"
    assert labels["component"] == "singleuser-server"
    manifest = {k: v for k, v in pod.items() if k != "status"}
    manifest["metadata"] = {k: v for k, v in pod["metadata"].items() if k in ("name", "namespace", "labels",
                                                                              "annotations")}
    kubernetes_validate.validate(manifest, "1.31.0", strict=True)
    assert cluster.get("", "v1", "secrets", "vision", token_secret)["data"]["token"]
    await stop_as_hub(sp)
    assert cluster.get("", "v1", "secrets", "vision", token_secret) is None


@pytest.mark.parametrize("name", [ALICE, "Very.Long_Name-" + "x" * 55])
async def test_awkward_names_get_valid_distinct_projects_and_pods(cluster, name):
    twin = name.upper() if name != ALICE else "alice-example-com"
    spawners = [make_spawner(make_user(n, uid=i + 1), {"profile": "cpu"}) for i, n in enumerate([name, twin])]
    for sp in spawners:
        await sp.start()
    namespaces = {sp.namespace for sp in spawners}
    pods = {(sp.namespace, sp.pod_name) for sp in spawners}
    assert len(namespaces) == 2 and len(pods) == 2
    for ns, pod in pods:
        assert len(ns) <= 63 and len(pod) <= 63 and ns.startswith("user-")
        assert cluster.get("", "v1", "pods", ns, pod)["status"]["phase"] == "Running"
    for sp in spawners:
        await sp.stop()


EXPECTED_VISION = {
    ("Namespace", "vision"), ("ServiceAccount", "mlplatform-runner"), ("Role", "mlplatform-project"),
    ("RoleBinding", "mlplatform-project"), ("ResourceQuota", "mlplatform-accelerators"),
    ("ConfigMap", "mlplatform-catalog"), ("RoleBinding", "mlplatform-hub"), ("RoleBinding", "mlplatform-operator"),
    ("ResourceQuota", "mlplatform-resources"),
    ("LimitRange", "mlplatform-defaults"), ("NetworkPolicy", "mlplatform-default-deny"),
    ("NetworkPolicy", "mlplatform-notebooks"), ("NetworkPolicy", "mlplatform-jobs"),
    ("NetworkPolicy", "mlplatform-suggestions"), ("NetworkPolicy", "mlplatform-egress"),
    # alice's own account in the team project (her pods run as it) and its binding
    ("ServiceAccount", "mlplatform-member-alice-example-com---ff8d9819"),
    ("RoleBinding", "mlplatform-member-alice-example-com---ff8d9819"),
}


def managed(cluster, ns):
    out = set()
    for kind, plural, group in (("ServiceAccount", "serviceaccounts", ""), ("ResourceQuota", "resourcequotas", ""),
                                ("ConfigMap", "configmaps", ""), ("Role", "roles", "rbac.authorization.k8s.io"),
                                ("RoleBinding", "rolebindings", "rbac.authorization.k8s.io"),
                                ("Secret", "secrets", ""), ("Pod", "pods", ""),
                                ("LimitRange", "limitranges", ""),
                                ("NetworkPolicy", "networkpolicies", "networking.k8s.io")):
        for obj in cluster.items(group, "v1", plural, ns):
            if ours(obj):
                out.add((kind, obj["metadata"]["name"]))
    cluster_ns = cluster.get("", "v1", "namespaces", None, ns)
    if cluster_ns and ours(cluster_ns):
        out.add(("Namespace", cluster_ns["metadata"]["name"]))
    return out


def ours(obj):
    return (obj["metadata"].get("labels") or {}).get("app.kubernetes.io/managed-by") == "jupyterhub-mlplatform"


async def test_provisioning_is_idempotent_and_leaves_exactly_the_project(cluster):
    alice = make_user(ALICE, ["vision"])
    sp = make_spawner(alice)
    await sp.provision()
    assert managed(cluster, "vision") == EXPECTED_VISION
    personal = "user-alice-example-com---ff8d9819"
    member = {(kind, "mlplatform-member-alice-example-com---ff8d9819") for kind in ("ServiceAccount", "RoleBinding")}
    # her personal project: the same objects, but no member account (its pods run as mlplatform-runner)
    assert managed(cluster, personal) == (EXPECTED_VISION - {("Namespace", "vision")} - member) | {
        ("Namespace", personal)}
    quota = cluster.get("", "v1", "resourcequotas", "vision", "mlplatform-accelerators")
    assert quota["spec"]["hard"] == {"requests.nvidia.com/gpu": "0", "requests.nvidia.com/mig-1g.5gb": "2",
                                     "requests.nvidia.com/mig-3g.20gb": "0"}
    role = cluster.get("rbac.authorization.k8s.io", "v1", "roles", "vision", "mlplatform-project")
    assert not any("secrets" in r["resources"] for r in role["rules"])
    assert not any("pods" in r["resources"] and "create" in r["verbs"] for r in role["rules"])
    catalog = json.loads(cluster.get("", "v1", "configmaps", "vision", "mlplatform-catalog")["data"]["catalog.json"])
    assert catalog["project"]["limits"] == {"1g.5gb": 2}
    assert {p["slug"] for p in catalog["profiles"]} == {"cpu", "mig-1g"}
    # the same hub process again: no request at all
    before = len(cluster.requests())
    await make_spawner(alice).provision()
    assert cluster.requests()[before:] == []
    # a restarted hub (fresh process state): reads only, no writes (what the API server stores
    # compares equal to what the hub wants)
    await restart_hub()
    before = len(cluster.requests())
    await make_spawner(alice).provision()
    assert writes(cluster, before) == []
    assert managed(cluster, "vision") == EXPECTED_VISION
    # a drifted object is put back
    cluster.patch("", "v1", "resourcequotas", "vision", "mlplatform-accelerators",
                  {"spec": {"hard": {"requests.nvidia.com/mig-1g.5gb": "9"}}})
    await restart_hub()
    await make_spawner(alice).provision()
    assert cluster.get("", "v1", "resourcequotas", "vision", "mlplatform-accelerators")["spec"]["hard"] == \
        quota["spec"]["hard"]


async def test_leaving_a_team_removes_the_members_binding_and_account_at_next_login(cluster):
    traits = {"member_identity_template": "oidc:{username}"}
    await make_spawner(make_user(ALICE, ["vision"]), **traits).provision()
    mine = "mlplatform-member-alice-example-com---ff8d9819"
    binding = cluster.get("rbac.authorization.k8s.io", "v1", "rolebindings", "vision", mine)
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": mine, "namespace": "vision"},
                                   {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": f"oidc:{ALICE}"}]
    assert cluster.get("", "v1", "serviceaccounts", "vision", mine)["metadata"]["annotations"] == {
        "mlplatform.io/member": ALICE, "mlplatform.io/identity": f"oidc:{ALICE}"}
    await make_spawner(make_user(ALICE, []), **traits).provision()
    assert cluster.get("rbac.authorization.k8s.io", "v1", "rolebindings", "vision", mine) is None
    assert cluster.get("", "v1", "serviceaccounts", "vision", mine) is None  # her tokens die with it
    assert cluster.get("rbac.authorization.k8s.io", "v1", "rolebindings", "vision", "mlplatform-project")
    await make_spawner(make_user(ALICE, ["vision"]), **traits).provision()  # back in the team
    assert cluster.get("rbac.authorization.k8s.io", "v1", "rolebindings", "vision",
                       "mlplatform-member-alice-example-com---ff8d9819")


async def test_loading_dataset_is_refused_or_waited_for(cluster):
    alice = make_user(ALICE, ["vision"])
    hub = await provisioned(alice)
    create(cluster, dataset_pvc("vision", "coco", "s3://vision/coco"))
    set_loaded(cluster, "vision", "coco", "False", "Loading", "copied 40 of 118 GiB")
    await dataset_state(hub, "coco", "loading")
    refused = make_spawner(alice, {"project": "vision", "profile": "cpu", "datasets": ["coco"]})
    with pytest.raises(web.HTTPError) as e:
        await refused.start()
    assert e.value.status_code == 409 and "datasets[0]" in e.value.log_message and "loading" in e.value.log_message
    await until(lambda: _bound(refused, "coco"), "the claim was bound (its size is the volume's)")
    files = await refused.project_files("vision")
    assert [(d.name, d.state, d.source, d.size) for d in files.datasets] == [("coco", "loading", "s3://vision/coco",
                                                                             "10Gi")]
    waiting = make_spawner(alice, {"project": "vision", "profile": "cpu", "datasets": ["coco"]},
                           when_dataset_loading="wait")
    waiting.start()
    messages, collector = watch_progress(waiting)
    await asyncio.sleep(1.0)
    assert "waiting for the dataset 'coco' to finish loading (copied 40 of 118 GiB)" in messages
    set_loaded(cluster, "vision", "coco", "True")
    await asyncio.wait_for(waiting._start_future, 30)
    await asyncio.wait_for(collector, 10)
    await waiting.stop()
    set_loaded(cluster, "vision", "coco", "False", "Failed", "403 from s3")
    await dataset_state(hub, "coco", "failed")
    failed = make_spawner(alice, {"project": "vision", "profile": "cpu", "datasets": ["coco"]},
                          when_dataset_loading="wait")
    with pytest.raises(web.HTTPError) as e:
        await failed.start()
    assert e.value.status_code == 409 and "failed: 403 from s3" in e.value.log_message


async def _bound(spawner, name):
    return any(p["metadata"]["name"] == name and (p.get("status") or {}).get("phase") == "Bound"
               for p in spawner.shared.resources.pvcs.items("vision"))


async def test_a_canary_credential_never_leaks(cluster, caplog):
    caplog.set_level(logging.DEBUG)
    alice = make_user(ALICE, ["vision"])
    hub = await provisioned(alice)
    create(cluster, secret_body("vision", "canary", "gcp-credential", {"key.json": GCP_KEY}))
    await seen(hub, "vision", ["canary"])
    sp = make_spawner(alice, {"project": "vision", "profile": "cpu", "credentials": ["canary"]})
    form = await sp.get_options_form()
    await sp.start()
    pod = cluster.get("", "v1", "pods", "vision", sp.pod_name)
    events = cluster.items("", "v1", "events", "vision")
    files = await sp.project_files("vision")
    visible = json.dumps([pod, events]) + form + repr(files) + caplog.text + json.dumps(sp.get_state())
    assert CANARY.replace("-", "") not in visible and sp.api_token not in visible
    await sp.stop()


@pytest.mark.parametrize("path", ["/rolebindings$", "/resourcequotas$", "/configmaps$"])
async def test_failures_while_provisioning_leave_no_half_made_project(cluster, path):
    cluster.inject_fault("POST", path, status=500, count=100)
    sp = make_spawner(make_user(ALICE, ["vision"]), {"project": "vision", "profile": "cpu"})
    with pytest.raises(web.HTTPError) as e:
        await sp.start()
    assert e.value.status_code == 502 and "nothing was left half-made" in e.value.log_message
    assert "500" in e.value.log_message
    cluster.clear_faults()
    for ns in ("vision", "user-alice-example-com---ff8d9819"):
        ns_obj = cluster.get("", "v1", "namespaces", None, ns)
        assert ns_obj is None or ns_obj["metadata"].get("deletionTimestamp"), ns
    # and it works once the API does (and the undone namespaces have finished terminating: the
    # API server refuses new objects in a terminating namespace)
    delete_projects(cluster)
    await sp.provision()
    assert managed(cluster, "vision") == EXPECTED_VISION


async def test_a_conflict_while_provisioning_is_resolved_by_reading(cluster):
    # a create answering 409 for an object that is then not there: read again, create again
    cluster.inject_fault("POST", "/roles$", status=409, count=1)
    await make_spawner(make_user("carol", [])).provision()
    assert managed(cluster, "user-carol")
    # another hub replica made the namespace and a Role at the same moment: compare and fix theirs
    sp = make_spawner(make_user(ALICE, ["vision"]))
    cluster.inject_fault("POST", "/namespaces/vision/roles$", status=409, count=1)
    create(cluster, {"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": "vision", "labels": {"app.kubernetes.io/managed-by": "jupyterhub-mlplatform",
                                     "mlplatform.io/project": "vision"},
        "annotations": {"mlplatform.io/owner": "group:vision"}}})
    cluster.create("rbac.authorization.k8s.io", "v1", "roles", "vision",
                   {"metadata": {"name": "mlplatform-project"}, "rules": []})
    await sp.provision()
    role = cluster.get("rbac.authorization.k8s.io", "v1", "roles", "vision", "mlplatform-project")
    assert role["rules"] and managed(cluster, "vision") == EXPECTED_VISION


async def test_credentials_are_added_validated_and_deleted_through_the_hub(cluster):
    from hub_ext.core.credentials import files_from_fields
    from hub_ext.core.errors import UserInputError

    sp = await provisioned(make_user(ALICE, ["vision"]))
    resources = sp.shared.resources
    creds = files_from_fields("aws-credential", {"aws_access_key_id": "AKIAABCDEFGHIJKLMNOP",
                                                 "aws_secret_access_key": "x" * 40, "region": "eu-west-1"})
    await resources.add_credential("vision", "s3-reader", creds, "read the raw bucket", ALICE)
    (c,) = (await resources.available("vision")).credentials
    assert (c.name, c.type, c.path, c.config_path, c.description) == (
        "s3-reader", "aws-credential", "/etc/mlplatform/credentials/s3-reader/credentials",
        "/etc/mlplatform/credentials/s3-reader/config", "read the raw bucket")
    with pytest.raises(UserInputError) as e:
        await resources.add_credential("vision", "s3-reader", creds, "", ALICE)
    assert e.value.status == 409 and e.value.field == "name"
    create(cluster, secret_body("vision", "not-a-credential", "Opaque", {"x": "y"}))
    with pytest.raises(UserInputError) as e:
        await resources.delete_credential("vision", "not-a-credential")
    assert e.value.status == 404
    assert cluster.get("", "v1", "secrets", "vision", "not-a-credential")
    await resources.delete_credential("vision", "s3-reader")
    assert (await resources.available("vision")).credentials == ()
    # the hub's caches hold names and keys, never a credential's data
    cache = resources._secret_cache("vision")
    assert cache.known and all(set(s["data"].values()) <= {""} for s in cache.items())


async def test_credentials_and_datasets_are_listed_per_project_without_cluster_wide_watch(cluster):
    cluster.inject_fault("GET", "^/api/v1/secrets", status=403, count=1000)
    cluster.inject_fault("GET", "^/api/v1/persistentvolumeclaims", status=403, count=1000)
    sp = await provisioned(make_user(ALICE, ["vision"]))
    create(cluster, secret_body("vision", "sa", "gcp-credential", {"key.json": GCP_KEY}))
    create(cluster, dataset_pvc("vision", "imagenet", "gs://vision-data/imagenet"))
    files = await sp.project_files("vision")
    assert [c.name for c in files.credentials] == ["sa"] and [d.name for d in files.datasets] == ["imagenet"]
    assert sp.shared.resources.pvcs.state == "forbidden"
    cluster.clear_faults()


async def test_a_profile_adds_volumes_and_keeps_the_configured_ones(cluster):
    home = {"name": "home", "emptyDir": {}}
    scratch = {"name": "scratch", "emptyDir": {"medium": "Memory"}}
    profiles = {"cpu": {"display_name": "CPU", "kubespawner_override": {
        "volumes": [scratch], "volume_mounts": [{"name": "scratch", "mountPath": "/scratch"}],
        "node_selector": {"pool": "cpu"}}}}
    sp = make_spawner(make_user("erin"), {"profile": "cpu"}, profiles=profiles,
                      accelerators={}, groups={}, everyone=None, volumes=[home],
                      volume_mounts=[{"name": "home", "mountPath": "/home/jovyan"}],
                      node_selector={"kubernetes.io/os": "linux"})
    await sp.load_user_options()
    assert sp.volumes == [home, scratch]
    assert [m["mountPath"] for m in sp.volume_mounts] == ["/home/jovyan", "/scratch"]
    assert sp.node_selector == {"kubernetes.io/os": "linux", "pool": "cpu"}
    await sp.load_user_options()  # a second start does not add them twice
    assert sp.volumes == [home, scratch]


async def test_a_leftover_pod_is_replaced_and_the_token_secret_kept(cluster):
    alice = make_user(ALICE, ["vision"])
    sp = make_spawner(alice, {"project": "vision", "profile": "cpu"})
    await sp.provision()
    leftover = {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": sp.pod_name, "namespace": "vision", "labels": {"component": "singleuser-server"}},
                "spec": {"serviceAccountName": "mlplatform-runner",
                         "containers": [{"name": "notebook", "image": "old"}]}}
    wait_default_service_account(cluster, "vision")
    create(cluster, leftover)
    await sp.start()  # KubeSpawner: create → 409 → stop the old pod → create again
    pod = cluster.get("", "v1", "pods", "vision", sp.pod_name)
    assert pod["spec"]["containers"][0]["image"] != "old"
    assert cluster.get("", "v1", "secrets", "vision", f"{sp.pod_name}-hub-token")
    await stop_as_hub(sp)
    assert cluster.get("", "v1", "secrets", "vision", f"{sp.pod_name}-hub-token") is None


async def test_a_server_whose_pod_is_gone_leaves_no_token_secret(cluster):
    """JupyterHub stops a server whose pod is gone (deleted, evicted, or never made by a hub that died
    between the Secret and the pod) without calling `stop`: its token Secret goes all the same."""
    bob = make_user("bob", ["vision"])
    sp = make_spawner(bob, {"project": "vision", "profile": "cpu"})
    await sp.start()
    secret = f"{sp.pod_name}-hub-token"
    assert cluster.get("", "v1", "secrets", "vision", secret)
    cluster.delete("", "v1", "pods", "vision", sp.pod_name)

    async def gone():
        return await sp.poll() is not None
    await until(gone, "the hub's poll sees the pod gone")
    await stop_as_hub(sp)
    assert cluster.get("", "v1", "secrets", "vision", secret) is None


async def test_user_options_are_the_platforms_to_apply_so_jupyterhub_does_not_warn(cluster, caplog):
    """JupyterHub runs `apply_user_options` before `start` and warns about options no hook takes;
    the platform takes project and profile itself in `load_user_options`."""
    options = {"project": "vision", "profile": "mig-1g"}
    sp = make_spawner(make_user(ALICE, ["vision"]), options)
    with caplog.at_level(logging.DEBUG):
        await sp._run_apply_user_options(sp.user_options)  # what jupyterhub.user.User.spawn calls
    assert not [r for r in caplog.records if "user_options" in r.getMessage()]
    assert sp.user_options == options
    await sp.load_user_options()
    assert sp.namespace == "vision" and sp.extra_resource_limits == {"nvidia.com/mig-1g.5gb": "1"}



async def test_a_server_gets_its_own_writable_copy_made_at_start_and_deleted_at_stop(cluster, snapshots):
    """The spawn form offers a copy of a dataset whose load has a snapshot; the server's copy is a
    claim from it with the dataset's files, mounted writable where the dataset would be, and goes
    when the server stops. (The operator's part, the snapshot of the load and the annotation naming
    it, is played here as `set_loaded` plays its condition; `test_dataset_copies` runs the operator.)"""
    alice = make_user(ALICE, ["vision"])
    hub = await provisioned(alice)
    pvc = dataset_pvc("vision", "coco", "s3://vision/coco")
    pvc["spec"]["storageClassName"] = "csi-hostpath"
    create(cluster, pvc)
    claim = wait_bound(cluster, "vision", "coco")
    volume = cluster.get("", "v1", "persistentvolumes", None, claim["spec"]["volumeName"])
    (pathlib.Path(volume["spec"]["csi"]["volumeAttributes"]["path"]) / "train.csv").write_text("a,b\n")  # loaded
    set_loaded(cluster, "vision", "coco", "True", "Loaded")
    cluster.create("snapshot.storage.k8s.io", "v1", "volumesnapshots", "vision", {
        "apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot", "metadata": {"name": "coco-snap-l1"},
        "spec": {"source": {"persistentVolumeClaimName": "coco"}}})

    async def snapshot_ready():
        snap = cluster.get("snapshot.storage.k8s.io", "v1", "volumesnapshots", "vision", "coco-snap-l1")
        return (snap.get("status") or {}).get("readyToUse")

    await until(snapshot_ready, "the snapshot is ready")
    cluster.patch("", "v1", "persistentvolumeclaims", "vision", "coco", {"metadata": {"annotations": {
        "mlplatform.io/load-id": "l1", "mlplatform.io/snapshot": "coco-snap-l1"}}})

    async def offered():
        return [d.snapshot for d in (await hub.project_files("vision")).datasets] == ["coco-snap-l1"]

    await until(offered, "the hub lists the dataset's snapshot")
    sp = make_spawner(alice, {"project": "vision", "profile": "cpu", "datasets": ["coco:copy"]})
    assert 'value="coco:copy"' in await sp.get_options_form()
    await sp.start()
    copy_name = f"{sp.pod_name}-coco-copy"
    pod = cluster.get("", "v1", "pods", "vision", sp.pod_name)
    (vol,) = [v for v in pod["spec"]["volumes"] if v.get("persistentVolumeClaim")]
    assert vol["persistentVolumeClaim"] == {"claimName": copy_name}  # writable (false is left out)
    (mount,) = [m for c in pod["spec"]["containers"] for m in c.get("volumeMounts") or [] if m["name"] == vol["name"]]
    assert mount["mountPath"] == "/datasets/coco" and not mount.get("readOnly")
    copy = wait_bound(cluster, "vision", copy_name)
    assert copy["metadata"]["labels"]["mlplatform.io/dataset-copy-of"] == "coco"
    copied = cluster.get("", "v1", "persistentvolumes", None, copy["spec"]["volumeName"])
    assert (pathlib.Path(copied["spec"]["csi"]["volumeAttributes"]["path"]) / "train.csv").read_text() == "a,b\n"
    await stop_as_hub(sp)

    async def copy_gone():
        return cluster.get("", "v1", "persistentvolumeclaims", "vision", copy_name) is None

    await until(copy_gone, "the copy deleted with the server")
