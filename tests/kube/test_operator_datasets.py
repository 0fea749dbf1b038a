"""The dataset loader on the real control plane: `mlplatform operator` (as its own ServiceAccount)
runs a loader Job for a dataset PVC, the Job controller and scheduler place its pod, the tests'
process kubelet runs ``python -m server_ext.datasets.load`` against the real S3 server (moto, IAM
auth on) and GCS emulator of `tests.local.object_stores`, and the operator reports on the PVC.

- first, the API server itself: a PVC status condition of type ``Loaded`` is stored through the
  status subresource, its ``observedGeneration`` dropped (hence ``mlplatform.io/load-id``), and it
  is kept when the PV controller binds the claim;
- a dataset of 1,000 objects, 100 MB, loads with its progress visible on the PVC during the load
  ("n of 1000 objects" and the progress annotation), ends ``Loaded``; its loader's pod mounted it
  writable, and a later Job's pod that asks for it writable (and wears the loader's label) gets it
  read-only from the pod webhook and reads it whole; an anonymous gs:// dataset loads beside it; a
  changed source reloads into the same PVC with a new Job, the old one gone;
- a credential without access: ``Failed`` at once (one pod, no retries) with the loader's reason
  and no secret anywhere; a credential that does not exist: ``Failed`` naming the annotation, and
  loaded once it is made (the operator looks for it again);
- the operator restarted mid-load: the new one adopts the running Job; one Job, one pod, the
  files once;
- a PVC deleted mid-load: its Job and pod go, and so does the PVC.

S3 is reached through `SlowS3`, a proxy that holds each object read a set time, so a load lasts
long enough to be watched and interrupted whatever the machine's speed.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import pathlib
import re
import time
import uuid

import aiohttp
import pytest
import pytest_asyncio

from hub_ext.core.mounts import Available, select
from hub_ext.kube.client import Kube, KubeError
from hub_ext.manifests.mounts import MountSettings, dataset_from_pvc, volumes
from hub_ext.operator.rules import datasets as ds
from hub_ext.operator.rules import gates
from server_ext.jobs.submission import Mounts, Submission
from server_ext.runtimes.kube.backend import KubeBackend
from server_ext.service.jobs import JobService
from tests.cluster.identities import install_platform
from tests.kube.dataset_env import SlowS3, aws_secret, dataset, put_many
from tests.kube.job_env import PLAN_SETTINGS
from tests.kube.job_env import SETTINGS as JOB_SETTINGS
from tests.kube.operator_env import OperatorProcess, make_project, running_operator
from tests.kube.platform_env import until

# one operator for the module (each start costs seconds): the tests share its event loop
pytestmark = [pytest.mark.kube, pytest.mark.asyncio(loop_scope="module")]

RUNNER = "mlplatform-runner"
MOUNTS = MountSettings({"gcp-credential": "gcp-credential", "aws-credential": "aws-credential"})
N, OBJECT_BYTES = 1000, 100_000  # the dataset of the issue: 1,000 objects, 100 MB


@pytest.fixture(scope="module")
def slow_s3(s3_store):  # noqa: F811
    proxy = SlowS3(s3_store.endpoint).start()
    yield proxy
    proxy.stop()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def operator(request, _session_cluster, tmp_path_factory, slow_s3, gcs_store):  # noqa: F811
    """`tests.kube.operator_env`'s operator, once for the module, told where the stores are."""
    if request.config.getoption("--kube-context"):
        pytest.skip("needs the built control plane")
    async with running_operator(_session_cluster, tmp_path_factory.mktemp("operator"),
                                [f"--s3-endpoint={slow_s3.url}", f"--gcs-endpoint={gcs_store.url}"]) as op:
        yield op


@pytest_asyncio.fixture(loop_scope="module")
async def project(operator, kube_cluster, slow_s3):
    """A project namespace with its runner ServiceAccount, the platform's pod policies, and the
    process kubelet; the S3 delay back to none afterwards."""
    install_platform(kube_cluster)
    admin, ns = operator.kube, f"data-{uuid.uuid4().hex[:6]}"
    await make_project(admin, ns)
    await admin.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": RUNNER, "namespace": ns}})
    kube_cluster.kubelet(mode="process")
    try:
        yield ns
    finally:
        slow_s3.delay = 0.0
        await admin.delete(f"/api/v1/namespaces/{ns}")


def claim_path(ns: str, name: str) -> str:
    return f"/api/v1/namespaces/{ns}/persistentvolumeclaims/{name}"


