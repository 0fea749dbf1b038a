"""The project boundary as Kubernetes holds it (issue 16.1, 16.2, 16.5, 16.6): Pod Security
admission on the labels the hub puts on each project namespace, and the ValidatingAdmissionPolicies
of `helm-values/project-policies.yaml`, evaluated by the real API server, against real identities.

The team project ``vision`` (the demo's grant: profiles cpu and mig-1g, ``1g.5gb: 2``, so it may
ask for ``nvidia.com/mig-1g.5gb`` and for no whole GPU) is provisioned by the hub (acting as
``system:serviceaccount:jhub:hub``). Then:

- pods an admin creates directly (so every answer is immediate): each escape (privileged, hostPath
  ``/``, hostPID, hostNetwork, another ServiceAccount, a reserved Secret, ``NVIDIA_VISIBLE_DEVICES``,
  an un-prefixed ``envFrom``, an accelerator the project is not entitled to, by resource or by node
  selector) is refused with a message naming it, and the same pod without the escape is admitted;
- the same escapes in batch Jobs created with the project's runner token (as a notebook holds it):
  the Job is accepted (members may run Jobs) but the Job controller's pod is refused: no pod
  appears and the Job's FailedCreate event carries the refusal, while a clean Job gets its pod;
- the catalogue ConfigMap the jobs API plans from cannot be changed, deleted or re-created by a
  member; other ConfigMaps can (packages);
- members may read but not create or change Katib trials and suggestions;
- the hub itself can bind roles, relabel and delete namespaces only in project namespaces;
- `mlplatform render-project` prints exactly the objects the hub made.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import time
import uuid

import pytest
import yaml

from tests.cluster.identities import hub_kubeconfig, service_account_kubeconfig
from tests.cluster.rest import ApiError, Rest
from tests.kube.platform_env import PLATFORM, make_spawner, make_user, platform_cluster, until

pytestmark = pytest.mark.kube

RUNNER = "mlplatform-runner"
MIG = "nvidia.com/mig-1g.5gb"
MIG_NODE = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG"}


def container(**extra) -> dict:
    return {"name": "c", "image": "python:3.11-slim", "command": ["true"], **extra}


def spec(**extra) -> dict:
    return {"restartPolicy": "Never", "serviceAccountName": RUNNER, "containers": [container()], **extra}


def gpu(resource: str, count: int = 1, selector: dict | None = None) -> dict:
    out = spec(containers=[container(resources={"limits": {resource: str(count)}})],
               tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}])
    if selector:
        out["nodeSelector"] = selector
    return out


# attempt → (pod spec, words the refusal must contain)
ESCAPES = {
    # the cluster door (a red team's escapes): preempting other projects, skipping the scheduler, a
    # reserved Secret by other volume kinds, a chosen volume through an ephemeral claim
    "system-node-critical priority": (spec(priorityClassName="system-node-critical"),
                                      "may not use the priority class system-node-critical"),
    "system-cluster-critical priority": (spec(priorityClassName="system-cluster-critical"),
                                         "may not use the priority class"),
    "nodeName": (spec(nodeName="dgx-full"), "spec.nodeName may not be set"),
    "reserved Secret through CSI": (spec(volumes=[{"name": "s", "csi": {
        "driver": "secrets-store.csi.k8s.io", "nodePublishSecretRef": {"name": "mlplatform-operator-tls"}}}]),
        "platform-reserved Secret"),
    "hub token as image pull Secret": (spec(imagePullSecrets=[{"name": "jupyter-alice-hub-token"}]),
                                       "platform-reserved Secret"),
    "ephemeral claim on a chosen volume": (spec(volumes=[{"name": "d", "ephemeral": {"volumeClaimTemplate": {
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
                 "volumeName": "another-projects-volume"}}}}]), "may not name a PersistentVolume"),
    "privileged": (spec(containers=[container(securityContext={"privileged": True})]), "privileged"),
    "hostPath /": (spec(volumes=[{"name": "root", "hostPath": {"path": "/"}}],
                        containers=[container(volumeMounts=[{"name": "root", "mountPath": "/host"}])]), "hostPath"),
    "hostPID": (spec(hostPID=True), "host namespaces"),
    "hostNetwork": (spec(hostNetwork=True), "host namespaces"),
    "other ServiceAccount": (spec(serviceAccountName="default"), "ServiceAccount mlplatform-runner"),
    "hub token Secret": (spec(volumes=[{"name": "t", "secret": {"secretName": "jupyter-alice-hub-token"}}]),
                         "platform-reserved Secret"),
    "mlplatform- Secret": (spec(containers=[container(env=[{"name": "K", "valueFrom": {"secretKeyRef": {
        "name": "mlplatform-operator-tls", "key": "k"}}}])]), "platform-reserved Secret"),
    "NVIDIA_VISIBLE_DEVICES": (spec(containers=[container(env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}])]),
                               "NVIDIA_VISIBLE_DEVICES"),
    "envFrom without prefix": (spec(containers=[container(envFrom=[{"configMapRef": {"name": "gpus"}}])]),
                               "envFrom needs a prefix"),
    "whole GPU": (gpu("nvidia.com/gpu", selector={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}),
                  "may not use this accelerator"),
    "MIG slice in a request only": (spec(containers=[container(resources={"requests": {"nvidia.com/mig-3g.20gb": "1"},
                                                                          "limits": {"nvidia.com/mig-3g.20gb": "1"}})]),
                                    "may not use this accelerator"),
}
ADMITTED = {"clean": spec(), "entitled MIG slice": gpu(MIG, selector=MIG_NODE)}


@pytest.fixture
async def vision(kube_cluster, tmp_path, monkeypatch):
    """The team project `vision` and bob's personal project, provisioned by the hub for bob."""
    async with platform_cluster(kube_cluster, tmp_path, monkeypatch):
        await make_spawner(make_user("bob", ["vision", "research"], uid=2)).provision()
        yield kube_cluster


