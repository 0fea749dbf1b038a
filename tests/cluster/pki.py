"""The control plane's keys and certificates, generated fresh for each control plane.

One CA signs everything: the API server's serving certificate (127.0.0.1, localhost and the
`kubernetes` Service names), client certificates (CN = user, O = groups) for the admin, the
controller-manager, the scheduler, the emulated kubelet and the fault proxy, and the kubelet's
serving certificate. The ServiceAccount token signing key is a separate RSA pair. Nothing here is a
secret worth keeping: the directory lives as long as the control plane.
"""

from __future__ import annotations

import datetime
import ipaddress
import pathlib
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_DAY = datetime.timedelta(days=1)


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _name(cn: str, orgs: tuple[str, ...] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    return x509.Name(attrs + [x509.NameAttribute(NameOID.COMMON_NAME, cn)])


@dataclass(frozen=True)
class Pair:
    """A certificate and its key, as files."""
    cert: pathlib.Path
    key: pathlib.Path


class PKI:
    """A CA in `directory` that issues serving and client certificates as PEM files."""

    def __init__(self, directory: pathlib.Path, ca_name: str = "mlplatform-test-ca"):
        self.dir = pathlib.Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._ca_key = _key()
        now = datetime.datetime.now(datetime.timezone.utc)
        self._ca = (x509.CertificateBuilder()
                    .subject_name(_name(ca_name)).issuer_name(_name(ca_name))
                    .public_key(self._ca_key.public_key()).serial_number(x509.random_serial_number())
                    .not_valid_before(now - _DAY).not_valid_after(now + 30 * _DAY)
                    .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                    .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                                 content_commitment=False, key_encipherment=False,
                                                 data_encipherment=False, key_agreement=False,
                                                 encipher_only=False, decipher_only=False), critical=True)
                    .sign(self._ca_key, hashes.SHA256()))
        self.ca = self.dir / "ca.crt"
        self.ca.write_bytes(self._ca.public_bytes(serialization.Encoding.PEM))
        self.ca_key = self.dir / "ca.key"
        self.ca_key.write_bytes(_pem_key(self._ca_key))
        self.ca_key.chmod(0o600)

    def issue(self, name: str, cn: str, orgs: tuple[str, ...] = (), *, server: bool = False,
              client: bool = False, hosts: tuple[str, ...] = ()) -> Pair:
        key = _key()
        now = datetime.datetime.now(datetime.timezone.utc)
        usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server else []) + \
                 ([ExtendedKeyUsageOID.CLIENT_AUTH] if client else [])
        b = (x509.CertificateBuilder().subject_name(_name(cn, orgs)).issuer_name(self._ca.subject)
             .public_key(key.public_key()).serial_number(x509.random_serial_number())
             .not_valid_before(now - _DAY).not_valid_after(now + 30 * _DAY)
             .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
             .add_extension(x509.ExtendedKeyUsage(usages), critical=False))
        if hosts:
            sans = []
            for h in hosts:
                try:
                    sans.append(x509.IPAddress(ipaddress.ip_address(h)))
                except ValueError:
                    sans.append(x509.DNSName(h))
            b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = b.sign(self._ca_key, hashes.SHA256())
        pair = Pair(self.dir / f"{name}.crt", self.dir / f"{name}.key")
        pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        pair.key.write_bytes(_pem_key(key))
        pair.key.chmod(0o600)
        return pair

    def service_account_keys(self) -> Pair:
        """The RSA pair the API server signs ServiceAccount tokens with (`cert` is the public key)."""
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pair = Pair(self.dir / "sa.pub", self.dir / "sa.key")
        pair.cert.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                            serialization.PublicFormat.SubjectPublicKeyInfo))
        pair.key.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                               serialization.PrivateFormat.TraditionalOpenSSL,
                                               serialization.NoEncryption()))
        pair.key.chmod(0o600)
        return pair
