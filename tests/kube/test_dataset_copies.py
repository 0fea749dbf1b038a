"""Private writable copies of a dataset (issue 21.2), on the real control plane with Kubernetes'
real snapshot-controller: the operator snapshots a loaded dataset once per load; two jobs asking for
``frames:copy`` each get a claim made from that snapshot, read the whole dataset there, write, and
never see each other's writes; the dataset itself is unchanged; the project's quota counts the
copies (a copy over quota refuses the job and leaves nothing); a copy goes with its job; a member's
token may make a claim only as such a copy (the ValidatingAdmissionPolicy mlplatform-dataset-copies),
and its Jobs mount no other job's or server's copy (the operator's pod webhook).
"""

from __future__ import annotations

import json
import uuid

import pytest

from hub_ext.core.errors import UserInputError
from hub_ext.core.mounts import Available
from hub_ext.kube.client import Kube
from hub_ext.manifests.mounts import dataset_from_pvc
from hub_ext.operator.rules import datasets as ds
from server_ext.jobs.submission import Mounts, Submission
from server_ext.runtimes.kube.backend import KubeBackend
from server_ext.service.jobs import JobService
from tests.cluster.rest import ApiError
from tests.kube.dataset_env import aws_secret, dataset, put_many, runner_rest
from tests.kube.job_env import PLAN_SETTINGS
from tests.kube.job_env import SETTINGS as JOB_SETTINGS
from tests.kube.platform_env import until
from tests.kube.test_operator_datasets import MOUNTS, READ_ALL, claim_path, digest, operator, project, slow_s3  # noqa: F401  (the module's operator and project)

pytestmark = [pytest.mark.kube, pytest.mark.asyncio(loop_scope="module")]

# what a job does with its copy: read it whole, then write its own file, then list what is there
READ_WRITE = """
import hashlib, json, pathlib, sys
root, me = pathlib.Path(sys.argv[1]), sys.argv[2]
files = sorted(root.rglob("*.bin"))  # the objects (the loader keeps its own state file beside them)
h = hashlib.sha256()
for p in files:
    h.update(p.relative_to(root).as_posix().encode() + p.read_bytes())
print(json.dumps({"files": len(files), "sha256": h.hexdigest()}), flush=True)
(root / f"written-by-{me}").write_text(me)
print(json.dumps(sorted(p.name for p in root.iterdir() if p.name.startswith("written-by-"))), flush=True)
"""


def job_body(job_id: str) -> dict:
    return {"jobId": job_id, "trainingInput": {
        "scaleTier": "CUSTOM", "masterType": "n1-standard-4",
        "masterConfig": {"imageUri": "python:3.11-slim",
                         "containerCommand": ["python", "-c", READ_WRITE, "/datasets/frames", job_id]}}}


