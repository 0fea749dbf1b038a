"""`mlplatform doctor` against the real control plane: a cluster as the manifests install it, then the
same cluster missing one thing at a time, each named with its fix (exit 1), and back.

The cluster: the session's control plane (the Training Operator's and Katib's CRDs), the hub's RBAC
and project policies (`install_platform`), `mlplatform operator` running with its webhooks
(`operator`: out of cluster, reached by URL, so no Deployment: a warning), the tests' kubelet with
the GPU nodes of `platform_env.NODES`, and one project namespace with the hub's and the operator's
RoleBindings. The doctor runs as a subprocess, as an administrator runs it, with the admin kubeconfig
(through the fault proxy) and a ``jupyterhub_config.py`` holding the demo's catalogue.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys

import pytest

from hub_ext.core.entitlements import Project
from hub_ext.manifests.tenancy import HUB_BINDING, OPERATOR_BINDING, project_objects
from tests.cluster.identities import install_platform
from tests.conftest import ROOT
from tests.kube.platform_env import NODES, PLATFORM, delete_projects

pytestmark = pytest.mark.kube
PROJECT = "doctor-p"
RBAC = "rbac.authorization.k8s.io"


def run_doctor(kubeconfig, *args: str) -> tuple[int, dict[str, dict], str]:
    """`mlplatform doctor` as an administrator runs it: (exit status, the findings by check with --json, else
    {}, its printed report with --json's stderr, else stdout)."""
    proc = subprocess.run([sys.executable, "-m", "hub_ext.cli", "doctor", f"--kubeconfig={kubeconfig}", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in proc.stderr, proc.stderr
    if "--json" not in args:
        return proc.returncode, {}, proc.stdout
    return proc.returncode, {f["check"]: f for f in json.loads(proc.stdout)}, proc.stderr


@pytest.fixture
def world(kube_cluster, operator, tmp_path):
    install_platform(kube_cluster)
    kube_cluster.kubelet(nodes=NODES)
    for obj in project_objects(Project(PROJECT, PROJECT, False, frozenset(), {}), {}, []):
        if obj["kind"] == "Namespace" or (obj["kind"] == "RoleBinding"
                                          and obj["metadata"]["name"] in (HUB_BINDING, OPERATOR_BINDING)):
            group = RBAC if obj["kind"] == "RoleBinding" else ""
            plural = "rolebindings" if group else "namespaces"
            kube_cluster.create(group, "v1", plural, obj["metadata"].get("namespace"), obj)
    config = tmp_path / "jupyterhub_config.py"
    config.write_text("".join(f"c.PlatformConfig.{k} = {v!r}\n" for k, v in PLATFORM.items()))
    kubeconfig = kube_cluster.write_kubeconfig(tmp_path / "admin.kubeconfig")

    def doctor(*args: str) -> tuple[int, dict[str, dict], str]:
        return run_doctor(kubeconfig, "--config", str(config), "--hub-account=jhub/hub", *args)

    try:
        yield doctor
    finally:
        delete_projects(kube_cluster)


@contextlib.contextmanager
def a_project_being_deleted(kube_cluster):
    """A project namespace held in Terminating (a ConfigMap's finalizer) that lists before
    `PROJECT`: a create there is refused before any webhook (found in CI: another module's project
    was going away when the doctor probed it)."""
    ns = "aaa-doctor-going"
    namespace = next(o for o in project_objects(Project(ns, ns, False, frozenset(), {}), {}, []) if o["kind"] == "Namespace")
    kube_cluster.create("", "v1", "namespaces", None, namespace)
    kube_cluster.create("", "v1", "configmaps", ns, {"metadata": {"name": "held", "finalizers": ["example.com/hold"]}})
    kube_cluster.delete("", "v1", "namespaces", None, ns)
    try:
        yield ns
    finally:
        kube_cluster.patch("", "v1", "configmaps", ns, "held", {"metadata": {"finalizers": None}})


def test_a_cluster_as_the_manifests_install_it_passes(world, kube_cluster):
    with a_project_being_deleted(kube_cluster):
        rc, found, err = world("--json")
    assert rc == 0, ([f for f in found.values() if f["status"] == "fail"], err)
    assert f"in {PROJECT} was sent to" in found["webhooks answer the API server"]["detail"], found
    status = {check: f["status"] for check, f in found.items()}
    for check in ("kubernetes", "api: training jobs", "api: sweeps", "installed: helm-values/hub-rbac.yaml",
                  "installed: helm-values/project-policies.yaml", "hub rights", "operator rights",
                  "webhook credential-secrets.operator.mlplatform.io", "webhook credential-mounts.operator.mlplatform.io",
                  "webhooks answer the API server", "accelerator a100", "accelerator 1g.5gb", "accelerator 3g.20gb",
                  "projects"):
        assert status[check] == "ok", found[check]
    assert "kubeflow.org/v1" in found["api: training jobs"]["detail"]
    assert found["accelerator 1g.5gb"]["detail"] == "2 nvidia.com/mig-1g.5gb on 1 node(s): dgx-mig"
    assert "refused by it" in found["webhooks answer the API server"]["detail"]
    # the operator runs out of cluster here, and neither Kueue nor a DCGM exporter is installed: the
    # platform works without them, so warnings, each with its fix
    assert status["operator"] == status["api: queueing"] == status["gpu metrics"] == "warn"
    assert "install Kueue" in found["api: queueing"]["fix"]
    # the same as a person reads it
    rc, _, text = world()
    print(text)
    assert rc == 0
    assert text.splitlines()[-1].startswith("0 failed, ")
    assert "fix: install NVIDIA's dcgm-exporter" in text


async def test_each_missing_piece_is_named_with_its_fix(world, kube_cluster, operator):
    # the hub's ClusterRoleBinding removed: the manifest is incomplete and the hub lacks its rights
    binding = kube_cluster.get(RBAC, "v1", "clusterrolebindings", None, "mlplatform-hub")
    kube_cluster.delete(RBAC, "v1", "clusterrolebindings", None, "mlplatform-hub")
    try:
        rc, found, _ = world("--json")
    finally:
        kube_cluster.create(RBAC, "v1", "clusterrolebindings", None,
                            {k: binding[k] for k in ("apiVersion", "kind", "roleRef", "subjects")}
                            | {"metadata": {"name": "mlplatform-hub", "labels": binding["metadata"]["labels"]}})
    assert rc == 1
    assert found["installed: helm-values/hub-rbac.yaml"]["detail"] == "missing ClusterRoleBinding mlplatform-hub"
    assert found["installed: helm-values/hub-rbac.yaml"]["fix"] == "kubectl apply -f helm-values/hub-rbac.yaml"
    assert found["hub rights"]["status"] == "fail"
    assert "system:serviceaccount:jhub:hub may not get nodes" in found["hub rights"]["detail"]

    # another hub account than the one the project policies name
    rc, found, _ = world("--json", "--hub-account=hub-ns/hub")
    assert rc == 1
    assert "mlplatform-project-pods" in found["policies name the hub"]["detail"]
    assert "project-policies.yaml" in found["policies name the hub"]["fix"]

    # a node's product label gone: the whole A100s are nowhere (the MIG slices still are)
    product = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}
    kube_cluster.patch("", "v1", "nodes", None, "dgx-full", {"metadata": {"labels": {"nvidia.com/gpu.product": None}}})
    try:
        rc, found, _ = world("--json")
    finally:
        kube_cluster.patch("", "v1", "nodes", None, "dgx-full", {"metadata": {"labels": product}})
    assert rc == 1
    assert found["accelerator a100"]["status"] == "fail"
    assert found["accelerator a100"]["detail"] == ("no node offers nvidia.com/gpu with "
                                                   "nvidia.com/gpu.product=NVIDIA-A100-SXM4-40GB")
    assert "accelerators['a100']" in found["accelerator a100"]["fix"]
    assert found["accelerator 1g.5gb"]["status"] == "ok"

    # a cluster without the Training Operator (nor Trainer v2)
    kube_cluster.inject_fault(None, r"^/apis/kubeflow\.org/v1(\?|$)", status=404, count=5)
    rc, found, _ = world("--json")
    kube_cluster.clear_faults()
    assert rc == 1
    assert found["api: training jobs"]["status"] == "fail"
    assert "not served: trainer.kubeflow.org/v1alpha1" in found["api: training jobs"]["detail"]
    assert "Kubeflow Trainer v2.3" in found["api: training jobs"]["fix"]

    # the operator down: its webhooks do not answer the API server
    await operator.stop()
    rc, found, _ = world("--json")
    assert rc == 1
    assert found["webhooks answer the API server"]["status"] == "fail"
    assert "could not call the operator" in found["webhooks answer the API server"]["detail"]
