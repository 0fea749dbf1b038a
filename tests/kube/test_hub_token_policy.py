"""The hub-token policy (in `helm-values/project-policies.yaml`, a ValidatingAdmissionPolicy that the
real API server evaluates) in a team project the hub provisioned, with real identities.

The hub (PlatformSpawner acting as ``system:serviceaccount:jhub:hub``) starts alice's notebook
pod, whose env refers to her ``<pod>-hub-token`` Secret: admitted. Her teammate's identities (the
project's runner ServiceAccount token, as a notebook or job pod holds it, and bob's own
certificate identity ``oidc:bob`` bound by his member RoleBinding) may not create pods at all (the
project Role has no pod creation: RBAC refuses), but may create batch Jobs; a Job whose pod
template refers to alice's token Secret (volume, projected volume, env, envFrom) is accepted, and
then the Job controller's pod is refused by the policy: no pod ever appears and the Job's
FailedCreate event names the policy, while the same Job without the reference gets its pod. Even
an admin's pod that refers to a hub token is refused: only the hub's identity passes.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from tests.cluster.identities import service_account_kubeconfig
from tests.cluster.rest import ApiError, Rest
from tests.kube.platform_env import make_spawner, make_user, platform_cluster

pytestmark = pytest.mark.kube

MESSAGE = "only the hub may start pods that use a platform-reserved Secret"
MEMBERS = {"member_identity_template": "oidc:{username}"}
RUNNER = "mlplatform-runner"


@pytest.fixture
async def team(kube_cluster, tmp_path, monkeypatch):
    """The team project `vision` with alice's server running (started by the hub) and bob a member."""
    async with platform_cluster(kube_cluster, tmp_path, monkeypatch):
        await make_spawner(make_user("bob", ["vision"], uid=2), **MEMBERS).provision()
        alice = make_spawner(make_user("alice", ["vision"], uid=1), {"project": "vision", "profile": "cpu"},
                             **MEMBERS)
        await alice.start()
        yield alice
        await alice.stop()


@pytest.fixture(params=["runner token", "member certificate"])
async def member(request, kube_cluster, team, tmp_path):
    """A Rest client acting as one of the team's identities other than the hub."""
    if request.param == "runner token":
        kubeconfig = service_account_kubeconfig(kube_cluster, tmp_path / "runner.kubeconfig", "vision", RUNNER)
    else:
        kubeconfig = kube_cluster.write_kubeconfig(tmp_path / "bob.kubeconfig", "vision", user="oidc:bob", groups=())
    rest = Rest(kubeconfig)
    yield rest
    await rest.close()


def token_secret(alice) -> str:
    return f"{alice.pod_name}-hub-token"


def references(secret: str) -> dict[str, tuple[list, dict]]:
    """Each way a pod can refer to a Secret: (pod volumes, container fields)."""
    return {
        "volume": ([{"name": "t", "secret": {"secretName": secret}}], {"volumeMounts": [{"name": "t", "mountPath": "/t"}]}),
        "projected": ([{"name": "t", "projected": {"sources": [{"secret": {"name": secret}}]}}],
                      {"volumeMounts": [{"name": "t", "mountPath": "/t"}]}),
        "env": ([], {"env": [{"name": "T", "valueFrom": {"secretKeyRef": {"name": secret, "key": "token"}}}]}),
        "envFrom": ([], {"envFrom": [{"secretRef": {"name": secret}}]}),
        "none": ([], {}),
    }


def pod_spec(volumes: list, container: dict) -> dict:
    spec = {"restartPolicy": "Never", "serviceAccountName": RUNNER,
            "containers": [{"name": "c", "image": "python:3.11-slim", "command": ["true"], **container}]}
    if volumes:
        spec["volumes"] = volumes
    return spec


def job(name: str, volumes: list, container: dict) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"backoffLimit": 0, "template": {"spec": pod_spec(volumes, container)}}}


async def test_the_hubs_notebook_pod_with_its_token_is_admitted_and_nobody_elses(team, kube_cluster):
    pod = kube_cluster.get("", "v1", "pods", "vision", team.pod_name)
    env = {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}
    assert env["JUPYTERHUB_API_TOKEN"]["valueFrom"]["secretKeyRef"]["name"] == token_secret(team)
    assert pod["status"]["phase"] == "Running"
    # the very same pod, created by an admin (system:masters) instead of the hub: refused
    copy = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "copy", "labels": pod["metadata"]["labels"]},
            "spec": {k: v for k, v in pod["spec"].items() if k not in ("nodeName",)}}
    copy["spec"]["volumes"] = [v for v in copy["spec"]["volumes"] if not v["name"].startswith("kube-api-access")]
    copy["spec"]["containers"] = [{**c, "volumeMounts": [m for m in c.get("volumeMounts") or []
                                                         if not m["name"].startswith("kube-api-access")]}
                                  for c in copy["spec"]["containers"]]
    with pytest.raises(ApiError) as e:
        kube_cluster.create("", "v1", "pods", "vision", copy)
    assert (e.value.status, e.value.reason) == (403, "Forbidden")
    assert MESSAGE in str(e.value) and "ValidatingAdmissionPolicy 'mlplatform-project-pods'" in str(e.value)


async def test_a_member_may_not_create_pods_at_all(team, member):
    volumes, container = references(token_secret(team))["none"]
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "direct"}, "spec": pod_spec(volumes, container)}
    with pytest.raises(ApiError) as e:
        await member.post("/api/v1/namespaces/vision/pods", body)
    assert e.value.status == 403 and 'cannot create resource "pods"' in str(e.value)  # RBAC, before admission


async def failed_creates(rest_get, name: str) -> list[str]:
    events = await rest_get("/api/v1/namespaces/vision/events", fieldSelector=f"involvedObject.name={name}")
    return [ev.get("message") or "" for ev in events["items"] if ev.get("reason") == "FailedCreate"]


async def test_a_members_job_that_mounts_a_teammates_hub_token_gets_no_pod(team, member, kube_cluster):
    suffix = uuid.uuid4().hex[:6]
    names = {}
    for how, (volumes, container) in references(token_secret(team)).items():
        names[how] = f"steal-{how.lower()}-{suffix}"
        created = await member.post("/apis/batch/v1/namespaces/vision/jobs", job(names[how], volumes, container))
        assert created["metadata"]["name"] == names[how]  # RBAC lets members run Jobs; admission is per pod

    admin = kube_cluster.rest  # reads as the test tooling, on the cluster's loop

    async def read(path, **params):
        return await kube_cluster.arun(admin.get(path, **params))

    deadline = time.monotonic() + 30
    refused = {}
    while time.monotonic() < deadline:
        refused = {how: await failed_creates(read, name) for how, name in names.items() if how != "none"}
        if all(refused.values()):
            break
        await asyncio.sleep(0.2)
    for how, messages in refused.items():
        assert messages and all(MESSAGE in m for m in messages), (how, messages)
    # the control Job's pod is created (so the Job door works and the refusal is the policy's)
    pods = {}
    while time.monotonic() < deadline:
        pods = {how: (await read("/api/v1/namespaces/vision/pods", labelSelector=f"job-name={name}"))["items"]
                for how, name in names.items()}
        if pods["none"]:
            break
        await asyncio.sleep(0.2)
    assert pods["none"] and not await failed_creates(read, names["none"])
    assert {how: p for how, p in pods.items() if how != "none" and p} == {}
