"""`mlplatform operator` on the test cluster, as helm-values/operator.yaml deploys it, for the kube tier.

`operator` (a fixture) installs the manifest's Namespace, ServiceAccount, ClusterRole, Role and
bindings and its ValidatingAdmissionPolicy (once per cluster; real RBAC: the operator acts as system:serviceaccount:mlplatform-system:
mlplatform-operator with a TokenRequest token), and its two webhook configurations with the
Service reference replaced by ``url: https://127.0.0.1:<port>/<path>`` (the API server reaches
an out-of-cluster webhook by URL; nothing else of them changes: selectors, failurePolicy, timeouts,
matchConditions are the shipped ones). It starts the real command (`python -m hub_ext.cli operator`)
as a subprocess with a self-signed certificate for 127.0.0.1 and waits for /readyz and for the CA
bundle in both configurations. The Deployment and Service are not applied (the tests' kubelet
runs pods as processes; the operator runs as one here).

The handle: ``namespace``; ``await start()`` / ``await stop()`` (SIGTERM, as the kubelet stops a
pod; the webhook configurations stay, so the API server meets a webhook that is down);
``log()`` (its output so far); ``health_url``; ``kube`` (an admin `hub_ext.kube.client.Kube`). At the end
the process stops and the webhook configurations are deleted, so no later test meets them.
Options through ``@pytest.mark.operator_args([...])``: extra flags (e.g. ``--s3-endpoint``).

`make_project` makes a project namespace as the hub does for the operator: the Namespace of
`hub_ext.manifests.tenancy.project_objects` (the platform's label) and its RoleBinding ``mlplatform-operator``
(the operator's rights there; it has none in other namespaces).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pathlib
import signal
import subprocess
import sys
import time
from typing import AsyncIterator

import aiohttp
import kubernetes_asyncio
import pytest
import yaml

from hub_ext.core.entitlements import Project
from hub_ext.kube.client import Kube
from hub_ext.manifests.tenancy import OPERATOR_BINDING, project_objects
from tests.cluster.cluster import api_path
from tests.cluster.controlplane import free_port
from tests.cluster.identities import policies_compiled, service_account_kubeconfig
from tests.cluster.rest import ApiError

ROOT = pathlib.Path(__file__).resolve().parents[2]
NAMESPACE, SERVICE_ACCOUNT = "mlplatform-system", "mlplatform-operator"
_PLURALS = {"Namespace": ("", "namespaces"), "ServiceAccount": ("", "serviceaccounts"),
            "ClusterRole": ("rbac.authorization.k8s.io", "clusterroles"),
            "ClusterRoleBinding": ("rbac.authorization.k8s.io", "clusterrolebindings"),
            "Role": ("rbac.authorization.k8s.io", "roles"), "RoleBinding": ("rbac.authorization.k8s.io", "rolebindings"),
            "ValidatingAdmissionPolicy": ("admissionregistration.k8s.io", "validatingadmissionpolicies"),
            "ValidatingAdmissionPolicyBinding": ("admissionregistration.k8s.io", "validatingadmissionpolicybindings"),
            "ValidatingWebhookConfiguration": ("admissionregistration.k8s.io", "validatingwebhookconfigurations"),
            "MutatingWebhookConfiguration": ("admissionregistration.k8s.io", "mutatingwebhookconfigurations")}
WEBHOOK_KINDS = ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")


def manifests() -> list[dict]:
    return [d for d in yaml.safe_load_all((ROOT / "helm-values" / "operator.yaml").read_text()) if d]


def _path(doc: dict, named: bool = False) -> str:
    group, plural = _PLURALS[doc["kind"]]
    ns = doc["metadata"].get("namespace")
    return api_path(group, doc["apiVersion"].split("/")[-1], plural, ns, doc["metadata"]["name"] if named else None)


def webhook_configs(port: int) -> list[dict]:
    """The shipped webhook configurations, reaching the operator at 127.0.0.1:`port`."""
    docs = []
    for doc in manifests():
        if doc["kind"] in WEBHOOK_KINDS:
            for hook in doc["webhooks"]:
                service = hook["clientConfig"].pop("service")
                hook["clientConfig"]["url"] = f"https://127.0.0.1:{port}{service['path']}"
            docs.append(doc)
    return docs


async def make_project(admin: Kube, ns: str, labels: dict | None = None) -> None:
    """The project namespace `ns` with the operator's RoleBinding, as the hub makes them (its other
    objects are the caller's to add); `labels` added to the Namespace's."""
    objects = project_objects(Project(ns, ns, False, frozenset(), {}), {}, [])
    namespace = next(o for o in objects if o["kind"] == "Namespace")
    namespace["metadata"]["labels"].update(labels or {})
    await admin.create(namespace)
    await operator_binding(admin, ns)


async def operator_binding(admin: Kube, ns: str) -> None:
    """The operator's RoleBinding in the existing namespace `ns`, as the hub makes it in a project."""
    objects = project_objects(Project(ns, ns, False, frozenset(), {}), {}, [])
    await admin.create(next(o for o in objects if o["kind"] == "RoleBinding" and o["metadata"]["name"] == OPERATOR_BINDING))


