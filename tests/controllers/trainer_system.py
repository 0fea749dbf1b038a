"""Real Kubeflow Trainer v2.3.0 and JobSet v0.12.0 for a test cluster, out of cluster (FINDINGS.md,
"Trainer v2"): `trainer-controller-manager` and `jobset-controller`, which `build.sh` builds from
their Go modules (`make controllers`), under their released RBAC, webhooks and CRDs. Nothing here
plays either. What differs from the released install and why:

- **JobSet** is `config/default` of its module (what its release manifest is built from), rendered by
  our kustomize from the module cache. **Trainer** is its `manifests/overlays/manager` without the
  overlay's own two lines we cannot follow here: `../../third-party/jobset` (the JobSet release
  manifest by URL: the JobSet above instead) and `namespace.yaml`, made by us (`kubeflow-system`,
  as the overlay names it); the overlay's two generators are made as it makes them (the empty
  Secret `kubeflow-trainer-webhook-cert`, the ConfigMap `kubeflow-trainer-public`). Both are
  applied without their Deployments (the controllers are local processes).
- Each webhook Service becomes `type: ExternalName, externalName: localhost` and every webhook's
  port the controller's local webhook port (`outofcluster.render`).
- **Certificates**: each controller's internal cert management (the released default) fills its
  Secret and injects the CA; both wait for the files in the hard-coded
  `/tmp/k8s-webhook-server/serving-certs`, where the Deployment mounts the Secret: `CertCopy` copies
  it to a directory of the session's, bind-mounted there for that process alone
  (`tests.cluster.network.private_mounts`), as for the Training Operator.
- **Configuration**: the released one (each ConfigMap's text) with only these set here: health
  (readyz) on a free port of 127.0.0.1, metrics off (`bindAddress: "0"`: their secure serving wants
  a certificate of its own), a free webhook port, leader election off; Trainer's status server on a
  free port, and its feature gates as the caller gives them.
- Each runs as its ServiceAccount (`outofcluster.sa_kubeconfig`), `--zap-log-level=2`. Trainer's
  status server (the `TrainJobStatus` gate) finds the cluster's token issuer in the pod's own
  token file, hard-coded at `/var/run/secrets/kubernetes.io/serviceaccount/token`: that directory
  (token, namespace, ca.crt, as the kubelet projects them) is bind-mounted for its process alone.

`TrainerV2(cluster, workdir).start()` starts JobSet, then Trainer (which watches JobSets), and
returns once both answer `/readyz` (Trainer's waits for its certificates and webhooks). `stop()`
uninstalls both, as `Kueue.stop` does: the CRDs (and so every TrainJob, runtime and JobSet) are
deleted while the controllers still run, then the processes stop and the webhook configurations go
(with their `failurePolicy: Fail` they would refuse every TrainJob, JobSet and JobSet pod). Without
the CRDs a later test of the session sees a cluster without Trainer v2, as before the start.
"""

from __future__ import annotations

import os
import pathlib
import tempfile
import time

import yaml

from tests.cluster.controlplane import free_port
from tests.cluster.rest import ApiError
from tests.controllers.outofcluster import BIN, HERE, CertCopy, ControllerProcess, apply, delete_all, module_dir, \
    remove_crds, render, sa_kubeconfig

CERT_DIR = "/tmp/k8s-webhook-server/serving-certs"  # hard-coded in both (cert-controller's rotator)
TOKEN_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"  # hard-coded in Trainer's status server
ADMISSION = "/apis/admissionregistration.k8s.io/v1"
GROUPS = ("trainer.kubeflow.org", "jobset.x-k8s.io")


def _config_of(docs: list[dict], name: str) -> dict:
    (cm,) = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == name]
    return yaml.safe_load(cm["data"]["controller_manager_config.yaml"])