async def ran(cluster, namespace: str, names: list[str]) -> None:
    """Wait until the test kubelet has run the pods (so it removes them when it stops)."""
    async def done():
        return all((cluster.get("", "v1", "pods", namespace, n) or {}).get("status", {}).get("phase")
                   in ("Running", "Succeeded") for n in names)
    await until(done, f"pods {names} run")


def pod(name: str, pod_spec: dict) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": pod_spec}


async def test_each_escape_in_a_pod_is_refused_and_the_same_pod_without_it_admitted(vision):
    namespace = vision.get("", "v1", "namespaces", None, "vision")["metadata"]
    assert namespace["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"
    assert namespace["annotations"]["accelerators.mlplatform.io/1g.5gb"].startswith(MIG + ";")
    for i, (attempt, (pod_spec, words)) in enumerate(ESCAPES.items()):
        with pytest.raises(ApiError) as e:
            vision.create("", "v1", "pods", "vision", pod(f"escape-{i}", pod_spec))
        assert e.value.status == 403 and words in str(e.value), (attempt, str(e.value))
    for i, pod_spec in enumerate(ADMITTED.values()):
        created = vision.create("", "v1", "pods", "vision", pod(f"fine-{i}", pod_spec))
        # the LimitRange gives requests, so the project's CPU/memory quota counts every pod
        assert created["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "100m"
    await ran(vision, "vision", [f"fine-{i}" for i in range(len(ADMITTED))])
    used = vision.get("", "v1", "resourcequotas", "vision", "mlplatform-resources")
    assert set(used["spec"]["hard"]) >= {"requests.cpu", "requests.memory", "pods", "count/secrets"}
    assert "it may use: 1g.5gb (nvidia.com/mig-1g.5gb)" in str(e.value)  # the catalogue's 1g.5gb: any node's


async def test_a_project_allowed_an_a100_gets_no_other_gpu_on_the_same_resource(vision):
    """bob's personal project may use one A100 (his group research's grant); an H100 shares the
    resource nvidia.com/gpu, so only the node selector tells them apart: the policy requires the
    entitled product's selector."""
    a100 = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}
    for i, selector in enumerate([None, {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, {"other": "x"}]):
        with pytest.raises(ApiError) as e:
            vision.create("", "v1", "pods", "user-bob", pod(f"h100-{i}", gpu("nvidia.com/gpu", selector=selector)))
        assert e.value.status == 403 and "may not use this accelerator" in str(e.value)
    assert "a100 (nvidia.com/gpu on nvidia.com/gpu.product=NVIDIA-A100-SXM4-40GB)" in str(e.value)
    assert vision.create("", "v1", "pods", "user-bob", pod("a100", gpu("nvidia.com/gpu", selector=a100)))
    await ran(vision, "user-bob", ["a100"])


async def failed_creates(cluster, name: str) -> list[str]:
    events = cluster.items("", "v1", "events", "vision")
    return [ev.get("message") or "" for ev in events
            if ev.get("reason") == "FailedCreate" and ev["involvedObject"]["name"] == name]


async def test_escapes_in_a_members_jobs_get_no_pod(vision, tmp_path):
    runner = Rest(service_account_kubeconfig(vision, tmp_path / "runner.kubeconfig", "vision", RUNNER))
    suffix = uuid.uuid4().hex[:5]
    names = {}
    try:
        for i, attempt in enumerate(["clean", *ESCAPES]):
            pod_spec = ADMITTED["clean"] if attempt == "clean" else ESCAPES[attempt][0]
            names[attempt] = f"job-{i}-{suffix}"
            body = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": names[attempt]},
                    "spec": {"backoffLimit": 0, "template": {"spec": pod_spec}}}
            await runner.post("/apis/batch/v1/namespaces/vision/jobs", body)  # RBAC lets members run Jobs
    finally:
        await runner.close()
    deadline = time.monotonic() + 60
    while True:
        refused = {a: await failed_creates(vision, n) for a, n in names.items() if a != "clean"}
        if all(refused.values()) or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.5)
    for attempt, messages in refused.items():
        assert messages and all(ESCAPES[attempt][1] in m for m in messages), (attempt, messages)
    pods = vision.items("", "v1", "pods", "vision")
    owners = {p["metadata"]["labels"].get("job-name") for p in pods}
    assert names["clean"] in owners and not owners & {n for a, n in names.items() if a != "clean"}


