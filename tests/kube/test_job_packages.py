"""``--package-path`` on the Kubernetes backend on the real control plane, end to end: the example
trainer built by the real PyPA ``build`` front end, shipped through `JobService.create` in a
ConfigMap owned by the job (or staged to a real GCS emulator), all or nothing under faults the
fault proxy injects, the fetch CLI reading the ConfigMap as a pod mounts it, the garbage collector
removing it with its job, and — run by the control plane's Job controller and the test kubelet's
processes — the job really running."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import hashlib
import os
import pathlib
import subprocess
import sys

import pytest

from hub_ext.core.errors import UpstreamError, UserInputError
from hub_ext.kube.client import Kube
from server_ext.errors import JobNotFound
from server_ext.jobs.package_uri import PACKAGES_DIR_ENV
from server_ext.jobs.submission import Package, Submission
from server_ext.runtimes.fetch import fetch_all
from server_ext.runtimes.kube.backend import KubeBackend
from server_ext.service.jobs import JobService
from tests.kube.job_env import NODES, PLAN_SETTINGS, SETTINGS, state

pytestmark = pytest.mark.kube

ROOT = pathlib.Path(__file__).resolve().parents[2]
TRAINER = ROOT / "examples" / "trainer" / "trainer"
USER = "alice@example.com"


def body(job_id: str, **training) -> dict:
    return {"jobId": job_id, "trainingInput": {"pythonModule": "trainer.task", "runtimeVersion": "python-3.11",
                                               "args": ["--epochs=2", "--sleep=0"], **training}}


def shipped(doc: dict, package: pathlib.Path, staging_bucket: str | None = None) -> Submission:
    """`doc` with the package built from the directory `package` (``--package-path``)."""
    return Submission(doc, package=Package(str(package), staging_bucket))


def service(backend, ns: str, **kw) -> JobService:
    async def projects(user: str) -> list[str]:
        return [ns]
    return JobService(backend, PLAN_SETTINGS, projects, **kw)


async def left_in(kube: Kube, ns: str) -> dict[str, list[str]]:
    """Names of every job object and ConfigMap of the namespace (the catalogue's excepted)."""
    out = {}
    for what, path in (("jobs", f"/apis/batch/v1/namespaces/{ns}/jobs"),
                       ("pytorchjobs", f"/apis/kubeflow.org/v1/namespaces/{ns}/pytorchjobs"),
                       ("configmaps", f"/api/v1/namespaces/{ns}/configmaps")):
        names = [o["metadata"]["name"] for o in (await kube.list(path))["items"]]
        out[what] = [n for n in names if n != "kube-root-ca.crt"]
    return out


NOTHING = {"jobs": [], "pytorchjobs": [], "configmaps": []}


async def test_the_package_ships_in_a_configmap_owned_by_the_job(backend, kube, kube_target, tmp_path):
    ns = kube_target.namespace
    job = await service(backend, ns).create(USER, ns, shipped(body("shipped"), TRAINER))
    uri = "configmap://shipped-package/mlplatform_example_trainer-0.1.0.tar.gz"
    assert job["jobId"] == "shipped" and job["trainingInput"]["packageUris"] == [uri]
    assert (await backend.get(ns, "shipped"))["trainingInput"]["packageUris"] == [uri]
    obj = await kube.get(f"/apis/batch/v1/namespaces/{ns}/jobs/shipped")
    cm = await kube.get(f"/api/v1/namespaces/{ns}/configmaps/shipped-package")
    assert cm["metadata"]["ownerReferences"] == [{"apiVersion": "batch/v1", "kind": "Job", "name": "shipped",
                                                  "uid": obj["metadata"]["uid"]}]
    sdist = base64.b64decode(cm["binaryData"]["mlplatform_example_trainer-0.1.0.tar.gz"])
    assert hashlib.sha256(sdist).hexdigest() == cm["metadata"]["annotations"]["mlplatform.io/package-sha256"]
    assert sdist[:2] == b"\x1f\x8b"
    pod = obj["spec"]["template"]["spec"]
    assert {"name": "package", "configMap": {"name": "shipped-package", "optional": False, "items": [
        {"key": "mlplatform_example_trainer-0.1.0.tar.gz",
         "path": "shipped-package/mlplatform_example_trainer-0.1.0.tar.gz"}],
        "defaultMode": 0o644}} in pod["volumes"]  # the mode: the API server's default
    (fetch,) = pod["initContainers"]
    assert fetch["command"][-1] == uri
    assert {"name": "package", "mountPath": "/mlplatform/packages", "readOnly": True} in fetch["volumeMounts"]
    assert {"name": PACKAGES_DIR_ENV, "value": "/mlplatform/packages"} in fetch["env"]
    assert all(m["name"] != "package" for c in pod["containers"] for m in c["volumeMounts"])

    # the fetch CLI, for real, against the ConfigMap laid out as the pod mounts it
    packages = tmp_path / "packages"
    for item in pod["volumes"][[v["name"] for v in pod["volumes"]].index("package")]["configMap"]["items"]:
        target = packages / item["path"]
        target.parent.mkdir(parents=True)
        target.write_bytes(base64.b64decode(cm["binaryData"][item["key"]]))
    env = {**os.environ, PACKAGES_DIR_ENV: str(packages)}
    done = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "server_ext.runtimes.fetch", "--dest",
                                                    str(tmp_path / "code"), uri], env=env, capture_output=True,
                                   text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    fetched = pathlib.Path(done.stdout.strip())
    assert fetched == tmp_path / "code" / "mlplatform_example_trainer-0.1.0.tar.gz"
    assert fetched.read_bytes() == sdist

    # deleting the job garbage-collects the ConfigMap
    await kube.delete(f"/apis/batch/v1/namespaces/{ns}/jobs/shipped")
    for _ in range(200):
        if await kube.get(f"/api/v1/namespaces/{ns}/configmaps/shipped-package") is None:
            break
        await asyncio.sleep(0.05)
    assert await kube.get(f"/api/v1/namespaces/{ns}/configmaps/shipped-package") is None


