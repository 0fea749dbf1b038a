"""Whose pods a team project runs (`hub_ext.operator.rules.member_accounts`): a member's Jobs,
training jobs and sweeps run as the member's own ServiceAccount, never a teammate's."""

from __future__ import annotations

import pytest

from hub_ext.core.errors import UserInputError
from hub_ext.core.entitlements import Project
from hub_ext.manifests.tenancy import member_binding_name, pod_account, project_objects
from hub_ext.operator.rules.member_accounts import account_of, decide, member_accounts, pod_specs

pytestmark = pytest.mark.unit

VISION = Project("vision", "Vision", False, frozenset(), {}, "group:vision")
BOB, ALICE = member_binding_name("bob"), member_binding_name("alice")
ACCOUNTS = member_accounts([o for o in project_objects(VISION, {}, (), [("bob", "oidc:bob"), ("alice", "")])
                            if o["kind"] == "ServiceAccount"])


def job(**pod) -> dict:
    return {"kind": "Job", "spec": {"template": {"spec": {"containers": [{"name": "c"}], **pod}}}}


def test_the_accounts_the_hub_makes_name_their_member_and_identity():
    assert ACCOUNTS == {BOB: {"mlplatform.io/member": "bob", "mlplatform.io/identity": "oidc:bob"},
                        ALICE: {"mlplatform.io/member": "alice", "mlplatform.io/identity": ""}}
    assert pod_account(VISION, "bob") == BOB
    assert pod_account(Project("user-bob", "bob", True, frozenset(), {}, "user:bob"), "bob") == "mlplatform-runner"


@pytest.mark.parametrize("user, groups, own", [
    (f"system:serviceaccount:vision:{BOB}", [], BOB),  # bob's notebook or job token
    ("oidc:bob", ["system:authenticated"], BOB),  # bob's own identity
    ("system:serviceaccount:kubeflow:katib-controller", [], None),  # Katib making trial Jobs
    ("system:serviceaccount:vision:default", [], None),  # no member
    ("admin", ["system:masters"], None),
    ("system:kube-controller-manager", [], None),
])
def test_the_requesters_own_account(user, groups, own):
    assert account_of(user, groups, "vision", ACCOUNTS) == own


@pytest.mark.parametrize("user, words", [
    ("system:serviceaccount:vision:mlplatform-runner", "restart your notebook server"),
    ("oidc:carol", "has no ServiceAccount in the team project vision"),
])
def test_a_member_without_an_account_is_told_what_to_do(user, words):
    with pytest.raises(UserInputError) as e:
        account_of(user, [], "vision", ACCOUNTS)
    assert e.value.status == 403 and words in e.value.message


def test_pods_get_the_members_account_and_no_one_elses():
    assert decide(job(), BOB, "vision") == [
        {"op": "add", "path": "/spec/template/spec/serviceAccountName", "value": BOB}]
    assert decide(job(serviceAccountName="mlplatform-runner"), BOB, "vision") == [
        {"op": "add", "path": "/spec/template/spec/serviceAccountName", "value": BOB}]
    assert decide(job(serviceAccountName=BOB), BOB, "vision") == []
    with pytest.raises(UserInputError) as e:
        decide(job(serviceAccountName=ALICE), BOB, "vision")
    assert e.value.field == "spec.template.spec.serviceAccountName" and e.value.status == 403
    assert f"run as your own ServiceAccount {BOB}, not {ALICE}" in e.value.message
    with pytest.raises(UserInputError):  # the deprecated spelling too
        decide(job(serviceAccount=ALICE), BOB, "vision")


def test_every_pod_template_of_a_training_job_and_a_sweep():
    pytorch = {"kind": "PyTorchJob", "spec": {"pytorchReplicaSpecs": {
        "Master": {"template": {"spec": {"containers": [{"name": "pytorch"}]}}},
        "Worker": {"template": {"spec": {"containers": [{"name": "pytorch"}], "serviceAccountName": ALICE}}}}}}
    assert [p for p, _ in pod_specs(pytorch["spec"], "/spec")] == [
        "/spec/pytorchReplicaSpecs/Master/template/spec", "/spec/pytorchReplicaSpecs/Worker/template/spec"]
    with pytest.raises(UserInputError) as e:
        decide(pytorch, BOB, "vision")
    assert e.value.field == "spec.pytorchReplicaSpecs.Worker.template.spec.serviceAccountName"
    sweep = {"kind": "Experiment", "spec": {"trialTemplate": {"trialSpec": job()}}}
    assert decide(sweep, BOB, "vision") == [
        {"op": "add", "path": "/spec/trialTemplate/trialSpec/spec/template/spec/serviceAccountName", "value": BOB}]
    in_config_map = {"kind": "Experiment", "spec": {"trialTemplate": {"configMap": {"configMapName": "t"}}}}
    with pytest.raises(UserInputError) as e:
        decide(in_config_map, BOB, "vision")
    assert e.value.field == "spec.trialTemplate.configMap" and "trialSpec" in e.value.message
