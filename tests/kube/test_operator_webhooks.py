"""The operator's admission webhooks on the real control plane: the API server calls
`mlplatform operator` (the `operator` fixture: the shipped webhook configurations, the operator as
its own ServiceAccount) over TLS for every credential Secret and every pod of a project namespace.

- a credential Secret written with a project identity's own token (a ServiceAccount of the project
  given the right to write Secrets, so that RBAC lets the request through to admission) is checked
  by the hub's validator: a malformed key is refused naming the field, without a byte of the
  value in the API server's answer; a reserved name and a missing kind label are refused; a good
  one is stored, and breaking it by an update is refused; a Secret of another type is not looked at;
- a plain batch/v1 Job whose pod template asks for a credential by annotation (and whose
  ServiceAccount asks for another) runs on the process kubelet with both mounted read-only where
  the spawner mounts them, the path variables pointing at them and no value in its environment;
  a pod the spawner already gave the mount (`kube_mounts.volumes` + `mounts.select`) is not
  mounted twice; a credential that does not exist refuses the pod, naming the annotation;
- the operator stopped: pods and credential Secrets in a project are refused with the API server's
  "failed calling webhook" naming the platform's operator, while pods in the operator's namespace
  and in a namespace that is not a project, and non-credential Secrets, are not affected; the
  operator started again: pods are mutated again, with no manual step.

Pods that need only admission's answer are created with ``dryRun=All`` (admission runs, the
mutated pod comes back, nothing is stored or run).
"""

from __future__ import annotations

import base64
import json
import uuid

import kubernetes_asyncio
import pytest
import pytest_asyncio

from hub_ext.core.credentials import secret_manifest, validate_files
from hub_ext.core.mounts import Available, select
from hub_ext.kube.client import Kube, KubeError
from hub_ext.manifests.mounts import MountSettings, credential_of_kind, volumes
from tests.cluster.identities import install_platform, service_account_kubeconfig
from tests.kube.operator_env import make_project, running_operator
from tests.kube.platform_env import until

# one operator for the module (each start and stop costs seconds): the tests share its event loop
pytestmark = [pytest.mark.kube, pytest.mark.asyncio(loop_scope="module")]

RUNNER = "mlplatform-runner"
MOUNTS = MountSettings({"gcp-credential": "gcp-credential", "aws-credential": "aws-credential"})
ROOT = MOUNTS.credentials_root
SECRET_PART = "SuperSecretMaterial"
KEY = {"type": "service_account", "project_id": "vision-training", "private_key_id": "1",
       "private_key": f"-----BEGIN PRIVATE KEY-----\nMIIE{SECRET_PART}==\n-----END PRIVATE KEY-----\n",
       "client_email": "trainer@vision-training.iam.gserviceaccount.com"}
AWS_FILES = {"credentials": "[default]\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\n"
                            f"aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/b{SECRET_PART}\n"}
DENIED = 'admission webhook "credential-secrets.operator.mlplatform.io" denied the request: '
DRY_RUN = {"dryRun": "All"}


def gcp_secret(ns: str, name: str, key: dict = KEY) -> dict:
    secret = secret_manifest(ns, name, "gcp-credential", validate_files("gcp-credential", {
        "key.json": json.dumps(KEY)}), "", "alice")
    secret["data"] = {"key.json": base64.b64encode(json.dumps(key).encode()).decode()}
    return secret


def aws_secret(ns: str, name: str) -> dict:
    return secret_manifest(ns, name, "aws-credential", validate_files("aws-credential", AWS_FILES), "", "alice")


def pod(ns: str, annotations: dict | None = None, account: str = RUNNER, **spec) -> dict:
    """A pod that Pod Security's restricted level (the operator's namespace) accepts too."""
    container = {"name": "main", "image": "python:3.11-slim", "command": ["python", "-c", "pass"],
                 "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": "w-", "namespace": ns, "annotations": annotations or {}},
            "spec": {"serviceAccountName": account, "restartPolicy": "Never",
                     "securityContext": {"runAsNonRoot": True, "runAsUser": 1000,
                                         "seccompProfile": {"type": "RuntimeDefault"}},
                     "containers": [container], **spec}}


