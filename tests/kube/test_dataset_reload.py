"""A dataset reloaded while pods read it (issue 21.1), on the real control plane with the operator as
its own ServiceAccount, the real loader against moto's S3, pods run by the process kubelet, and
Kubernetes' own pvc-protection (`hub_ext.operator.rules.volumes` says what is chosen and why):

- a pod reading the dataset keeps its data, unchanged to the byte, through a reload of new contents:
  the new load goes to a new volume claim of the dataset's (owned by it; the project's quota counts
  it); a pod made while it loads is held and mounts the new volume; once loaded it reads the new
  contents whole;
- a reload that nobody's volume is in the way of goes in place (no third claim);
- once the reader of the dataset's own claim has ended, the next reload goes back to it (brought up
  to date from an older load) and the newer volume is deleted, kept by pvc-protection until the last
  pod that names it is gone (an ended pod that still exists counts: Kubernetes' rule).
"""

from __future__ import annotations

import asyncio
import json
import uuid

import aiohttp
import pytest

from hub_ext.kube.client import Kube, KubeError
from hub_ext.manifests.mounts import LOADED_LOAD, dataset_from_pvc
from hub_ext.manifests.mounts import volumes as pod_volumes
from hub_ext.operator.rules import datasets as ds
from hub_ext.operator.rules import gates, volumes
from tests.kube.dataset_env import aws_secret, dataset, put_many
from tests.kube.platform_env import until
from tests.kube.test_operator_datasets import (  # noqa: F401  (the module's operator and project)
    MOUNTS,
    READ_ALL,
    RUNNER,
    claim_path,
    digest,
    files_of,
    operator,
    project,
    slow_s3,
    volume_dir,
)

pytestmark = [pytest.mark.kube, pytest.mark.asyncio(loop_scope="module")]

# a reader that goes on reading: the digest of the whole dataset, again and again
READ_ON = ("import hashlib, json, pathlib, sys, time\n"
           "root = pathlib.Path(sys.argv[1])\n"
           "while True:\n"
           "    h = hashlib.sha256()\n"
           "    files = sorted(p for p in root.rglob('*.bin'))\n"
           "    for p in files: h.update(p.relative_to(root).as_posix().encode() + p.read_bytes())\n"
           "    print(json.dumps({'files': len(files), 'sha256': h.hexdigest()}), flush=True)\n"
           "    time.sleep(0.2)\n")


def reader(pvc: dict, name: str, script: str = READ_ON) -> dict:
    """A pod that mounts the dataset `pvc` as the spawner would (by the dataset's name)."""
    d = dataset_from_pvc(pvc, MOUNTS)
    vols, mounts = pod_volumes([], [d], MOUNTS)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": pvc["metadata"]["namespace"]},
            "spec": {"restartPolicy": "Never", "serviceAccountName": RUNNER, "volumes": vols,
                     "containers": [{"name": "main", "image": "python:3.12-slim",
                                     "command": ["python", "-c", script, d.path], "volumeMounts": mounts}]}}


async def lines(admin: Kube, ns: str, pod: str) -> list[dict]:
    """The reads the pod has printed ([] before it has started)."""
    try:
        got = [raw async for raw in admin.stream(f"/api/v1/namespaces/{ns}/pods/{pod}/log", [], "*/*",
                                                 aiohttp.ClientTimeout(total=10))]
    except KubeError as e:
        if e.code == 400:  # waiting to start
            return []
        raise
    return [json.loads(line) for line in b"".join(got).decode().splitlines() if line.startswith("{")]


def read(objects: dict[str, bytes]) -> dict:
    return {"files": len(objects), "sha256": digest(objects)}


async def reload(admin: Kube, ns: str, annotations: dict) -> str:
    """Change the dataset's annotations; the new load's id once it is loaded."""
    before = (await admin.get(claim_path(ns, "frames")))["metadata"]["annotations"][ds.LOAD_ID_ANNOTATION]
    await admin.request("PATCH", claim_path(ns, "frames"), {"metadata": {"annotations": annotations}},
                        content_type="application/merge-patch+json")
    return await reload_done(admin, ns, before)


async def loaded_other_than(admin: Kube, ns: str, before: str) -> str | None:
    pvc = await admin.get(claim_path(ns, "frames"))
    annotations = pvc["metadata"]["annotations"]
    load_id = annotations.get(ds.LOAD_ID_ANNOTATION)
    done = (ds.condition_of(pvc) or {}).get("status") == "True" and annotations.get(LOADED_LOAD) == load_id
    return load_id if load_id != before and done else None


