"""Issue 16 through the jobs API on the real control plane, with the project's real identities:

- a teammate (the project's runner token, as any notebook or job pod of the project holds it) swaps
  a job's ``<job>-package`` ConfigMap between submit and start: it cannot be edited in place
  (immutable), and deleted and recreated with other bytes it fails the job's fetch with the digest
  message, so the swapped code never runs (the test kubelet runs the pod's processes for real);
- a staged package overwritten in the bucket is refused by the fetcher the same way;
- a project whose published catalogue allows ``a100: 1`` cannot submit an H100 job or two A100s
  through the notebook server's REST API on Kubernetes (a real ``jupyter server`` process with no
  hub, planning from the catalogue ConfigMap the hub published)."""

from __future__ import annotations

import asyncio
import base64
import json
import pathlib
import shutil

import pytest
import requests

from hub_ext.core.catalog import parse_accelerators
from hub_ext.core.entitlements import Project
from hub_ext.core.errors import UserInputError
from hub_ext.core.publish import catalog_json
from hub_ext.manifests.tenancy import CATALOG_CONFIGMAP, ROLE, ROLE_RULES, SERVICE_ACCOUNT
from server_ext.jobs.package_uri import DIGESTS_ENV
from server_ext.jobs.submission import Package, Submission
from server_ext.runtimes import package
from server_ext.runtimes.fetch import fetch_all
from server_ext.runtimes.kube.backend import KubeBackend
from server_ext.service.jobs import JobService
from tests.cluster.identities import service_account_kubeconfig
from tests.cluster.rest import ApiError, Rest
from tests.kube.job_env import NODES, PLAN_SETTINGS, SETTINGS, pods, state
from tests.kube.test_widget_watches import KubeNotebookServer

pytestmark = pytest.mark.kube

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "trainer"
USER = "alice@example.com"
SWAPPED = "the swapped code ran"


def body(job_id: str) -> dict:
    return {"jobId": job_id, "trainingInput": {"pythonModule": "trainer.task", "runtimeVersion": "python-3.11",
                                               "args": ["--epochs=1", "--sleep=0"]}}


def service(backend, ns: str, **kw) -> JobService:
    async def projects(user: str) -> list[str]:
        return [ns]
    return JobService(backend, PLAN_SETTINGS, projects, **kw)


@pytest.fixture
async def teammate(kube, kube_cluster, kube_target, runner, tmp_path):
    """A Rest client acting as the project's runner ServiceAccount, bound to the project Role."""
    ns = kube_target.namespace
    await kube.request("POST", f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
                       {"metadata": {"name": ROLE}, "rules": ROLE_RULES})
    await kube.request("POST", f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
                       {"metadata": {"name": ROLE},
                        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ROLE},
                        "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": ns}]})
    rest = Rest(service_account_kubeconfig(kube_cluster, tmp_path / "runner.kubeconfig", ns, SERVICE_ACCOUNT))
    yield rest
    await rest.close()


