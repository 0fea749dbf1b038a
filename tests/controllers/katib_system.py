"""Real Katib v0.19.0 for a test cluster, out of cluster (FINDINGS.md §3, "Step 3"): Debian's
PostgreSQL, `katib-db-manager` and `katib-controller`, the binaries `build.sh` builds from Katib's
Go module (`make controllers`). Nothing here plays Katib; what differs from the released install
`katib-standalone-postgres` (rendered by our kustomize from the module cache) is how the pieces
are wired without Deployments, kube-proxy or a cluster network:

- **Postgres** runs as `nobody` (`setpriv`; it refuses root) with `fsync=off` in the session's
  temporary directory, on a free port of 127.0.0.1; database `katib`, user `katib`.
- **db-manager** gets the database through its env (`DB_NAME=postgres`, `KATIB_POSTGRESQL_DB_HOST/
  PORT`) and listens on its own free port (its default 6789 is every suggestion's port, P5).
- **katib-controller** runs as ServiceAccount `kubeflow/katib-controller` (released RBAC; its pod
  mutator skips that user). The db-manager address reaches it and every injected metrics collector as
  `KATIB_DB_MANAGER_SERVICE_NAMESPACE=` (empty) + `_IP=127.0.0.1` + `_PORT` (P7). Its katib-config
  is the released one with `init.controller` ports of our own and Trainer v2's TrainJob among its
  `trialResources` (`TRAINJOB_RESOURCE`, as Katib's non-postgres standalone install has it): its suggestion images (goptuna's Go
  service, Katib's Python services skopt, hyperopt, optuna, hyperband and medianstop early stopping)
  are run by the tests' kubelet from what `make controllers` builds (`build.sh`, `build_python.sh`). Certs:
  the rotator's Secret is copied (`CertCopy`) into a directory
  bind-mounted on `/tmp/cert` in the controller's private mount namespace (P3); the webhook Service
  is ExternalName `localhost` with the local webhook port (P4).
- **Suggestion Services** (`<experiment>-<algorithm>.<ns>:6789`, ClusterIP, and `:6788` for
  medianstop): there is no kube-proxy, so a ClusterIP answers nothing. The controller's private mount
  namespace has its own `/etc/hosts`, kept by `tests.cluster.service_hosts.ServiceHosts` (each Service
  with a ready endpoint → that endpoint's pod IP, **a debt**); while the controller runs, the same file
  is the /etc/hosts of the pods the process kubelet runs with their volumes at their paths (Katib's
  trial pods, whose metrics collector dials the medianstop service).

`Katib(cluster, workdir).start()` starts all three and returns once `/readyz` answers ok;
`stop_controller()` stops the controller and deletes its webhook configurations (with the
controller gone, their `failurePolicy: Fail` would refuse every Experiment and every pod create in
an injection-labelled namespace, P12); `start_controller()` starts it again on the same database.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pathlib
import shutil
import socket
import subprocess
import time
from typing import Callable

import yaml

from tests.cluster.controlplane import free_port
from tests.cluster.service_hosts import ServiceHosts
from tests.controllers.outofcluster import BIN, HERE, CertCopy, ControllerProcess, apply, delete_all, module_dir, \
    render, sa_kubeconfig

TRAINJOB_RESOURCE = "TrainJob.v1alpha1.trainer.kubeflow.org"  # a trial kind of Katib v0.19 (Kubeflow Trainer v2)
WEBHOOKS = ("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/katib.kubeflow.org",
            "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/katib.kubeflow.org")


def postgres_bin() -> pathlib.Path | None:
    """Debian's PostgreSQL server binaries (the newest installed), or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), key=lambda p: int(p.split("/")[4]))
    return pathlib.Path(found[-1]).parent if found else None