async def test_jobs_get_their_own_writable_copies_from_the_loads_snapshot(operator, project, s3_store, snapshots):  # noqa: F811
    admin, ns = operator.kube, project
    prefix = f"copies-{uuid.uuid4().hex[:6]}"
    objects = put_many(s3_store, prefix, 30)
    await admin.create(aws_secret(ns, "s3-reader", s3_store.key_id, s3_store.secret))
    claim = dataset(ns, "frames", f"s3://{s3_store.bucket}/{prefix}", "s3-reader")
    claim["spec"]["storageClassName"] = "csi-hostpath"  # the test cluster's class that can snapshot
    await admin.create(claim)

    async def copies_offered():
        return dataset_from_pvc(await admin.get(claim_path(ns, "frames")), MOUNTS).snapshot

    await until(copies_offered, "the operator snapshotted the loaded dataset and offers copies", timeout=60)
    pvc = await admin.get(claim_path(ns, "frames"))
    load_id = pvc["metadata"]["annotations"][ds.LOAD_ID_ANNOTATION]
    assert dataset_from_pvc(pvc, MOUNTS).snapshot == f"frames-snap-{load_id}"
    snap = await admin.get(f"/apis/snapshot.storage.k8s.io/v1/namespaces/{ns}/volumesnapshots/frames-snap-{load_id}")
    assert snap["metadata"]["ownerReferences"][0]["uid"] == pvc["metadata"]["uid"]  # it goes with the dataset

    async def files(_project: str) -> Available:
        return Available(datasets=(dataset_from_pvc(await admin.get(claim_path(ns, "frames")), MOUNTS),))

    async def projects(_user: str) -> list[str]:
        return [ns]

    backend = KubeBackend(admin, JOB_SETTINGS, poll_interval=0.1)
    service = JobService(backend, PLAN_SETTINGS, projects, files)
    try:
        for job_id in ("copy_a", "copy_b"):
            await service.create("alice", ns, Submission(job_body(job_id), ns, mounts=Mounts(datasets=("frames:copy",))))
        for job_id in ("copy_a", "copy_b"):
            async def ended(job_id=job_id):
                got = await service.get("alice", ns, job_id)
                return got if got["state"] in ("SUCCEEDED", "FAILED") else None

            await until(ended, f"{job_id} ran", timeout=120)
            assert (await service.get("alice", ns, job_id))["state"] == "SUCCEEDED"
            lines = [line.text async for line in backend.logs(ns, job_id)]
            assert json.loads(lines[0]) == {"files": 30, "sha256": digest(objects)}  # the whole dataset
            assert json.loads(lines[1]) == [f"written-by-{job_id}"]  # its own write, not the other job's
        copies = (await admin.list(f"/api/v1/namespaces/{ns}/persistentvolumeclaims",
                                   labelSelector="mlplatform.io/dataset-copy-of=frames"))["items"]
        assert sorted(c["metadata"]["name"] for c in copies) == ["copy-a-frames-copy", "copy-b-frames-copy"]
        assert {c["metadata"]["ownerReferences"][0]["name"] for c in copies} == {"copy-a", "copy-b"}

        # the dataset itself is as loaded: a shared (read-only) mount reads it unchanged
        shared = job_body("shared")
        shared["trainingInput"]["masterConfig"]["containerCommand"] = ["python", "-c", READ_ALL, "/datasets/frames"]
        await service.create("alice", ns, Submission(shared, ns, mounts=Mounts(datasets=("frames",))))

        async def shared_ended():
            got = await service.get("alice", ns, "shared")
            return got if got["state"] in ("SUCCEEDED", "FAILED") else None

        await until(shared_ended, "the shared reader ran", timeout=120)
        lines = [line.text async for line in backend.logs(ns, "shared")]
        assert json.loads(lines[-1]) == {"files": 30, "sha256": digest(objects)}
        job = await admin.get(f"/apis/batch/v1/namespaces/{ns}/jobs/shared")
        (volume,) = [v for v in job["spec"]["template"]["spec"]["volumes"] if "persistentVolumeClaim" in v]
        assert volume["persistentVolumeClaim"] == {"claimName": "frames", "readOnly": True}
        copy_job = await admin.get(f"/apis/batch/v1/namespaces/{ns}/jobs/copy-b")
        (volume,) = [v for v in copy_job["spec"]["template"]["spec"]["volumes"] if "persistentVolumeClaim" in v]
        assert volume["persistentVolumeClaim"] == {"claimName": "copy-b-frames-copy"}  # writable (false: left out)

        # the quota counts copies: with no claim left, a job asking for a copy is refused, nothing made
        used = len((await admin.list(f"/api/v1/namespaces/{ns}/persistentvolumeclaims"))["items"])
        await admin.create({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "claims", "namespace": ns},
                            "spec": {"hard": {"count/persistentvolumeclaims": str(used)}}})

        async def quota_counted():
            quota = await admin.get(f"/api/v1/namespaces/{ns}/resourcequotas/claims")
            return ((quota.get("status") or {}).get("used") or {}).get("count/persistentvolumeclaims") == str(used)

        await until(quota_counted, "the quota counted the claims")
        with pytest.raises(UserInputError) as refused:
            await service.create("alice", ns, Submission(job_body("copy_c"), ns, mounts=Mounts(datasets=("frames:copy",))))
        assert refused.value.field == "mounts.datasets" and "quota" in refused.value.message, refused.value.message
        left = await admin.get(f"/apis/batch/v1/namespaces/{ns}/jobs/copy-c")
        assert left is None or left["metadata"].get("deletionTimestamp"), left  # the job object went again

        # a copy goes with its job (owner reference, the garbage collector)
        await admin.delete(f"/apis/batch/v1/namespaces/{ns}/jobs/copy-a")

        async def copy_gone():
            return await admin.get(claim_path(ns, "copy-a-frames-copy")) is None

        await until(copy_gone, "the job's copy deleted with it", timeout=60)
    finally:
        await backend.close()


def member_job(name: str, volume: dict) -> dict:
    """A batch Job as a member makes it (members make no pods themselves): one container mounting `volume`."""
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"backoffLimit": 0, "template": {"spec": {
                "restartPolicy": "Never", "serviceAccountName": "mlplatform-runner",
                "containers": [{"name": "main", "image": "python:3.12-slim", "command": ["true"],
                                "volumeMounts": [{"name": "v", "mountPath": "/v"}]}],
                "volumes": [{"name": "v", **volume}]}}}}