async def swapped_sdist(tmp_path: pathlib.Path, marker: pathlib.Path) -> bytes:
    """The example trainer's sdist (same name and version) whose module writes `marker` and says so."""
    project = tmp_path / "swapped"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("__pycache__"))
    (project / "trainer" / "task.py").write_text(
        f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\nprint({SWAPPED!r})\n")
    sdist = await package.build_sdist(project / "trainer", tmp_path / "swapped-dist")
    return sdist.read_bytes()


async def test_a_teammate_cannot_swap_a_jobs_package_configmap(backend, kube, kube_cluster, kube_target, teammate,
                                                              tmp_path):
    ns = kube_target.namespace
    await service(backend, ns).create(USER, ns, Submission(body("shipped"), package=Package(str(EXAMPLE / "trainer"))))
    path = f"/api/v1/namespaces/{ns}/configmaps/shipped-package"
    cm = await teammate.get(path)
    assert cm["immutable"] is True
    (key, _), = cm["binaryData"].items()
    marker = tmp_path / "marker"
    evil = await swapped_sdist(tmp_path, marker)

    # in place: refused by the API server
    with pytest.raises(ApiError) as e:
        await teammate.put(path, {**cm, "binaryData": {key: base64.b64encode(evil).decode()}})
    assert e.value.status == 422 and "immutable" in str(e.value)
    # deleted and made again, with the same name, owner and annotation: the Role allows it
    await teammate.delete(path)
    meta = {k: cm["metadata"][k] for k in ("name", "labels", "annotations", "ownerReferences")}
    await teammate.post(f"/api/v1/namespaces/{ns}/configmaps",
                        {"metadata": meta, "binaryData": {key: base64.b64encode(evil).decode()}})

    job = await kube.get(f"/apis/batch/v1/namespaces/{ns}/jobs/shipped")
    (fetch,) = job["spec"]["template"]["spec"]["initContainers"]
    assert DIGESTS_ENV in [e["name"] for e in fetch["env"]]  # written at submit, with the job

    kubelet = kube_cluster.kubelet(mode="process", nodes=NODES)
    failed = await state(backend, ns, "shipped", "FAILED", timeout=90)
    (pod,) = pods(kube_cluster, ns)
    name = pod["metadata"]["name"]
    fetch_log = "\n".join(t for _, t in kubelet.kubelet.logs.container(ns, name, "fetch-code").lines)
    assert "changed after submission" in fetch_log and "nothing was installed" in fetch_log, fetch_log
    assert "sha256" in fetch_log
    assert not marker.exists()  # the swapped code never ran
    trainer_log = kubelet.kubelet.logs.container(ns, name, "trainer").lines
    assert not any(SWAPPED in t for _, t in trainer_log)
    assert failed["state"] == "FAILED"


async def test_a_staged_package_overwritten_in_the_bucket_is_refused(kube, kube_target, runner, gcs_store, tmp_path):
    ns = kube_target.namespace
    env = gcs_store.credentials_env(tmp_path / "creds")
    backend = KubeBackend(kube, SETTINGS, staging_env=env)
    try:
        bucket = f"gs://{gcs_store.bucket}/staging"
        job = await service(backend, ns, package_limit=1000).create(
            USER, ns, Submission(body("staged"), package=Package(str(EXAMPLE / "trainer"), bucket)))
        (uri,) = job["trainingInput"]["packageUris"]
        key = uri.removeprefix(f"gs://{gcs_store.bucket}/")
        assert len(await fetch_all([uri], tmp_path / "before", env)) == 1  # as submitted: fetched
        gcs_store.put(key, await swapped_sdist(tmp_path, tmp_path / "marker"))  # anyone with the bucket's key
        with pytest.raises(UserInputError) as e:
            await fetch_all([uri], tmp_path / "code", env)
        assert e.value.field == "trainingInput.packageUris[0]" and "changed after submission" in e.value.message
        assert list((tmp_path / "code").iterdir()) == []
    finally:
        await backend.close()


ACCELERATORS = parse_accelerators({"a100": {"type": "gpu", "product": "NVIDIA-A100-SXM4-40GB"},
                                   "h100": {"type": "gpu", "product": "NVIDIA-H100-80GB-HBM3"}})


def gpu_job(job_id: str, gpu: str, count: int = 1) -> dict:
    return {"jobId": job_id, "trainingInput": {
        "scaleTier": "CUSTOM", "masterType": "n1-standard-8",
        "masterConfig": {"imageUri": "python:3.11-slim", "containerCommand": ["python", "train.py"],
                         "acceleratorConfig": {"type": gpu, "count": str(count)}}}}


async def test_the_rest_api_on_kubernetes_plans_with_the_projects_published_limits(kube, kube_target, runner,
                                                                                   tmp_path):
    ns = kube_target.namespace
    project = Project(ns, ns, False, frozenset(), {"a100": 1})
    await kube.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": CATALOG_CONFIGMAP, "namespace": ns},
                       "data": {"catalog.json": json.dumps(catalog_json(ACCELERATORS.values(), [], project))}})
    server = KubeNotebookServer(tmp_path / "server", kube_target.kubeconfig, ns)
    await asyncio.to_thread(server.start)
    try:
        def submit(doc: dict) -> requests.Response:
            return server.api("POST", f"ml/v1/projects/{ns}/jobs", data=json.dumps(doc))

        for doc, message in ((gpu_job("h100_job", "NVIDIA_H100_80GB"), "may use none of"),
                             (gpu_job("two_a100", "NVIDIA_TESLA_A100", 2), "may use at most 1 at once of")):
            answer = await asyncio.to_thread(submit, doc)
            assert answer.status_code == 403, answer.text
            error = answer.json()["error"]
            (violation,) = error["details"][0]["fieldViolations"]
            assert violation["field"] == "trainingInput.masterConfig.acceleratorConfig", error
            assert message in violation["description"] and error["status"] == "PERMISSION_DENIED"
        ok = await asyncio.to_thread(submit, gpu_job("one_a100", "NVIDIA_TESLA_A100"))
        assert ok.status_code == 200, ok.text
        made = [o["metadata"]["name"] for o in (await kube.list(f"/apis/batch/v1/namespaces/{ns}/jobs"))["items"]]
        assert made == ["one-a100"]
    finally:
        await asyncio.to_thread(server.stop)