async def test_the_catalogue_is_the_hubs_and_trials_are_read_only(vision, tmp_path):
    member = Rest(vision.write_kubeconfig(tmp_path / "bob.kubeconfig", "vision", user="oidc:bob", groups=()))
    runner = Rest(service_account_kubeconfig(vision, tmp_path / "runner.kubeconfig", "vision", RUNNER))
    base = "/api/v1/namespaces/vision/configmaps"
    try:
        for rest in (runner,):
            with pytest.raises(ApiError) as e:
                await rest.patch(f"{base}/mlplatform-catalog", {"data": {"catalog.json": "{}"}})
            assert e.value.status == 403 and "only the hub changes it" in str(e.value)
            with pytest.raises(ApiError) as e:
                await rest.delete(f"{base}/mlplatform-catalog")
            assert e.value.status == 403 and "only the hub changes it" in str(e.value)
            with pytest.raises(ApiError) as e:
                await rest.post(base, {"metadata": {"name": "mlplatform-catalog-2"}, "data": {}})
            assert e.value.status == 403
            assert (await rest.post(base, {"metadata": {"name": "job-1-package"}, "data": {}}))["metadata"]["uid"]
            trials = "/apis/kubeflow.org/v1beta1/namespaces/vision/trials"
            assert (await rest.get(trials))["items"] == []
            with pytest.raises(ApiError) as e:
                await rest.post(trials, {"apiVersion": "kubeflow.org/v1beta1", "kind": "Trial",
                                         "metadata": {"name": "forged"}, "spec": {}})
            assert e.value.status == 403 and 'cannot create resource "trials"' in str(e.value)
        with pytest.raises(ApiError) as e:  # a member's own identity: RBAC already refuses Secrets
            await member.get("/api/v1/namespaces/vision/secrets")
        assert e.value.status == 403
    finally:
        await member.close()
        await runner.close()