def _token_dir(cluster, ns: str, sa: str, directory: pathlib.Path, kubeconfig: pathlib.Path) -> pathlib.Path:
    """What the kubelet projects at `TOKEN_DIR` for a pod of ServiceAccount ns/sa: the token of
    `kubeconfig` (`sa_kubeconfig` made it), the namespace, the cluster's CA."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "token").write_text(yaml.safe_load(kubeconfig.read_text())["users"][0]["user"]["token"])
    (directory / "namespace").write_text(ns)
    (directory / "ca.crt").write_bytes(pathlib.Path(cluster.cp.pki.ca).read_bytes())
    return directory


def _trainer_overlay(module: pathlib.Path, directory: pathlib.Path) -> pathlib.Path:
    """A kustomization of Trainer's `overlays/manager` bases (the module docstring), in `directory`:
    kustomize takes bases by relative path only."""
    directory.mkdir(parents=True, exist_ok=True)
    base = os.path.relpath(module / "manifests" / "base", directory)
    (directory / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "namespace": TrainerV2.NS,
        "resources": [f"{base}/{part}" for part in ("crds", "manager", "rbac", "webhook")]}))
    return directory


class _Controller:
    """One of the two: its process, its certificates, its readiness."""

    def __init__(self, name: str, process: ControllerProcess, certs: CertCopy, probe: int):
        self.name, self.process, self.certs, self.probe = name, process, certs, probe

    def stop(self) -> None:
        self.certs.stop()
        self.process.stop()


class TrainerV2:
    """Kubeflow Trainer v2.3.0 on JobSet v0.12.0 for a test cluster (see the module docstring)."""

    TRAINER_MODULE, JOBSET_MODULE = "github.com/kubeflow/trainer/v2", "sigs.k8s.io/jobset"
    NS, SA = "kubeflow-system", "kubeflow-trainer-controller-manager"
    SERVICE, SECRET = "kubeflow-trainer-controller-manager", "kubeflow-trainer-webhook-cert"
    JOBSET_NS, JOBSET_SA = "jobset-system", "jobset-controller-manager"
    JOBSET_SERVICE, JOBSET_SECRET = "jobset-webhook-service", "jobset-webhook-server-cert"
    WEBHOOKS = (f"{ADMISSION}/mutatingwebhookconfigurations/defaulter.trainer.kubeflow.org",
                f"{ADMISSION}/validatingwebhookconfigurations/validator.trainer.kubeflow.org",
                f"{ADMISSION}/mutatingwebhookconfigurations/jobset-mutating-webhook-configuration",
                f"{ADMISSION}/validatingwebhookconfigurations/jobset-validating-webhook-configuration")

    def __init__(self, cluster, workdir: pathlib.Path, feature_gates: dict[str, bool] | None = None):
        self.cluster, self.dir = cluster, pathlib.Path(workdir)
        self.feature_gates = dict(feature_gates or {})
        self.controllers: list[_Controller] = []
        self.status_port: int | None = None  # Trainer's status server (TrainJob progress)

    # ---- start -----------------------------------------------------------------------------------------
    def start(self, timeout: float = 120) -> "TrainerV2":
        for binary in ("jobset-controller", "trainer-controller-manager"):
            if not (BIN / binary).exists():
                raise FileNotFoundError(f"{BIN / binary} is not built: run `make controllers`")
        self.dir.mkdir(parents=True, exist_ok=True)
        try:
            self._start_jobset(timeout)
            self._start_trainer(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _apply(self, docs: list[dict], webhook: int) -> None:
        apply(self.cluster, docs)
        for doc in docs:
            if doc["kind"] == "CustomResourceDefinition":
                self.cluster.run(self.cluster._wait_established(doc["metadata"]["name"]))
            elif doc["kind"] in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
                # kept from an earlier start: its port is this start's (the CA the rotator injects again)
                path = f"{ADMISSION}/{doc['kind'].lower()}s/{doc['metadata']['name']}"
                current = self.cluster.run(self.cluster.rest.get(path))
                for hook in current["webhooks"]:
                    hook["clientConfig"]["service"]["port"] = webhook
                self.cluster.run(self.cluster.rest.put(path, current))

    def _run(self, name: str, binary: str, config: dict, ns: str, sa: str, secret: str, probe: int,
             timeout: float, token: bool = False) -> None:
        workdir = self.dir / name
        workdir.mkdir(parents=True, exist_ok=True)
        config_file = workdir / "controller_manager_config.yaml"
        config_file.write_text(yaml.safe_dump(config, sort_keys=False))
        kubeconfig = sa_kubeconfig(self.cluster, ns, sa, workdir / f"{name}.kubeconfig")
        certs = CertCopy(self.cluster, ns, secret, workdir / "serving-certs")
        certs.start()
        binds = {CERT_DIR: workdir / "serving-certs"}
        if token:
            binds[TOKEN_DIR] = _token_dir(self.cluster, ns, sa, workdir / "serviceaccount", kubeconfig)
        process = ControllerProcess([str(BIN / binary), f"--config={config_file}", f"--kubeconfig={kubeconfig}",
                                     "--zap-log-level=2"], {}, workdir / f"{name}.log", binds=binds)
        self.controllers.append(_Controller(name, process, certs, probe))
        process.wait_http_ok(f"http://127.0.0.1:{probe}/readyz", timeout, name)

    @staticmethod
    def _local(config: dict, probe: int, webhook: int) -> dict:
        return {**config,
                "health": {**config.get("health", {}), "healthProbeBindAddress": f"127.0.0.1:{probe}"},
                "metrics": {**config.get("metrics", {}), "bindAddress": "0"},
                "webhook": {**config.get("webhook", {}), "port": webhook},
                "leaderElection": {"leaderElect": False}}

    def _start_jobset(self, timeout: float) -> None:
        webhook, probe = free_port(), free_port()
        docs = render(module_dir(HERE / "trainer", self.JOBSET_MODULE) / "config" / "default",
                      {self.JOBSET_SERVICE: webhook}, drop_kinds=("Deployment",))
        self._apply(docs, webhook)
        config = self._local(_config_of(docs, "jobset-manager-config"), probe, webhook)
        self._run("jobset", "jobset-controller", config, self.JOBSET_NS, self.JOBSET_SA, self.JOBSET_SECRET, probe,
                  timeout)

    def _start_trainer(self, timeout: float) -> None:
        webhook, probe, self.status_port = free_port(), free_port(), free_port()
        module = module_dir(HERE / "trainer", self.TRAINER_MODULE)
        with tempfile.TemporaryDirectory(dir=self.dir) as tmp:
            docs = render(_trainer_overlay(module, pathlib.Path(tmp)), {self.SERVICE: webhook},
                          drop_kinds=("Deployment",))
        generated = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.NS}},
                     {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                      "metadata": {"name": self.SECRET, "namespace": self.NS}},
                     {"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": "kubeflow-trainer-public", "namespace": self.NS},
                      "data": {"kubeflow_trainer_version": "v2.3.0"}}]
        self._apply(generated + docs, webhook)
        config = self._local(_config_of(docs, "kubeflow-trainer-config"), probe, webhook)
        config["statusServer"] = {**config.get("statusServer", {}), "port": self.status_port}
        if self.feature_gates:
            config["featureGates"] = {**config.get("featureGates", {}), **self.feature_gates}
        self._run("trainer", "trainer-controller-manager", config, self.NS, self.SA, self.SECRET, probe, timeout,
                  token=True)

    def apply_runtimes(self, path: pathlib.Path) -> list[str]:
        """Apply the runtimes of a YAML file (the platform's `helm-values/trainer-runtimes.yaml`), as a
        platform team applies it; their names."""
        docs = [d for d in yaml.safe_load_all(pathlib.Path(path).read_text()) if d]
        apply(self.cluster, docs)
        names = [d["metadata"]["name"] for d in docs]
        for name in names:
            self.wait_known(name)
        return names

    def wait_known(self, runtime: str, timeout: float = 30) -> None:
        """Wait until Trainer's TrainJob webhook knows the ClusterTrainingRuntime `runtime` (it reads
        runtimes from its controller's cache, a moment behind the API server: a TrainJob created at
        once can be refused "must be created before the TrainJob"): a server-side dry run of a
        TrainJob naming it is admitted."""
        probe = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                 "metadata": {"name": "runtime-known-probe", "namespace": "default"},
                 "spec": {"runtimeRef": {"name": runtime}}}
        deadline, last = time.monotonic() + timeout, None
        while time.monotonic() < deadline:
            try:
                self.cluster.run(self.cluster.rest.request(
                    "POST", "/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs", probe,
                    params={"dryRun": "All"}))
                return
            except ApiError as e:
                if "must be created before" not in str(e):
                    return  # refused for another reason: the runtime itself was found
                last = e
                time.sleep(0.2)
        raise TimeoutError(f"Trainer's webhook never knew the runtime {runtime}: {last}")

    # ---- stop ------------------------------------------------------------------------------------------
    def halt(self) -> None:
        """Stop the controllers and nothing else: for a cluster that is going away with everything in it
        (`make demo-kube`'s Ctrl-C), where uninstalling would only wait on finalizers."""
        for controller in reversed(self.controllers):
            controller.stop()
        self.controllers = []

    def stop(self) -> None:
        """Uninstall (the module docstring); the namespaces, RBAC, Services and Secrets stay for a later
        start."""
        left: list[str] = []
        try:
            if self.controllers:
                left = remove_crds(self.cluster, GROUPS)
        finally:
            for controller in reversed(self.controllers):
                controller.stop()
            self.controllers = []
            delete_all(self.cluster, self.WEBHOOKS)
        if left:
            raise RuntimeError(f"Trainer's and JobSet's CRDs not deleted: {left}")

    def log(self, name: str = "trainer") -> str:
        for controller in self.controllers:
            if controller.name == name:
                return controller.process.tail()
        return ""