async def refusal(call) -> KubeError:
    try:
        await call
    except KubeError as e:
        return e
    raise AssertionError("the API server accepted it")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def operator(request, _session_cluster, tmp_path_factory):
    """The `operator` fixture's operator (tests.kube.operator_env), started once for the module; a
    test that stops it starts it again."""
    if request.config.getoption("--kube-context"):
        pytest.skip("needs the built control plane")
    async with running_operator(_session_cluster, tmp_path_factory.mktemp("operator"), []) as op:
        yield op


@pytest_asyncio.fixture(loop_scope="module")
async def project(operator, kube_cluster, tmp_path):
    """A project namespace (the platform's label), its runner ServiceAccount allowed to write Secrets
    there (as an admin of the project may; the hub's own project Role never grants Secrets), and a
    `Kube` acting with that ServiceAccount's token."""
    install_platform(kube_cluster)  # the project policies judge the mutated pods too
    admin, ns = operator.kube, f"proj-{uuid.uuid4().hex[:6]}"
    await make_project(admin, ns)
    await admin.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": RUNNER, "namespace": ns}})
    rbac = "/apis/rbac.authorization.k8s.io/v1/namespaces/" + ns
    await admin.request("POST", f"{rbac}/roles", {"metadata": {"name": "secret-writer"}, "rules": [
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "create", "update", "patch"]}]})
    await admin.request("POST", f"{rbac}/rolebindings", {
        "metadata": {"name": "secret-writer"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "secret-writer"},
        "subjects": [{"kind": "ServiceAccount", "name": RUNNER, "namespace": ns}]})
    api = await kubernetes_asyncio.config.new_client_from_config(
        config_file=str(service_account_kubeconfig(kube_cluster, tmp_path / "runner.kubeconfig", ns, RUNNER)))
    try:
        yield ns, Kube(api)
    finally:
        await api.close()
        await admin.delete(f"/api/v1/namespaces/{ns}")


