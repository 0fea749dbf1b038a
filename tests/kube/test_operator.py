"""`mlplatform operator` itself on the real control plane: its own ServiceAccount's RBAC suffices,
it becomes ready with the CA bundle in both webhook configurations, two replicas elect one leader
and a standby takes over when the leader stops, and the self-signed serving certificate is renewed
and reloaded without a restart. (Its webhooks and dataset controller: test_operator_webhooks.py,
test_operator_datasets.py.)"""

from __future__ import annotations

import asyncio
import base64
import socket
import ssl
import uuid

import aiohttp
import pytest
from cryptography import x509

from tests.kube.operator_env import OperatorProcess
from tests.kube.platform_env import until

pytestmark = pytest.mark.kube
LEASE = "/apis/coordination.k8s.io/v1/namespaces/mlplatform-system/leases/mlplatform-operator"
TLS_SECRET = "/api/v1/namespaces/mlplatform-system/secrets/mlplatform-operator-tls"


async def _metrics(op) -> str:
    async with aiohttp.ClientSession() as http, http.get(f"{op.health_url}/metrics") as resp:
        return await resp.text()


def _served_serial(port: int) -> int:
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock, \
            ctx.wrap_socket(sock, server_hostname="127.0.0.1") as tls:
        return x509.load_der_x509_certificate(tls.getpeercert(binary_form=True)).serial_number


async def test_two_replicas_elect_one_leader_and_a_standby_takes_over(operator, kube_cluster, tmp_path):
    async def holder():
        lease = await operator.kube.get(LEASE)
        return (lease or {}).get("spec", {}).get("holderIdentity")

    await until(lambda: _is(holder, "operator-1"), "the first replica holds the lease")
    assert "mlplatform_operator_leader 1" in await _metrics(operator)
    ca = (await operator.kube.get(TLS_SECRET))["data"]["ca.crt"]
    second = OperatorProcess(kube_cluster, tmp_path / "second", [])
    (tmp_path / "second").mkdir()
    second.kube, second.starts = operator.kube, 5
    await second.start()  # ready (it serves webhooks) though it does not lead: operator-6
    try:
        await asyncio.sleep(2)
        assert await holder() == "operator-1"
        assert "mlplatform_operator_leader 0" in await _metrics(second)
        # both replicas serve one certificate (the Secret's): the API server's CA bundle fits either
        assert (await operator.kube.get(TLS_SECRET))["data"]["ca.crt"] == ca
        assert _served_serial(second.webhook_port) == _served_serial(operator.webhook_port)
        await operator.stop()  # a clean stop releases the lease: the standby takes it at its next try
        await until(lambda: _is(holder, "operator-6"), "the standby holds the lease", timeout=10)
        assert "mlplatform_operator_leader 1" in await _metrics(second)
        lease = await operator.kube.get(LEASE)
        assert lease["spec"]["leaseTransitions"] >= 1
    finally:
        await second.stop()


async def _is(fn, value) -> bool:
    return await fn() == value


@pytest.mark.operator_args(["--tls-validity=9", "--tls-check=1"])
async def test_the_serving_certificate_is_renewed_and_reloaded_without_a_restart(operator):
    first = _served_serial(operator.webhook_port)
    bundle = (await operator.kube.get(
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/mlplatform-credential-mounts"
    ))["webhooks"][0]["clientConfig"]["caBundle"]
    pid = operator.proc.pid

    async def renewed():
        return await asyncio.to_thread(_served_serial, operator.webhook_port) != first
    await until(renewed, "a renewed certificate is served", timeout=20)
    secret = await operator.kube.get(TLS_SECRET)
    cert = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    assert cert.serial_number == _served_serial(operator.webhook_port)
    assert operator.proc.pid == pid and operator.proc.poll() is None
    # the CA did not change, so the API server trusted the old certificate and trusts the new one
    live = await operator.kube.get(
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/mlplatform-credential-mounts")
    assert live["webhooks"][0]["clientConfig"]["caBundle"] == bundle
    async with aiohttp.ClientSession() as http, http.get(f"{operator.health_url}/readyz") as resp:
        assert resp.status == 200


async def test_the_operator_reads_secrets_and_runs_jobs_only_in_projects(operator, kube_cluster, tmp_path):
    """The manifest's RBAC with the binding the hub makes in a project: as its own ServiceAccount,
    the operator reads a credential's metadata and creates a Job in a project, and in a namespace
    that is not one it may do neither (it still sees the dataset claims there: its watches)."""
    import kubernetes_asyncio

    from hub_ext.kube.client import METADATA_ONLY, Forbidden, Kube
    from tests.cluster.identities import service_account_kubeconfig
    from tests.kube.operator_env import NAMESPACE, SERVICE_ACCOUNT, make_project

    admin = operator.kube
    project, other = f"opr-{uuid.uuid4().hex[:6]}", f"plain-{uuid.uuid4().hex[:6]}"
    await make_project(admin, project)
    await admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": other}})
    api = await kubernetes_asyncio.config.new_client_from_config(config_file=str(service_account_kubeconfig(
        kube_cluster, tmp_path / "operator.kubeconfig", NAMESPACE, SERVICE_ACCOUNT)))
    me = Kube(api, retries=0)
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "probe"},
           "spec": {"template": {"spec": {"restartPolicy": "Never",
                                          "containers": [{"name": "c", "image": "busybox"}]}}}}
    try:
        for ns in (project, other):
            await admin.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": ns},
                                "stringData": {"k": "v"}})
        meta = await me.request("GET", f"/api/v1/namespaces/{project}/secrets/s", accept=METADATA_ONLY)
        assert meta["kind"] == "PartialObjectMetadata" and "data" not in meta
        made = await me.request("POST", f"/apis/batch/v1/namespaces/{project}/jobs", job, query={"dryRun": "All"})
        assert made["metadata"]["name"] == "probe"
        for call in (me.request("GET", f"/api/v1/namespaces/{other}/secrets/s", accept=METADATA_ONLY),
                     me.request("GET", "/api/v1/namespaces/kube-system/secrets/any", accept=METADATA_ONLY),
                     me.request("POST", f"/apis/batch/v1/namespaces/{other}/jobs", job, query={"dryRun": "All"}),
                     me.request("POST", "/apis/batch/v1/namespaces/kube-system/jobs", job, query={"dryRun": "All"})):
            with pytest.raises(Forbidden):
                await call
        assert (await me.list(f"/api/v1/namespaces/{other}/persistentvolumeclaims"))["items"] == []
        # claims in a project: only datasets' volumes (its RBAC allows any; the policy
        # mlplatform-operator-claims narrows it), neither making nor deleting another claim
        claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "plain"},
                 "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}
        claims = f"/api/v1/namespaces/{project}/persistentvolumeclaims"
        volume = {**claim, "metadata": {"name": "frames-vol-x", "labels": {"mlplatform.io/dataset-volume-of": "frames"}}}
        assert (await me.request("POST", claims, volume, query={"dryRun": "All"}))["metadata"]["name"] == "frames-vol-x"
        await admin.create({**claim, "metadata": {"name": "plain", "namespace": project}})
        for call in (me.request("POST", claims, claim, query={"dryRun": "All"}),
                     me.request("DELETE", f"{claims}/plain", query={"dryRun": "All"})):
            with pytest.raises(Forbidden, match="datasets' volumes"):
                await call
    finally:
        await api.close()
        for ns in (project, other):
            await admin.delete(f"/api/v1/namespaces/{ns}")