@pytest.mark.parametrize("status, error", [(500, UpstreamError), (403, UserInputError)])
async def test_a_failed_configmap_create_leaves_nothing(backend, kube, kube_cluster, kube_target, status, error):
    ns = kube_target.namespace
    await backend.list(ns)
    kube_cluster.clear_requests()
    kube_cluster.inject_fault("POST", "/configmaps", status)
    with pytest.raises(error) as e:
        await service(backend, ns).create(USER, ns, shipped(body("half_made"), TRAINER))
    if error is UserInputError:
        assert e.value.field == "package.path" and e.value.status == 403
    else:
        assert "package ConfigMap" in str(e.value) and "500" in e.value.reason
    assert await left_in(kube, ns) == NOTHING
    with pytest.raises(JobNotFound):
        await backend.get(ns, "half_made")
    made = [(r.method, r.path.rsplit("/", 1)[-1]) for r in kube_cluster.requests() if r.method in ("POST", "DELETE")
            and f"/namespaces/{ns}/" in r.path]
    assert made == [("POST", "jobs"), ("POST", "configmaps"), ("DELETE", "half-made")]
    await asyncio.sleep(0.3)  # the watch saw it come and go
    assert await backend.list(ns) == []
    job = await service(backend, ns).create(USER, ns, shipped(body("half_made"), TRAINER))  # a retry works
    assert job["jobId"] == "half_made" and (await left_in(kube, ns))["configmaps"] == ["half-made-package"]


async def test_a_failed_job_create_makes_no_configmap(backend, kube, kube_cluster, kube_target):
    ns = kube_target.namespace
    await backend.list(ns)
    kube_cluster.inject_fault("POST", "/pytorchjobs", 500)
    doc = body("ddp", scaleTier="CUSTOM", runtimeVersion="pytorch-2.5", masterType="n1-standard-4",
               workerType="n1-standard-4", workerCount=1)
    with pytest.raises(UpstreamError):
        await service(backend, ns).create(USER, ns, shipped(doc, TRAINER))
    assert await left_in(kube, ns) == NOTHING
    assert kube_cluster.requests("POST", "/configmaps") == []


async def test_too_large_without_a_staging_bucket_creates_nothing(backend, kube, kube_target):
    ns = kube_target.namespace
    with pytest.raises(UserInputError) as e:
        await service(backend, ns, package_limit=1000).create(USER, ns, shipped(body("too_big"), TRAINER))
    assert e.value.field == "package.path" and "set --staging-bucket" in e.value.message
    assert await left_in(kube, ns) == NOTHING