async def volume_claims(admin: Kube, ns: str) -> list[dict]:
    return (await admin.list(f"/api/v1/namespaces/{ns}/persistentvolumeclaims",
                             labelSelector=f"{volumes.VOLUME_OF_LABEL}=frames"))["items"]


async def still_reads(admin: Kube, ns: str, pod: str, expected: dict) -> int:
    """How many reads the pod has made, once it has read again after now; each one was `expected`."""
    seen = len(await lines(admin, ns, pod))

    async def more():
        got = await lines(admin, ns, pod)
        return got if len(got) > seen + 1 else None

    got = await until(more, f"{pod} read again", timeout=30)
    assert all(g == expected for g in got), [g for g in got if g != expected][:3]
    return len(got)


async def test_a_reload_while_pods_read_goes_to_a_new_volume_and_they_keep_their_data(
        operator, project, kube_cluster, s3_store, slow_s3):  # noqa: F811
    admin, ns = operator.kube, project
    prefix = f"reload-{uuid.uuid4().hex[:6]}"
    first, second, third = (put_many(s3_store, f"{prefix}-{n}", count) for n, count in ((1, 20), (2, 25), (3, 15)))
    bucket = f"s3://{s3_store.bucket}/{prefix}"
    await admin.create(aws_secret(ns, "s3-reader", s3_store.key_id, s3_store.secret))
    await admin.create(dataset(ns, "frames", f"{bucket}-1", "s3-reader"))
    first_load = await until(lambda: loaded_other_than(admin, ns, ""), "the first load", timeout=90)
    pvc = await admin.get(claim_path(ns, "frames"))
    assert volumes.VOLUME_ANNOTATION not in pvc["metadata"]["annotations"]  # the first load: the claim itself
    await admin.create(reader(pvc, "early"))
    await until(lambda: lines(admin, ns, "early"), "the early reader read")
    assert (await lines(admin, ns, "early"))[0] == read(first)

    # new contents while 'early' reads: a new volume; a pod made meanwhile is held on it
    slow_s3.delay = 1.0  # 25 objects, 8 at a time: a few seconds of loading
    await admin.request("PATCH", claim_path(ns, "frames"), {"metadata": {"annotations": {
        "mlplatform.io/source": f"{bucket}-2"}}}, content_type="application/merge-patch+json")

    async def begun():
        claim = await admin.get(claim_path(ns, "frames"))
        began = claim["metadata"]["annotations"][ds.LOAD_ID_ANNOTATION] != first_load
        return claim if began and ds.condition_of(claim)["reason"] == ds.LOADING else None

    pvc = await until(begun, "the reload begun")
    await asyncio.sleep(0.5)  # the webhook answers from its watch's copy of the claim: let it arrive
    second_load = pvc["metadata"]["annotations"][ds.LOAD_ID_ANNOTATION]
    new_volume = pvc["metadata"]["annotations"][volumes.VOLUME_ANNOTATION]
    assert new_volume.startswith(f"frames-vol-{second_load}-")  # and a random part: unknown before it exists
    assert pvc["metadata"]["annotations"][LOADED_LOAD] == first_load
    await admin.create(reader(pvc, "meanwhile", READ_ALL))
    held = await admin.get(f"/api/v1/namespaces/{ns}/pods/meanwhile")
    assert gates.is_held(held) and held["metadata"]["annotations"][gates.WAITING_ANNOTATION] == "frames"
    assert held["spec"]["volumes"][0]["persistentVolumeClaim"] == {"claimName": new_volume, "readOnly": True}
    # a pod posing as the loader (its label, its Job as controller, the new volume writable) is no
    # loader: not made by the Job controller, it gets the volume read-only and waits. Members make no
    # pods themselves (the project Role: Jobs make them); an identity that may, here the admin, may not
    # make a loader either
    job = await until(lambda: loader_job_of(admin, ns, second_load), "the new load's loader Job")
    impostor = reader(pvc, "impostor")
    impostor["metadata"].update(labels={ds.LOADER_LABEL: "frames", ds.LOAD_LABEL: second_load}, ownerReferences=[
        {"apiVersion": "batch/v1", "kind": "Job", "name": job["metadata"]["name"], "uid": job["metadata"]["uid"],
         "controller": True}])
    impostor["spec"]["volumes"][0]["persistentVolumeClaim"] = {"claimName": new_volume}
    impostor["spec"]["containers"][0]["volumeMounts"][0].pop("readOnly", None)
    made = await admin.create(impostor)
    assert made["spec"]["volumes"][0]["persistentVolumeClaim"] == {"claimName": new_volume, "readOnly": True}
    assert gates.is_held(made)
    await admin.delete(f"/api/v1/namespaces/{ns}/pods/impostor")
    assert await reload_done(admin, ns, first_load) == second_load
    slow_s3.delay = 0.0

    async def meanwhile_done():
        pod = await admin.get(f"/api/v1/namespaces/{ns}/pods/meanwhile")
        return pod["status"].get("phase") in ("Succeeded", "Failed") and pod

    assert (await until(meanwhile_done, "the held reader ran", timeout=60))["status"]["phase"] == "Succeeded"
    assert (await lines(admin, ns, "meanwhile"))[-1] == read(second)  # the new contents, whole
    await still_reads(admin, ns, "early", read(first))  # and 'early' still reads the first, to the byte
    (claim,) = await volume_claims(admin, ns)
    dataset_claim = await admin.get(claim_path(ns, "frames"))
    assert claim["metadata"]["name"] == new_volume and volumes.is_volume_of(claim, dataset_claim)
    assert claim["spec"]["resources"] == dataset_claim["spec"]["resources"]
    assert files_of(volume_dir(kube_cluster, dataset_claim)) == first
    assert files_of(volume_dir(kube_cluster, claim)) == second

    # nobody reads the new volume now ('meanwhile' ended): the next reload goes there, in place
    third_load = await reload(admin, ns, {"mlplatform.io/source": f"{bucket}-3"})
    assert [c["metadata"]["name"] for c in await volume_claims(admin, ns)] == [new_volume]
    assert (await admin.get(claim_path(ns, "frames")))["metadata"]["annotations"][volumes.VOLUME_ANNOTATION] == \
        new_volume
    assert files_of(volume_dir(kube_cluster, claim)) == third
    await still_reads(admin, ns, "early", read(first))

    # 'late' reads the new volume, 'early' ends: the next reload goes back to the dataset's own claim
    # (from the first load's data to the second's), and the newer volume goes once 'late' has ended
    await admin.create(reader(await admin.get(claim_path(ns, "frames")), "late"))
    await until(lambda: lines(admin, ns, "late"), "the late reader read")
    await admin.delete(f"/api/v1/namespaces/{ns}/pods/early")
    await until(lambda: gone(admin, f"/api/v1/namespaces/{ns}/pods/early"), "'early' gone", timeout=60)
    assert third_load != await reload(admin, ns, {"mlplatform.io/source": f"{bucket}-2"})
    dataset_claim = await admin.get(claim_path(ns, "frames"))
    assert volumes.VOLUME_ANNOTATION not in dataset_claim["metadata"]["annotations"]
    assert files_of(volume_dir(kube_cluster, dataset_claim)) == second

    async def older_volume_deleted():  # the operator drops it just after writing Loaded
        claims = await volume_claims(admin, ns)
        return len(claims) == 1 and claims[0]["metadata"].get("deletionTimestamp") and claims

    (claim,) = await until(older_volume_deleted, "the older volume deleted, kept while 'late' reads it",
                       timeout=30)
    assert "kubernetes.io/pvc-protection" in claim["metadata"]["finalizers"]
    await still_reads(admin, ns, "late", read(third))
    # a pod that names the older volume itself, writable, gets the current one, read-only
    direct = reader(dataset_claim, "direct")
    direct["spec"]["volumes"][0]["persistentVolumeClaim"] = {"claimName": new_volume}
    direct["spec"]["containers"][0]["volumeMounts"][0].pop("readOnly", None)
    made = await admin.create(direct)
    assert made["spec"]["volumes"][0]["persistentVolumeClaim"] == {"claimName": "frames", "readOnly": True}
    assert made["spec"]["containers"][0]["volumeMounts"][0]["readOnly"] is True
    await admin.delete(f"/api/v1/namespaces/{ns}/pods/direct")
    # pvc-protection counts every pod that names the claim, an ended one too ('meanwhile')
    await admin.delete(f"/api/v1/namespaces/{ns}/pods/meanwhile")
    await admin.delete(f"/api/v1/namespaces/{ns}/pods/late")
    await until(lambda: gone(admin, claim_path(ns, new_volume)), "the older volume gone with its last reader",
                timeout=60)


async def loader_job_of(admin: Kube, ns: str, load_id: str) -> dict | None:
    jobs = (await admin.list(f"/apis/batch/v1/namespaces/{ns}/jobs",
                             labelSelector=f"{ds.LOADER_LABEL}=frames,{ds.LOAD_LABEL}={load_id}"))["items"]
    return jobs[0] if jobs else None


async def reload_done(admin: Kube, ns: str, before: str) -> str:
    return await until(lambda: loaded_other_than(admin, ns, before), "the new load loaded", timeout=90)


async def gone(admin: Kube, path: str) -> bool:
    return await admin.get(path) is None
