"""A TrainJob on a dataset still loading (issue 31's tests), with real Kubeflow Trainer v2.3.0 on
JobSet and the platform's operator: the jobs service (``training_api: auto``, the default) makes a
TrainJob on the platform's runtime; the pod JobSet's Job makes for its node is held by the
operator's pod webhook (its scheduling gate) while the dataset loads, the job says what it waits for,
and once loaded the node runs and reads the dataset whole."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest

from hub_ext.operator.rules import gates
from server_ext.jobs.submission import Mounts, Submission
from tests.kube.job_env import SETTINGS
from tests.kube.platform_env import until
from tests.kube.test_operator_datasets import (  # noqa: F401  (the module's operator, project and slow S3)
    READ_ALL,
    digest,
    jobs_service,
    loading_shards,
    operator,
    project,
    slow_s3,
)

pytestmark = [pytest.mark.kube, pytest.mark.asyncio(loop_scope="module")]
JOBSET = "jobset.sigs.k8s.io/jobset-name"


async def test_a_trainjob_on_a_dataset_still_loading_is_held_then_reads_it_whole(
        operator, project, platform_runtime, s3_store, slow_s3):  # noqa: F811
    admin, ns = operator.kube, project
    objects = await loading_shards(admin, ns, s3_store, slow_s3)
    slow_s3.delay = 2.0  # 120 reads, 8 at a time: half a minute, until the node's pod is seen held
    body = {"jobId": "v2_reads_shards", "trainingInput": {
        "scaleTier": "CUSTOM", "masterType": "n1-standard-4",
        "masterConfig": {"imageUri": "python:3.11-slim",
                         "containerCommand": ["python", "-c", READ_ALL, "/datasets/shards"]}}}
    async with jobs_service(admin, ns, replace(SETTINGS, training_api="auto")) as (backend, service):
        await service.create("alice", ns, Submission(body, ns, mounts=Mounts(datasets=("shards",))))
        (obj,) = (await admin.list(f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs"))["items"]
        assert obj["spec"]["runtimeRef"]["name"] == "mlplatform-torch"
        name = obj["metadata"]["name"]

        async def node_held():
            pods = (await admin.list(f"/api/v1/namespaces/{ns}/pods", labelSelector=f"{JOBSET}={name}"))["items"]
            return [p for p in pods if gates.is_held(p)]

        (held,) = await until(node_held, "the TrainJob's node pod made and held while the dataset loads", timeout=90)
        assert held["metadata"]["annotations"][gates.WAITING_ANNOTATION] == "shards"
        assert not held["spec"].get("nodeName")
        got = await service.get("alice", ns, "v2_reads_shards")
        assert re.fullmatch(r"waiting for the dataset 'shards' to finish loading \((\d+%|[^)]*)\)",
                            got.get("statusMessage", "")), got
        slow_s3.delay = 0.0

        async def ended():
            got = await service.get("alice", ns, "v2_reads_shards")
            return got if got["state"] in ("SUCCEEDED", "FAILED") else None

        final = await until(ended, "the TrainJob ran once the dataset was loaded", timeout=120)
        assert final["state"] == "SUCCEEDED" and "statusMessage" not in final, final
        lines = [line.text async for line in backend.logs(ns, "v2_reads_shards")]
        assert json.loads(lines[-1]) == {"files": 120, "sha256": digest(objects)}  # the whole of it
