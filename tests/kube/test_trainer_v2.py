"""Real Kubeflow Trainer v2.3.0 on JobSet v0.12.0 (`trainer_v2`, built by `make controllers`) on the
tests' control plane, with the process kubelet and the cluster DNS: what the platform's TrainJobs
rely on. A TrainJob on a torch ClusterTrainingRuntime becomes a JobSet whose indexed Job runs one
pod per node; each node is told its rank and the master's stable name (``PET_*``, as torchrun reads
them), which resolves through the JobSet's headless Service; the status server's token and CA are
projected into each pod (the ``TrainJobStatus`` gate), and the example trainer's progress reaches
the TrainJob's ``status.trainerStatus`` through it. The platform's jobs and sweeps (Katib's TrainJob
trials) on it follow."""

from __future__ import annotations

import asyncio
import re
from dataclasses import replace

import pytest

from hub_ext.core.errors import UserInputError
from server_ext.jobs.kube.kubeflow import KubeSettings
from server_ext.runtimes.kube.backend import KubeBackend
from tests.kube.job_env import NODES, SETTINGS, state, until
from tests.kube.test_doctor import run_doctor
from tests.kube.test_katib_real import INJECTION, ROOT, condition, sweep_body, trials_of
from tests.kube.test_job_packages import TRAINER, USER, body, service, shipped
from tests.kube.test_training_operator import IP, following, logs, network, pytorch_body, tf_body  # noqa: F401

pytestmark = pytest.mark.kube
TRAINER_API = "/apis/trainer.kubeflow.org/v1alpha1"
JOBSET, INDEX = "jobset.sigs.k8s.io/jobset-name", "batch.kubernetes.io/job-completion-index"


def torch_runtime(name: str) -> dict:
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
            "metadata": {"name": name, "labels": {"trainer.kubeflow.org/framework": "torch"}},
            "spec": {"mlPolicy": {"numNodes": 1, "torch": {}}, "template": {"spec": {"replicatedJobs": [
                {"name": "node", "template": {
                    "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                    "spec": {"template": {"spec": {"containers": [
                        {"name": "node", "image": "python:3.11-slim"}]}}}}}]}}}}


def ended(kube_cluster, ns: str, name: str):
    for job in kube_cluster.items("trainer.kubeflow.org", "v1alpha1", "trainjobs", ns):
        conditions = (job.get("status") or {}).get("conditions") or []
        if job["metadata"]["name"] == name and any(c["type"] in ("Complete", "Failed") and c["status"] == "True"
                                                   for c in conditions):
            return job
    return None


