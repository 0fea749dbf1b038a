"""A kind whose CRD is made after the operator started is served by its webhooks (hub_ext.operator.rescan).

kopf learns the kinds the cluster serves when it starts and from its watch of CRDs after, and it
misses a CRD made between the two or while that watch reconnects: it then answers that kind's
reviews 404, and every create in a project fails closed (the kube tier's TrainJob dataset test met
it in CI, Trainer installed just after the operator). Here kopf cannot see CRD events at all (the
operator's ClusterRole, for this test only, lacks ``watch`` on CRDs), so only the operator's own
rescan can learn the kind: the ``member-accounts`` webhook answers a TrainJob create in a project
within a few rescans, and the operator says it now serves trainjobs. The CRD is a minimal one of
Trainer's group, version and plural (what kopf and the webhook configuration match; Trainer's
controller is not needed for an admission review), removed at the end with the test's changes."""

from __future__ import annotations

import asyncio
import copy
import time
import uuid

import pytest

from hub_ext.kube.client import KubeError
from tests.controllers.outofcluster import remove_crds
from tests.kube.operator_env import OperatorProcess, manifests, make_project

pytestmark = [pytest.mark.kube, pytest.mark.asyncio(loop_scope="function")]
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
ROLE = "/apis/rbac.authorization.k8s.io/v1/clusterroles/mlplatform-operator"
TRAINJOBS_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "trainjobs.trainer.kubeflow.org"},
    "spec": {"group": "trainer.kubeflow.org", "scope": "Namespaced",
             "names": {"plural": "trainjobs", "singular": "trainjob", "kind": "TrainJob", "listKind": "TrainJobList"},
             "versions": [{"name": "v1alpha1", "served": True, "storage": True, "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": {"type": "object",
                                                          "x-kubernetes-preserve-unknown-fields": True}}}]}}


def without_crd_watch(role: dict) -> dict:
    changed = copy.deepcopy(role)
    for rule in changed["rules"]:
        if "customresourcedefinitions" in rule.get("resources", []):
            rule["verbs"] = [v for v in rule["verbs"] if v != "watch"]
    return changed


async def test_a_kind_installed_after_the_operator_started_is_served(kube_cluster, tmp_path):
    if kube_cluster.get("apiextensions.k8s.io", "v1", "customresourcedefinitions", None, TRAINJOBS_CRD["metadata"]["name"]):
        pytest.skip("Trainer's CRDs are installed on this cluster already")
    op = OperatorProcess(kube_cluster, tmp_path, [])
    await op.install()
    shipped = next(d for d in manifests() if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "mlplatform-operator")
    await op.kube.request("PUT", ROLE, {**without_crd_watch(shipped), "metadata": (await op.kube.get(ROLE))["metadata"]})
    try:
        await op.start()
        ns = f"rescan-{uuid.uuid4().hex[:6]}"
        await make_project(op.kube, ns)
        await op.kube.request("POST", CRDS, TRAINJOBS_CRD)
        job = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
               "metadata": {"name": "t", "namespace": ns}, "spec": {"runtimeRef": {"name": "mlplatform-torch"}}}
        deadline, refused = time.monotonic() + 30, []
        while True:
            try:
                made = await op.kube.request("POST", f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs",
                                             job, query={"dryRun": "All"})
                break
            except KubeError as e:  # the API not serving it yet, or kopf's 404 behind the webhook
                refused.append(e.reason)
                assert time.monotonic() < deadline, (refused[-3:], op.log()[-3000:])
                await asyncio.sleep(0.5)
        assert made["metadata"]["name"] == "t", made
        assert "now serving trainjobs.trainer.kubeflow.org (installed after the operator started)" in op.log(), \
            op.log()[-3000:]
        await op.kube.delete(f"/api/v1/namespaces/{ns}")
    finally:
        await op.stop()
        await op.kube.request("PUT", ROLE, {**shipped, "metadata": (await op.kube.get(ROLE))["metadata"]})
        await op.uninstall()
        remove_crds(kube_cluster, ("trainer.kubeflow.org",))
