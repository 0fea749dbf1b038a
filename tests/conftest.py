"""Shared fixtures: the Kubernetes target (stand-in, or a real cluster with --kube-context), both
real Kubernetes clients, and the hub/browser harness plugin."""

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
                     help="run the kube tier against this context of $KUBECONFIG (a real cluster) instead of "
                          "the stand-in; tests that need stand-in-only controls are skipped there")


def pytest_configure(config):
    """kubernetes_asyncio fixes its default kubeconfig path when first imported, and KubeSpawner
    loads that file: point KUBECONFIG at a stand-in kubeconfig before any test module imports
    them (each test then gives its own stand-in's URL through `k8s_api_host`)."""
    if config.getoption("--kube-context"):
        return
    import tempfile

    from tests.kubeapi.standin import write_kubeconfig

    path = pathlib.Path(tempfile.mkdtemp(prefix="standin-kubeconfig-")) / "config"
    write_kubeconfig(path, "http://127.0.0.1:9")  # a closed port until a test overrides the host
    os.environ["KUBECONFIG"] = str(path)
    # a conftest named on the command line (pytest tests/kube/...) is imported before this hook
    # runs, and with it the clients: give them the path too
    for name in ("kubernetes_asyncio.config.kube_config", "kubernetes.config.kube_config"):
        if name in sys.modules:
            sys.modules[name].KUBE_CONFIG_DEFAULT_LOCATION = str(path)


def pytest_collection_modifyitems(config, items):
    """Every test belongs to exactly one tier, so `make test` (one run per tier) runs them all."""
    tiers = {"unit", "local", "kube", "hub", "browser"}
    real = config.getoption("--kube-context")
    for item in items:
        if real and item.get_closest_marker("standin_only"):
            item.add_marker(pytest.mark.skip(reason="uses the stand-in's test controls; not on a real cluster"))
        found = tiers & {m.name for m in item.iter_markers()}
        if len(found) != 1:
            raise pytest.UsageError(f"{item.nodeid}: needs exactly one tier marker of {sorted(tiers)}, has "
                                    f"{sorted(found) or 'none'}")


@dataclass
class KubeTarget:
    kubeconfig: str
    context: str | None
    namespace: str
    standin: object | None  # tests.kubeapi.StandIn, or None on a real cluster

    @property
    def real(self) -> bool:
        return self.standin is None


@pytest.fixture
def standin(request):
    """The stand-in itself (its test controls). Skips against a real cluster."""
    if request.config.getoption("--kube-context"):
        pytest.skip("needs the stand-in's test controls (kubelet, faults, request log); not on a real cluster")
    from tests.kubeapi import StandIn

    s = StandIn(bookmark_interval=0.5).start()
    yield s
    s.stop()


@pytest.fixture
def kube_target(request, tmp_path):
    """A Kubernetes API to test against and a fresh namespace in it, removed afterwards."""
    context = request.config.getoption("--kube-context")
    namespace = f"t-{uuid.uuid4().hex[:8]}"
    if context:
        kubeconfig = os.environ.get("KUBECONFIG", str(pathlib.Path.home() / ".kube" / "config"))
        target = KubeTarget(kubeconfig, context, namespace, None)
    else:
        s = request.getfixturevalue("standin")
        target = KubeTarget(str(s.write_kubeconfig(tmp_path / "kubeconfig")), None, namespace, s)
    import kubernetes

    api = kubernetes.config.new_client_from_config(config_file=target.kubeconfig, context=context)
    core = kubernetes.client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": namespace}})
    yield target
    try:
        core.delete_namespace(namespace)
    except kubernetes.client.ApiException as e:
        if e.status != 404:
            raise
    api.close()


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
