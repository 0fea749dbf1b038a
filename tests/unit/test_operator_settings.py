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
