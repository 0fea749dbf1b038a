"""Fixtures the Kubernetes job backend tests share, on the session's real control plane:

- `kube`: an async client (`hub_ext.kube.Kube`) of the test's cluster, as admin through the proxy;
- `runner`: the project's ServiceAccount (`KubeSettings.service_account`) that job pods run as,
  made as the hub makes it when it provisions a project (admission refuses a pod whose
  ServiceAccount does not exist);
- `backend`: a `KubeBackend` on `kube` that polls pods every 0.1 s, in a namespace with `runner`;
- `cluster`: the test kubelet (`tests.cluster`), whose nodes the real scheduler binds the pods to
  and which runs a pod only when told (`run`, `log`, `finish`), with the Training Operator helper
  (`tests.kube.training_operator`) running PyTorchJobs and TFJobs of the namespace. batch/v1 Jobs
  are run by the control plane's own Job controller.
"""

from __future__ import annotations

import kubernetes_asyncio
import pytest

from hub_ext.kube import Kube
from server_ext.jobs.kube.backend import KubeBackend
from tests.kube.job_env import NODES, SETTINGS
from tests.kube.operator_env import operator  # noqa: F401  (the `operator` fixture: mlplatform operator)
from tests.kube.training_operator import TrainingOperator


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
async def backend(kube, runner):
    b = KubeBackend(kube, SETTINGS, poll_interval=0.1)
    yield b
    await b.close()


@pytest.fixture
async def cluster(kube_cluster, kube_target, kube, runner):
    """The test kubelet (pods run only when told) and the Training Operator helper."""
    kubelet = kube_cluster.kubelet(auto_run=False, nodes=NODES)
    operator = await TrainingOperator(kube, kube_target.namespace).start()
    yield kubelet
    await operator.stop()
