"""Real Kueue v0.17.0 for a test cluster, out of cluster (FINDINGS.md, "Kueue"): the `kueue-manager`
binary `build.sh` builds from Kueue's Go module (`make controllers`), under Kueue's released RBAC
and webhooks, with the platform's Kueue configuration (`helm-values/kueue.yaml`). Nothing here plays
Kueue. What differs from the released install (`config/default` of the module, rendered by our
kustomize from the module cache) and why:

- **Applied without its Deployment** (the manager is a local process) **and its two APIServices**
  (`v1beta1`/`v1beta2.visibility.kueue.x-k8s.io`): the tests' API server has no aggregation layer
  configured (no front-proxy client certificate), so an aggregated API could only be unavailable,
  and an unavailable APIService fails discovery for every client and the namespace controller. The
  visibility server is therefore off (`featureGates: {VisibilityOnDemand: false}`).
- **Kueue's CRDs are the released ones, applied with it** (the cluster installs none of them): five
  of them (`clusterqueues`, `cohorts`, `localqueues`, `workloads`, `multikueueclusters`) convert
  between v1beta1 and v1beta2 through Kueue's webhook, so their `conversion.webhook` points at the
  webhook Service like the admission webhooks do.
- The webhook Service becomes `type: ExternalName, externalName: localhost` and every webhook's
  port (admission and conversion) the manager's local webhook port (`outofcluster.render`).
- **Certificates**: Kueue's own internal cert management (the released default) makes the CA and
  serving certificate, stores them in Secret `kueue-webhook-server-cert` and injects the CA into
  the webhook configurations and the five CRDs; it does not write the files, it waits for them to
  appear in `webhook.certDir` (the Deployment mounts the Secret there). `CertCopy` copies the
  Secret there, as the kubelet's Secret volume would; the directory is configurable, so it is a
  directory of the session's and no private mount namespace is needed.
- **The Configuration** is `managerConfig.controllerManagerConfigYaml` of `helm-values/kueue.yaml`
  (`platform_config()`: integrations, `manageJobsWithoutQueueName`, `managedJobsNamespaceSelector`,
  `resources`), or one a caller gives, with only these set here: `namespace: kueue-system`; health
  (readyz) and metrics on free ports of 127.0.0.1 and a free webhook port; leader election off;
  `internalCertManagement` on with the released Service and Secret names and `webhook.certDir` in
  the session's directory; the visibility server off (above). Its `managedJobsNamespaceSelector`
  also replaces the released `namespaceSelector` of the pod, deployment and statefulset webhooks
  (the released overlay excludes only kube-system and kueue-system), as Kueue's Helm chart does:
  pods elsewhere never reach Kueue's webhooks. The ConfigMap `kueue-manager-config` is given the
  same text (the manager reads its file, `--config`).
- The manager runs as its ServiceAccount `kueue-system/kueue-controller-manager` (a TokenRequest
  token in a kubeconfig straight to the API server, `outofcluster.sa_kubeconfig`), with the
  released `--zap-log-level=2`.

`Kueue(cluster, workdir).start()` returns once the manager's `/readyz` answers its own `readyz` check
(certificates ready, webhook server listening). `stop()` uninstalls it: it waits until no object
Kueue finalizes is left in a namespace being deleted (pods, Workloads), deletes Kueue's CRDs (so
every Kueue object) while the manager still runs to let go of its finalizers, kills the process,
and deletes the two webhook configurations (with the manager gone their `failurePolicy: Fail` would
refuse every Job, PyTorchJob, TFJob and pod create they match). Without the CRDs the API group
`kueue.x-k8s.io` is gone, so the hub (`queueing: auto`) no longer finds Kueue installed: later
tests of the session see a cluster without Kueue, as before the start.
"""

from __future__ import annotations

import pathlib
import time

import yaml

from tests.cluster.controlplane import free_port
from tests.cluster.rest import ApiError
from tests.controllers.outofcluster import BIN, CRDS, HERE, CertCopy, ControllerProcess, apply, delete_all, \
    get_or_none, module_dir, remove_crds, render, sa_kubeconfig

