"""The webhook server's certificate, and the CA bundle the API server trusts it by.

Two modes:
- cert-manager (``--tls-dir``): its Secret mounted as a directory (``tls.crt``, ``tls.key``); the
  webhook configurations get their ``caBundle`` from cert-manager's CA injector (the annotation in
  helm-values/operator.yaml). Renewals reach the files and the server reloads them.
- self-signed bootstrap (default): a CA (10 years) and a serving certificate for the Service's DNS
  names (plus ``--tls-host``) kept in the Secret ``--tls-secret`` of the operator's namespace, so
  every replica serves the same certificate. The first replica creates it (of two racing, the
  second reads the first's). The operator writes the CA into every webhook of its configurations
  (``--webhook-configurations``) whenever it differs (a ``helm upgrade`` that resets it is undone
  at the next check). The serving certificate is renewed, by whichever replica sees it first, when
  a third of its lifetime is left; the CA stays, so the API server trusts the old and the new one
  throughout. Each replica rewrites its files when the Secret changes.

Reload: the webhook server serves with `Certificates.context`, one `ssl.SSLContext` for the
process's life; a new certificate is loaded into it (``load_cert_chain``), so the next handshake
gets it while the listening socket never closes (kopf's own file watching, which restarts its
server and leaves a moment with no listener, is not used). In cert-manager mode the files are read
again every ``--tls-check`` seconds and loaded when they changed.

Callers: with ``--webhook-client-ca`` the server asks every caller for a client certificate and
answers only one that CA issued (`server_context`); the API server presents its own, configured in
its AdmissionConfiguration (docs/operator.md).

Private keys are only written to a 0700 directory of this process and to the Secret; never logged.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import hashlib
import ipaddress
import logging
import pathlib
import ssl
import tempfile

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from hub_ext.kube.client import Conflict, Kube, KubeError
from hub_ext.operator.rules.settings import OperatorSettings

log = logging.getLogger("mlplatform.operator.tls")
CA_DAYS = 3650
_CONFIG_PATHS = ("/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/",
                 "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/")


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def new_ca(now: dt.datetime) -> tuple[bytes, bytes]:
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(_name("mlplatform-operator-ca")).issuer_name(_name("mlplatform-operator-ca"))
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=CA_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM), _pem_key(key)


def new_serving(ca_pem: bytes, ca_key_pem: bytes, hosts: list[str], now: dt.datetime, validity_s: int) -> tuple[bytes, bytes]:
    ca = x509.load_pem_x509_certificate(ca_pem)
    ca_key = serialization.load_pem_private_key(ca_key_pem, None)
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = []
    for h in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            sans.append(x509.DNSName(h))
    cert = (x509.CertificateBuilder().subject_name(_name(hosts[0])).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(seconds=validity_s))
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM), _pem_key(key)


def needs_renewal(cert_pem: bytes, hosts: list[str], now: dt.datetime, validity_s: int | None = None) -> bool:
    """True when a third or less of the certificate's lifetime is left, it lacks one of `hosts`, or
    it was made for longer than `validity_s` (the operator was told a shorter lifetime since)."""
    cert = x509.load_pem_x509_certificate(cert_pem)
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    try:
        names = {str(n.value) for n in cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value}
    except x509.ExtensionNotFound:
        names = set()
    longer = validity_s is not None and (end - start) > dt.timedelta(seconds=validity_s, minutes=6)
    return (end - now) <= (end - start) / 3 or not set(hosts) <= names or longer


def server_context(client_ca: str | None) -> ssl.SSLContext:
    """The webhook server's TLS context. With `client_ca`, a caller must present a client certificate
    that CA issued (mutual TLS: a forged AdmissionReview from a pod gets no answer, so the webhook is
    no oracle on other projects' names); only that CA is trusted for it, not the system's."""
    if client_ca is None:
        return ssl.create_default_context(purpose=ssl.Purpose.CLIENT_AUTH)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_verify_locations(cafile=client_ca)
    context.verify_mode = ssl.CERT_REQUIRED
    return context


class Certificates:
    """Where the webhook server's files are, and the task that keeps them current."""

    def __init__(self, kube: Kube, settings: OperatorSettings):
        self.kube, self.settings = kube, settings
        s = settings
        self.hosts = [s.service_host, f"{s.service_host}.cluster.local", *s.tls_hosts]
        if s.tls_dir:
            self.dir = pathlib.Path(s.tls_dir)
        else:
            self.dir = pathlib.Path(tempfile.mkdtemp(prefix="mlplatform-operator-tls-"))
        self.certfile, self.keyfile = self.dir / "tls.crt", self.dir / "tls.key"
        self.ready = asyncio.Event()
        self.context = server_context(settings.webhook_client_ca)
        self._version: str | None = None
        self._loaded = ""

    @property
    def secret_path(self) -> str:
        return f"/api/v1/namespaces/{self.settings.namespace}/secrets/{self.settings.tls_secret}"

    async def prepare(self) -> None:
        """The files exist, are loaded into `context` (and the CA bundle is in the webhook
        configurations) when this returns."""
        if self.settings.tls_dir:
            self._load()
            self.ready.set()
            return
        await self._sync()

    async def keep(self) -> None:
        while True:
            await asyncio.sleep(self.settings.tls_check_s)
            try:
                if self.settings.tls_dir:
                    self._load()
                else:
                    await self._sync()
            except KubeError as e:
                log.warning("TLS check: %s", e.reason)
            except (OSError, ssl.SSLError) as e:  # a half-written renewal: the next check loads it
                log.warning("TLS check: the certificate files could not be loaded (%s)", type(e).__name__)

    def _load(self) -> None:
        """Load the files into `context` when they changed since the last load."""
        digest = hashlib.sha256(self.certfile.read_bytes() + self.keyfile.read_bytes()).hexdigest()
        if digest != self._loaded:
            self.context.load_cert_chain(str(self.certfile), str(self.keyfile))
            if self._loaded:
                log.info("serving the renewed certificate")
            self._loaded = digest

    async def _sync(self) -> None:
        data = await self._secret()
        now = dt.datetime.now(dt.timezone.utc)
        if needs_renewal(data["tls.crt"], self.hosts, now, self.settings.tls_validity_s):
            cert, key = new_serving(data["ca.crt"], data["ca.key"], self.hosts, now, self.settings.tls_validity_s)
            data = await self._store({**data, "tls.crt": cert, "tls.key": key}, replace=True)
            log.info("renewed the webhook serving certificate (valid %s s)", self.settings.tls_validity_s)
        self._write(data)
        self._load()
        await self._inject(data["ca.crt"])
        self.ready.set()

    async def _secret(self) -> dict[str, bytes]:
        secret = await self.kube.get(self.secret_path)
        if secret is None:
            now = dt.datetime.now(dt.timezone.utc)
            ca, ca_key = new_ca(now)
            cert, key = new_serving(ca, ca_key, self.hosts, now, self.settings.tls_validity_s)
            return await self._store({"ca.crt": ca, "ca.key": ca_key, "tls.crt": cert, "tls.key": key}, replace=False)
        self._version = secret["metadata"].get("resourceVersion")
        return {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}

    async def _store(self, data: dict[str, bytes], replace: bool) -> dict[str, bytes]:
        body = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                "metadata": {"name": self.settings.tls_secret, "namespace": self.settings.namespace,
                             "labels": {"app.kubernetes.io/managed-by": "jupyterhub-mlplatform",
                                        "app.kubernetes.io/component": "operator"}},
                "data": {k: base64.b64encode(v).decode() for k, v in data.items()}}
        try:
            if replace:
                body["metadata"]["resourceVersion"] = self._version
                await self.kube.request("PUT", self.secret_path, body)
            else:
                await self.kube.request("POST", self.secret_path.rsplit("/", 1)[0], body)
            return data
        except Conflict:  # another replica wrote it first: theirs is as good
            return await self._secret()

    def _write(self, data: dict[str, bytes]) -> None:
        self.dir.chmod(0o700)
        for name in ("tls.crt", "tls.key"):
            path = self.dir / name
            if not path.exists() or path.read_bytes() != data[name]:
                tmp = self.dir / f".{name}.new"
                tmp.write_bytes(data[name])
                tmp.chmod(0o600)
                tmp.replace(path)

    async def _inject(self, ca: bytes) -> None:
        bundle = base64.b64encode(ca).decode()
        for name in self.settings.webhook_configurations:
            for base in _CONFIG_PATHS:
                config = await self.kube.get(base + name)
                if config is None:
                    continue
                ops = [{"op": "replace" if (w.get("clientConfig") or {}).get("caBundle") else "add",
                        "path": f"/webhooks/{i}/clientConfig/caBundle", "value": bundle}
                       for i, w in enumerate(config.get("webhooks") or [])
                       if (w.get("clientConfig") or {}).get("caBundle") != bundle]
                if ops:
                    await self.kube.request("PATCH", base + name, ops, content_type="application/json-patch+json")
                    log.info("wrote the CA bundle into %s", name)
