"""The cluster door: what a red team got through on the real API server, closed by the cluster itself
(`helm-values/project-policies.yaml`, the project's ResourceQuota), tried as a tenant would with a
notebook's runner token and a member's own identity. The pod escapes (a system PriorityClass, a
named node, reserved Secrets through other volume kinds, an ephemeral claim on a chosen volume) are
rows of `test_project_policies.ESCAPES`, tried there as pods and as a member's Jobs; here the doors
beside them:

- a Katib Experiment naming another namespace's ConfigMap as its trial template is refused before
  Katib reads it (the policy runs before Katib's webhook, which would quote the ConfigMap);
- a teammate cannot delete a team member's notebook server pod (only the hub stops servers), while
  a job's pod stays theirs to delete;
- a generic ephemeral volume of 1 PiB gets no claim: the project's storage quota refuses it;
- the operator's webhook answers only the API server (its webhook client certificate): a review
  forged by anyone else, with no certificate or a user's, gets no answer (so it is no oracle on other
  projects' credential and dataset names).
"""

from __future__ import annotations

import http.client
import json
import ssl

import pytest

from tests.cluster.rest import ApiError, Rest
from tests.cluster.identities import service_account_kubeconfig
from tests.kube.operator_env import make_project
from tests.kube.platform_env import make_spawner, make_user, platform_cluster, until

pytestmark = pytest.mark.kube

RUNNER = "mlplatform-runner"
EXPERIMENTS = "/apis/kubeflow.org/v1beta1/namespaces/vision/experiments"


@pytest.fixture
async def vision(kube_cluster, tmp_path, monkeypatch):
    """The team project `vision`, provisioned by the hub for bob (his identity ``oidc:bob`` bound as a
    member); the project's runner token and bob's identity."""
    async with platform_cluster(kube_cluster, tmp_path, monkeypatch):
        await make_spawner(make_user("bob", ["vision", "research"], uid=2),
                           member_identity_template="oidc:{username}").provision()
        runner = Rest(service_account_kubeconfig(kube_cluster, tmp_path / "runner.kubeconfig", "vision", RUNNER))
        member = Rest(kube_cluster.write_kubeconfig(tmp_path / "bob.kubeconfig", "vision", user="oidc:bob",
                                                    groups=()))
        try:
            yield kube_cluster, runner, member
        finally:
            await runner.close()
            await member.close()


def experiment(name: str, config_map_namespace: str | None) -> dict:
    config_map = {"configMapName": "trial-templates", "templatePath": "default.yaml"}
    if config_map_namespace is not None:
        config_map["configMapNamespace"] = config_map_namespace
    return {"apiVersion": "kubeflow.org/v1beta1", "kind": "Experiment", "metadata": {"name": name},
            "spec": {"objective": {"type": "maximize", "objectiveMetricName": "acc"},
                     "algorithm": {"algorithmName": "random"}, "maxTrialCount": 1, "parallelTrialCount": 1,
                     "parameters": [{"name": "lr", "parameterType": "double",
                                     "feasibleSpace": {"min": "0.01", "max": "0.1"}}],
                     "trialTemplate": {"primaryContainerName": "training", "configMap": config_map,
                                       "trialParameters": [{"name": "lr", "reference": "lr"}]}}}


async def test_a_sweep_cannot_make_katib_read_another_namespaces_config_map(vision):
    cluster, runner, member = vision
    secret_data = {"default.yaml": "another project's template: its values must never be quoted"}
    cluster.create("", "v1", "configmaps", "kube-system",
                   {"metadata": {"name": "trial-templates"}, "data": secret_data})
    try:
        attempts = 0
        for rest in (runner, member):
            for namespace in ("kube-system", "user-bob", "jhub"):
                attempts += 1
                with pytest.raises(ApiError) as e:
                    await rest.post(EXPERIMENTS, experiment(f"x-{attempts}", namespace))
                assert e.value.status == 403, str(e.value)
                assert "reads its trial template only from its own project" in str(e.value)
                assert "must never be quoted" not in str(e.value)
        assert attempts == 6
        # the project's own namespace, named or left out, is not this policy's business
        for i, namespace in enumerate(("vision", None)):
            try:
                await runner.post(EXPERIMENTS, experiment(f"own-{i}", namespace))
            except ApiError as e:  # Katib's own webhook may refuse the missing ConfigMap: not our words
                assert "reads its trial template only from its own project" not in str(e)
        # nor can an Experiment be changed to point elsewhere after it was made
        made = cluster.get("kubeflow.org", "v1beta1", "experiments", "vision", "own-1")
        if made is not None:
            made["spec"]["trialTemplate"]["configMap"]["configMapNamespace"] = "kube-system"
            with pytest.raises(ApiError) as e:
                await runner.put(f"{EXPERIMENTS}/own-1", made)
            assert e.value.status in (403, 422) and "kube-system" in str(e.value)
    finally:
        cluster.delete("", "v1", "configmaps", "kube-system", "trial-templates")
        for name in ("own-0", "own-1"):
            cluster.delete("kubeflow.org", "v1beta1", "experiments", "vision", name)