async def test_a_bad_job_spec_is_refused_before_any_build(backend, kube, kube_target, tmp_path):
    ns = kube_target.namespace
    jobs = service(backend, ns)
    missing = tmp_path / "not-built"  # would fail the build: the spec's error must come first
    for doc, field in ((body("1bad"), "jobId"), (body("x", pythonModule=None), "trainingInput.pythonModule"),
                       (body("x", masterType="n1-standard-4"), "trainingInput.masterType")):
        doc["trainingInput"] = {k: v for k, v in doc["trainingInput"].items() if v is not None}
        with pytest.raises(UserInputError) as e:
            await jobs.create(USER, ns, shipped(doc, missing))
        assert e.value.field == field
    with pytest.raises(UserInputError, match="package.stagingBucket"):
        await jobs.create(USER, ns, shipped(body("x"), missing, "ftp://nope"))
    assert await left_in(kube, ns) == NOTHING


async def test_a_large_package_is_staged_before_the_job(kube, kube_cluster, kube_target, gcs_store, tmp_path):
    ns = kube_target.namespace
    env = gcs_store.credentials_env(tmp_path / "creds")
    backend = KubeBackend(kube, SETTINGS, staging_env=env)
    try:
        bucket = f"gs://{gcs_store.bucket}/staging"
        jobs = service(backend, ns, package_limit=1000)
        job = await jobs.create(USER, ns, shipped(body("staged"), TRAINER, bucket))
        (uri,) = job["trainingInput"]["packageUris"]
        assert uri.startswith(f"{bucket}/staged/packages/") and uri.endswith("/mlplatform_example_trainer-0.1.0.tar.gz")
        obj = await kube.get(f"/apis/batch/v1/namespaces/{ns}/jobs/staged")
        pod = obj["spec"]["template"]["spec"]
        assert pod["initContainers"][0]["command"][-1] == uri
        assert "package" not in [v["name"] for v in pod["volumes"]]
        (path,) = await fetch_all([uri], tmp_path / "out", env)
        assert uri.split("/")[-2] == hashlib.sha256(path.read_bytes()).hexdigest()
        assert await left_in(kube, ns) == {**NOTHING, "jobs": ["staged"]}
        # the upload fails (no such bucket): nothing is created
        with pytest.raises(UserInputError) as e:
            await jobs.create(USER, ns, shipped(body("failed"), TRAINER, "gs://no-such-bucket-x1"))
        assert e.value.field == "package.stagingBucket" and "not found" in e.value.message
        assert len(kube_cluster.requests("POST", "/jobs")) == 1  # only the first job: no create after a failed upload
        assert await left_in(kube, ns) == {**NOTHING, "jobs": ["staged"]}
    finally:
        await backend.close()


@pytest.mark.parametrize("run_as", [None, (20001, 100)], ids=["image-user", "notebook-user"])
async def test_the_example_trainer_runs_from_its_shipped_package(kube, runner, _operator_log, kube_cluster,
                                                                 kube_target, run_as):
    """The control plane's Job controller makes the pod; the process kubelet runs its init container
    (the fetch CLI reading the mounted ConfigMap) and the training container's script (pip installs
    the sdist, then ``python -m trainer.task``), as the image's user or as the notebook's."""
    ns = kube_target.namespace
    backend = KubeBackend(kube, dataclasses.replace(SETTINGS, run_as=run_as), poll_interval=0.1)
    try:
        await service(backend, ns).create(USER, ns, shipped(body("e2e"), TRAINER))
        # nodes only once the ConfigMap exists: the test kubelet retries a missing volume only when
        # the pod changes, where a real one retries on its own
        kube_cluster.kubelet(mode="process", nodes=NODES)
        try:
            await state(backend, ns, "e2e", "SUCCEEDED", timeout=90)
        finally:
            lines = [line.text async for line in backend.logs(ns, "e2e")]
            print("\n".join(lines))
        assert any(t.startswith("epoch 2/2 loss=") for t in lines), lines
        assert lines[-1].startswith("done: rmse="), lines
        (pod,) = (await kube.list(f"/api/v1/namespaces/{ns}/pods"))["items"]
        sc = pod["spec"]["securityContext"]
        assert (sc.get("runAsUser"), sc.get("runAsGroup")) == (run_as or (None, None))  # the kubelet runs it so
    finally:
        await backend.close()
