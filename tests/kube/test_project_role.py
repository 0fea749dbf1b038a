"""The project's RBAC on the real API server, with real identities.

The hub, acting as the ServiceAccount of `helm-values/hub-rbac.yaml` (not as admin), provisions a
project with the platform's own code (`hub_ext.manifests.tenancy` objects through `hub_ext.kube.provision`): the
API server refuses a Role that grants more than the hub holds, so this also proves the ClusterRole
covers the project Role. Then the project's runner ServiceAccount, with a token from TokenRequest
as its notebook pod has it, makes every call the notebook server and `kubectl ai-platform` make (a
real submit, list, describe and cancel through the plugin), and is refused, by real requests, what
the project must never do: Secrets, pod creation, exec, RBAC writes and other projects.
"""

from __future__ import annotations

import asyncio
import json
import os
import sysconfig
import uuid

import kubernetes_asyncio
import pytest
import yaml

from hub_ext.core.catalog import parse_accelerators
from hub_ext.core.entitlements import Project
from hub_ext.kube.client import Kube, KubeError
from hub_ext.kube.provision import Provisioner
from hub_ext.manifests.tenancy import SERVICE_ACCOUNT, project_objects
from tests.cluster.identities import hub_kubeconfig, service_account_kubeconfig

pytestmark = pytest.mark.kube
PLUGIN = os.path.join(sysconfig.get_path("scripts"), "kubectl-ai_platform")
ACCELERATORS = parse_accelerators({"a100": {"type": "gpu", "product": "NVIDIA-A100-SXM4-40GB"},
                                   "1g.5gb": {"type": "mig", "profile": "1g.5gb"}})


async def _client(kubeconfig) -> Kube:
    api = await kubernetes_asyncio.config.new_client_from_config(config_file=str(kubeconfig))
    return Kube(api)


async def provision(kube_cluster, tmp_path, name: str) -> None:
    """The project as the hub makes it, with the hub's identity."""
    hub = await _client(hub_kubeconfig(kube_cluster, tmp_path / "hub.kubeconfig"))
    try:
        project = Project(name=name, display_name=name, personal=True, profiles=frozenset(),
                          limits={"a100": 1, "1g.5gb": 2})
        objects = project_objects(project, ACCELERATORS, [])
        await Provisioner(hub).ensure(name, lambda: objects, f"provision {name}")
    finally:
        await hub.api_client.close()


@pytest.fixture
async def project(kube_cluster, tmp_path):
    """(namespace, the runner's kubeconfig, a client acting as the runner); removed afterwards."""
    ns = f"proj-{uuid.uuid4().hex[:8]}"
    await provision(kube_cluster, tmp_path, ns)
    for _ in range(100):  # TokenRequest needs the ServiceAccount the hub just made
        if kube_cluster.get("", "v1", "serviceaccounts", ns, SERVICE_ACCOUNT):
            break
        await asyncio.sleep(0.05)
    kubeconfig = service_account_kubeconfig(kube_cluster, tmp_path / "runner.kubeconfig", ns, SERVICE_ACCOUNT)
    runner = await _client(kubeconfig)
    yield ns, kubeconfig, runner
    await runner.api_client.close()
    kube_cluster.delete("", "v1", "namespaces", None, ns)


async def status_of(kube: Kube, method: str, path: str, body=None) -> int:
    try:
        await kube.request(method, path, body)
        return 200
    except KubeError as e:
        return e.code


def configmap(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}}


def pod_body(secret: str | None = None) -> dict:
    spec = {"containers": [{"name": "c", "image": "python:3.11-slim", "command": ["true"]}]}
    if secret:
        spec["volumes"] = [{"name": "s", "secret": {"secretName": secret}}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}


