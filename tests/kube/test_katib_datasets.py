"""A Katib sweep on a dataset still loading (issue 21.3), with real Katib v0.19.0 and the platform's
operator: the trials' pods (made by the batch Job controller for Katib's Trials, given Katib's metrics
collector by its pod mutator) are held by the operator's pod webhook until the dataset is loaded, then
run, each reading the whole dataset (a trial whose digest differs fails, and fails the Experiment).
"""

from __future__ import annotations

import uuid

import aiohttp

import pytest

from hub_ext.manifests.mounts import dataset_from_pvc, volumes
from hub_ext.operator.rules import datasets as ds
from hub_ext.operator.rules import gates
from tests.kube.dataset_env import aws_secret, dataset, put_many
from tests.kube.platform_env import until
from tests.kube.test_katib_real import INJECTION, condition, native_experiment
from tests.kube.test_operator_datasets import MOUNTS, RUNNER, claim_path, digest, operator, project, slow_s3  # noqa: F401  (the module's operator and project)

pytestmark = [pytest.mark.kube, pytest.mark.asyncio(loop_scope="module")]

# Katib's StdOut collector re-runs the command through `sh -c` unquoted: a script file, plain words only
CHECK = """import hashlib, pathlib, sys
root, want = pathlib.Path(sys.argv[1]), sys.argv[2]
h = hashlib.sha256()
files = sorted(root.rglob("*.bin"))
for p in files:
    h.update(p.relative_to(root).as_posix().encode() + p.read_bytes())
print(f"read {len(files)} files", flush=True)
if h.hexdigest() != want:
    sys.exit(f"the dataset read is not the dataset loaded ({len(files)} files)")
print(f"rmse={float(sys.argv[3]):.4f}", flush=True)
"""


def experiment(name: str, pvc: dict, script: str, want: str) -> dict:
    """`native_experiment`'s two trials (batch Jobs) as the project's runner, mounting the dataset and
    running `script`; one failed trial fails the Experiment."""
    vols, mounts = volumes([], [dataset_from_pvc(pvc, MOUNTS)], MOUNTS)
    doc = native_experiment(name, trials=2, parallel=2)
    spec = doc["spec"]
    spec.update(maxFailedTrialCount=0, objective={"type": "minimize", "objectiveMetricName": "rmse"})
    job = spec["trialTemplate"]["trialSpec"]["spec"]
    job["backoffLimit"] = 0
    pod = job["template"]["spec"]
    pod.update(serviceAccountName=RUNNER, volumes=vols)
    (container,) = pod["containers"]
    container.pop("env")
    container.update(volumeMounts=mounts, command=["python", script, "/datasets/shards", want,
                                                   "${trialParameters.learningRate}"])
    return doc


async def test_a_katib_sweeps_trials_wait_for_a_loading_dataset_then_read_it_whole(
        operator, project, real_katib, kube_cluster, s3_store, slow_s3, tmp_path):  # noqa: F811
    if real_katib is None:
        pytest.skip("needs the test cluster's real Katib")
    admin, ns = operator.kube, project
    await admin.request("PATCH", f"/api/v1/namespaces/{ns}", {"metadata": {"labels": INJECTION}},
                        content_type="application/merge-patch+json")
    prefix = f"sweep-{uuid.uuid4().hex[:6]}"
    objects = put_many(s3_store, prefix, 120)
    await admin.create(aws_secret(ns, "s3-reader", s3_store.key_id, s3_store.secret))
    slow_s3.delay = 2.0  # 120 objects, 8 at a time: 30 s of loading, longer than Katib takes to make trials;
    # sped up once the trials' pods are seen held
    pvc = await admin.create(dataset(ns, "shards", f"s3://{s3_store.bucket}/{prefix}", "s3-reader"))
    script = tmp_path / "check_dataset.py"
    script.write_text(CHECK)
    await admin.request("POST", f"/apis/kubeflow.org/v1beta1/namespaces/{ns}/experiments",
                        experiment("on-shards", pvc, str(script), digest(objects)))

    held: list[dict] = []

    async def trial_pods_held():
        pods = (await admin.list(f"/api/v1/namespaces/{ns}/pods", labelSelector="job-name"))["items"]
        trials = [p for p in pods if p["metadata"]["labels"]["job-name"].startswith("on-shards-")]  # trials' Jobs
        held[:] = [p for p in trials if gates.is_held(p)]
        return len(held) == 2

    try:
        await until(trial_pods_held, "both trials' pods made and held while the dataset loads", timeout=90)
    except AssertionError as e:
        raise AssertionError(f"{e}; {await what_there_is(admin, ns)}") from None
    assert (ds.condition_of(await admin.get(claim_path(ns, "shards"))) or {}).get("status") != "True"
    for pod in held:  # Katib's collector was injected and the operator's gate added: both webhooks acted
        assert [c["name"] for c in pod["spec"]["containers"]][-1] == "metrics-logger-and-collector"
        assert pod["metadata"]["annotations"][gates.WAITING_ANNOTATION] == "shards"
        assert not pod["spec"].get("nodeName")
    slow_s3.delay = 0.0

    async def finished():
        exp = await admin.get(f"/apis/kubeflow.org/v1beta1/namespaces/{ns}/experiments/on-shards")
        return exp if condition(exp, "Succeeded") or condition(exp, "Failed") else None

    exp = await until(finished, "the Experiment finished", timeout=180)
    if not condition(exp, "Succeeded") or exp["status"].get("trialsSucceeded") != 2:
        raise AssertionError(f"{exp['status']}\n{await what_there_is(admin, ns)}\n{await trial_logs(admin, ns)}")  # each trial read the whole dataset


async def what_there_is(admin, ns: str) -> str:
    """The sweep's objects and the namespace's events, for a failure's message."""
    katib = f"/apis/kubeflow.org/v1beta1/namespaces/{ns}"
    parts = []
    for path in (f"{katib}/experiments", f"{katib}/suggestions", f"{katib}/trials", f"/apis/batch/v1/namespaces/{ns}/jobs",
                 f"/api/v1/namespaces/{ns}/pods"):
        items = (await admin.list(path))["items"]
        parts.append(f"{path.rsplit('/', 1)[-1]}: " + "; ".join(
            f"{i['metadata']['name']} {((i.get('status') or {}).get('conditions') or [])[-1:]}"
            f" {(i.get('status') or {}).get('phase', '')}" for i in items))
    events = (await admin.list(f"/api/v1/namespaces/{ns}/events"))["items"]
    parts.append("events: " + "; ".join(f"{e['involvedObject']['name']}: {e.get('reason')}: {e.get('message', '')[:300]}"
                                        for e in events[-15:]))
    return "\n".join(parts)


async def trial_logs(admin, ns: str) -> str:
    """Each trial pod's containers' logs (their last lines), for a failure's message."""
    out = []
    for pod in (await admin.list(f"/api/v1/namespaces/{ns}/pods", labelSelector="job-name"))["items"]:
        name = pod["metadata"]["name"]
        for c in pod["spec"]["containers"]:
            try:
                got = [raw async for raw in admin.stream(f"/api/v1/namespaces/{ns}/pods/{name}/log",
                                                         [("container", c["name"])], "*/*", aiohttp.ClientTimeout(total=10))]
                text = b"".join(got).decode(errors="replace")
            except Exception as e:  # noqa: BLE001  (a failure's message: what could be read)
                text = f"(no log: {e})"
            out.append(f"--- {name}/{c['name']}:\n{text[-1500:]}")
    return "\n".join(out)