async def loaded(admin: Kube, ns: str, name: str) -> dict | None:
    pvc = await admin.get(claim_path(ns, name))
    cond = ds.condition_of(pvc or {})
    return cond if cond and cond["reason"] in (ds.LOADED_REASON, ds.FAILED) else None


async def settled(admin: Kube, ns: str, name: str, timeout: float = 60) -> dict:
    """The claim once its Loaded condition is True or Failed."""
    await until(lambda: loaded(admin, ns, name), f"the dataset {ns}/{name} loaded or failed", timeout=timeout)
    return await admin.get(claim_path(ns, name))


def volume_dir(cluster, pvc: dict) -> pathlib.Path:
    pv = cluster.get("", "v1", "persistentvolumes", None, pvc["spec"]["volumeName"])
    return pathlib.Path(pv["spec"]["hostPath"]["path"])


def files_of(d: pathlib.Path) -> dict[str, bytes]:
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*"))
            if p.is_file() and p.name != ".mlplatform-load.json"}


async def loader_jobs(admin: Kube, ns: str, name: str) -> list[dict]:
    return (await admin.list(f"/apis/batch/v1/namespaces/{ns}/jobs", labelSelector=f"{ds.LOADER_LABEL}={name}"))["items"]


async def test_the_api_server_keeps_a_loaded_condition_across_binding(operator, project, kube_cluster):
    """A claim of a class nobody provisions stays Pending until a PV bound to it appears: the
    condition is written first, then the PV controller binds the claim (its own status write)."""
    admin, ns = operator.kube, project
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "manual", "namespace": ns},
             "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "manual-none",
                      "resources": {"requests": {"storage": "1Gi"}}}}
    made = await admin.create(claim)
    cond = {"type": "Loaded", "status": "False", "reason": "Loading", "message": "3 of 9 objects",
            "lastTransitionTime": "2026-12-04T10:00:00Z", "observedGeneration": 1}
    await admin.request("PATCH", claim_path(ns, "manual") + "/status", {"status": {"conditions": [cond]}},
                        content_type="application/strategic-merge-patch+json")
    pv = f"manual-{uuid.uuid4().hex[:6]}"
    await admin.request("POST", "/api/v1/persistentvolumes", {
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pv},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "manual-none",
                 "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": f"/tmp/{pv}"},
                 "claimRef": {"namespace": ns, "name": "manual", "uid": made["metadata"]["uid"]}}})
    try:
        async def bound():
            return ((await admin.get(claim_path(ns, "manual"))).get("status") or {}).get("phase") == "Bound"

        await until(bound, "the PV controller bound the claim")
        status = (await admin.get(claim_path(ns, "manual")))["status"]
        kept = {k: v for k, v in cond.items() if k != "observedGeneration"}
        assert ds.condition_of({"status": status}) == {**kept, "lastProbeTime": None}
        assert status["phase"] == "Bound" and status["capacity"] == {"storage": "1Gi"}
        # Kubernetes' own conditions of the claim (1.37: "Unused", which the controller-manager adds
        # in its own time: waited for) stay beside ours: the controller patches by type, a merge
        # patch would drop them
        others: list[str] = []

        async def theirs():
            status = (await admin.get(claim_path(ns, "manual")))["status"]
            others[:] = sorted(c["type"] for c in status.get("conditions") or [] if c["type"] != "Loaded")
            return others

        await until(theirs, "the controller-manager's own condition of the claim")
        await admin.request("PATCH", claim_path(ns, "manual") + "/status", {"status": {"conditions": [
            {"type": "Loaded", "status": "True", "reason": "Loaded", "message": "9 objects"}]}},
            content_type="application/strategic-merge-patch+json")
        status = (await admin.get(claim_path(ns, "manual")))["status"]
        # (their times are the controller-manager's to change meanwhile: compared by type)
        assert sorted(c["type"] for c in status["conditions"] if c["type"] != "Loaded") == others
        assert ds.condition_of({"status": status})["lastTransitionTime"] == "2026-12-04T10:00:00Z"  # merged by type
    finally:
        await admin.delete(f"/api/v1/persistentvolumes/{pv}")