async def test_credential_secrets_are_checked_whoever_writes_them_and_pods_get_them_mounted(
        operator, project, kube_cluster):
    ns, runner = project
    admin = operator.kube
    # --- the validating webhook, with the project identity's own token
    bad = gcp_secret(ns, "gcs-key", {**KEY, "private_key": f"MIIE{SECRET_PART}"})
    e = await refusal(runner.create(bad))
    assert e.code == 400, e.reason
    assert DENIED + "data.key.json.private_key: must be a PEM private key" in e.reason
    assert SECRET_PART not in e.body and SECRET_PART.lower() not in e.body.lower()
    e = await refusal(runner.create(gcp_secret(ns, "mlplatform-keys")))
    assert DENIED + "metadata.name: may not start with 'mlplatform-'" in e.reason
    unlabelled = gcp_secret(ns, "gcs-key")
    unlabelled["metadata"]["labels"] = {}
    e = await refusal(runner.create(unlabelled))
    assert DENIED + "metadata.labels[mlplatform.io/credential]: must be 'gcp-credential'" in e.reason
    await runner.create(gcp_secret(ns, "gcs-key"))
    await runner.create(aws_secret(ns, "s3"))
    broken = await runner.request("GET", f"/api/v1/namespaces/{ns}/secrets/gcs-key")
    broken["data"]["key.json"] = base64.b64encode(json.dumps({**KEY, "client_email": SECRET_PART}).encode()).decode()
    e = await refusal(runner.replace(broken))
    assert DENIED + "data.key.json.client_email: must be the service account's e-mail address" in e.reason
    assert SECRET_PART not in e.body
    await runner.create({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",  # not a credential: not checked
                         "metadata": {"name": "notes", "namespace": ns}, "stringData": {"key.json": "{"}})

    # --- the mutating webhook: a plain Job asks by annotation, its ServiceAccount asks for another
    await admin.request("PATCH", f"/api/v1/namespaces/{ns}/serviceaccounts/{RUNNER}",
                        {"metadata": {"annotations": {"mlplatform.io/credentials": "s3"}}},
                        content_type="application/merge-patch+json")
    script = ("import json, os, stat\n"
              "p = os.environ['GOOGLE_APPLICATION_CREDENTIALS']\n"
              "a = os.environ['AWS_SHARED_CREDENTIALS_FILE']\n"
              "print(json.dumps({'email': json.load(open(p))['client_email'],"
              " 'gcp_mode': oct(os.stat(p).st_mode & 0o777),"
              " 'aws_len': len(open(a).read()), 'config_exists': os.path.exists(os.environ['AWS_CONFIG_FILE']),"
              f" 'value_in_env': any({SECRET_PART!r} in v or 'PRIVATE KEY' in v for v in os.environ.values())}}))\n")
    kube_cluster.kubelet(mode="process")
    template = pod(ns, {"mlplatform.io/credentials": "gcs-key"})
    template["spec"]["containers"][0]["command"] = ["python", "-c", script]
    await admin.request("POST", f"/apis/batch/v1/namespaces/{ns}/jobs", {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "reads"},
        "spec": {"backoffLimit": 0, "template": {"metadata": {"annotations": template["metadata"]["annotations"]},
                                                 "spec": template["spec"]}}})

    async def done():
        job = await admin.get(f"/apis/batch/v1/namespaces/{ns}/jobs/reads")
        return (job.get("status") or {}).get("succeeded") or (job.get("status") or {}).get("failed")

    await until(done, "the Job ran", timeout=60)
    pods = (await admin.list(f"/api/v1/namespaces/{ns}/pods", labelSelector="job-name=reads"))["items"]
    assert len(pods) == 1
    spec = pods[0]["spec"]
    log = await admin.request("GET", f"/api/v1/namespaces/{ns}/pods/{pods[0]['metadata']['name']}/log")
    printed = log if isinstance(log, dict) else json.loads(log.strip().splitlines()[-1])  # one JSON line: parsed
    # the pod runs as uid 1000 (the kubelet runs it so) with no fsGroup: 0444, else it could not read
    # them (0440 root-owned was unreadable; mounts.volumes)
    assert printed == {
        "email": KEY["client_email"], "gcp_mode": "0o444", "aws_len": len(AWS_FILES["credentials"]),
        "config_exists": False, "value_in_env": False}
    assert [v for v in spec["volumes"] if "secret" in v] == [
        {"name": "credential-gcs-key", "secret": {"secretName": "gcs-key", "defaultMode": 0o444}},
        {"name": "credential-s3", "secret": {"secretName": "s3", "defaultMode": 0o444}}]
    container = spec["containers"][0]
    assert [m for m in container["volumeMounts"] if m["name"].startswith("credential-")] == [
        {"name": "credential-gcs-key", "mountPath": f"{ROOT}/gcs-key", "readOnly": True},
        {"name": "credential-s3", "mountPath": f"{ROOT}/s3", "readOnly": True}]
    assert container["env"] == [{"name": "AWS_CONFIG_FILE", "value": f"{ROOT}/s3/config"},
                                {"name": "AWS_SHARED_CREDENTIALS_FILE", "value": f"{ROOT}/s3/credentials"},
                                {"name": "GOOGLE_APPLICATION_CREDENTIALS", "value": f"{ROOT}/gcs-key/key.json"}]

    # --- a pod the spawner already gave the credential: nothing twice (the SA's s3 is still added)
    gcs = credential_of_kind("gcs-key", "gcp-credential", MOUNTS)
    vols, mounts = volumes([gcs], [], MOUNTS)
    spawned = pod(ns, {"mlplatform.io/credentials": "gcs-key"}, volumes=vols)
    spawned["spec"]["containers"][0].update(
        volumeMounts=mounts, env=[{"name": k, "value": v} for k, v in select(Available((gcs,)), ["gcs-key"], None,
                                                                              ns).items()])
    made = await admin.request("POST", f"/api/v1/namespaces/{ns}/pods", spawned, query=DRY_RUN)
    assert [v["name"] for v in made["spec"]["volumes"] if "secret" in v] == ["credential-gcs-key", "credential-s3"]
    c = made["spec"]["containers"][0]
    assert [m["mountPath"] for m in c["volumeMounts"] if m["name"].startswith("credential-")] == [
        f"{ROOT}/gcs-key", f"{ROOT}/s3"]
    assert [e["name"] for e in c["env"]] == ["GOOGLE_APPLICATION_CREDENTIALS", "AWS_CONFIG_FILE",
                                             "AWS_SHARED_CREDENTIALS_FILE"]

    # --- what cannot be mounted refuses the pod, naming where it was asked for
    e = await refusal(admin.request("POST", f"/api/v1/namespaces/{ns}/pods",
                                    pod(ns, {"mlplatform.io/credentials": "gone,notes"}), query=DRY_RUN))
    assert ('admission webhook "credential-mounts.operator.mlplatform.io" denied the request: '
            f"metadata.annotations[mlplatform.io/credentials]: the credential 'gone' does not exist in the namespace "
            f"'{ns}'") in e.reason
    e = await refusal(admin.request("POST", f"/api/v1/namespaces/{ns}/pods",
                                    pod(ns, {"mlplatform.io/credentials": "notes"}), query=DRY_RUN))
    assert "the Secret 'notes' is not a credential" in e.reason
    opted_out = await admin.request("POST", f"/api/v1/namespaces/{ns}/pods",
                                    pod(ns, {"mlplatform.io/inject-credentials": "false"}), query=DRY_RUN)
    assert "volumes" not in opted_out["spec"] or not any("secret" in v for v in opted_out["spec"]["volumes"])
    assert SECRET_PART not in operator.log() and "PRIVATE KEY" not in operator.log()  # nor in its logs

    # --- projects made a moment ago, one after the other: the first pod of each is mounted too (a
    # namespace the operator does not know yet is asked about at once, not at its next listing)
    fresh = [f"{ns}-a", f"{ns}-b"]
    try:
        for new in fresh:
            await make_project(admin, new)
            await admin.create({"apiVersion": "v1", "kind": "ServiceAccount",
                                "metadata": {"name": RUNNER, "namespace": new}})
            await admin.create(gcp_secret(new, "gcs-key"))
            made = await admin.request("POST", f"/api/v1/namespaces/{new}/pods",
                                       pod(new, {"mlplatform.io/credentials": "gcs-key"}), query=DRY_RUN)
            assert [v["name"] for v in made["spec"]["volumes"] if "secret" in v] == ["credential-gcs-key"], new
    finally:
        for new in fresh:
            await admin.delete(f"/api/v1/namespaces/{new}")