async def test_the_hub_binds_roles_and_changes_namespaces_only_in_projects(vision, tmp_path):
    hub = Rest(hub_kubeconfig(vision, tmp_path / "hub.kubeconfig"))
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "mlplatform-hub"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                           "name": "mlplatform-hub-project"},
               "subjects": [{"kind": "ServiceAccount", "name": "hub", "namespace": "jhub"}]}
    try:
        with pytest.raises(ApiError) as e:  # would give the hub every Secret of kube-system
            await hub.post("/apis/rbac.authorization.k8s.io/v1/namespaces/kube-system/rolebindings", binding)
        assert e.value.status == 403 and "binds roles only in project namespaces" in str(e.value)
        with pytest.raises(ApiError) as e:  # adopting an existing namespace as a project
            await hub.patch("/api/v1/namespaces/default",
                            {"metadata": {"labels": {"app.kubernetes.io/managed-by": "jupyterhub-mlplatform"}}})
        assert e.value.status == 403 and "only the namespaces it made" in str(e.value)
        with pytest.raises(ApiError) as e:
            await hub.delete("/api/v1/namespaces/kube-public")
        assert e.value.status == 403
        with pytest.raises(ApiError) as e:  # and no cluster-wide Secret read any more
            await hub.get("/api/v1/secrets")
        assert e.value.status == 403
        assert (await hub.get("/api/v1/namespaces/vision/secrets"))["items"] is not None
    finally:
        await hub.close()


async def test_render_project_prints_exactly_what_the_hub_made(vision, tmp_path):
    """`mlplatform render-project` (what an operator reviews before deploying) against the objects
    the hub really made for bob on the API server: the same objects, the same wanted fields."""
    from hub_ext.cli.main import main

    config = tmp_path / "jupyterhub_config.py"
    config.write_text('c.JupyterHub.spawner_class = "platform"\n'
                      + "".join(f"c.PlatformSpawner.{k} = {v!r}\n" for k, v in PLATFORM.items()))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["render-project", "--config", str(config), "--user", "bob",
                     "--group", "vision", "--group", "research"]) == 0
    rendered = [d for d in yaml.safe_load_all(out.getvalue()) if d]
    assert {d["metadata"].get("namespace") or d["metadata"]["name"] for d in rendered} == {"user-bob", "vision"}
    for doc in rendered:
        group, version = doc["apiVersion"].rpartition("/")[::2]
        plural = {"NetworkPolicy": "networkpolicies", "LimitRange": "limitranges"}.get(
            doc["kind"], doc["kind"].lower() + "s")
        meta = doc["metadata"]
        live = vision.get(group, version, plural, meta.get("namespace"), meta["name"])
        assert live is not None, (doc["kind"], meta)
        assert meta["labels"].items() <= live["metadata"]["labels"].items()
        assert (meta.get("annotations") or {}).items() <= (live["metadata"].get("annotations") or {}).items()
        for key in set(doc) - {"apiVersion", "kind", "metadata", "spec"}:
            assert live[key] == doc[key], (doc["kind"], meta["name"], key)
        if "spec" in doc and doc["kind"] != "NetworkPolicy":  # the API server fills NetworkPolicy defaults
            assert live["spec"] == doc["spec"] or doc["kind"] == "Namespace", (doc["kind"], meta["name"])
