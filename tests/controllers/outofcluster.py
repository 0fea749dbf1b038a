"""Real Kubeflow controllers, built from their Go modules by `build.sh` (`make controllers`), run out of
cluster against the tests' control plane (`tests.cluster.Cluster`). Nothing here plays a controller:
the processes are the released binaries, under their released RBAC and webhooks.

What changes against the released install (FINDINGS.md §2, §4) and nothing else:
- the released kustomize overlay is rendered from the Go module cache (`kustomize build`, kustomize v5.7.1 built from its Go module by build.sh: the
  same output as `kubectl kustomize`) and
  applied without its Deployment (the controller is a local process) and CRDs (the cluster installs
  its copies, the same commit);
- the webhook Service becomes `type: ExternalName, externalName: localhost` and each webhook's
  `clientConfig.service.port` the local webhook port: the API server dials localhost and still
  verifies the certificate for `<svc>.<ns>.svc`;
- the controller runs as its ServiceAccount (a TokenRequest token in a kubeconfig that talks to the
  API server directly, not through the tests' fault proxy);
- the cert-controller rotator's Secret is copied to the hard-coded serving-cert directory, as the
  kubelet's Secret volume would (`CertCopy`), and that directory is private to the process
  (`unshare -m` + bind mount, `tests.cluster.network.private_mounts`).

`TrainingOperator(cluster, workdir).start()` runs training-operator v1.9.4 with
`--enable-scheme=pytorchjob --enable-scheme=tfjob` and returns once `/readyz` answers ok.
"""

from __future__ import annotations

import base64
import os
import pathlib
import subprocess
import threading
import time
import urllib.request

import yaml

from tests.cluster.controlplane import free_port
from tests.cluster.network import private_mounts
from tests.cluster.rest import ApiError

HERE = pathlib.Path(__file__).resolve().parent
BIN = HERE / "bin"

_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never through an http_proxy
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
PATHS = {  # kind → collection path ({ns}: the object's namespace)
    "Namespace": "/api/v1/namespaces",
    "ServiceAccount": "/api/v1/namespaces/{ns}/serviceaccounts",
    "Secret": "/api/v1/namespaces/{ns}/secrets",
    "ConfigMap": "/api/v1/namespaces/{ns}/configmaps",
    "Service": "/api/v1/namespaces/{ns}/services",
    "Role": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
    "RoleBinding": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    "ValidatingWebhookConfiguration": "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
    "MutatingWebhookConfiguration": "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
    "CustomResourceDefinition": "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
    "ClusterTrainingRuntime": "/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes",
}


def module_dir(module_root: pathlib.Path, module: str) -> pathlib.Path:
    """Where the Go module cache holds `module` at the version `module_root`'s go.mod pins."""
    out = subprocess.run(["go", "list", "-m", "-f", "{{.Dir}}", module], cwd=module_root, check=True,
                         capture_output=True, text=True).stdout.strip()
    if not out:  # listed but not downloaded
        subprocess.run(["go", "mod", "download", module], cwd=module_root, check=True, capture_output=True)
        return module_dir(module_root, module)
    return pathlib.Path(out)


def render(overlay: pathlib.Path, webhook_ports: dict[str, int],
           drop_kinds: tuple[str, ...] = ("Deployment", "CustomResourceDefinition")) -> list[dict]:
    """The released overlay for an out-of-cluster controller (see the module's docstring)."""
    rendered = subprocess.run([str(BIN / "kustomize"), "build", str(overlay)], check=True, capture_output=True,
                              text=True).stdout
    docs = []
    for doc in yaml.safe_load_all(rendered):
        if not doc or doc["kind"] in drop_kinds:
            continue
        if doc["kind"] == "Service" and doc["metadata"]["name"] in webhook_ports:
            doc["spec"] = {"type": "ExternalName", "externalName": "localhost"}
        if doc["kind"] in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
            configs = [hook.get("clientConfig", {}) for hook in doc.get("webhooks", [])]
        elif doc["kind"] == "CustomResourceDefinition":  # a conversion webhook (only if CRDs are kept)
            configs = [((doc["spec"].get("conversion") or {}).get("webhook") or {}).get("clientConfig", {})]
        else:
            configs = []
        for config in configs:
            svc = config.get("service")
            if svc and svc["name"] in webhook_ports:
                svc["port"] = webhook_ports[svc["name"]]
        docs.append(doc)
    return docs


def apply(cluster, docs: list[dict]) -> None:
    """Create each object as the test tooling (one that exists is kept)."""
    async def create():
        for doc in docs:
            path = PATHS[doc["kind"]].format(ns=doc["metadata"].get("namespace", ""))
            try:
                await cluster.rest.post(path, doc)
            except ApiError as e:
                if e.status != 409:
                    raise
    cluster.run(create())


def delete_all(cluster, paths) -> None:
    """Delete each object of `paths` (API paths); one already gone is fine."""
    for path in paths:
        try:
            cluster.run(cluster.rest.delete(path))
        except ApiError as e:
            if e.status != 404:
                raise


def get_or_none(cluster, path: str) -> dict | None:
    """The object (or list) at API path `path` as the test tooling reads it; None if there is none."""
    try:
        return cluster.run(cluster.rest.get(path))
    except ApiError as e:
        if e.status == 404:
            return None
        raise


