"""Fixtures the Kubernetes job backend tests share: an async client of the test's cluster (`kube`),
a `KubeBackend` on it that polls pods every 0.1 s (`backend`), and the stand-in's kubelet, running
pods only when told, with the Training Operator helper watching the namespace (`cluster`)."""

from __future__ import annotations

import kubernetes_asyncio
import pytest

from hub_ext.kube import Kube
from server_ext.jobs.kube_backend import KubeBackend
from tests.kube.job_env import NODES, SETTINGS
from tests.kube.training_operator import TrainingOperator


@pytest.fixture
async def kube(kube_target):
    api = await kubernetes_asyncio.config.new_client_from_config(config_file=kube_target.kubeconfig,
                                                                context=kube_target.context)
    yield Kube(api)
    await api.close()


@pytest.fixture
async def backend(kube):
    b = KubeBackend(kube, SETTINGS, poll_interval=0.1)
    yield b
    await b.close()


@pytest.fixture
async def cluster(standin, kube_target, kube):
    """The stand-in with a kubelet that runs pods only when told, and the operator helper."""
    kubelet = standin.kubelet(auto_run=False, nodes=NODES)
    operator = await TrainingOperator(kube, kube_target.namespace).start()
    yield kubelet
    await operator.stop()
