"""What `mlplatform operator` is told, parsed once into a frozen `OperatorSettings`.

Every setting is a flag with a default that matches the hub's (`hub_ext.spawners.mount_config.MountConfig`:
credential Secret types, mount roots, the dataset label and source annotation), so a pod the
webhook mounts sees credentials where a notebook does. `parse(argv)` raises `SystemExit(2)` naming
the flag on a bad value (argparse's own message), as every command of the platform does.
"""

from __future__ import annotations

import argparse
import os
import socket
from dataclasses import dataclass

from hub_ext.manifests.mounts import MountSettings

PROJECT_SELECTOR = "app.kubernetes.io/managed-by=jupyterhub-mlplatform"
CREDENTIALS_ANNOTATION = "mlplatform.io/credentials"
INJECT_ANNOTATION = "mlplatform.io/inject-credentials"
WEBHOOK_CONFIGURATIONS = ("mlplatform-credential-secrets", "mlplatform-credential-mounts", "mlplatform-member-accounts")
DEFAULT_LOADER_IMAGE = "ghcr.io/jupyterhub-mlplatform/trainer-tools:0.1.0"
KATIB_DB_MANAGER = "katib-db-manager.kubeflow:6789"  # the Service Katib's released manifests make


@dataclass(frozen=True)
class OperatorSettings:
    namespace: str
    identity: str
    mounts: MountSettings
    kubeconfig: str | None = None
    project_selector: str = PROJECT_SELECTOR
    credentials_annotation: str = CREDENTIALS_ANNOTATION
    inject_annotation: str = INJECT_ANNOTATION
    webhook_addr: str = "0.0.0.0"
    webhook_port: int = 9443
    webhook_configurations: tuple[str, ...] = WEBHOOK_CONFIGURATIONS
    tls_dir: str | None = None
    tls_secret: str = "mlplatform-operator-tls"
    tls_hosts: tuple[str, ...] = ()
    tls_validity_s: int = 90 * 86400
    tls_check_s: float = 60.0
    # a CA bundle (PEM): the webhook server then answers only a caller presenting a client
    # certificate it issued (the API server's, from its AdmissionConfiguration); None: anyone
    webhook_client_ca: str | None = None
    health_addr: str = "0.0.0.0"
    health_port: int = 8080
    lease_name: str = "mlplatform-operator"
    lease_duration_s: int = 15
    loader_image: str = DEFAULT_LOADER_IMAGE
    loader_python: tuple[str, ...] = ("python",)
    loader_service_account: str = "mlplatform-runner"
    # who makes a Job's pods: the Job controller, as its own ServiceAccount (kube-controller-manager
    # --use-service-account-credentials) or as the controller manager; only their pods may be loaders
    job_controller_users: tuple[str, ...] = ("system:serviceaccount:kube-system:job-controller",
                                             "system:kube-controller-manager")
    s3_endpoint: str = ""
    gcs_endpoint: str = ""
    progress_interval: float = 2.0
    progress_reads: float = 10.0
    log_format: str = "json"
    drain_s: float = 5.0
    katib_db_manager: str = KATIB_DB_MANAGER
    rescan_interval_s: float = 30.0

    @property
    def service_host(self) -> str:
        """The webhook Service's DNS name, as the API server reaches it in a cluster."""
        return f"mlplatform-operator.{self.namespace}.svc"


def _credential_type(value: str) -> tuple[str, str]:
    kind, sep, secret_type = value.partition("=")
    if not sep or kind not in ("gcp-credential", "aws-credential") or not secret_type:
        raise argparse.ArgumentTypeError(f"{value!r}: expected gcp-credential=<Secret type> or aws-credential=<Secret type>")
    return kind, secret_type