async def test_a_dataset_loads_with_progress_and_mounts_read_only(operator, project, kube_cluster, s3_store,  # noqa: F811
                                                                  gcs_store, slow_s3):  # noqa: F811
    admin, ns = operator.kube, project
    prefix = f"coco-{uuid.uuid4().hex[:6]}"
    objects = put_many(s3_store, prefix, N, size=lambda i: OBJECT_BYTES)  # 1,000 objects, 100 MB
    public = put_many(gcs_store, f"open-{prefix}", 5)
    await admin.create(aws_secret(ns, "s3-reader", s3_store.key_id, s3_store.secret))
    slow_s3.delay = 0.02  # 1,000 objects, 8 at a time: a few seconds more
    source = f"s3://{s3_store.bucket}/{prefix}"
    await admin.create(dataset(ns, "coco", source, "s3-reader"))
    await admin.create(dataset(ns, "mnist", f"gs://{gcs_store.bucket}/open-{prefix}"))
    messages, progress = set(), set()
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        pvc = await admin.get(claim_path(ns, "coco"))
        cond = ds.condition_of(pvc) or {}
        messages.add((cond.get("reason"), cond.get("message")))
        progress.add(pvc["metadata"].get("annotations", {}).get(ds.PROGRESS_ANNOTATION))
        if cond.get("status") == "True":
            break
        await asyncio.sleep(0.1)
    during = [m for r, m in messages if r == "Loading" and m and re.fullmatch(rf"(\d+) of {N} objects, .* of .*", m)]
    assert [m for m in during if 0 < int(m.split()[0]) < N], messages  # seen mid-way, as the spawn form shows it
    assert any(p and json.loads(p).get("phase") == "copying" for p in progress), progress
    assert ("Loading", "waiting for the loader to start") in messages
    pvc = await admin.get(claim_path(ns, "coco"))
    total = sum(len(v) for v in objects.values())
    cond = ds.condition_of(pvc)
    assert cond["status"] == "True" and cond["reason"] == "Loaded"
    assert total == 100_000_000 and cond["message"] == f"{N} objects, {ds.size_text(total)} from {source}"
    annotations = pvc["metadata"]["annotations"]
    spec = ds.read_dataset(pvc, MOUNTS)
    assert annotations[ds.LOAD_ID_ANNOTATION] == spec.load_id
    assert json.loads(annotations[ds.PROGRESS_ANNOTATION])["phase"] == "done"
    assert dataset_from_pvc(pvc, MOUNTS).state == "ready"
    assert files_of(volume_dir(kube_cluster, pvc)) == objects
    (job,) = await loader_jobs(admin, ns, "coco")
    assert job["metadata"]["name"] == spec.job_name and job["status"]["succeeded"] == 1
    assert job["metadata"]["ownerReferences"][0]["uid"] == pvc["metadata"]["uid"]
    template = job["spec"]["template"]
    assert template["metadata"]["labels"][ds.LOADER_LABEL] == "coco"
    assert template["spec"]["automountServiceAccountToken"] is False
    assert template["spec"]["serviceAccountName"] == RUNNER
    # the anonymous gs:// one beside it
    mnist = await settled(admin, ns, "mnist")
    assert ds.condition_of(mnist)["status"] == "True", ds.condition_of(mnist)
    assert files_of(volume_dir(kube_cluster, mnist)) == public

    # the loader's own pod (its Job's, owned by the claim) mounted it writable
    (loader,) = (await admin.list(f"/api/v1/namespaces/{ns}/pods", labelSelector=f"{ds.LOADER_LABEL}=coco"))["items"]
    assert not any(v["persistentVolumeClaim"].get("readOnly") for v in loader["spec"]["volumes"]
                   if "persistentVolumeClaim" in v)
    # a later pod reads it whole; mounted read-only by the platform's pod webhook although its Job
    # asks for it writable and its pods carry the loader's label (their Job is not the loader)
    d = dataset_from_pvc(pvc, MOUNTS)
    vols, mounts = volumes([], [d], MOUNTS)
    for v in vols:
        v["persistentVolumeClaim"].pop("readOnly")
    for m in mounts:
        m.pop("readOnly")
    env = select(Available(datasets=(d,)), [], ["coco"], ns)
    script = ("import hashlib, json, os, pathlib\n"
              "root = pathlib.Path(json.loads(os.environ['MLPLATFORM_DATASETS'])['coco'])\n"
              "files = sorted(p for p in root.rglob('*.bin'))\n"
              "h = hashlib.sha256()\n"
              "for p in files: h.update(p.relative_to(root).as_posix().encode() + p.read_bytes())\n"
              "print(json.dumps({'files': len(files), 'sha256': h.hexdigest()}))\n")
    await admin.request("POST", f"/apis/batch/v1/namespaces/{ns}/jobs", {
        "apiVersion": "batch/v1", "kind": "Job",
        # labels of its own: a Job without any takes its template's, and the loader label is the operator's
        "metadata": {"name": "reader", "labels": {"app": "reader"}},
        "spec": {"backoffLimit": 0, "template": {"metadata": {"labels": {ds.LOADER_LABEL: "coco"}}, "spec": {
            "restartPolicy": "Never", "serviceAccountName": RUNNER, "volumes": vols,
            "containers": [{"name": "main", "image": "python:3.12-slim", "command": ["python", "-c", script],
                            "env": [{"name": k, "value": v} for k, v in env.items()], "volumeMounts": mounts}]}}}})

    async def read():
        job = await admin.get(f"/apis/batch/v1/namespaces/{ns}/jobs/reader")
        return (job.get("status") or {}).get("succeeded") or (job.get("status") or {}).get("failed")

    await until(read, "the reader ran", timeout=60)
    (reader,) = (await admin.list(f"/api/v1/namespaces/{ns}/pods", labelSelector="job-name=reader"))["items"]
    assert reader["spec"]["volumes"][0]["persistentVolumeClaim"] == {"claimName": "coco", "readOnly": True}
    assert {m.get("readOnly") for m in reader["spec"]["containers"][0]["volumeMounts"]} == {True}
    lines = [line async for line in admin.stream(f"/api/v1/namespaces/{ns}/pods/{reader['metadata']['name']}/log",
                                                 [], "*/*", aiohttp.ClientTimeout(total=10))]
    h = hashlib.sha256()
    for rel in sorted(objects, key=lambda r: pathlib.Path(r)):
        h.update(rel.encode() + objects[rel])
    assert json.loads(lines[-1]) == {"files": N, "sha256": h.hexdigest()}

    # a changed source: a new Job loads into the same PVC; the old Job goes
    slow_s3.delay = 0.0
    newer = put_many(s3_store, f"{prefix}-v2", 12)
    await admin.request("PATCH", claim_path(ns, "coco"), {"metadata": {"annotations": {
        "mlplatform.io/source": f"{source}-v2"}}}, content_type="application/merge-patch+json")

    async def reloaded():
        claim = await admin.get(claim_path(ns, "coco"))
        cond = ds.condition_of(claim)
        return claim["metadata"]["annotations"][ds.LOAD_ID_ANNOTATION] != spec.load_id and cond["status"] == "True"

    await until(reloaded, "the new source loaded", timeout=60)
    pvc = await admin.get(claim_path(ns, "coco"))
    assert files_of(volume_dir(kube_cluster, pvc)) == newer
    assert [j["metadata"]["name"] for j in await loader_jobs(admin, ns, "coco")] == \
        [ds.read_dataset(pvc, MOUNTS).job_name]
    assert s3_store.secret not in operator.log()