def _wait_port(port: int, proc: subprocess.Popen, timeout: float, what: str, log: pathlib.Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited ({proc.returncode}):\n{log.read_text(errors='replace')[-4000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"{what} not listening on {port} in {timeout} s:\n{log.read_text(errors='replace')[-4000:]}")


class Postgres:
    """PostgreSQL as `nobody`, fsync off, in `workdir` (made traversable for `nobody`)."""

    USER = PASSWORD = DATABASE = "katib"

    def __init__(self, workdir: pathlib.Path):
        self.dir = pathlib.Path(workdir)
        self.port = 0
        self.proc: subprocess.Popen | None = None

    def _as_nobody(self, argv: list[str], **kwargs) -> subprocess.CompletedProcess:
        return subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", *argv],
                              capture_output=True, text=True, **kwargs)

    def start(self, timeout: float = 60) -> "Postgres":
        bindir = postgres_bin()
        if bindir is None:
            raise FileNotFoundError("PostgreSQL is not installed (/usr/lib/postgresql/*/bin/postgres): "
                                    "run `make controllers`, which installs Debian's `postgresql`")
        self.dir.mkdir(parents=True, exist_ok=True)
        # nobody must reach its data directory: let it traverse (not read) the directories above
        for parent in [self.dir, *self.dir.parents]:
            if parent == pathlib.Path("/"):
                break
            parent.chmod(parent.stat().st_mode | 0o001)
        shutil.chown(self.dir, "nobody", "nogroup")
        pw = self.dir / "pw"
        pw.write_text(self.PASSWORD)
        shutil.chown(pw, "nobody", "nogroup")
        data = self.dir / "data"
        if not data.exists():
            done = self._as_nobody([str(bindir / "initdb"), "-D", str(data), "-U", self.USER, f"--pwfile={pw}",
                                    "-A", "scram-sha-256", "--no-sync"])
            if done.returncode:
                raise RuntimeError(f"initdb failed: {done.stdout}{done.stderr}")
        self.port = free_port()
        log = self.dir / "postgres.log"
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(
                ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", str(bindir / "postgres"),
                 "-D", str(data), "-k", str(self.dir), "-h", "127.0.0.1", "-p", str(self.port), "-c", "fsync=off",
                 "-c", "synchronous_commit=off", "-c", "full_page_writes=off"],
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        _wait_port(self.port, self.proc, timeout, "postgres", log)
        env = {**os.environ, "PGPASSWORD": self.PASSWORD}
        deadline = time.monotonic() + timeout
        while True:  # listening comes a moment before accepting logins
            done = subprocess.run([str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", self.USER,
                                   self.DATABASE], capture_output=True, text=True, env=env)
            if done.returncode == 0 or "already exists" in done.stderr:
                return self
            if time.monotonic() > deadline:
                raise RuntimeError(f"createdb failed: {done.stderr}")
            time.sleep(0.2)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(2)  # SIGINT: fast shutdown
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@contextlib.contextmanager
def katib_config_changed(cluster, change: Callable[[dict], None]):
    """While the block runs, the cluster's katib-config ConfigMap (`Katib.NS`) holds the parsed
    katib-config.yaml as `change` left it (changed in place); after, what it held before. Katib's
    webhook and controller read it from their informer's cache: give them a moment."""
    path = ("", "v1", "configmaps", Katib.NS, "katib-config")
    before = cluster.get(*path)
    config = yaml.safe_load(before["data"]["katib-config.yaml"])
    change(config)
    cluster.patch(*path, {"data": {"katib-config.yaml": yaml.safe_dump(config, sort_keys=False)}})
    try:
        yield
    finally:
        cluster.patch(*path, {"data": before["data"]})


class Katib:
    """Katib v0.19.0: Postgres, katib-db-manager, katib-controller (see the module docstring)."""

    MODULE = "github.com/kubeflow/katib"
    NS, SA, SECRET, SERVICE = "kubeflow", "katib-controller", "katib-webhook-cert", "katib-controller"
    CERT_DIR = "/tmp/cert"  # hard-coded in katib-controller (consts.CertDir)

    def __init__(self, cluster, workdir: pathlib.Path):
        self.cluster, self.dir = cluster, pathlib.Path(workdir)
        self.postgres = Postgres(self.dir / "postgres")
        self.db_manager: ControllerProcess | None = None
        self.db_port = 0
        self.process: ControllerProcess | None = None
        self._certs: CertCopy | None = None
        self._hosts: ServiceHosts | None = None

    @property
    def db_address(self) -> str:
        return f"127.0.0.1:{self.db_port}"

    def start(self, timeout: float = 90) -> "Katib":
        for name in ("katib-controller", "katib-db-manager"):
            if not (BIN / name).exists():
                raise FileNotFoundError(f"{BIN / name} is not built: run `make controllers`")
        try:
            self.postgres.start()
            self.db_port = free_port()
            self.db_manager = ControllerProcess(
                [str(BIN / "katib-db-manager"), "-listen-address", self.db_address],
                {"DB_NAME": "postgres", "DB_USER": Postgres.USER, "DB_PASSWORD": Postgres.PASSWORD,
                 "KATIB_POSTGRESQL_DB_HOST": "127.0.0.1", "KATIB_POSTGRESQL_DB_PORT": str(self.postgres.port),
                 "KATIB_POSTGRESQL_DB_DATABASE": Postgres.DATABASE}, self.dir / "katib-db-manager.log")
            _wait_port(self.db_port, self.db_manager.proc, timeout, "katib-db-manager", self.db_manager.log)
            self.start_controller(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _docs(self, webhook: int, probe: int) -> tuple[list[dict], str]:
        overlay = module_dir(HERE / "katib", self.MODULE) / "manifests" / "v1beta1" / "installs" / \
            "katib-standalone-postgres"
        docs = render(overlay, {self.SERVICE: webhook},
                      drop_kinds=("Deployment", "CustomResourceDefinition", "PersistentVolumeClaim"))
        config_text = ""
        for doc in docs:
            if doc["kind"] == "ConfigMap" and doc["metadata"]["name"] == "katib-config":
                config = yaml.safe_load(doc["data"]["katib-config.yaml"])
                config["init"]["controller"].update(webhookPort=webhook, metricsAddr="0",
                                                    healthzAddr=f"127.0.0.1:{probe}")
                # Kubeflow Trainer v2's TrainJob as a trial kind, as Katib's own katib-standalone
                # install lists it (its postgres variant does not): a TrainJob trial's end is seen only
                # if the controller watches TrainJobs (from its start, and only once their CRD exists)
                resources = config["init"]["controller"].setdefault("trialResources", [])
                if TRAINJOB_RESOURCE not in resources:
                    resources.append(TRAINJOB_RESOURCE)
                # the suggestions and early stopping as Katib releases them (random, tpe: hyperopt;
                # grid: optuna; bayesianoptimization: skopt; cmaes, sobol: goptuna; medianstop): their
                # images are mapped to the services `make controllers` builds
                # (tests/cluster/kubelet_process.py's DEFAULT_IMAGES)
                config_text = yaml.safe_dump(config, sort_keys=False)
                doc["data"]["katib-config.yaml"] = config_text
        return docs, config_text

    def start_controller(self, timeout: float = 90) -> None:
        webhook, probe = free_port(), free_port()
        docs, config_text = self._docs(webhook, probe)
        apply(self.cluster, docs)
        # the runtime part (suggestion images) is read from the ConfigMap: make it ours even if kept
        cm = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "katib-config")
        self.cluster.run(self.cluster.rest.put(f"/api/v1/namespaces/{self.NS}/configmaps/katib-config", cm))
        config = self.dir / "katib-config.yaml"
        config.write_text(config_text)
        kubeconfig = sa_kubeconfig(self.cluster, self.NS, self.SA, self.dir / "katib-controller.kubeconfig")
        certs = self.dir / "cert"
        self._certs = CertCopy(self.cluster, self.NS, self.SECRET, certs)
        self._certs.start()
        self._hosts = ServiceHosts(self.cluster, self.dir / "hosts")
        self._hosts.start()
        self.cluster.network.service_hosts = self._hosts.path  # and Katib's pods' (its collectors: medianstop)
        self.process = ControllerProcess(
            [str(BIN / "katib-controller"), f"--katib-config={config}", f"--kubeconfig={kubeconfig}"],
            {"KATIB_CORE_NAMESPACE": self.NS, "KATIB_DB_MANAGER_SERVICE_NAMESPACE": "",
             "KATIB_DB_MANAGER_SERVICE_IP": "127.0.0.1", "KATIB_DB_MANAGER_SERVICE_PORT": str(self.db_port)},
            self.dir / "katib-controller.log", binds={self.CERT_DIR: certs, "/etc/hosts": self._hosts.path})
        self.process.wait_http_ok(f"http://127.0.0.1:{probe}/readyz", timeout, "katib-controller")

    def _finalized(self, timeout: float = 30) -> None:
        """Wait until no Katib object is left in a namespace being deleted: their finalizers are the
        controller's to remove, and without it such a namespace would stay Terminating."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                gone = {n["metadata"]["name"] for n in self.cluster.run(self.cluster.rest.get("/api/v1/namespaces"))[
                    "items"] if n["metadata"].get("deletionTimestamp")}
                listed = [self.cluster.run(self.cluster.rest.get(f"/apis/kubeflow.org/v1beta1/{plural}"))["items"]
                          for plural in ("experiments", "trials", "suggestions")]
                left = [o for items in listed for o in items
                        if o["metadata"]["namespace"] in gone or o["metadata"].get("deletionTimestamp")]
            except Exception:  # the cluster is going away
                return
            if not left:
                return
            time.sleep(0.3)

    def stop_controller(self) -> None:
        if self.process and self.process.proc.poll() is None:
            self._finalized()
        for part in (self._certs, self._hosts):
            if part:
                part.stop()
        self.cluster.network.service_hosts = None
        if self.process:
            self.process.stop()
            self.process = None
            delete_all(self.cluster, WEBHOOKS)

    def stop(self) -> None:
        self.stop_controller()
        if self.db_manager:
            self.db_manager.stop()
        self.postgres.stop()