def pod(name: str, labels: dict) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels},
            "spec": {"restartPolicy": "Never", "serviceAccountName": RUNNER,
                     "containers": [{"name": "c", "image": "python:3.11-slim", "command": ["sleep", "300"]}]}}


async def test_a_teammate_cannot_stop_a_members_notebook_server(vision):
    cluster, runner, member = vision
    cluster.create("", "v1", "pods", "vision",
                   pod("jupyter-alice", {"component": "singleuser-server", "hub.jupyter.org/username": "alice"}))
    cluster.create("", "v1", "pods", "vision", pod("job-1-master-0", {"mlplatform.io/job": "job_1"}))
    for rest in (runner, member):
        with pytest.raises(ApiError) as e:
            await rest.delete("/api/v1/namespaces/vision/pods/jupyter-alice")
        assert e.value.status == 403 and "is stopped only through the hub" in str(e.value)
    assert cluster.get("", "v1", "pods", "vision", "jupyter-alice")["metadata"].get("deletionTimestamp") is None
    await runner.delete("/api/v1/namespaces/vision/pods/job-1-master-0")  # a job's pod: still the team's
    cluster.delete("", "v1", "pods", "vision", "jupyter-alice")  # as the hub does (an administrator here)


async def test_an_ephemeral_volume_of_a_petabyte_gets_no_claim(vision):
    cluster, runner, member = vision
    body = pod("big-scratch", {})
    body["spec"]["volumes"] = [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Pi"}}}}}}]
    body["spec"]["containers"][0]["volumeMounts"] = [{"name": "scratch", "mountPath": "/scratch"}]
    cluster.create("", "v1", "pods", "vision", body)
    try:
        async def refused():
            events = cluster.items("", "v1", "events", "vision")
            return [ev["message"] for ev in events if ev["involvedObject"].get("name") == "big-scratch"
                    and "exceeded quota" in (ev.get("message") or "")]
        messages = await until(refused, "the ephemeral claim refused by the project's storage quota", 60)
        assert "requests.storage" in messages[0]
        assert cluster.get("", "v1", "persistentvolumeclaims", "vision", "big-scratch-scratch") is None
    finally:
        cluster.delete("", "v1", "pods", "vision", "big-scratch")


def forged_review(port: int, cert=None) -> int:
    """POST an AdmissionReview to the operator's pod webhook as a caller with `cert` (a Pair, or
    None); the HTTP status it answers (an exception when the server gives no answer)."""
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE  # the caller does not care who answers
    if cert is not None:
        context.load_cert_chain(str(cert.cert), str(cert.key))
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "forged", "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"}, "operation": "CREATE",
        "namespace": "user-alice", "userInfo": {"username": "oidc:mallory"},
        "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe", "namespace": "user-alice",
                                                                  "annotations": {"mlplatform.io/credentials": "s3"}},
                   "spec": {"containers": [{"name": "c", "image": "x"}]}}}}
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
    try:
        conn.request("POST", "/credential-mounts", json.dumps(review), {"Content-Type": "application/json"})
        return conn.getresponse().status
    finally:
        conn.close()


async def test_the_operators_webhook_answers_only_the_api_server(kube_cluster, operator, tmp_path):
    pki = kube_cluster.cp.pki
    tenant = pki.issue("mallory", "oidc:mallory", client=True)  # a user's certificate of the cluster's CA
    attempts = 0
    for cert in (None, tenant):
        attempts += 1
        with pytest.raises((ssl.SSLError, ConnectionError)):
            forged_review(operator.webhook_port, cert)
    # the same review with the API server's webhook client certificate is answered
    api_server = kube_cluster.cp.webhook_pki.issue("webhook-caller", "kube-apiserver-webhook-client", client=True)
    assert forged_review(operator.webhook_port, api_server) == 200
    # and the API server itself reaches it: a pod asking for a credential its project lacks is refused
    # with the operator's words
    await make_project(operator.kube, "door-webhook")
    probe = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe", "annotations": {
        "mlplatform.io/credentials": "nope"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    try:
        with pytest.raises(ApiError) as e:
            await kube_cluster.arun(kube_cluster.rest.post("/api/v1/namespaces/door-webhook/pods", probe))
        assert "the credential 'nope' does not exist in the namespace 'door-webhook'" in str(e.value), str(e.value)
    finally:
        await kube_cluster.arun(kube_cluster.rest.delete("/api/v1/namespaces/door-webhook"))
    assert attempts == 2
