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
