"""A real Kubernetes control plane on 127.0.0.1: etcd, kube-apiserver, kube-controller-manager and
kube-scheduler, built from their Go modules by `tests/cluster/build.sh` into `tests/cluster/bin/`.

`ControlPlane(workdir).start()` generates a CA and keys (see `pki.py`), starts the four processes
on free loopback ports, waits until the API server is ready and its RBAC bootstrap is done, and
writes `admin.kubeconfig` (client certificate, group system:masters). `stop()` ends them all. The
API server runs with TLS, `--authorization-mode=Node,RBAC`, ServiceAccount issuer and keys (bound
tokens via TokenRequest) and the admission chain the platform relies on (presenting a client
certificate of its own to webhooks that ask: `webhook_pki.ca` issued it); the controller-manager
runs its default controllers (garbage collector, namespace, resourcequota, serviceaccount and its
token controller, job, ttl-after-finished, PV binder, ...) with per-controller credentials; the
scheduler is the real one. There are no nodes until a kubelet (`tests.cluster.kubelet`) registers
them.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request

import yaml

from tests.cluster.pki import PKI, Pair
from hub_ext.core.ports import free_port  # noqa: F401  (the controllers' harnesses take it from here)

HERE = pathlib.Path(__file__).resolve().parent
BIN = pathlib.Path(os.environ.get("MLPLATFORM_CLUSTER_BIN", HERE / "bin"))
SERVICE_CIDR = "10.96.0.0/16"
ADMISSION = ("NamespaceLifecycle,LimitRanger,ServiceAccount,PodSecurity,NodeRestriction,DefaultStorageClass,"
             "DefaultTolerationSeconds,PersistentVolumeClaimResize,RuntimeClass,Priority,TaintNodesByCondition,"
             "StorageObjectInUseProtection,CertificateApproval,CertificateSigning,CertificateSubjectRestriction,"
             "ClusterTrustBundleAttest,DefaultIngressClass,PodTopologyLabels,MutatingAdmissionPolicy,"
             "MutatingAdmissionWebhook,ValidatingAdmissionPolicy,ValidatingAdmissionWebhook,ResourceQuota")


def kubeconfig(server: str, ca: pathlib.Path, *, pair: Pair | None = None, token: str | None = None,
               namespace: str = "default", name: str = "mlplatform-test") -> dict:
    """A kubeconfig for `server`, authenticating with a client certificate or a bearer token."""
    user: dict = {"token": token} if token else {"client-certificate": str(pair.cert), "client-key": str(pair.key)}
    return {
        "apiVersion": "v1", "kind": "Config", "current-context": name,
        "clusters": [{"name": name, "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": name, "user": user}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name, "namespace": namespace}}],
    }


def write_yaml(path: pathlib.Path, data: dict) -> pathlib.Path:
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data))
    path.chmod(0o600)
    return path


def webhook_admission_config(directory: pathlib.Path, client: Pair) -> pathlib.Path:
    """The API server's AdmissionConfiguration: it presents `client` to every admission webhook that
    asks for a client certificate (the platform's operator does, with --webhook-client-ca)."""
    clients = write_yaml(directory / "webhook-clients.kubeconfig", {
        "apiVersion": "v1", "kind": "Config",
        "users": [{"name": "*", "user": {"client-certificate": str(client.cert), "client-key": str(client.key)}}]})
    webhook = {"apiVersion": "apiserver.config.k8s.io/v1", "kind": "WebhookAdmissionConfiguration",
               "kubeConfigFile": str(clients)}
    return write_yaml(directory / "admission.yaml", {
        "apiVersion": "apiserver.config.k8s.io/v1", "kind": "AdmissionConfiguration",
        "plugins": [{"name": "ValidatingAdmissionWebhook", "configuration": webhook},
                    {"name": "MutatingAdmissionWebhook", "configuration": webhook}]})


def binaries_missing() -> list[str]:
    return [n for n in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
            if not (BIN / n).is_file()]


class ControlPlane:
    """The four processes, their files under `workdir`, and an admin kubeconfig."""

    def __init__(self, workdir: str | os.PathLike, *, verbosity: int = 0):
        self.dir = pathlib.Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.verbosity = verbosity
        self.procs: dict[str, subprocess.Popen] = {}
        self.port = 0
        self.pki: PKI | None = None

    # ---- files ----------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def admin_kubeconfig(self) -> pathlib.Path:
        return self.dir / "admin.kubeconfig"

    def client_pair(self, name: str, user: str, groups: tuple[str, ...] = ()) -> Pair:
        """A client certificate for `user` in `groups`, issued by the cluster's CA."""
        return self.pki.issue(name, user, groups, client=True)

    def write_kubeconfig(self, path, *, user: str = "admin", groups: tuple[str, ...] = ("system:masters",),
                         token: str | None = None, namespace: str = "default", server: str | None = None):
        pair = None if token else self.client_pair(f"user-{user.replace(':', '-')}", user, groups)
        return write_yaml(path, kubeconfig(server or self.url, self.pki.ca, pair=pair, token=token,
                                           namespace=namespace))

    # ---- lifecycle ------------------------------------------------------------------------------
    def start(self, timeout: float = 120, before_controllers=None) -> "ControlPlane":
        """`before_controllers()`: called once the API server is ready, before the controller-manager
        starts (what its controllers must find at their first discovery: the CRDs)."""
        missing = binaries_missing()
        if missing:
            raise RuntimeError(f"control plane binaries missing in {BIN}: {', '.join(missing)}; "
                               "run `make cluster` (needs Go, see README)")
        self.pki = PKI(self.dir / "pki")
        try:
            self._start(timeout, before_controllers)
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self, timeout: float, before_controllers=None) -> None:
        pki = self.pki
        deadline = time.monotonic() + timeout
        etcd_port, peer_port = free_port(), free_port()
        self._spawn("etcd", [
            "--name", "default", "--data-dir", str(self.dir / "etcd"),
            "--listen-client-urls", f"http://127.0.0.1:{etcd_port}",
            "--advertise-client-urls", f"http://127.0.0.1:{etcd_port}",
            "--listen-peer-urls", f"http://127.0.0.1:{peer_port}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer_port}",
            "--initial-cluster", f"default=http://127.0.0.1:{peer_port}",
            "--unsafe-no-fsync", "--log-level", "warn", "--listen-metrics-urls", ""])
        self._wait(lambda: _http_ok(f"http://127.0.0.1:{etcd_port}/health"), "etcd", deadline)

        self.port = free_port()
        serving = pki.issue("apiserver", "kube-apiserver", server=True,
                            hosts=("127.0.0.1", "localhost", "10.96.0.1", "kubernetes", "kubernetes.default",
                                   "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"))
        kubelet_client = pki.issue("apiserver-kubelet-client", "kube-apiserver-kubelet-client",
                                   ("kubeadm:cluster-admins",), client=True)
        sa = pki.service_account_keys()
        # the API server's client certificate for webhooks, from a CA of its own (not the cluster's,
        # which issues users' certificates): what the operator's --webhook-client-ca trusts
        self.webhook_pki = PKI(self.dir / "webhook-client-pki", ca_name="mlplatform-test-webhook-client-ca")
        admission = webhook_admission_config(self.dir, self.webhook_pki.issue(
            "apiserver-webhook-client", "kube-apiserver-webhook-client", client=True))
        self._spawn("kube-apiserver", [
            "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
            "--secure-port", str(self.port),
            "--etcd-servers", f"http://127.0.0.1:{etcd_port}",
            "--tls-cert-file", str(serving.cert), "--tls-private-key-file", str(serving.key),
            "--client-ca-file", str(pki.ca),
            "--service-account-issuer", self.url,
            "--service-account-key-file", str(sa.cert), "--service-account-signing-key-file", str(sa.key),
            "--api-audiences", self.url,
            "--service-cluster-ip-range", SERVICE_CIDR,
            "--authorization-mode", "Node,RBAC",
            "--enable-admission-plugins", ADMISSION,
            "--admission-control-config-file", str(admission),
            "--allow-privileged=true",
            "--kubelet-client-certificate", str(kubelet_client.cert),
            "--kubelet-client-key", str(kubelet_client.key),
            "--kubelet-preferred-address-types", "InternalIP",
            "--endpoint-reconciler-type", "none",
            "--profiling=false", "--v", str(self.verbosity)])
        self.write_kubeconfig(self.admin_kubeconfig)
        admin = self.client_pair("user-admin", "admin", ("system:masters",))
        self._wait(lambda: self._readyz(admin), "kube-apiserver", deadline)
        if before_controllers is not None:
            before_controllers()

        cm = self.dir / "controller-manager.kubeconfig"
        write_yaml(cm, kubeconfig(self.url, pki.ca, pair=self.client_pair(
            "controller-manager", "system:kube-controller-manager")))
        self._spawn("kube-controller-manager", [
            "--kubeconfig", str(cm), "--authentication-kubeconfig", str(cm), "--authorization-kubeconfig", str(cm),
            "--bind-address", "127.0.0.1", "--secure-port", str(free_port()),
            "--leader-elect=false", "--use-service-account-credentials=true",
            "--service-account-private-key-file", str(sa.key), "--root-ca-file", str(pki.ca),
            "--cluster-signing-cert-file", str(pki.ca), "--cluster-signing-key-file", str(pki.ca_key),
            "--controllers", "*", "--node-monitor-period", "2s",
            # the PV controller retries a claim whose status write conflicted (a test or the
            # operator wrote its condition meanwhile) at its periodic sync: 1 s, not 15 s
            "--pvclaimbinder-sync-period", "1s",
            "--concurrent-gc-syncs", "5", "--v", str(self.verbosity)])
        sched = self.dir / "scheduler.kubeconfig"
        write_yaml(sched, kubeconfig(self.url, pki.ca, pair=self.client_pair("scheduler", "system:kube-scheduler")))
        self._spawn("kube-scheduler", [
            "--kubeconfig", str(sched), "--authentication-kubeconfig", str(sched),
            "--authorization-kubeconfig", str(sched),
            "--bind-address", "127.0.0.1", "--secure-port", str(free_port()),
            "--leader-elect=false", "--v", str(self.verbosity)])

    def _spawn(self, name: str, args: list[str]) -> None:
        log = open(self.dir / f"{name}.log", "ab")
        self.procs[name] = subprocess.Popen([str(BIN / name), *args], stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()

    def _wait(self, ready, name: str, deadline: float) -> None:
        while time.monotonic() < deadline:
            proc = self.procs[name]
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}: {self.log_tail(name)}")
            if ready():
                return
            time.sleep(0.1)
        raise TimeoutError(f"{name} not ready in time: {self.log_tail(name)}")

    def _readyz(self, admin: Pair) -> bool:
        ctx = ssl.create_default_context(cafile=str(self.pki.ca))
        ctx.load_cert_chain(str(admin.cert), str(admin.key))
        return _http_ok(f"{self.url}/readyz", ctx)

    def log_tail(self, name: str, chars: int = 3000) -> str:
        with contextlib.suppress(OSError):
            return (self.dir / f"{name}.log").read_text(errors="replace")[-chars:]
        return ""

    def stop(self, grace: float = 2.0) -> None:
        """SIGTERM, then SIGKILL after `grace` seconds: the state is thrown away, so a graceful
        drain of watches (the API server waits up to a minute for them) buys nothing here."""
        for proc in reversed(list(self.procs.values())):
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for proc in self.procs.values():
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)
        self.procs.clear()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def _http_ok(url: str, ctx: ssl.SSLContext | None = None) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2, context=ctx) as r:
            return r.status == 200
    except (OSError, urllib.error.URLError):
        return False