HELM_VALUES = HERE.parents[1] / "helm-values" / "kueue.yaml"
WEBHOOKS = ("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/kueue-mutating-webhook-configuration",
            "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/"
            "kueue-validating-webhook-configuration")
GROUP = "kueue.x-k8s.io"
FINALIZED = ("/api/v1/pods", "/apis/kueue.x-k8s.io/v1beta2/workloads")  # what Kueue's finalizers hold


def platform_config() -> dict:
    """The Kueue Configuration the platform installs Kueue with (`helm-values/kueue.yaml`)."""
    values = yaml.safe_load(HELM_VALUES.read_text())
    return yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])


class Kueue:
    """Kueue v0.17.0's manager for a test cluster (see the module docstring)."""

    MODULE = "sigs.k8s.io/kueue"
    NS, SA = "kueue-system", "kueue-controller-manager"
    SERVICE, SECRET, CONFIGMAP = "kueue-webhook-service", "kueue-webhook-server-cert", "kueue-manager-config"

    def __init__(self, cluster, workdir: pathlib.Path, config: dict | None = None):
        self.cluster, self.dir = cluster, pathlib.Path(workdir)
        self.base_config = config if config is not None else platform_config()
        self.process: ControllerProcess | None = None
        self._certs: CertCopy | None = None
        self.config: dict = {}  # what runs: `base_config` with our ports, leader election, certificates

    def _docs(self, webhook: int, probe: int, metrics: int) -> list[dict]:
        overlay = module_dir(HERE / "kueue", self.MODULE) / "config" / "default"
        docs = render(overlay, {self.SERVICE: webhook}, drop_kinds=("Deployment", "APIService"))
        config = self.config = {
            **self.base_config,
            "namespace": self.NS,
            "health": {**self.base_config.get("health", {}), "healthProbeBindAddress": f"127.0.0.1:{probe}"},
            "metrics": {**self.base_config.get("metrics", {}), "bindAddress": f"127.0.0.1:{metrics}"},
            "webhook": {**self.base_config.get("webhook", {}), "port": webhook,
                        "certDir": str(self.dir / "serving-certs")},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": True, "webhookServiceName": self.SERVICE,
                                       "webhookSecretName": self.SECRET},
            "featureGates": {**self.base_config.get("featureGates", {}), "VisibilityOnDemand": False}}
        selector = config.get("managedJobsNamespaceSelector")
        for doc in docs:
            if doc["kind"] == "ConfigMap" and doc["metadata"]["name"] == self.CONFIGMAP:
                doc["data"]["controller_manager_config.yaml"] = yaml.safe_dump(config, sort_keys=False)
            if doc["kind"] in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration") and selector:
                for hook in doc.get("webhooks", []):
                    if "namespaceSelector" in hook:  # pod, deployment, statefulset
                        hook["namespaceSelector"] = selector
        return docs

    def start(self, timeout: float = 120) -> "Kueue":
        binary = BIN / "kueue-manager"
        if not binary.exists():
            raise FileNotFoundError(f"{binary} is not built: run `make controllers`")
        self.dir.mkdir(parents=True, exist_ok=True)
        webhook, probe, metrics = free_port(), free_port(), free_port()
        docs = self._docs(webhook, probe, metrics)
        apply(self.cluster, docs)
        for doc in docs:  # kept from an earlier start: their webhook port is this start's
            name = doc["metadata"]["name"]
            if doc["kind"] == "CustomResourceDefinition":
                if (doc["spec"].get("conversion") or {}).get("strategy") == "Webhook":
                    self.cluster.run(self.cluster.rest.patch(f"{CRDS}/{name}", {"spec": {"conversion": {"webhook": {
                        "clientConfig": {"service": {"port": webhook}}}}}}))
                self.cluster.run(self.cluster._wait_established(name))
            elif doc["kind"] == "ConfigMap" and name == self.CONFIGMAP:
                self.cluster.run(self.cluster.rest.put(f"/api/v1/namespaces/{self.NS}/configmaps/{name}", doc))
        config = self.dir / "controller_manager_config.yaml"
        config.write_text(yaml.safe_dump(self.config, sort_keys=False))
        kubeconfig = sa_kubeconfig(self.cluster, self.NS, self.SA, self.dir / "kueue.kubeconfig")
        self._certs = CertCopy(self.cluster, self.NS, self.SECRET, pathlib.Path(self.config["webhook"]["certDir"]))
        self._certs.start()
        self.process = ControllerProcess(
            [str(binary), f"--config={config}", f"--kubeconfig={kubeconfig}", "--zap-log-level=2"], {},
            self.dir / "kueue-manager.log")
        try:
            # the certificate bootstrap runs a first manager on the same probe address whose /readyz
            # has no check at all (so answers ok): wait for the main manager's own `readyz` check
            self.process.wait_http_ok(f"http://127.0.0.1:{probe}/readyz?verbose", timeout, "kueue-manager",
                                      contains="[+]readyz ok")
        except BaseException:
            self.stop()
            raise
        return self

    def _finalized(self, timeout: float = 30) -> None:
        """Wait until no pod or Workload that Kueue finalizes is left in a namespace being deleted
        (or itself being deleted): without the manager those would stay, and their namespace with them."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                gone = {n["metadata"]["name"] for n in self.cluster.run(self.cluster.rest.get("/api/v1/namespaces"))[
                    "items"] if n["metadata"].get("deletionTimestamp")}
                left = [o for path in FINALIZED for o in self.cluster.run(self.cluster.rest.get(path))["items"]
                        if any(f.startswith("kueue.x-k8s.io/") for f in o["metadata"].get("finalizers") or [])
                        and (o["metadata"]["namespace"] in gone or o["metadata"].get("deletionTimestamp"))]
            except Exception:  # the cluster is going away
                return
            if not left:
                return
            time.sleep(0.3)

    def _unfinalize(self, crds: list[str]) -> None:
        """What an admin does for a controller that is gone: remove Kueue's finalizers from what is left
        (objects of the CRDs being deleted, pods Kueue managed)."""
        paths = [f"/apis/kueue.x-k8s.io/v1beta2/{name.split('.')[0]}" for name in crds] + ["/api/v1/pods"]
        for path in paths:
            for obj in (get_or_none(self.cluster, path) or {}).get("items", []):
                meta = obj["metadata"]
                keep = [f for f in meta.get("finalizers") or [] if not f.startswith("kueue.x-k8s.io/")]
                if keep == (meta.get("finalizers") or []):
                    continue
                ns = f"/namespaces/{meta['namespace']}" if meta.get("namespace") else ""
                base, plural = path.rsplit("/", 1)
                try:
                    self.cluster.run(self.cluster.rest.patch(f"{base}{ns}/{plural}/{meta['name']}",
                                                             {"metadata": {"finalizers": keep or None}}))
                except ApiError as e:
                    if e.status != 404:
                        raise

    def halt(self) -> None:
        """Stop the manager and nothing else: for a cluster that is going away with everything in it
        (`make demo-kube`'s Ctrl-C), where uninstalling would only wait on finalizers."""
        if self._certs:
            self._certs.stop()
        if self.process is not None:
            self.process.stop()
            self.process = None

    def stop(self) -> None:
        """Uninstall: Kueue's CRDs and so its objects deleted (while the manager still runs, so that it
        lets go of its finalizers), the manager stopped, its webhook configurations deleted. The rest
        of the release (namespace, RBAC, Services, Secret) stays for a later start. Without the CRDs
        nothing finds Kueue installed (the hub looks for `kueue.x-k8s.io/v1beta2`)."""
        if self._certs:
            self._certs.stop()
        if self.process is None:
            return
        try:
            if self.process.proc.poll() is None:
                self._finalized()
            left = remove_crds(self.cluster, (GROUP,))
        finally:
            self.process.stop()
            self.process = None
        if left:
            self._unfinalize(left)
            left = remove_crds(self.cluster, (GROUP,), 30)
        self._unfinalize([])  # pods still holding Kueue's finalizer
        delete_all(self.cluster, WEBHOOKS)
        deadline = time.monotonic() + 30
        while get_or_none(self.cluster, "/apis/kueue.x-k8s.io/v1beta2") is not None and time.monotonic() < deadline:
            time.sleep(0.2)
        if left:
            raise RuntimeError(f"Kueue's CRDs not deleted: {left}")
