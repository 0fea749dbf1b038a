"""Shared fixtures: the Kubernetes target (the control plane built from tests/cluster, one per test
session with a fresh namespace per test, or a real cluster with --kube-context), both real
Kubernetes clients, and the hub/browser harness plugin."""

from __future__ import annotations

import os
import pathlib
import sys
import uuid
from dataclasses import dataclass

import pytest

pytest_plugins = ["tests.harness.fixtures"]

ROOT = pathlib.Path(__file__).resolve().parent.parent


def pytest_addoption(parser):
    parser.addoption("--kube-context", default=None,
                     help="run the Kubernetes tests against this context of $KUBECONFIG (a real cluster, e.g. kind "
                          "or k3s) instead of the control plane built from tests/cluster; tests that need the "
                          "test kubelet or the fault proxy are skipped there")


# kubernetes_asyncio and kubernetes fix their default kubeconfig path when first imported, and
# KubeSpawner loads that file: point KUBECONFIG at a file of ours before any test module imports
# them; the session's control plane fills it in when it starts (an admin through the fault proxy).
DEFAULT_KUBECONFIG: pathlib.Path | None = None


def pytest_configure(config):
    global DEFAULT_KUBECONFIG
    if config.getoption("--kube-context"):
        return
    import tempfile

    from tests.cluster.controlplane import kubeconfig, write_yaml

    DEFAULT_KUBECONFIG = pathlib.Path(tempfile.mkdtemp(prefix="test-kubeconfig-")) / "config"
    write_yaml(DEFAULT_KUBECONFIG, kubeconfig("https://127.0.0.1:9", DEFAULT_KUBECONFIG.parent / "ca.crt",
                                              token="no-cluster-yet"))  # a closed port until the cluster starts
    os.environ["KUBECONFIG"] = str(DEFAULT_KUBECONFIG)
    # a conftest named on the command line (pytest tests/kube/...) is imported before this hook
    # runs, and with it the clients: give them the path too
    for name in ("kubernetes_asyncio.config.kube_config", "kubernetes.config.kube_config"):
        if name in sys.modules:
            sys.modules[name].KUBE_CONFIG_DEFAULT_LOCATION = str(DEFAULT_KUBECONFIG)


def pytest_collection_modifyitems(config, items):
    """Every test belongs to exactly one tier, so `make test` (one run per tier) runs them all."""
    tiers = {"unit", "local", "kube", "hub", "browser"}
    for item in items:
        found = tiers & {m.name for m in item.iter_markers()}
        if len(found) != 1:
            raise pytest.UsageError(f"{item.nodeid}: needs exactly one tier marker of {sorted(tiers)}, has "
                                    f"{sorted(found) or 'none'}")


@dataclass
class KubeTarget:
    kubeconfig: str
    context: str | None
    namespace: str
    cluster: object | None  # tests.cluster.Cluster, or None on a real cluster

    @property
    def real(self) -> bool:
        """A cluster of the user's (--kube-context), not the one the tests built."""
        return self.cluster is None


@pytest.fixture(scope="session")
def _session_cluster(request, tmp_path_factory):
    from tests.cluster.cluster import Cluster
    from tests.cluster.controlplane import binaries_missing

    if binaries_missing():
        pytest.fail(f"the control plane is not built ({', '.join(binaries_missing())} missing): run `make cluster`")
    c = Cluster(tmp_path_factory.mktemp("cluster")).start()
    if DEFAULT_KUBECONFIG is not None:
        c.write_kubeconfig(DEFAULT_KUBECONFIG)
    yield c
    c.stop()


@pytest.fixture
def kube_cluster(request):
    """The session's control plane built from tests/cluster (its kubelets, fault proxy, request
    log), reset after the test. Skips on a --kube-context cluster."""
    if request.config.getoption("--kube-context"):
        pytest.skip("needs the test kubelet and the fault proxy of the built control plane; not on --kube-context")
    c = request.getfixturevalue("_session_cluster")
    yield c
    c.reset()


@pytest.fixture
def kube_target(request, tmp_path):
    """A Kubernetes API to test against and a fresh namespace in it, removed afterwards."""
    context = request.config.getoption("--kube-context")
    namespace = f"t-{uuid.uuid4().hex[:8]}"
    if context:
        kubeconfig = os.environ.get("KUBECONFIG", str(pathlib.Path.home() / ".kube" / "config"))
        target = KubeTarget(kubeconfig, context, namespace, None)
    else:
        c = request.getfixturevalue("kube_cluster")
        target = KubeTarget(str(c.write_kubeconfig(tmp_path / "kubeconfig")), None, namespace, c)
    import kubernetes

    api = kubernetes.config.new_client_from_config(config_file=target.kubeconfig, context=context)
    core = kubernetes.client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": namespace}})
    _wait_controller_objects(core, namespace)
    yield target
    try:
        core.delete_namespace(namespace)
    except kubernetes.client.ApiException as e:
        if e.status != 404:
            raise
    api.close()


def _wait_controller_objects(core, namespace: str, timeout: float = 30) -> None:
    """What the controller-manager adds to a new namespace, there before the test starts: pods are
    refused until the default ServiceAccount exists, and a kube-root-ca.crt ConfigMap arriving
    mid-test would show in the test's own lists and watches."""
    import time

    deadline = time.monotonic() + timeout
    for what, lister in (("ServiceAccount default", core.list_namespaced_service_account),
                         ("ConfigMap kube-root-ca.crt", core.list_namespaced_config_map)):
        name = what.split()[1]
        while not lister(namespace, field_selector=f"metadata.name={name}").items:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {what} in {namespace}")
            time.sleep(0.05)


@pytest.fixture(params=["sync", "async"])
async def k(request, kube_target):
    """Each test using `k` runs twice: through the sync `kubernetes` client and `kubernetes_asyncio`."""
    from tests.kube.client import Kube

    if request.param == "sync":
        import kubernetes

        api = kubernetes.config.new_client_from_config(config_file=kube_target.kubeconfig,
                                                      context=kube_target.context)
    else:
        import kubernetes_asyncio

        api = await kubernetes_asyncio.config.new_client_from_config(config_file=kube_target.kubeconfig,
                                                                    context=kube_target.context)
    kube = Kube(request.param, api)
    kube.ns = kube_target.namespace
    kube.target = kube_target
    yield kube
    await kube.close()