async def test_a_credential_without_access_fails_at_once_with_the_reason(operator, project, s3_store):  # noqa: F811
    admin, ns = operator.kube, project
    prefix = f"raw-{uuid.uuid4().hex[:6]}"
    put_many(s3_store, prefix, 3)
    await admin.create(aws_secret(ns, "nobody", s3_store.denied_key_id, s3_store.denied_secret))
    raw = await admin.create(dataset(ns, "raw", f"s3://{s3_store.bucket}/{prefix}", "nobody"))
    typo = await admin.create(dataset(ns, "typo", f"s3://{s3_store.bucket}/{prefix}", "no-such-key"))
    await admin.create(dataset(ns, "bad", "s3://x/y"))
    # Jobs that mount them: held, and told why while their dataset has failed
    await admin.create(reader_job(raw, "on-raw"))
    await admin.create(reader_job(typo, "on-typo"))
    pvc = await settled(admin, ns, "raw")
    cond = ds.condition_of(pvc)
    assert cond["status"] == "False" and cond["reason"] == "Failed"
    assert cond["message"] == (f"access denied (AccessDenied) listing s3://{s3_store.bucket}/{prefix}/: the dataset's "
                               "credential must be an aws-credential allowed to list and read this bucket")
    assert dataset_from_pvc(pvc, MOUNTS).state == "failed"
    (job,) = await loader_jobs(admin, ns, "raw")
    assert job["status"]["failed"] == 1 and not job["status"].get("succeeded")  # not retried: it cannot help
    async def progress_says_why():  # written just after the condition
        pvc = await admin.get(claim_path(ns, "raw"))
        return json.loads(pvc["metadata"]["annotations"].get(ds.PROGRESS_ANNOTATION) or "{}").get("reason")

    await until(progress_says_why, "the progress annotation names the reason", timeout=10)
    assert await progress_says_why() == "AccessDenied"
    typo = ds.condition_of(await settled(admin, ns, "typo"))
    assert (typo["reason"], typo["message"]) == (
        "Failed", f"mlplatform.io/credential: there is no credential 'no-such-key' in the project '{ns}'; add it (the "
                  "load starts once it exists)")
    assert await loader_jobs(admin, ns, "typo") == []

    async def told(job: str):
        pods = await job_pods(admin, ns, job)
        events = (await admin.list(f"/api/v1/namespaces/{ns}/events",
                                   fieldSelector=f"reason={gates.FAILED_REASON}"))["items"]
        return pods and [e for e in events if e["involvedObject"]["name"] == pods[0]["metadata"]["name"]]

    for held, name in (("on-raw", "raw"), ("on-typo", "typo")):
        await until(lambda: told(held), f"the pod of {held} told why it is held", timeout=20)
        (event,) = await told(held)
        assert event["type"] == "Warning" and event["message"].startswith(
            f"held until the dataset {name} is loaded; its load failed: ")
        (pod,) = await job_pods(admin, ns, held)
        assert gates.is_held(pod) and not pod["spec"].get("nodeName")
    # the credential made afterwards: the operator looks again (10 s later) and the load starts
    await admin.create(aws_secret(ns, "no-such-key", s3_store.key_id, s3_store.secret))

    async def typo_loaded():
        return (ds.condition_of(await admin.get(claim_path(ns, "typo"))) or {}).get("status") == "True"

    await until(typo_loaded, "the dataset loaded once its credential existed", timeout=40)

    async def ran(job: str):
        status = (await admin.get(f"/apis/batch/v1/namespaces/{ns}/jobs/{job}")).get("status") or {}
        return status.get("succeeded") or status.get("failed")

    await until(lambda: ran("on-typo"), "the pod held for typo let go and run", timeout=60)
    assert (await admin.get(f"/apis/batch/v1/namespaces/{ns}/jobs/on-typo"))["status"].get("succeeded") == 1
    (pod,) = await job_pods(admin, ns, "on-raw")
    assert gates.is_held(pod)  # raw's load failed for good: still held
    bad = ds.condition_of(await settled(admin, ns, "bad"))
    assert bad["message"] == "mlplatform.io/source: 'x' is not a bucket name (3-222 lower-case letters, digits, '.', " \
                             "'-' or '_')"
    everything = json.dumps([await admin.get(claim_path(ns, n)) for n in ("raw", "typo", "bad")]) + operator.log()
    assert s3_store.denied_secret not in everything
    # a Job posing as the failed dataset's loader (its label, its owner, the loader's own name) is
    # refused by the API server for anyone but the operator, even a cluster admin: it would otherwise
    # be taken for the loader and mark the dataset Loaded with whatever it wrote
    forged = {"apiVersion": "batch/v1", "kind": "Job",
              "metadata": {**{k: job["metadata"][k] for k in ("labels", "ownerReferences")}, "name": "raw-forged"},
              "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
                  {"name": "loader", "image": "busybox", "command": ["true"]}]}}}}
    with pytest.raises(KubeError) as refused:
        await admin.request("POST", f"/apis/batch/v1/namespaces/{ns}/jobs", forged)
    assert "only the platform's operator makes dataset loader Jobs" in refused.value.reason


