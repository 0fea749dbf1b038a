"""A member who leaves keeps nothing, not even a token they copied out while a member: in a team
project each member's pods run as their own ServiceAccount (the hub makes it; the operator's
``member-accounts`` webhook gives it to the pods of whatever the member makes and refuses a
teammate's), and when they leave the hub deletes it, which voids every token of it.

On the real API server, with the real operator and the hub's own provisioning and reconciler: bob
and alice are members of the team project ``vision`` (identities ``oidc:<name>``). Then, through
plain Kubernetes calls:

- bob's notebook token (his account's) makes a Job naming the project's runner, or nothing: the Job
  is stored, and its pod runs, as bob's account; one naming alice's account is refused; so are a
  sweep whose trial template is in a ConfigMap, and the project's shared runner token;
- bob's own identity gets his account the same way; alice may still label bob's Job (a change
  that leaves its pods as they are);
- bob leaves the group: a reconcile round deletes his RoleBinding and his account; the token he
  held (as a job could have sent it anywhere) is refused at once, and his Job's pod goes on
  running with no right.
"""

from __future__ import annotations

import pytest

from hub_ext.manifests.membership import HubUser
from hub_ext.manifests.tenancy import member_binding_name
from hub_ext.web.reconcile import Platform, Reconciler
from tests.cluster.identities import service_account_kubeconfig
from tests.cluster.rest import ApiError, Rest
from tests.kube.platform_env import make_spawner, make_user, platform_cluster, until

pytestmark = pytest.mark.kube

BOB, ALICE = member_binding_name("bob"), member_binding_name("alice")
JOBS = "/apis/batch/v1/namespaces/vision/jobs"
MEMBERS = {"member_identity_template": "oidc:{username}"}


def job(name: str, account: str | None = None) -> dict:
    spec = {"restartPolicy": "Never", "containers": [{"name": "main", "image": "python:3.12-slim",
                                                      "command": ["sleep", "600"]}]}
    if account:
        spec["serviceAccountName"] = account
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"backoffLimit": 0, "template": {"spec": spec}}}


@pytest.fixture
async def vision(kube_cluster, operator, tmp_path, monkeypatch):
    async with platform_cluster(kube_cluster, tmp_path, monkeypatch):
        bob = make_spawner(make_user("bob", ["vision"], uid=2), **MEMBERS)
        await bob.provision()
        await make_spawner(make_user("alice", ["vision"], uid=3), **MEMBERS).provision()
        yield kube_cluster, bob, tmp_path


async def test_a_leavers_pods_and_tokens_are_their_own_and_go_with_them(vision):
    cluster, bob_spawner, tmp_path = vision
    accounts = {a["metadata"]["name"] for a in cluster.items("", "v1", "serviceaccounts", "vision")}
    assert {BOB, ALICE, "mlplatform-runner"} <= accounts
    bob = Rest(service_account_kubeconfig(cluster, tmp_path / "bob-sa.kubeconfig", "vision", BOB))
    bob_identity = Rest(cluster.write_kubeconfig(tmp_path / "bob.kubeconfig", "vision", user="oidc:bob", groups=()))
    alice = Rest(cluster.write_kubeconfig(tmp_path / "alice.kubeconfig", "vision", user="oidc:alice", groups=()))
    runner = Rest(service_account_kubeconfig(cluster, tmp_path / "runner.kubeconfig", "vision", "mlplatform-runner"))
    try:
        # bob's token: the project's runner, or no account, becomes bob's own
        for name, named in (("bob-runner", "mlplatform-runner"), ("bob-none", None)):
            made = await bob.post(JOBS, job(name, named))
            assert made["spec"]["template"]["spec"]["serviceAccountName"] == BOB, name
        # his identity too (kubectl ai-platform on a laptop)
        made = await bob_identity.post(JOBS, job("bob-laptop"))
        assert made["spec"]["template"]["spec"]["serviceAccountName"] == BOB
        refusals = {
            "a teammate's account": (bob, JOBS, job("bob-as-alice", ALICE), f"not {ALICE}"),
            "a trial template in a ConfigMap": (bob, "/apis/kubeflow.org/v1beta1/namespaces/vision/experiments", {
                "apiVersion": "kubeflow.org/v1beta1", "kind": "Experiment", "metadata": {"name": "cm"},
                "spec": {"objective": {"type": "maximize", "objectiveMetricName": "acc"},
                         "algorithm": {"algorithmName": "random"},
                         "parameters": [{"name": "lr", "parameterType": "double",
                                         "feasibleSpace": {"min": "0.01", "max": "0.1"}}],
                         "trialTemplate": {"primaryContainerName": "main", "configMap": {
                             "configMapName": "templates", "templatePath": "t.yaml"}}}}, "trialTemplate.trialSpec"),
            "the shared runner token": (runner, JOBS, job("shared"), "restart your notebook server"),
        }
        for what, (rest, path, body, words) in refusals.items():
            with pytest.raises(ApiError) as e:
                await rest.post(path, body)
            assert e.value.status == 403 and words in str(e.value), (what, str(e.value))
        # a teammate may still change bob's Job in ways that leave its pods as they are
        await alice.patch(f"{JOBS}/bob-none", {"metadata": {"labels": {"reviewed-by": "alice"}}})

        async def running():
            pods = cluster.items("", "v1", "pods", "vision", labelSelector="job-name=bob-none")
            return pods if pods and pods[0].get("status", {}).get("phase") == "Running" else None

        pod = (await until(running, "bob's Job's pod runs", 60))[0]
        assert pod["spec"]["serviceAccountName"] == BOB
        assert (await bob.get("/api/v1/namespaces/vision/pods"))["items"]  # while a member: the team's pods

        # bob leaves the group: one reconcile round, as the hub runs it
        platform = Platform({"vision": "vision"}, bob_spawner.shared.kube, bob_spawner.shared.provisioner)
        report = await Reconciler(platform).run([HubUser("alice", frozenset({"vision"})), HubUser("bob")], [],
                                                stop=None)
        assert report.json()["removed_bindings"] == [f"vision/{BOB}"]
        assert report.json()["removed_accounts"] == [f"vision/{BOB}"] and not report.errors
        for rest in (bob, bob_identity):  # the copied token, and his own identity
            with pytest.raises(ApiError) as e:
                await rest.get("/api/v1/namespaces/vision/pods")
            assert e.value.status in (401, 403), str(e.value)
            with pytest.raises(ApiError):
                await rest.post(JOBS, job("after-leaving"))
        assert (await alice.get("/api/v1/namespaces/vision/pods"))["items"]  # the team keeps its work
        left = cluster.get("", "v1", "pods", "vision", pod["metadata"]["name"])
        assert left is not None and left["status"]["phase"] == "Running"  # running on, with no right
    finally:
        for rest in (bob, bob_identity, alice, runner):
            await rest.close()
        for name in ("bob-runner", "bob-none", "bob-laptop"):
            cluster.delete("batch", "v1", "jobs", "vision", name)
