"""Fixtures the Kubernetes job backend tests share, on the session's real control plane:

- `kube`: an async client (`hub_ext.kube.Kube`) of the test's cluster, as admin through the proxy;
- `runner`: the project's ServiceAccount (`KubeSettings.service_account`) that job pods run as,
  made as the hub makes it when it provisions a project (admission refuses a pod whose
  ServiceAccount does not exist);
- `backend`: a `KubeBackend` on `kube` that polls pods every 0.1 s, in a namespace with `runner`;
- `cluster`: the test kubelet (`tests.cluster`), whose nodes the real scheduler binds the pods to
  and which runs a pod only when told (`run`, `log`, `finish`);
- `training_operator`: the real Kubeflow Training Operator v1.9.4 (`tests.controllers.outofcluster`,
  built by `make controllers`), once per session, cluster-wide, with its released RBAC and
  validating webhook: it runs the PyTorchJobs and TFJobs of every test that has `backend` or
  `cluster`; its log (this test's part) is added to the report of a failed test. batch/v1 Jobs are
  run by the control plane's own Job controller.
"""

from __future__ import annotations

import kubernetes_asyncio
import pytest

from hub_ext.kube import Kube
from server_ext.jobs.kube.backend import KubeBackend
from tests.kube.job_env import NODES, SETTINGS
from tests.kube.operator_env import operator  # noqa: F401  (the `operator` fixture: mlplatform operator)
from tests.controllers.outofcluster import TrainingOperator

OPERATOR_LOG = pytest.StashKey[tuple]()


@pytest.fixture(scope="session")
def training_operator(request, tmp_path_factory):
    """The real Training Operator on the session's control plane (None on a --kube-context cluster,
    which has its own)."""
    if request.config.getoption("--kube-context"):
        yield None
        return
    op = TrainingOperator(request.getfixturevalue("_session_cluster"),
                          tmp_path_factory.mktemp("training-operator")).start()
    yield op
    op.stop()


@pytest.fixture
def _operator_log(request, training_operator):
    """Marks where this test's part of the operator's log starts (see pytest_runtest_makereport)."""
    if training_operator is not None:
        request.node.stash[OPERATOR_LOG] = (training_operator, training_operator.process.size())
    return training_operator


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed and OPERATOR_LOG in item.stash:
        op, start = item.stash[OPERATOR_LOG]
        report.sections.append((f"training-operator log ({op.process.log})", op.process.tail(12000, start)))


@pytest.fixture
async def kube(kube_target):
    api = await kubernetes_asyncio.config.new_client_from_config(config_file=kube_target.kubeconfig,
                                                                context=kube_target.context)
    yield Kube(api)
    await api.close()


@pytest.fixture
async def runner(kube, kube_target) -> str:
    """The ServiceAccount the project's job pods run as, in the test's namespace."""
    ns, name = kube_target.namespace, SETTINGS.service_account
    await kube.request("POST", f"/api/v1/namespaces/{ns}/serviceaccounts", {"metadata": {"name": name}})
    return name


@pytest.fixture
async def backend(kube, runner, _operator_log):
    b = KubeBackend(kube, SETTINGS, poll_interval=0.1)
    yield b
    await b.close()


@pytest.fixture
async def cluster(kube_cluster, kube_target, kube, runner, _operator_log):
    """The test kubelet (pods run only when told), with the real Training Operator running."""
    return kube_cluster.kubelet(auto_run=False, nodes=NODES)


@pytest.fixture(scope="session")
def snapshots(request, tmp_path_factory):
    """Volume snapshots on the session's control plane: the real snapshot-controller, the CSI class
    `csi-hostpath` and its VolumeSnapshotClass (`tests.controllers.snapshots`); started by the first
    test that asks for it. Skips on a --kube-context cluster (it has its own CSI driver or none)."""
    if request.config.getoption("--kube-context"):
        pytest.skip("needs the test cluster's CSI class; not on --kube-context")
    from tests.controllers.snapshots import SnapshotController

    controller = SnapshotController(request.getfixturevalue("_session_cluster"),
                                    tmp_path_factory.mktemp("snapshot-controller")).start()
    yield controller
    controller.stop()