async def test_the_operator_restarted_mid_load_loads_once(operator, project, kube_cluster, s3_store,  # noqa: F811
                                                          slow_s3):
    admin, ns = operator.kube, project
    prefix = f"imgs-{uuid.uuid4().hex[:6]}"
    objects = put_many(s3_store, prefix, 200)
    await admin.create(aws_secret(ns, "s3-reader", s3_store.key_id, s3_store.secret))
    slow_s3.delay = 0.3
    await admin.create(dataset(ns, "imgs", f"s3://{s3_store.bucket}/{prefix}", "s3-reader"))

    async def copying():
        msg = (ds.condition_of(await admin.get(claim_path(ns, "imgs"))) or {}).get("message") or ""
        return re.match(r"[1-9]\d* of 200 objects", msg)

    await until(copying, "the load is under way", timeout=60)
    slow_s3.delay = 2.0  # still loading whatever the restart costs
    await operator.stop()
    await operator.start()
    await until(lambda: _leads(admin, operator), "the restarted operator leads", timeout=30)
    slow_s3.delay = 0.0
    pvc = await settled(admin, ns, "imgs", timeout=90)
    assert ds.condition_of(pvc)["status"] == "True", ds.condition_of(pvc)
    assert files_of(volume_dir(kube_cluster, pvc)) == objects
    (job,) = await loader_jobs(admin, ns, "imgs")
    assert job["status"]["succeeded"] == 1 and not job["status"].get("failed")  # one pod, never restarted
    pods = (await admin.list(f"/api/v1/namespaces/{ns}/pods", labelSelector=f"{ds.LOADER_LABEL}=imgs"))["items"]
    assert len(pods) == 1
    assert operator.log().count(f"dataset {ns}/imgs: load ") == 2  # started once (by the first), loaded once