async def test_a_members_token_makes_claims_only_as_dataset_copies(operator, project, kube_cluster, tmp_path):  # noqa: F811
    """Plain Kubernetes calls with the project's runner token (what a notebook or a job holds)."""
    admin, ns = operator.kube, project
    rest = await runner_rest(admin, kube_cluster, ns, tmp_path)
    claims = f"/api/v1/namespaces/{ns}/persistentvolumeclaims"
    spec = {"accessModes": ["ReadWriteOnce"], "storageClassName": "csi-hostpath",
            "resources": {"requests": {"storage": "1Gi"}}}
    copy = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "mine", "labels": {"mlplatform.io/dataset-copy-of": "frames"}},
            "spec": {**spec, "dataSource": {"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot",
                                            "name": "frames-snap-x"}}}
    escapes = {
        "a plain claim": {"metadata": {"name": "plain"}, "spec": spec},
        "a claim of a chosen volume": {**copy, "metadata": {**copy["metadata"], "name": "bound"},
                                       "spec": {**copy["spec"], "volumeName": "pvc-someone-elses"}},
        "a claim posing as a dataset": {**copy, "metadata": {"name": "fake", "labels": {
            "mlplatform.io/dataset-copy-of": "frames", "mlplatform.io/dataset": "true"}}},
        "a copy without its label": {**copy, "metadata": {"name": "unlabelled"}},
        # a dataset's volumes are the operator's (a reload in use: hub_ext.operator.rules.volumes)
        "a claim posing as a dataset's volume": {**copy, "metadata": {"name": "frames-vol-x", "labels": {
            "mlplatform.io/dataset-copy-of": "frames", "mlplatform.io/dataset-volume-of": "frames"}}},
    }
    try:
        for what, body in escapes.items():
            with pytest.raises(ApiError) as e:
                await rest.post(claims, {"apiVersion": "v1", "kind": "PersistentVolumeClaim", **body})
            assert e.value.status == 403 and "private copies of a dataset" in str(e.value), (what, e.value)
        await rest.post(claims, copy)  # the shape the jobs service makes
        with pytest.raises(ApiError) as e:
            await rest.delete(f"{claims}/mine")
        assert e.value.status == 403  # copies go with their jobs; members delete no claims
        # a pod's generic ephemeral volume (in a Job's pod template: members make no pods themselves):
        # its claim is made by Kubernetes' ephemeral-volume controller from the member's template, so
        # it may not pose as a dataset (the hub lists datasets by their label); a plain one is made
        for name, labels in (("scratch", {}), ("posing", {"mlplatform.io/dataset": "true"})):
            await rest.post(f"/apis/batch/v1/namespaces/{ns}/jobs", member_job(name, {"ephemeral": {
                "volumeClaimTemplate": {"metadata": {"labels": labels}, "spec": spec}}}))

        async def pod_of(job: str) -> str | None:
            items = (await admin.list(f"/api/v1/namespaces/{ns}/pods", labelSelector=f"job-name={job}"))["items"]
            return items[0]["metadata"]["name"] if items else None

        scratch, posing = await until(lambda: pod_of("scratch"), "a pod"), await until(lambda: pod_of("posing"), "a pod")
        await until(lambda: admin.get(claim_path(ns, f"{scratch}-v")), "the plain ephemeral claim made", timeout=30)

        async def refused_claim():
            events = (await admin.list(f"/api/v1/namespaces/{ns}/events",
                                       fieldSelector=f"involvedObject.name={posing}"))["items"]
            return [e for e in events if "dataset labels" in (e.get("message") or "")]

        await until(refused_claim, "the posing claim refused (an Event on its pod)", timeout=30)
        assert await admin.get(claim_path(ns, f"{posing}-v")) is None

        # another's private copy is theirs: a job's (owned by its job object) and a server's (named for
        # its pod), and a claim named as a copy that is not made yet; a teammate's Job gets no pod
        owner = await admin.create({"apiVersion": "batch/v1", "kind": "Job",
                                    "metadata": {"name": "copy-b", "namespace": ns},
                                    "spec": {"suspend": True, "template": {"spec": {
                                        "restartPolicy": "Never", "serviceAccountName": "mlplatform-runner",
                                        "containers": [{"name": "main", "image": "python:3.12-slim"}]}}}})
        owned = {**copy, "metadata": {**copy["metadata"], "name": "copy-b-frames-copy", "namespace": ns,
                                      "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "copy-b",
                                                           "uid": owner["metadata"]["uid"]}]}}
        await admin.create({"apiVersion": "v1", "kind": "PersistentVolumeClaim", **owned})
        await rest.post(claims, {**copy, "metadata": {**copy["metadata"], "name": "jupyter-alice-frames-copy"}})
        thefts = {"steal-job-copy": "copy-b-frames-copy", "steal-server-copy": "jupyter-alice-frames-copy",
                  "wait-for-a-copy": "copy-z-frames-copy"}
        for job, claim_name in thefts.items():
            await rest.post(f"/apis/batch/v1/namespaces/{ns}/jobs",
                            member_job(job, {"persistentVolumeClaim": {"claimName": claim_name}}))

        async def refused_copies():
            events = (await admin.list(f"/api/v1/namespaces/{ns}/events"))["items"]
            said = {job: [e["message"] for e in events if e["involvedObject"].get("name") == job
                          and e.get("reason") == "FailedCreate"] for job in thefts}
            return said if all(said.values()) else None

        said = await until(refused_copies, "each theft refused (a FailedCreate Event on its Job)", timeout=30)
        assert "another job's or notebook server's private copy of the dataset frames" in said["steal-job-copy"][0]
        assert "another job's or notebook server's private copy" in said["steal-server-copy"][0]
        assert "does not exist yet" in said["wait-for-a-copy"][0]
        for job in thefts:
            assert await pod_of(job) is None
    finally:
        await rest.close()