async def test_the_webhook_down_refuses_project_pods_clearly_and_nothing_else_and_recovers(
        operator, project):
    ns, runner = project
    admin = operator.kube
    await runner.create(gcp_secret(ns, "gcs-key"))
    asks = pod(ns, {"mlplatform.io/credentials": "gcs-key"})
    await operator.stop()

    # the failurePolicy Fail refusal: the API server's text names the webhook of the platform's
    # operator, and the platform's clients (hub_ext.kube.client) tell it as such
    for name, call in (("credential-mounts", admin.request("POST", f"/api/v1/namespaces/{ns}/pods", asks,
                                                           query=DRY_RUN)),
                       ("credential-secrets", runner.create(gcp_secret(ns, "other-key")))):
        e = await refusal(call)
        assert f'failed calling webhook "{name}.operator.mlplatform.io"' in json.loads(e.body)["message"], e.body
        assert e.reason == (f"the platform's operator (mlplatform operator, webhook {name}) is not answering, so "
                            "Kubernetes refused the request; try again in a minute, or ask your administrator to "
                            "check it")
    # the rest works: pods outside projects, Secrets that are not credentials
    for where, account in ((operator.namespace, "mlplatform-operator"), ("default", "default")):
        made = await admin.request("POST", f"/api/v1/namespaces/{where}/pods",
                                   pod(where, asks["metadata"]["annotations"], account), query=DRY_RUN)
        assert not any("secret" in v for v in made["spec"].get("volumes") or [])
    await runner.create({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                         "metadata": {"name": "notes", "namespace": ns}, "stringData": {"a": "b"}})

    await operator.start()
    made = await admin.request("POST", f"/api/v1/namespaces/{ns}/pods", asks, query=DRY_RUN)
    assert [v["name"] for v in made["spec"]["volumes"] if "secret" in v] == ["credential-gcs-key"]