async def _leads(admin: Kube, op: OperatorProcess) -> bool:
    lease = await admin.get("/apis/coordination.k8s.io/v1/namespaces/mlplatform-system/leases/mlplatform-operator")
    return ((lease or {}).get("spec") or {}).get("holderIdentity") == f"operator-{op.starts}"


async def test_a_deleted_dataset_takes_its_loader_with_it(operator, project, s3_store, slow_s3):  # noqa: F811
    admin, ns = operator.kube, project
    prefix = f"gone-{uuid.uuid4().hex[:6]}"
    put_many(s3_store, prefix, 40)
    await admin.create(aws_secret(ns, "s3-reader", s3_store.key_id, s3_store.secret))
    slow_s3.delay = 1.0
    await admin.create(dataset(ns, "gone", f"s3://{s3_store.bucket}/{prefix}", "s3-reader"))

    async def running():
        pods = (await admin.list(f"/api/v1/namespaces/{ns}/pods", labelSelector=f"{ds.LOADER_LABEL}=gone"))["items"]
        return any((p.get("status") or {}).get("phase") == "Running" for p in pods)

    await until(running, "the loader runs", timeout=60)
    await admin.delete(claim_path(ns, "gone"))

    async def all_gone():
        pods = await admin.list(f"/api/v1/namespaces/{ns}/pods", labelSelector=f"{ds.LOADER_LABEL}=gone")
        return not await loader_jobs(admin, ns, "gone") and not pods["items"] and \
            await admin.get(claim_path(ns, "gone")) is None

    await until(all_gone, "the Job, its pod and the claim are gone", timeout=60)
    # by the operator, at once: the garbage collector alone would wait for the claim, which the
    # running loader pod holds (pvc-protection)
    assert f"dataset {ns}/gone: deleted the loader Job gone-load-" in operator.log()


READ_ALL = ("import hashlib, json, pathlib, sys\n"
            "root = pathlib.Path(sys.argv[1])\n"
            "h = hashlib.sha256()\n"
            "files = sorted(p for p in root.rglob('*.bin'))\n"
            "for p in files: h.update(p.relative_to(root).as_posix().encode() + p.read_bytes())\n"
            "print(json.dumps({'files': len(files), 'sha256': h.hexdigest()}))\n")


def digest(objects: dict[str, bytes]) -> str:
    h = hashlib.sha256()
    for rel in sorted(objects, key=lambda r: pathlib.Path(r)):
        h.update(rel.encode() + objects[rel])
    return h.hexdigest()


def reader_job(pvc: dict, name: str, pods: int = 1) -> dict:
    """A plain Job of `pods` pods that mount the dataset `pvc` (asking for nothing more: no
    readOnly, no wait) and print its file count and digest."""
    d = dataset_from_pvc(pvc, MOUNTS)
    vols, mounts = volumes([], [d], MOUNTS)
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": pvc["metadata"]["namespace"]},
            "spec": {"backoffLimit": 0, "completions": pods, "parallelism": pods, "template": {"spec": {
                "restartPolicy": "Never", "serviceAccountName": RUNNER, "volumes": vols,
                "containers": [{"name": "main", "image": "python:3.12-slim",
                                "command": ["python", "-c", READ_ALL, d.path], "volumeMounts": mounts}]}}}}


async def job_pods(admin: Kube, ns: str, job: str) -> list[dict]:
    return (await admin.list(f"/api/v1/namespaces/{ns}/pods", labelSelector=f"job-name={job}"))["items"]


