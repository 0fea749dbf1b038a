"""A Kubeflow Trainer v2 TrainJob made with a notebook's token holds what a v1 job holds (issue 31:
the tenancy doors for TrainJobs). On the real control plane with real Trainer v2 and JobSet
(`platform_runtime`), the real operator (its ``member-accounts`` webhook, `helm-values/operator.yaml`)
and the project policies (`helm-values/project-policies.yaml`): the hub provisions the team project
``vision`` (entitled to MIG ``1g.5gb`` only) for bob and alice; bob's notebook token (his own member
account's) then tries, with plain Kubernetes calls:

- a runtime that is not the platform's (refused: ``mlplatform-trainjobs``), an initializer
  (refused), a teammate's account in a runtime patch (refused by the webhook, naming the field),
  another namespace (refused by RBAC): nothing is made;
- a privileged container and a whole GPU the project may not use, both through a runtime patch or
  the trainer's resources: the TrainJob is stored, but no pod of it is ever made (Pod Security
  admission and ``mlplatform-project-pods`` refuse the Job controller's pods; FailedCreate says why);
- a clean TrainJob naming the project's runner: stored, and its pods run, as bob's own account.
"""

from __future__ import annotations

import asyncio
import copy

import pytest

from hub_ext.manifests.tenancy import member_binding_name
from tests.cluster.identities import service_account_kubeconfig
from tests.cluster.rest import ApiError, Rest
from tests.kube.platform_env import make_spawner, make_user, platform_cluster, until

pytestmark = pytest.mark.kube

BOB, ALICE = member_binding_name("bob"), member_binding_name("alice")
TRAINJOBS = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs"
MEMBERS = {"member_identity_template": "oidc:{username}"}
JOBSET = "jobset.sigs.k8s.io/jobset-name"


def trainjob(name: str, account: str | None = "mlplatform-runner", runtime: str = "mlplatform-torch",
             container: dict | None = None, resources: dict | None = None, **spec) -> dict:
    pod: dict = {"containers": [{"name": "node", **(container or {})}]}
    if account:
        pod["serviceAccountName"] = account
    trainer = {"image": "python:3.11-slim", "command": ["sleep", "600"], "numNodes": 1,
               "resourcesPerNode": resources or {"limits": {"cpu": "1", "memory": "1Gi"}}}
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": name},
            "spec": {"runtimeRef": {"name": runtime}, "trainer": trainer, "runtimePatches": [
                {"manager": "example.com/bob", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
                    {"name": "node", "template": {"spec": {"template": {"spec": pod}}}}]}}}}], **spec}}


def patched_pod(obj: dict) -> dict:
    return obj["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0][
        "template"]["spec"]["template"]["spec"]


@pytest.fixture
async def vision(kube_cluster, operator, platform_runtime, tmp_path, monkeypatch):
    async with platform_cluster(kube_cluster, tmp_path, monkeypatch):
        await make_spawner(make_user("bob", ["vision"], uid=2), **MEMBERS).provision()
        await make_spawner(make_user("alice", ["vision"], uid=3), **MEMBERS).provision()
        bob = Rest(service_account_kubeconfig(kube_cluster, tmp_path / "bob-sa.kubeconfig", "vision", BOB))
        try:
            yield kube_cluster, bob
        finally:
            await bob.close()


async def test_a_trainjob_by_a_notebook_token_holds_the_projects_doors(vision):
    cluster, bob = vision
    path = TRAINJOBS.format(ns="vision")
    refusals = {
        "a runtime not the platform's": (path, trainjob("other-runtime", runtime="torch-distributed"),
                                         "one of the platform's runtimes"),
        "an initializer": (path, trainjob("init", initializer={"dataset": {"storageUri": "hf://x/y"}}),
                           "spec.initializer"),
        "a teammate's account": (path, trainjob("as-alice", account=ALICE), f"not {ALICE}"),
        "another namespace": (TRAINJOBS.format(ns="default"), trainjob("elsewhere"), "forbidden"),
    }
    for what, (where, body, words) in refusals.items():
        with pytest.raises(ApiError) as e:
            await bob.post(where, body)
        assert e.value.status == 403 and words in str(e.value), (what, str(e.value))
    assert not cluster.items("trainer.kubeflow.org", "v1alpha1", "trainjobs", "vision")

    # stored, but admission refuses every pod the Job controller makes for them
    held = {"privileged": trainjob("privileged", container={"securityContext": {"privileged": True}}),
            "a-gpu": trainjob("a-gpu", resources={"limits": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}})}
    for body in held.values():
        made = await bob.post(path, copy.deepcopy(body))
        assert patched_pod(made)["serviceAccountName"] == BOB  # the webhook gave it bob's account

    # a clean one: stored and run as bob's own account
    clean = await bob.post(path, trainjob("clean"))
    assert patched_pod(clean)["serviceAccountName"] == BOB

    def pods_of(name: str) -> list[dict]:
        return cluster.items("", "v1", "pods", "vision", labelSelector=f"{JOBSET}={name}")

    async def clean_pods():
        return pods_of("clean")

    (pod,) = await until(clean_pods, "the clean TrainJob's pod", 60)
    assert pod["spec"]["serviceAccountName"] == BOB

    async def refused(name: str) -> str | None:
        events = cluster.items("", "v1", "events", "vision")
        found = [e["message"] for e in events if e.get("reason") == "FailedCreate"
                 and e["involvedObject"]["name"].startswith(f"{name}-node")]
        return found[0] if found else None

    messages = {name: await until(lambda n=name: refused(n), f"the Job controller refused {name}'s pod", 60)
                for name in held}  # (the lambda's call is the coroutine `until` awaits)
    assert "privileged" in messages["privileged"], messages
    assert "mlplatform-project-pods" in messages["a-gpu"] and "may not use this accelerator" in messages["a-gpu"], \
        messages
    await asyncio.sleep(1)  # and none was made meanwhile
    assert not pods_of("privileged") and not pods_of("a-gpu")