async def test_a_two_node_trainjob_knows_its_ranks_and_finds_its_master(trainer_v2, kube, kube_cluster, kube_target,
                                                                         runner):
    ns = kube_target.namespace
    kube_cluster.kubelet(mode="process", nodes=NODES)
    await kube.request("POST", f"{TRAINER_API}/clustertrainingruntimes", torch_runtime(f"torch-{ns}"))
    await asyncio.to_thread(trainer_v2.wait_known, f"torch-{ns}")  # its webhook reads runtimes from a cache
    # each retries the lookup, as a rendezvous does: a name resolves once the JobSet's Service has the pod
    script = ('echo "rank=$PET_NODE_RANK of $PET_NNODES master=$PET_MASTER_ADDR:$PET_MASTER_PORT"; '
              'for i in $(seq 60); do getent hosts "$PET_MASTER_ADDR" && break; sleep 0.5; done | cut -d" " -f1; '
              'test -s "$KUBEFLOW_TRAINER_SERVER_TOKEN" && echo token; '
              '[ "$PET_NODE_RANK" = 0 ] && sleep 5; true')  # the master stays while the other looks it up
    job = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "two"},
           "spec": {"runtimeRef": {"name": f"torch-{ns}"}, "trainer": {"numNodes": 2, "command": ["sh", "-c", script]}}}
    try:
        await kube.request("POST", f"{TRAINER_API}/namespaces/{ns}/trainjobs", job)
        done = await until(lambda: ended(kube_cluster, ns, "two"), timeout=90, what="the TrainJob ended")
        assert [c["type"] for c in done["status"]["conditions"] if c["status"] == "True"] == ["Complete"]
        pods = sorted(kube_cluster.items("", "v1", "pods", ns, labelSelector="jobset.sigs.k8s.io/jobset-name=two"),
                      key=lambda p: p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"])
        master_ip = pods[0]["status"]["podIP"]
        for rank, pod in enumerate(pods):
            log = await kube.request("GET", f"/api/v1/namespaces/{ns}/pods/{pod['metadata']['name']}/log")
            assert log.split("\n")[:3] == [f"rank={rank} of 2 master=two-node-0-0.two:29500", master_ip, "token"], log
    finally:
        await kube.request("DELETE", f"{TRAINER_API}/clustertrainingruntimes/torch-{ns}")


# ---- the platform's jobs as TrainJobs ------------------------------------------------------------------
@pytest.fixture
async def v2_backend(kube, runner, _operator_log, platform_runtime):
    """The jobs backend with ``training_api: auto`` on a cluster that serves Trainer v2."""
    b = KubeBackend(kube, replace(SETTINGS, training_api="auto"), poll_interval=0.1)
    yield b
    await b.close()


def trainjob(kube_cluster, ns: str) -> dict:
    (obj,) = kube_cluster.items("trainer.kubeflow.org", "v1alpha1", "trainjobs", ns)
    return obj


async def test_a_pytorch_job_of_three_runs_as_a_trainjob_and_meets_at_its_master(v2_backend, backend, network,
                                                                                   kube_cluster, kube_target):
    ns = kube_target.namespace
    kube_cluster.kubelet(mode="process", nodes=NODES)
    # made on v1 before the switch: still listed, described and read after it
    v1 = service(backend, ns)
    await v1.create(USER, ns, shipped(body("before"), TRAINER))
    await state(backend, ns, "before", "SUCCEEDED", timeout=60)

    jobs = service(v2_backend, ns)
    await jobs.create(USER, ns, shipped(pytorch_body("ddp"), TRAINER))
    followed = {i: asyncio.ensure_future(following(v2_backend, ns, "ddp", f"worker-replica-{i}")) for i in (0, 1)}
    await state(v2_backend, ns, "ddp", "SUCCEEDED", timeout=120)
    obj = trainjob(kube_cluster, ns)
    assert obj["spec"]["runtimeRef"]["name"] == "mlplatform-torch" and obj["spec"]["trainer"]["numNodes"] == 3
    assert not kube_cluster.items("kubeflow.org", "v1", "pytorchjobs", ns)  # nothing on v1
    name = obj["metadata"]["name"]
    master_pod = kube_cluster.items("", "v1", "pods", ns, labelSelector=f"{JOBSET}={name},{INDEX}=0")[0]
    master_ip, master = master_pod["status"]["podIP"], await logs(v2_backend, ns, "ddp", "master-replica-0")
    host = f"{name}-node-0-0.{name}"
    assert f"rendezvous: rank 0 listening on {host}={master_ip}:29500 for 2 replicas" in master, master
    assert master[-1].startswith("done: rmse="), master
    for i in (0, 1):
        worker = await asyncio.wait_for(followed[i], 60)
        assert f"rendezvous: rank {i + 1} met the primary at {host}={master_ip}:29500 (ok 3)" in worker, worker
    listed = {j["jobId"]: j["state"] for j in (await jobs.list(USER, ns))["jobs"]}
    assert listed == {"before": "SUCCEEDED", "ddp": "SUCCEEDED"}
    assert (await logs(v2_backend, ns, "before", "master-replica-0"))[-1].startswith("done: rmse=")
    # progress (issue 31.4): the trainer posted it to Trainer's status server (its token, its CA, the
    # Service's name), which wrote the TrainJob's trainerStatus; the v1 job's is its master's last line
    assert not [t for t in master if "could not report" in t], master
    status = trainjob(kube_cluster, ns)["status"]["trainerStatus"]
    assert status["progressPercentage"] == 100 and [m["name"] for m in status["metrics"]] == ["loss", "rmse"]
    reported = (await v2_backend.get(ns, "ddp"))["trainingOutput"]["progress"]
    assert reported["progressPercentage"] == 100 and reported["updateTime"].endswith("Z")
    assert (await v2_backend.get(ns, "before"))["trainingOutput"]["progress"]["progressPercentage"] == 100


async def test_cancel_of_a_running_trainjob_removes_its_pods(v2_backend, kube_cluster, kube_target):
    ns = kube_target.namespace
    jobs = service(v2_backend, ns)
    await jobs.create(USER, ns, shipped(pytorch_body("long", 1, "--epochs=600", "--sleep=0.5"), TRAINER))
    kube_cluster.kubelet(mode="process", nodes=NODES)
    await state(v2_backend, ns, "long", "RUNNING", timeout=60)
    name = trainjob(kube_cluster, ns)["metadata"]["name"]
    assert (await v2_backend.cancel(ns, "long"))["state"] == "CANCELLING"
    await state(v2_backend, ns, "long", "CANCELLED", timeout=60)
    await until(lambda: not kube_cluster.items("", "v1", "pods", ns, labelSelector=f"{JOBSET}={name}"),
                timeout=60, what="no pods of the TrainJob")


async def test_a_tensorflow_job_of_master_workers_and_ps_meets_at_its_master_as_a_trainjob(v2_backend, network,
                                                                                        kube_cluster, kube_target):
    """Each node's TF_CONFIG, made by the launcher from its completion index, names the others by the
    JobSet's stable names; the parameter server never exits: the master's success ends the job."""
    ns = kube_target.namespace
    jobs = service(v2_backend, ns)
    await jobs.create(USER, ns, shipped(tf_body("tfd"), TRAINER))
    followed = {t: asyncio.ensure_future(following(v2_backend, ns, "tfd", t))
                for t in ("worker-replica-0", "worker-replica-1")}
    kube_cluster.kubelet(mode="process", nodes=NODES)
    await state(v2_backend, ns, "tfd", "SUCCEEDED", timeout=120)
    name = trainjob(kube_cluster, ns)["metadata"]["name"]
    host = f"{name}-node-0-0.{name}"
    master_pod = kube_cluster.items("", "v1", "pods", ns, labelSelector=f"{JOBSET}={name},{INDEX}=0")[0]
    master_ip, master = master_pod["status"]["podIP"], await logs(v2_backend, ns, "tfd", "master-replica-0")
    assert f"rendezvous: master 0 listening on {host}={master_ip}:2222 for 3 replicas" in master, master
    assert any(re.fullmatch(rf"rendezvous: met ps 0 from {IP}, worker 0 from {IP}, worker 1 from {IP}", t)
               for t in master), master
    for task, who in (("worker-replica-0", "worker 0"), ("worker-replica-1", "worker 1")):
        lines = await asyncio.wait_for(followed[task], 60)
        assert f"rendezvous: {who} met the primary at {host}={master_ip}:2222 (ok 4)" in lines, lines


def test_the_doctor_checks_the_platforms_runtime_where_trainer_v2_is_served(platform_runtime, kube_cluster, tmp_path):
    """`mlplatform doctor` (tests/kube/test_doctor.py has the rest): with Trainer v2 and the platform's
    runtime it says so; with the runtime missing (the proxy answers its read 404), it names the file
    that makes it, and fails."""
    kubeconfig = kube_cluster.write_kubeconfig(tmp_path / "admin.kubeconfig")
    _, found, _ = run_doctor(kubeconfig, "--json")
    assert found["api: training jobs"]["detail"].startswith("trainer.kubeflow.org/v1alpha1, kubeflow.org/v1: ")
    assert found["trainer runtimes"] == {"check": "trainer runtimes", "status": "ok",
                                         "detail": ", ".join(platform_runtime), "fix": ""}
    kube_cluster.inject_fault("GET", r"/clustertrainingruntimes/mlplatform-torch$", status=404, count=1)
    rc, found, _ = run_doctor(kubeconfig, "--json")
    assert rc == 1 and found["trainer runtimes"]["status"] == "fail"
    assert "ClusterTrainingRuntime mlplatform-torch is missing" in found["trainer runtimes"]["detail"]
    assert found["trainer runtimes"]["fix"] == "kubectl apply -f helm-values/trainer-runtimes.yaml"


async def test_a_cluster_of_trainer_v2_alone_runs_what_a_trainjob_can_and_refuses_the_rest(
        v2_backend, kube_cluster, kube_target):
    """A cluster without the Training Operator: the test proxy answers kubeflow.org/v1 (its discovery,
    the namespace's PyTorchJobs and TFJobs) 404, as such an API server does (before the backend's
    first request: it discovers then). The default ``training_api`` (``auto``) runs a one-replica job
    as a TrainJob and lists it; a job of unlike replicas (no TrainJob of ours) is refused, naming why,
    and nothing is made."""
    ns, b = kube_target.namespace, v2_backend
    assert KubeSettings(SETTINGS.mounts).training_api == "auto"  # the platform's default
    kube_cluster.inject_fault(None, r"^/apis/kubeflow\.org/v1(\?|$)", status=404, count=5)
    kube_cluster.inject_fault(None, rf"^/apis/kubeflow\.org/v1/namespaces/{ns}/", status=404, count=1000)
    kube_cluster.clear_requests()
    try:
        jobs = service(b, ns)
        await jobs.create(USER, ns, shipped(body("alone"), TRAINER))
        kube_cluster.kubelet(mode="process", nodes=NODES)
        await state(b, ns, "alone", "SUCCEEDED", timeout=90)
        assert trainjob(kube_cluster, ns)["metadata"]["annotations"]["mlplatform.io/job-id"] == "alone"
        unlike = pytorch_body("unlike", 1)
        unlike["trainingInput"]["workerType"] = "n1-standard-8"
        with pytest.raises(UserInputError) as refused:
            await jobs.create(USER, ns, shipped(unlike, TRAINER))
        assert refused.value.field == "trainingInput" and refused.value.message == (
            "this job needs the Kubeflow Training Operator (a PyTorchJob), which this cluster does not run, and "
            "cannot run as a Kubeflow Trainer v2 TrainJob: its worker replicas differ from its master (image, "
            "machine or accelerator): a TrainJob's nodes are alike")
        assert [j["jobId"] for j in (await jobs.list(USER, ns))["jobs"]] == ["alone"]
        assert not kube_cluster.items("kubeflow.org", "v1", "pytorchjobs", ns)  # straight to the API server
        assert not [c for c in kube_cluster.items("", "v1", "configmaps", ns)
                    if c["metadata"]["name"].startswith("unlike")]  # its package neither
        asked = [r.path for r in kube_cluster.requests() if r.path.startswith("/apis/kubeflow.org/v1/")]
        assert asked == [], asked  # no watch of a kind the cluster lacks
    finally:
        kube_cluster.clear_faults()


# ---- sweeps of TrainJob trials (issue 31.3) -----------------------------------------------------------
# Real Katib v0.19 (its own TrainJob trial kind), its controller started after Trainer's CRDs exist
# (`katib_on_trainer`): a Katib started before does not watch TrainJobs. An AI Platform hptuning job
# with ``training_api: auto`` and a user's own Experiment whose trialSpec is a TrainJob both run to
# completion with every trial's metric collected by Katib, the best its optimum.
@pytest.fixture(scope="module")
def katib_on_trainer(platform_runtime, request):
    """Real Katib, its controller started once Trainer v2 (and the platform's runtime) is there."""
    return request.getfixturevalue("real_katib")


@pytest.fixture
async def v2_sweeps(katib_on_trainer, kube, kube_target, runner, kube_cluster, _operator_log):
    """(backend with ``training_api: auto``, namespace labelled for Katib's collector injection)."""
    ns = kube_target.namespace
    await kube.request("PATCH", f"/api/v1/namespaces/{ns}", {"metadata": {"labels": INJECTION}},
                       content_type="application/merge-patch+json")
    kube_cluster.kubelet(mode="process", nodes=NODES)
    b = KubeBackend(kube, replace(SETTINGS, training_api="auto"), poll_interval=0.1)
    yield b, ns
    await b.close()


def own_experiment() -> dict:
    """A user's own Experiment whose trialSpec is a TrainJob on the platform's runtime (Katib's StdOut
    collector reading the example trainer's ``rmse=…`` lines)."""
    trial = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "spec": {
        "runtimeRef": {"name": "mlplatform-torch"},
        "trainer": {"image": "python:3.11-slim", "numNodes": 1,
                    "env": [{"name": "PYTHONPATH", "value": str(ROOT / "examples" / "trainer")}],
                    "command": ["python", "-m", "trainer.task", "--epochs=3", "--sleep=0.2",
                                "--learning_rate=${trialParameters.learningRate}"]}}}
    return {"apiVersion": "kubeflow.org/v1beta1", "kind": "Experiment", "metadata": {"name": "own-v2"},
            "spec": {"objective": {"type": "minimize", "objectiveMetricName": "rmse"},
                     "algorithm": {"algorithmName": "random"},
                     "parallelTrialCount": 2, "maxTrialCount": 2, "maxFailedTrialCount": 1,
                     "metricsCollectorSpec": {"collector": {"kind": "StdOut"}},
                     "parameters": [{"name": "lr", "parameterType": "double",
                                     "feasibleSpace": {"min": "0.01", "max": "0.2"}}],
                     "trialTemplate": {"primaryContainerName": "node",
                                       "trialParameters": [{"name": "learningRate", "reference": "lr"}],
                                       "trialSpec": trial}}}