async def test_the_runner_may_do_what_the_notebook_server_and_the_cli_do(project):
    ns, _, runner = project
    base = f"/api/v1/namespaces/{ns}"
    kf = f"/apis/kubeflow.org/v1/namespaces/{ns}"
    katib = f"/apis/kubeflow.org/v1beta1/namespaces/{ns}"
    allowed = [
        ("GET", f"{base}/configmaps/mlplatform-catalog"),
        ("POST", f"{base}/configmaps", configmap("package-x")),
        ("DELETE", f"{base}/configmaps/package-x"),
        ("GET", f"{base}/pods"), ("GET", f"{base}/events"), ("GET", f"{base}/persistentvolumeclaims"),
        ("GET", f"{base}/resourcequotas"),
        ("GET", f"{kf}/pytorchjobs"), ("GET", f"{kf}/tfjobs"), ("GET", f"{katib}/experiments"),
        ("GET", f"{katib}/trials"), ("GET", f"/apis/batch/v1/namespaces/{ns}/jobs"),
        ("GET", f"{kf}/pytorchjobs?watch=1&timeoutSeconds=1"),
    ]
    for method, path, *body in allowed:
        assert await status_of(runner, method, path, *body) == 200, (method, path)


async def test_the_runner_is_refused_secrets_pods_exec_rbac_and_other_projects(project, kube_target, kube_cluster):
    ns, _, runner = project
    kube_cluster.create("", "v1", "pods", kube_target.namespace, pod_body())  # someone else's pod
    base = f"/api/v1/namespaces/{ns}"
    rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}"
    refused = [
        ("GET", f"{base}/secrets"), ("GET", f"{base}/secrets/any"),
        ("POST", f"{base}/secrets", {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}),
        ("POST", f"{base}/pods", pod_body()),
        ("POST", f"{base}/pods/p/exec?command=true&container=c&stdout=true"),
        ("POST", f"{rbac}/roles", {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                                   "metadata": {"name": "r"}, "rules": []}),
        ("POST", f"{rbac}/rolebindings", {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                                          "metadata": {"name": "b"},
                                          "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                                      "name": "admin"},
                                          "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT,
                                                        "namespace": ns}]}),
        ("PATCH", f"/api/v1/namespaces/{ns}", {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "privileged"}}}),
        ("GET", f"/api/v1/namespaces/{kube_target.namespace}/pods"),
        ("DELETE", f"/api/v1/namespaces/{kube_target.namespace}/pods/p"),
        ("GET", "/api/v1/nodes"),
    ]
    for method, path, *body in refused:
        assert await status_of(runner, method, path, *body) == 403, (method, path)


async def cli(kubeconfig, ns: str, *argv: str) -> tuple[int, str, str]:
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "JUPYTERHUB_USER": "alice", "MLPLATFORM_CONFIG": os.devnull,
           "PYTHONWARNINGS": "ignore"}
    for name in ("MLPLATFORM_LOCAL", "MLPLATFORM_SERVER_URL", "JUPYTERHUB_SERVICE_URL", "JUPYTER_SERVER_URL"):
        env.pop(name, None)
    proc = await asyncio.create_subprocess_exec(PLUGIN, *argv, "--namespace", ns, env=env,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 90)
    return proc.returncode, out.decode(), err.decode()


async def test_kubectl_ai_platform_works_with_the_project_token_alone(project):
    ns, kubeconfig, _ = project
    code, out, err = await cli(kubeconfig, ns, "jobs", "submit", "training", "role_job", "--module-name",
                               "trainer.task", "--packages", "gs://bucket/trainer.tar.gz", "--runtime-version",
                               "pytorch-2.3", "--scale-tier", "custom", "--master-machine-type", "n1-standard-4",
                               "--master-accelerator", "type=nvidia-a100-1g-5gb,count=1",
                               "--worker-machine-type", "n1-standard-4", "--worker-count", "1")
    assert code == 0, err
    assert yaml.safe_load(out) == {"jobId": "role_job", "state": "QUEUED"}
    code, out, err = await cli(kubeconfig, ns, "jobs", "list", "--format", "json")
    assert code == 0, err
    assert [j["jobId"] for j in json.loads(out)] == ["role_job"]
    code, out, err = await cli(kubeconfig, ns, "jobs", "describe", "role_job", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["trainingInput"]["masterConfig"]["acceleratorConfig"]["count"] == "1"
    code, out, err = await cli(kubeconfig, ns, "jobs", "cancel", "role_job")
    assert code == 0, err
