"""Real identities on the test cluster: the platform's own RBAC and admission policy installed as a
deployment would install them, and kubeconfigs for the hub's and a project's ServiceAccounts.

`install_platform(cluster)` applies `helm-values/hub-rbac.yaml` (the hub's ClusterRoles and
binding to ServiceAccount `jhub/hub`) and `helm-values/project-policies.yaml` (the
ValidatingAdmissionPolicies whose CEL the API server runs; a type-checking warning fails), once
per cluster. `hub_kubeconfig()`
writes a kubeconfig that acts as `system:serviceaccount:jhub:hub` with a token from TokenRequest,
so a permission the hub needs and lacks fails the test that needs it; `service_account_kubeconfig()`
does the same for any ServiceAccount (e.g. a project's runner, as its notebook pod would act).
"""

from __future__ import annotations

import asyncio
import pathlib

import yaml

from tests.cluster.cluster import Cluster, api_path
from tests.cluster.rest import ApiError

ROOT = pathlib.Path(__file__).resolve().parents[2]
HUB_NAMESPACE, HUB_SERVICE_ACCOUNT = "jhub", "hub"
HUB_USER = f"system:serviceaccount:{HUB_NAMESPACE}:{HUB_SERVICE_ACCOUNT}"
MANIFESTS = ("hub-rbac.yaml", "project-policies.yaml")
_PLURALS = {"ClusterRole": ("rbac.authorization.k8s.io", "clusterroles"),
            "ClusterRoleBinding": ("rbac.authorization.k8s.io", "clusterrolebindings"),
            "ValidatingAdmissionPolicy": ("admissionregistration.k8s.io", "validatingadmissionpolicies"),
            "ValidatingAdmissionPolicyBinding": ("admissionregistration.k8s.io",
                                                 "validatingadmissionpolicybindings")}


def manifests() -> list[dict]:
    docs = []
    for name in MANIFESTS:
        docs += [d for d in yaml.safe_load_all((ROOT / "helm-values" / name).read_text()) if d]
    return docs


async def _create(cluster: Cluster, path: str, body: dict) -> None:
    try:
        await cluster.rest.post(path, body)
    except ApiError as e:
        if e.status != 409:
            raise


async def policies_compiled(cluster: Cluster, docs: list[dict]) -> None:
    """A ValidatingAdmissionPolicy takes effect once the API server has compiled it: wait for its
    type checking to be recorded in status (observedGeneration); a CEL mistake in a shipped policy
    (a type-checking warning) fails every test that installs it. Runs on the cluster's loop."""
    for doc in docs:
        if doc["kind"] != "ValidatingAdmissionPolicy":
            continue
        for _ in range(100):
            vap = await cluster.rest.get(api_path("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies",
                                                  None, doc["metadata"]["name"]))
            status = vap.get("status") or {}
            if status.get("observedGeneration") == vap["metadata"]["generation"]:
                warnings = (status.get("typeChecking") or {}).get("expressionWarnings")
                if warnings:
                    raise AssertionError(f"{doc['metadata']['name']}: {warnings}")
                break
            await asyncio.sleep(0.1)


def install_platform(cluster: Cluster) -> None:
    """The hub's namespace, ServiceAccount, ClusterRole(Binding) and the hub-token policy (idempotent)."""
    if getattr(cluster, "_platform_installed", False):
        return

    async def install():
        await _create(cluster, "/api/v1/namespaces", {"metadata": {"name": HUB_NAMESPACE}})
        await _create(cluster, f"/api/v1/namespaces/{HUB_NAMESPACE}/serviceaccounts",
                      {"metadata": {"name": HUB_SERVICE_ACCOUNT}})
        for doc in manifests():
            group, plural = _PLURALS[doc["kind"]]
            await _create(cluster, api_path(group, doc["apiVersion"].split("/")[-1], plural), doc)
        await policies_compiled(cluster, manifests())

    cluster.run(install())
    cluster._platform_installed = True


def service_account_token(cluster: Cluster, namespace: str, name: str, seconds: int = 3600) -> str:
    answer = cluster.run(cluster.rest.post(
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": seconds}}))
    return answer["status"]["token"]


def service_account_kubeconfig(cluster: Cluster, path, namespace: str, name: str) -> pathlib.Path:
    """A kubeconfig (through the fault proxy) that acts as system:serviceaccount:<namespace>:<name>."""
    return cluster.write_kubeconfig(path, namespace=namespace, token=service_account_token(cluster, namespace, name))


def hub_kubeconfig(cluster: Cluster, path) -> pathlib.Path:
    """A kubeconfig acting as the hub's ServiceAccount, with the platform's RBAC installed."""
    install_platform(cluster)
    return service_account_kubeconfig(cluster, path, HUB_NAMESPACE, HUB_SERVICE_ACCOUNT)
