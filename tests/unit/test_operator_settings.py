"""The operator's flags and its certificate arithmetic (pure parts of hub_ext.operator)."""

from __future__ import annotations

import datetime as dt

import pytest
from cryptography import x509

from hub_ext.operator.rules import settings as op_settings
from hub_ext.operator.tls import needs_renewal, new_ca, new_serving

pytestmark = pytest.mark.unit
NOW = dt.datetime(2026, 12, 4, tzinfo=dt.timezone.utc)


def test_defaults_agree_with_the_hubs_mount_settings():
    from hub_ext.spawners.mount_config import MountConfig

    s = op_settings.parse(["--namespace", "ops", "--identity", "a"])
    assert s.mounts == MountConfig().mount_settings()
    assert s.service_host == "mlplatform-operator.ops.svc"


def test_credential_types_and_loader_command():
    s = op_settings.parse(["--credential-type", "gcp-credential=example.com/gcp", "--loader-python", "/opt/py -X utf8"])
    assert s.mounts.credential_types == {"gcp-credential": "example.com/gcp"}
    assert s.loader_python == ("/opt/py", "-X", "utf8")


@pytest.mark.parametrize("argv, named", [
    (["--credential-type", "ssh-key=x"], "--credential-type"),
    (["--tls-validity", "0"], "--tls-validity"),
    (["--progress-interval", "soon"], "--progress-interval"),
])
def test_a_bad_flag_is_named(argv, named, capsys):
    with pytest.raises(SystemExit) as e:
        op_settings.parse(argv)
    assert e.value.code == 2 and named in capsys.readouterr().err


def test_serving_certificate_names_and_renewal_at_a_third_left():
    ca, ca_key = new_ca(NOW)
    hosts = ["mlplatform-operator.ops.svc", "127.0.0.1"]
    cert, _ = new_serving(ca, ca_key, hosts, NOW, 3000)
    parsed = x509.load_pem_x509_certificate(cert)
    sans = parsed.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {str(n.value) for n in sans} == set(hosts)
    assert parsed.issuer == x509.load_pem_x509_certificate(ca).subject
    start = parsed.not_valid_before_utc  # five minutes before NOW (clock skew)
    lifetime = parsed.not_valid_after_utc - start
    assert not needs_renewal(cert, hosts, start + lifetime * 0.6)
    assert needs_renewal(cert, hosts, start + lifetime * 0.7)
    assert needs_renewal(cert, [*hosts, "another.example"], NOW)
    assert not needs_renewal(cert, hosts, NOW, validity_s=3000)
    assert needs_renewal(cert, hosts, NOW, validity_s=600)  # told a shorter lifetime since


def _answers(port: int, cert) -> bool:
    """Whether a TLS caller presenting `cert` (a tests.cluster.pki Pair or None) gets an answer."""
    import socket
    import ssl
    client = ssl.create_default_context()
    client.check_hostname, client.verify_mode = False, ssl.CERT_NONE
    if cert is not None:
        client.load_cert_chain(str(cert.cert), str(cert.key))
    try:
        with socket.create_connection(("127.0.0.1", port), 5) as raw, client.wrap_socket(raw) as tls:
            tls.sendall(b"ping")
            return tls.recv(4) == b"pong"
    except (ssl.SSLError, ConnectionError):
        return False


def test_with_a_client_ca_the_webhook_server_answers_only_the_certificates_it_issued(tmp_path):
    import socket
    import ssl
    import threading

    from hub_ext.operator.tls import server_context
    from tests.cluster.pki import PKI

    callers, cluster = PKI(tmp_path / "callers", ca_name="webhook-callers"), PKI(tmp_path / "cluster")
    serving = cluster.issue("serving", "operator", server=True, hosts=("127.0.0.1",))
    assert op_settings.parse(["--webhook-client-ca", str(callers.ca)]).webhook_client_ca == str(callers.ca)
    assert op_settings.parse([]).webhook_client_ca is None
    for client_ca, expected in ((str(callers.ca), [False, False, True]), (None, [True, True, True])):
        context = server_context(client_ca)
        context.load_cert_chain(str(serving.cert), str(serving.key))
        listener = socket.create_server(("127.0.0.1", 0))

        def serve():
            for _ in range(3):
                conn, _ = listener.accept()
                try:
                    with context.wrap_socket(conn, server_side=True) as tls:
                        if tls.recv(4) == b"ping":
                            tls.sendall(b"pong")
                except (ssl.SSLError, OSError):
                    pass
        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        port = listener.getsockname()[1]
        got = [_answers(port, cert) for cert in
               (None, cluster.issue("user", "oidc:mallory", client=True),  # a user's certificate of another CA
                callers.issue("api-server", "kube-apiserver-webhook-client", client=True))]
        thread.join(10)
        listener.close()
        assert got == expected, (client_ca, got)