def _positive(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number") from None
    if not number > 0:
        raise argparse.ArgumentTypeError(f"{value!r} must be above 0")
    return number


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mlplatform operator", description=(
        "The platform's cluster side: the credential Secret and pod webhooks, and the dataset loader."))
    a = p.add_argument
    a("--namespace", default=os.environ.get("POD_NAMESPACE", "mlplatform-system"),
      help="the operator's own namespace (its Lease, TLS Secret and Service); default $POD_NAMESPACE")
    a("--identity", default=os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}",
      help="this replica's name in the Lease; default $POD_NAME")
    a("--kubeconfig", help="a kubeconfig file (default: the in-cluster ServiceAccount)")
    a("--project-selector", default=PROJECT_SELECTOR, help="the label selector of project namespaces")
    a("--credential-type", action="append", type=_credential_type, metavar="KIND=TYPE",
      help="Secret type of a credential kind, as c.PlatformSpawner.credential_types (repeat)")
    a("--credentials-root", default="/etc/mlplatform/credentials")
    a("--datasets-root", default="/datasets")
    a("--dataset-label", default="mlplatform.io/dataset")
    a("--source-annotation", default="mlplatform.io/source")
    a("--webhook-addr", default="0.0.0.0")
    a("--webhook-port", type=int, default=9443)
    a("--tls-dir", help="a directory with tls.crt and tls.key (cert-manager's Secret); default: a self-signed "
                        "certificate the operator keeps in --tls-secret and rotates")
    a("--tls-secret", default="mlplatform-operator-tls")
    a("--tls-host", action="append", default=[], help="an extra name or IP for the self-signed certificate")
    a("--tls-validity", type=_positive, default=90 * 86400.0, metavar="SECONDS",
      help="lifetime of a self-signed serving certificate; renewed when a third is left")
    a("--tls-check", type=_positive, default=60.0, metavar="SECONDS", help="how often the certificate is checked")
    a("--webhook-client-ca", metavar="FILE",
      help="a CA bundle (PEM): answer admission reviews only from a caller whose client certificate it "
           "issued (the API server's webhook client certificate; docs/operator.md). Default: any caller")
    a("--health-addr", default="0.0.0.0")
    a("--health-port", type=int, default=8080)
    a("--lease", default="mlplatform-operator")
    a("--lease-duration", type=int, default=15)
    a("--loader-image", default=DEFAULT_LOADER_IMAGE)
    a("--loader-python", default="python", help="the loader container's command prefix (space-separated)")
    a("--loader-service-account", default="mlplatform-runner")
    a("--s3-endpoint", default="", help="an S3-compatible endpoint for dataset sources (MinIO, Ceph)")
    a("--gcs-endpoint", default="", help="a GCS endpoint (an emulator) for dataset sources")
    a("--progress-interval", type=_positive, default=2.0, metavar="SECONDS",
      help="how often a running load's progress is read from its loader's log")
    a("--progress-reads", type=_positive, default=10.0, metavar="PER_SECOND",
      help="at most this many progress reads a second across all running loads (each: a pod listing "
           "and a log tail); with many loads each one's progress is read less often")
    a("--katib-db-manager", default=KATIB_DB_MANAGER, metavar="HOST:PORT",
      help="Katib's DB manager (gRPC), where early-stopped trials' metrics are read to write the "
           "observation Katib leaves out (hub_ext.operator.early_stopped); empty: not done")
    a("--rescan-interval", type=_positive, default=30.0, metavar="SECONDS",
      help="how often the API groups of custom resources the operator serves are looked at again, so "
           "a CRD installed after it (Kubeflow Trainer, Katib) is served (hub_ext.operator.rescan)")
    a("--log-format", choices=["json", "text"], default="json", help="one JSON object per line, or text")
    a("--drain-seconds", type=float, default=5.0, metavar="SECONDS",
      help="on SIGTERM, how long to keep answering reviews while failing readiness before stopping")
    return p


def parse(argv: list[str] | None = None) -> OperatorSettings:
    ns = parser().parse_args(argv)
    types = dict(ns.credential_type or [("gcp-credential", "gcp-credential"), ("aws-credential", "aws-credential")])
    mounts = MountSettings(types, ns.credentials_root.rstrip("/"), ns.datasets_root.rstrip("/"), ns.dataset_label,
                           ns.source_annotation)
    return OperatorSettings(
        namespace=ns.namespace, identity=ns.identity, mounts=mounts, kubeconfig=ns.kubeconfig,
        project_selector=ns.project_selector, webhook_addr=ns.webhook_addr, webhook_port=ns.webhook_port,
        tls_dir=ns.tls_dir, tls_secret=ns.tls_secret, tls_hosts=tuple(ns.tls_host), tls_validity_s=int(ns.tls_validity),
        tls_check_s=ns.tls_check, webhook_client_ca=ns.webhook_client_ca, health_addr=ns.health_addr, health_port=ns.health_port, lease_name=ns.lease,
        lease_duration_s=ns.lease_duration, loader_image=ns.loader_image, loader_python=tuple(ns.loader_python.split()),
        loader_service_account=ns.loader_service_account, s3_endpoint=ns.s3_endpoint, gcs_endpoint=ns.gcs_endpoint,
        progress_interval=ns.progress_interval, progress_reads=ns.progress_reads, log_format=ns.log_format,
        drain_s=max(0.0, ns.drain_seconds), katib_db_manager=ns.katib_db_manager.strip(),
        rescan_interval_s=ns.rescan_interval)