async def test_pods_that_mount_a_loading_dataset_are_held_until_it_is_loaded_then_read_it_whole(
        operator, project, kube_cluster, s3_store, slow_s3):  # noqa: F811
    admin, ns = operator.kube, project
    prefix = f"held-{uuid.uuid4().hex[:6]}"
    objects = put_many(s3_store, prefix, 200)
    await admin.create(aws_secret(ns, "s3-reader", s3_store.key_id, s3_store.secret))
    slow_s3.delay = 0.3  # 200 objects, 8 at a time: about 8 s of loading
    pvc = await admin.create(dataset(ns, "frames", f"s3://{s3_store.bucket}/{prefix}", "s3-reader"))
    await admin.create(reader_job(pvc, "early", pods=2))

    seen: list[dict] = []

    async def both_held():
        seen[:] = await job_pods(admin, ns, "early")
        return len(seen) == 2 and all(gates.is_held(p) for p in seen)

    try:
        await until(both_held, "the Job's two pods made and held")
    except AssertionError:
        raise AssertionError(json.dumps([{"meta": p["metadata"], "gates": p["spec"].get("schedulingGates"),
                                          "status": p.get("status")} for p in seen], indent=1)[:4000] +
                             "\n" + operator.log()[-3000:]) from None
    for pod in await job_pods(admin, ns, "early"):
        assert not pod["spec"].get("nodeName")  # not scheduled: the scheduler leaves a gated pod alone
        scheduled = next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
        assert (scheduled["status"], scheduled["reason"]) == ("False", "SchedulingGated")
        assert pod["metadata"]["annotations"][gates.WAITING_ANNOTATION] == "frames"
        assert pod["spec"]["volumes"][0]["persistentVolumeClaim"]["readOnly"] is True
    assert ds.condition_of(await admin.get(claim_path(ns, "frames")))["status"] == "False"  # still loading
    # a gate cannot be put back, nor added by anyone after creation (Kubernetes' own rule)
    with pytest.raises(KubeError):
        await admin.request("PATCH", f"/api/v1/namespaces/{ns}/pods/{(await job_pods(admin, ns, 'early'))[0]['metadata']['name']}",
                            {"spec": {"schedulingGates": [{"name": "example.com/late"}]}},
                            content_type="application/strategic-merge-patch+json")

    async def done():
        job = await admin.get(f"/apis/batch/v1/namespaces/{ns}/jobs/early")
        return (job.get("status") or {}).get("succeeded") == 2 or (job.get("status") or {}).get("failed")

    await until(done, "the held pods ran once the dataset was loaded", timeout=120)
    assert ds.condition_of(await admin.get(claim_path(ns, "frames")))["status"] == "True"
    for pod in await job_pods(admin, ns, "early"):
        assert not gates.is_held(pod) and gates.GATED_LABEL not in pod["metadata"]["labels"]
        lines = [line async for line in admin.stream(f"/api/v1/namespaces/{ns}/pods/{pod['metadata']['name']}/log",
                                                     [], "*/*", aiohttp.ClientTimeout(total=10))]
        assert json.loads(lines[-1]) == {"files": 200, "sha256": digest(objects)}  # the whole of it
    # a pod made once it is loaded is not held at all
    await admin.create(reader_job(await admin.get(claim_path(ns, "frames")), "late"))
    await until(lambda: job_pods(admin, ns, "late"), "the later Job's pod made")
    (late,) = await job_pods(admin, ns, "late")
    assert not gates.is_held(late) and gates.GATED_LABEL not in (late["metadata"].get("labels") or {})


async def loading_shards(admin: Kube, ns: str, s3_store, slow_s3) -> dict[str, bytes]:  # noqa: F811
    """The dataset ``shards`` of 120 objects, loading for about 5 s (120 reads held 0.3 s, 8 at a time)."""
    prefix = f"shards-{uuid.uuid4().hex[:6]}"
    objects = put_many(s3_store, prefix, 120)
    await admin.create(aws_secret(ns, "s3-reader", s3_store.key_id, s3_store.secret))
    slow_s3.delay = 0.3
    await admin.create(dataset(ns, "shards", f"s3://{s3_store.bucket}/{prefix}", "s3-reader"))
    return objects


@contextlib.asynccontextmanager
async def jobs_service(admin: Kube, ns: str, settings=JOB_SETTINGS):
    """(backend, service): the platform's jobs service on Kubernetes for `ns` (`settings`: the v1
    path's unless told), whose only dataset is ``shards`` as the API server has it now."""
    async def files(_project: str) -> Available:
        return Available(datasets=(dataset_from_pvc(await admin.get(claim_path(ns, "shards")), JOB_SETTINGS.mounts),))

    async def projects(_user: str) -> list[str]:
        return [ns]

    backend = KubeBackend(admin, settings, poll_interval=0.1)
    try:
        yield backend, JobService(backend, PLAN_SETTINGS, projects, files)
    finally:
        await backend.close()