def remove_crds(cluster, groups: tuple[str, ...], timeout: float = 60) -> list[str]:
    """Delete the CRDs of API `groups` (and so every object of them) and wait until they are gone;
    the names of those still there at `timeout`."""
    names = [c["metadata"]["name"] for c in cluster.run(cluster.rest.get(CRDS))["items"]
             if c["spec"]["group"] in groups]
    delete_all(cluster, [f"{CRDS}/{n}" for n in names])
    deadline = time.monotonic() + timeout
    left = names
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = [n for n in left if get_or_none(cluster, f"{CRDS}/{n}") is not None]
    return left


def sa_kubeconfig(cluster, ns: str, sa: str, path: pathlib.Path, hours: int = 24) -> pathlib.Path:
    """A kubeconfig for ServiceAccount ns/sa (a TokenRequest token), straight to the API server."""
    resp = cluster.run(cluster.rest.post(f"/api/v1/namespaces/{ns}/serviceaccounts/{sa}/token",
                                         {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                          "spec": {"expirationSeconds": hours * 3600}}))
    return cluster.cp.write_kubeconfig(path, token=resp["status"]["token"], namespace=ns, server=cluster.cp.url)


class CertCopy(threading.Thread):
    """Stand-in for the kubelet's Secret volume: copies the rotator's Secret (tls.crt, tls.key,
    ca.crt) into a directory once it is filled, and again whenever it changes."""

    def __init__(self, cluster, ns: str, secret: str, directory: pathlib.Path, interval: float = 0.5):
        super().__init__(name=f"certcopy-{secret}", daemon=True)
        self.cluster, self.path, self.dir, self.interval = cluster, f"/api/v1/namespaces/{ns}/secrets/{secret}", \
            directory, interval
        self.dir.mkdir(parents=True, exist_ok=True)
        self._stop = threading.Event()
        self._seen: dict = {}

    def run(self) -> None:
        while not self._stop.is_set():
            try:
                data = self.cluster.run(self.cluster.rest.get(self.path)).get("data") or {}
            except Exception:  # the cluster is going away, or a passing error: try again
                data = {}
            if data.get("tls.crt") and data != self._seen:
                for key, value in data.items():
                    tmp = self.dir / f".{key}.tmp"
                    tmp.write_bytes(base64.b64decode(value))
                    tmp.replace(self.dir / key)
                self._seen = data
            self._stop.wait(self.interval)

    def stop(self) -> None:
        self._stop.set()


class ControllerProcess:
    """One controller binary as a local process; output to `log`."""

    def __init__(self, argv: list[str], env: dict[str, str], log: pathlib.Path, binds: dict | None = None):
        self.log = log
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(private_mounts(binds, argv) if binds else argv,
                                         env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)

    def wait_http_ok(self, url: str, timeout: float, what: str, contains: str | None = None) -> None:
        """Until `url` answers 200 (and, given `contains`, a body that contains it)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{what} exited ({self.proc.returncode}):\n{self.tail()}")
            try:
                with _DIRECT.open(url, timeout=1) as r:
                    if r.status == 200 and (contains is None or contains in r.read().decode(errors="replace")):
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"{what} not ready in {timeout} s ({url}):\n{self.tail()}")

    def tail(self, chars: int = 6000, since: int = 0) -> str:
        text = self.log.read_bytes()[since:].decode(errors="replace")
        return text[-chars:]

    def size(self) -> int:
        return self.log.stat().st_size if self.log.exists() else 0

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, 15)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait()


class TrainingOperator:
    """The Kubeflow Training Operator v1.9.4 (PyTorchJob, TFJob) for a test cluster."""

    MODULE = "github.com/kubeflow/training-operator"
    NS, SA, SECRET, SERVICE = "kubeflow", "training-operator", "training-operator-webhook-cert", "training-operator"
    CERT_DIR = "/tmp/k8s-webhook-server/serving-certs"  # hard-coded in the operator (cert-controller)

    def __init__(self, cluster, workdir: pathlib.Path):
        self.cluster, self.dir = cluster, pathlib.Path(workdir)
        self.process: ControllerProcess | None = None
        self._certs: CertCopy | None = None

    def start(self, timeout: float = 90) -> "TrainingOperator":
        binary = BIN / "training-operator"
        if not binary.exists():
            raise FileNotFoundError(f"{binary} is not built: run `make controllers`")
        webhook, probe = free_port(), free_port()
        overlay = module_dir(HERE / "training-operator", self.MODULE) / "manifests" / "overlays" / "standalone"
        apply(self.cluster, render(overlay, {self.SERVICE: webhook}))
        kubeconfig = sa_kubeconfig(self.cluster, self.NS, self.SA, self.dir / "training-operator.kubeconfig")
        certs = self.dir / "serving-certs"
        self._certs = CertCopy(self.cluster, self.NS, self.SECRET, certs)
        self._certs.start()
        self.process = ControllerProcess(
            [str(binary), f"--kubeconfig={kubeconfig}", "--enable-scheme=pytorchjob", "--enable-scheme=tfjob",
             "--metrics-bind-address=0", f"--health-probe-bind-address=127.0.0.1:{probe}",
             f"--webhook-server-port={webhook}", "--zap-devel=false"],
            {"MY_POD_NAMESPACE": self.NS}, self.dir / "training-operator.log", binds={self.CERT_DIR: certs})
        try:
            self.process.wait_http_ok(f"http://127.0.0.1:{probe}/readyz", timeout, "training-operator")
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self._certs:
            self._certs.stop()
        if self.process:
            self.process.stop()
