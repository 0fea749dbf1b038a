"""Fixtures the Kubernetes job backend tests share, on the session's real control plane:

- `kube`: an async client (`hub_ext.kube.client.Kube`) of the test's cluster, as admin through the proxy;
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
- `real_katib`: real Katib v0.19.0 (`tests.controllers.katib_system`: Postgres, katib-db-manager,
  katib-controller, built by `make controllers`), started lazily by the first module that asks for
  it (Postgres and db-manager then stay for the session), its controller running for that module
  only: it is cluster-wide, and its webhooks would refuse or change other modules' pods in
  injection-labelled namespaces. Between modules its webhook configurations are deleted (P12). Its log (this test's part) is added to a failed test's report.
- `kueue`: real Kueue v0.17.0 (`tests.controllers.kueue_system`, `kueue-manager` built by `make
  controllers`) with the platform's configuration (`helm-values/kueue.yaml`), for the module that
  asks for it and only while that module runs: it is cluster-wide (its webhooks see every Job,
  PyTorchJob and TFJob create, and every pod create in a namespace labelled as the platform labels
  its projects); it is uninstalled when the module ends (its CRDs and so its objects, its webhook
  configurations), so later modules see a cluster without Kueue (the hub looks for its API).
- `trainer_v2`: real Kubeflow Trainer v2.3.0 on JobSet v0.12.0 (`tests.controllers.trainer_system`,
  built by `make controllers`) for the module that asks for it and only while it runs, uninstalled
  as Kueue is (its CRDs and so its TrainJobs, runtimes and JobSets, its webhook configurations):
  later modules see a cluster without Trainer v2, so the platform runs their jobs on v1;
  `platform_runtime` applies the platform's runtime (`helm-values/trainer-runtimes.yaml`) to it.
"""

from __future__ import annotations

import pathlib

import kubernetes_asyncio
import pytest

from hub_ext.kube.client import Kube
from server_ext.runtimes.kube.backend import KubeBackend
from tests.controllers.katib_system import Katib
from tests.controllers.kueue_system import Kueue
from tests.controllers.outofcluster import TrainingOperator
from tests.controllers.trainer_system import TrainerV2
from tests.kube.job_env import NODES, SETTINGS
from tests.kube.operator_env import operator  # noqa: F401  (the `operator` fixture: mlplatform operator)

# the real object stores, registered once for the tier: moto's state is per process, so a second S3
# server (a second registration of the session fixture, e.g. by a module importing it) finds IAM auth on
from tests.local.object_stores import gcs_store, s3_store  # noqa: F401

TRAINER_RUNTIMES = pathlib.Path(__file__).resolve().parents[2] / "helm-values" / "trainer-runtimes.yaml"
OPERATOR_LOG = pytest.StashKey[tuple]()
KATIB_LOG = pytest.StashKey[tuple]()


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


@pytest.fixture(scope="session")
def _katib_holder(request, tmp_path_factory):
    """Holds the session's Katib once a module has started it (see `real_katib`)."""
    holder: dict = {}
    yield holder
    if holder.get("katib"):
        holder["katib"].stop()


@pytest.fixture(scope="module")
def real_katib(request, _katib_holder, training_operator, tmp_path_factory):
    """Real Katib on the session's control plane for this module (None on a --kube-context cluster,
    which has its own)."""
    if request.config.getoption("--kube-context"):
        yield None
        return
    cluster = request.getfixturevalue("_session_cluster")
    if not cluster.network.dns:
        pytest.skip("the test cluster has no pod network/DNS here (`ip addr add` refused, or not root): "
                    "Katib's suggestion Service has no endpoints")
    katib = _katib_holder.get("katib")
    if katib is None:
        katib = _katib_holder["katib"] = Katib(cluster, tmp_path_factory.mktemp("katib")).start()
    else:
        katib.start_controller()
    yield katib
    katib.stop_controller()


@pytest.fixture(scope="module")
def kueue(request, tmp_path_factory):
    """Real Kueue on the session's control plane for this module (None on a --kube-context cluster,
    which has its own or none)."""
    if request.config.getoption("--kube-context"):
        yield None
        return
    k = Kueue(request.getfixturevalue("_session_cluster"), tmp_path_factory.mktemp("kueue")).start()
    yield k
    k.stop()


@pytest.fixture(scope="module")
def trainer_v2(request, tmp_path_factory):
    """Real Trainer v2 and JobSet on the session's control plane for this module (None on a
    --kube-context cluster, which has its own or none)."""
    if request.config.getoption("--kube-context"):
        yield None
        return
    t = TrainerV2(request.getfixturevalue("_session_cluster"), tmp_path_factory.mktemp("trainer-v2"),
                  feature_gates={"TrainJobStatus": True}).start()
    yield t
    t.stop()


@pytest.fixture(scope="module")
def platform_runtime(trainer_v2):
    """`trainer_v2` with helm-values/trainer-runtimes.yaml applied, as a platform team applies it
    (gone with Trainer's CRDs when the module ends); the runtimes' names."""
    return trainer_v2.apply_runtimes(TRAINER_RUNTIMES)


@pytest.fixture
def katib_log(request, real_katib):
    """`real_katib`, marking where this test's part of its log starts (see pytest_runtest_makereport)."""
    if real_katib is not None:
        request.node.stash[KATIB_LOG] = (real_katib, real_katib.process.size())
    return real_katib


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
    if report.failed and KATIB_LOG in item.stash:
        katib, start = item.stash[KATIB_LOG]
        if katib.process is not None:
            report.sections.append((f"katib-controller log ({katib.process.log})", katib.process.tail(12000, start)))


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