async def test_a_job_submitted_with_a_dataset_still_loading_waits_saying_so_then_reads_it_whole(
        operator, project, s3_store, slow_s3):  # noqa: F811
    """The platform's jobs service on Kubernetes accepts a dataset still loading (the webhook holds the
    pods); `get` and `list` say what the job waits for, with the load's percentage, until it runs."""
    admin, ns = operator.kube, project
    objects = await loading_shards(admin, ns, s3_store, slow_s3)
    body = {"jobId": "reads_shards", "trainingInput": {
        "scaleTier": "CUSTOM", "masterType": "n1-standard-4",
        "masterConfig": {"imageUri": "python:3.11-slim",
                         "containerCommand": ["python", "-c", READ_ALL, "/datasets/shards"]}}}
    async with jobs_service(admin, ns) as (backend, service):
        assert (await service.files(ns)).datasets[0].state == "loading"
        job = await service.create("alice", ns, Submission(body, ns, mounts=Mounts(datasets=("shards",))))
        assert job["jobId"] == "reads_shards"
        seen: list[str] = []

        async def told():
            got = await service.get("alice", ns, "reads_shards")
            if got.get("statusMessage"):
                seen.append(got["statusMessage"])
            return got.get("statusMessage")

        await until(told, "the job says what it waits for")
        assert re.fullmatch(r"waiting for the dataset 'shards' to finish loading \((\d+%|[^)]*)\)", seen[0]), seen
        (listed,) = [j for j in await backend.list(ns) if j["jobId"] == "reads_shards"]
        assert listed["statusMessage"].startswith("waiting for the dataset 'shards'")
        assert listed["state"] in ("QUEUED", "PREPARING")

        async def ended():
            got = await service.get("alice", ns, "reads_shards")
            seen.append(got.get("statusMessage") or "")
            return got if got["state"] in ("SUCCEEDED", "FAILED") else None

        await until(ended, "the job ran once the dataset was loaded", timeout=120)
        final = await service.get("alice", ns, "reads_shards")
        assert final["state"] == "SUCCEEDED" and "statusMessage" not in final, final
        assert any(re.search(r"\(\d+%\)", s) for s in seen), seen  # the load's progress, as it went
        lines = [line.text async for line in backend.logs(ns, "reads_shards")]
        assert json.loads(lines[-1]) == {"files": 120, "sha256": digest(objects)}  # the whole of it


async def test_a_pytorchjob_on_a_dataset_still_loading_waits_then_its_master_reads_it_whole(
        operator, project, kube_cluster, s3_store, slow_s3, training_operator):  # noqa: F811
    """The real Training Operator's replicas (master, worker: pods it makes, with its init container)
    are held like any pod until the dataset is loaded; the job says so; then the master reads it whole."""
    if training_operator is None or not kube_cluster.network.dns:
        pytest.skip("needs the real Training Operator and the test cluster's pod network and DNS")
    admin, ns = operator.kube, project
    objects = await loading_shards(admin, ns, s3_store, slow_s3)
    replica = {"imageUri": "python:3.11-slim", "containerCommand": ["python", "-c", READ_ALL, "/datasets/shards"]}
    body = {"jobId": "ddp_reads", "trainingInput": {
        "runtimeVersion": "pytorch-2.5", "scaleTier": "CUSTOM", "masterType": "n1-standard-4",
        "workerType": "n1-standard-4", "workerCount": 1, "masterConfig": replica, "workerConfig": replica}}
    async with jobs_service(admin, ns) as (backend, service):
        await service.create("alice", ns, Submission(body, ns, mounts=Mounts(datasets=("shards",))))
        replicas: list[dict] = []

        async def both_held():
            replicas[:] = (await admin.list(f"/api/v1/namespaces/{ns}/pods",
                                            labelSelector="training.kubeflow.org/job-name=ddp-reads"))["items"]
            return len(replicas) == 2 and all(gates.is_held(p) for p in replicas)

        await until(both_held, "the operator's master and worker pods made and held", timeout=60)
        assert ds.condition_of(await admin.get(claim_path(ns, "shards")))["status"] == "False"  # still loading
        held = await service.get("alice", ns, "ddp_reads")
        assert held["statusMessage"].startswith("waiting for the dataset 'shards'"), held

        async def ended():
            got = await service.get("alice", ns, "ddp_reads")
            return got if got["state"] in ("SUCCEEDED", "FAILED") else None

        await until(ended, "the PyTorchJob ran once the dataset was loaded", timeout=180)
        final = await service.get("alice", ns, "ddp_reads")
        assert final["state"] == "SUCCEEDED" and "statusMessage" not in final, final
        # the master read the whole of it (the job ends with the master, so the worker, held the same way
        # and let go at the same moment, may be cleaned up mid-read: cleanPodPolicy Running)
        lines = [line.text async for line in backend.logs(ns, "ddp_reads", "master-replica-0")]
        assert json.loads(lines[-1]) == {"files": 120, "sha256": digest(objects)}, lines[-5:]