class OperatorProcess:
    def __init__(self, cluster, workdir: pathlib.Path, args: list[str]):
        self.cluster, self.workdir, self.args = cluster, workdir, args
        self.namespace = NAMESPACE
        self.webhook_port, self.health_port = free_port(), free_port()
        self.health_url = f"http://127.0.0.1:{self.health_port}"
        self.log_path = workdir / "operator.log"
        self.proc: subprocess.Popen | None = None
        self.kube: Kube | None = None
        self._api = None
        self.starts = 0

    async def install(self) -> None:
        rest = self.cluster.rest
        for doc in manifests():
            if doc["kind"] in _PLURALS and doc["kind"] not in WEBHOOK_KINDS:
                try:
                    await self.cluster.arun(rest.post(_path(doc), doc))
                except ApiError as e:
                    if e.status != 409:
                        raise
        await self.cluster.arun(policies_compiled(self.cluster, manifests()))
        for doc in webhook_configs(self.webhook_port):
            await self.cluster.arun(rest.post(_path(doc), doc))
        self._api = await kubernetes_asyncio.config.new_client_from_config(
            config_file=str(self.cluster.write_kubeconfig(self.workdir / "admin.kubeconfig")))
        self.kube = Kube(self._api)

    async def start(self) -> None:
        self.starts += 1
        kubeconfig = service_account_kubeconfig(self.cluster, self.workdir / "operator.kubeconfig", NAMESPACE,
                                                SERVICE_ACCOUNT)
        cmd = [sys.executable, "-m", "hub_ext.cli", "operator", f"--kubeconfig={kubeconfig}",
               f"--namespace={NAMESPACE}", f"--identity=operator-{self.starts}",
               f"--webhook-addr=127.0.0.1", f"--webhook-port={self.webhook_port}", "--tls-host=127.0.0.1",
               f"--health-addr=127.0.0.1", f"--health-port={self.health_port}", "--log-format=text",
               "--lease-duration=4", "--tls-check=2", f"--loader-python={sys.executable}",
               "--progress-interval=0.5", "--drain-seconds=0", "--rescan-interval=1",
               # reviews only from the API server (its webhook client certificate), as docs/operator.md says
               f"--webhook-client-ca={self.cluster.cp.webhook_pki.ca}", *self.args]
        with open(self.log_path, "a") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
                                         env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=True)
        await self.wait_ready()

    async def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        async with aiohttp.ClientSession() as http:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise AssertionError(f"the operator exited {self.proc.returncode}:\n{self.log()[-3000:]}")
                try:
                    async with http.get(f"{self.health_url}/readyz") as resp:
                        if resp.status == 200 and await self._bundled():
                            return
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.2)
        raise AssertionError(f"the operator was not ready in {timeout} s:\n{self.log()[-3000:]}")

    async def _bundled(self) -> bool:
        for doc in webhook_configs(self.webhook_port):
            live = await self.kube.get(_path(doc, named=True))
            if not all((w.get("clientConfig") or {}).get("caBundle") for w in live["webhooks"]):
                return False
        return True

    async def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            for _ in range(150):
                if self.proc.poll() is not None:
                    break
                await asyncio.sleep(0.1)
            else:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    async def uninstall(self) -> None:
        for doc in webhook_configs(self.webhook_port):
            await self.kube.delete(_path(doc, named=True))
        await self._api.close()


@contextlib.asynccontextmanager
async def running_operator(cluster, workdir: pathlib.Path, args=()) -> AsyncIterator[OperatorProcess]:
    """The operator installed and started, then stopped and its webhook configurations removed.
    A module's tests may share one (a module-scoped fixture of their own), where they can."""
    op = OperatorProcess(cluster, workdir, list(args))
    await op.install()
    try:
        await op.start()
        yield op
    finally:
        await op.stop()
        await op.uninstall()


@pytest.fixture
async def operator(kube_cluster, tmp_path, request):
    marker = request.node.get_closest_marker("operator_args")
    async with running_operator(kube_cluster, tmp_path, marker.args[0] if marker else ()) as op:
        yield op