async def test_an_ai_platform_sweep_and_a_native_experiment_run_trainjob_trials_on_real_katib(v2_sweeps,
                                                                                               kube_cluster):
    """Both at once (they wait side by side): each trial's job a TrainJob, every trial SUCCEEDED with
    the metric Katib's collector (injected into node 0's pod) stored, the best Katib's optimum."""
    backend, ns = v2_sweeps
    jobs = service(backend, ns)
    await jobs.create(USER, ns, shipped(sweep_body("tune_v2", trials=2, parallel=2, sleep=0.2), TRAINER))
    await backend.submit_experiment(ns, USER, own_experiment())
    job = await state(backend, ns, "tune_v2", "SUCCEEDED", timeout=240)
    own = await state(backend, ns, "own_v2", "SUCCEEDED", timeout=120)
    experiments = {e["metadata"]["name"]: e for e in kube_cluster.items("kubeflow.org", "v1beta1", "experiments", ns)}
    assert {e["spec"]["trialTemplate"]["trialSpec"]["kind"] for e in experiments.values()} == {"TrainJob"}
    assert condition(experiments["own-v2"], "Succeeded")
    trials = trials_of(kube_cluster, ns, "tune-v2")
    made = {t["metadata"]["name"] for t in kube_cluster.items("trainer.kubeflow.org", "v1alpha1", "trainjobs", ns)}
    assert {t["metadata"]["name"] for t in trials} <= made  # the platform's trial jobs are retained (a native
    # Experiment without retain: Katib deletes each trial's TrainJob once the trial ended)
    assert not kube_cluster.items("kubeflow.org", "v1", "pytorchjobs", ns)
    out = job["trainingOutput"]
    assert [t["state"] for t in out["trials"]] == ["SUCCEEDED"] * 2 and out["completedTrialCount"] == "2"
    observed = {t["spec"]["parameterAssignments"][0]["value"]:
                float(next(m for m in t["status"]["observation"]["metrics"] if m["name"] == "rmse")["latest"])
                for t in trials}
    for t in out["trials"]:
        assert t["finalMetric"]["objectiveValue"] == observed[str(t["hyperparameters"]["learning_rate"])], (t, observed)
    best = min(out["trials"], key=lambda t: t["finalMetric"]["objectiveValue"])  # MINIMIZE: Katib's optimum
    optimal = experiments["tune-v2"]["status"]["currentOptimalTrial"]
    assert optimal["parameterAssignments"][0]["value"] == str(best["hyperparameters"]["learning_rate"])
    lines = [x.text async for x in backend.logs(ns, "tune_v2", f"trial-{best['trialId']}")]
    assert any(line.startswith("epoch 3/3 ") for line in lines), lines
    assert [t["state"] for t in own["trainingOutput"]["trials"]] == ["SUCCEEDED"] * 2
    assert all(t["finalMetric"]["objectiveValue"] > 0 for t in own["trainingOutput"]["trials"])
