"""`server_ext.jobs.local.env`: argv, environment and outcomes of local jobs, as whole values."""

from __future__ import annotations

import json

import pytest

from hub_ext.core.errors import UserInputError
from hub_ext.core.mounts import Credential, Dataset
from server_ext.jobs.local import env as local_env
from server_ext.jobs.local.env import PackageSource
from server_ext.jobs.machines import Machines
from server_ext.jobs.model import parse_job
from server_ext.jobs.plan import PlanSettings, Runtime, Runtimes, plan_job

pytestmark = pytest.mark.unit


PLAIN = PlanSettings(Machines(accelerators={}), Runtimes({"plain": {"3.11": Runtime("python:3.11")}}, "plain"))


def make_plan(training: dict, job_id: str = "job1", settings: PlanSettings | None = None, **kwargs):
    doc = {"jobId": job_id, "trainingInput": {"pythonModule": "trainer.task", "packageUris": ["/p/t.tar.gz"],
                                              "region": "local", **training}}
    return plan_job(parse_job(doc), settings or PlanSettings(Machines(accelerators={})), project="alice",
                    owner="alice", **kwargs)


def custom(workers: int = 0, ps: int = 0, evaluators: int = 0, **extra) -> dict:
    t = {"scaleTier": "CUSTOM", "masterType": "standard", **extra}
    if workers:
        t.update(workerType="standard", workerCount=str(workers))
    if ps:
        t.update(parameterServerType="standard", parameterServerCount=str(ps))
    if evaluators:
        t.update(evaluatorType="standard", evaluatorCount=str(evaluators))
    return t


BASE = {"PATH": "/usr/bin", "PYTHONPATH": "/existing"}


def test_single_tensorflow_master():
    plan = make_plan({"runtimeVersion": "2.11", "args": ["--epochs=2"], "jobDir": "/out"})
    env = local_env.task_env(plan, "master-replica-0", base=BASE, ports={"master-replica-0": 5000},
                             pythonpath=["/jd/site", "/pkgs"], metrics_file="/jd/master-replica-0.metrics")
    assert env == {
        "PATH": "/usr/bin", "PYTHONPATH": "/jd/site:/pkgs:/existing", "PYTHONUNBUFFERED": "1",
        "CLOUD_ML_JOB_ID": "job1", "CLOUD_ML_HP_METRIC_FILE": "/jd/master-replica-0.metrics",
        "TF_CONFIG": json.dumps({"cluster": {"master": ["127.0.0.1:5000"]}, "environment": "cloud",
                                 "job": dict(plan.job.training), "task": {"index": 0, "type": "master"}},
                                sort_keys=True),
    }
    assert local_env.command(plan, "/py") == ["/py", "-m", "trainer.task", "--epochs=2", "--job-dir=/out"]


def test_plain_process_without_framework():
    doc = {"jobId": "j", "trainingInput": {"pythonModule": "m", "packageUris": ["/p"], "runtimeVersion": "plain"}}
    plan = plan_job(parse_job(doc), PLAIN, project="alice", owner="alice")
    assert local_env.port_tasks(plan) == []
    env = local_env.task_env(plan, "master-replica-0", base={"TF_CONFIG": "stale"}, ports={}, pythonpath=["/s"],
                             metrics_file="/m")
    assert env == {"PYTHONUNBUFFERED": "1", "CLOUD_ML_JOB_ID": "j", "CLOUD_ML_HP_METRIC_FILE": "/m", "PYTHONPATH": "/s"}


def test_tf_config_master_workers_ps_evaluator():
    plan = make_plan(custom(workers=2, ps=1, evaluators=1, runtimeVersion="2.11"))
    assert local_env.port_tasks(plan) == ["master-replica-0", "worker-replica-0", "worker-replica-1",
                                          "ps-replica-0"]
    ports = dict(zip(local_env.port_tasks(plan), (7000, 7001, 7002, 7003)))
    cluster = {"master": ["127.0.0.1:7000"], "worker": ["127.0.0.1:7001", "127.0.0.1:7002"], "ps": ["127.0.0.1:7003"]}
    job = json.loads(json.dumps(dict(plan.job.training)))
    expected = {
        "master-replica-0": {"type": "master", "index": 0},
        "worker-replica-1": {"type": "worker", "index": 1},
        "ps-replica-0": {"type": "ps", "index": 0},
        "evaluator-replica-0": {"type": "evaluator", "index": 0},
    }
    for task, role in expected.items():
        assert local_env.tf_config(plan, task, ports) == {"cluster": cluster, "task": role, "job": job,
                                                          "environment": "cloud"}


def test_tf_config_chief_when_asked():
    plan = make_plan(custom(workers=1, runtimeVersion="2.11", useChiefInTfConfig=True))
    ports = {"master-replica-0": 1, "worker-replica-0": 2}
    config = local_env.tf_config(plan, "master-replica-0", ports)
    assert (config["cluster"], config["task"]) == ({"chief": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"]},
                                                   {"type": "chief", "index": 0})


def test_multi_replica_without_framework_gets_tf_config():
    # a runtime without a framework: several replicas still get TF_CONFIG (AI Platform gave it to every job)
    plan = make_plan(custom(workers=1, runtimeVersion="plain"), settings=PLAIN)
    assert plan.framework is None
    assert local_env.port_tasks(plan) == ["master-replica-0", "worker-replica-0"]
    env = local_env.task_env(plan, "worker-replica-0", base={}, ports={"master-replica-0": 1, "worker-replica-0": 2},
                             pythonpath=[], metrics_file="/m")
    assert json.loads(env["TF_CONFIG"])["task"] == {"type": "worker", "index": 0}


def test_pytorch_env():
    plan = make_plan(custom(workers=2, runtimeVersion="pytorch-2.5", pythonVersion="3.11"))
    assert local_env.port_tasks(plan) == ["master-replica-0"]
    ports = {"master-replica-0": 29500}
    env = local_env.task_env(plan, "worker-replica-1", base={"TF_CONFIG": "stale", "RANK": "9"}, ports=ports,
                             pythonpath=[], metrics_file="/m")
    assert env == {"PYTHONUNBUFFERED": "1", "CLOUD_ML_JOB_ID": "job1", "CLOUD_ML_HP_METRIC_FILE": "/m",
                   "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "WORLD_SIZE": "3", "RANK": "2"}
    assert local_env.torch_env(plan, "master-replica-0", ports)["RANK"] == "0"


def test_mounts_and_extra_env():
    creds = (Credential("key", "gcp-credential", "/c/key.json"),
             Credential("aws", "aws-credential", "/c/aws", config_path="/c/aws.config"))
    datasets = (Dataset("mnist", "/d/mnist"),)
    plan = make_plan(custom(runtimeVersion="pytorch-2.5", pythonVersion="3.11"), credentials=creds, datasets=datasets)
    env = local_env.task_env(plan, "master-replica-0", base={}, ports={"master-replica-0": 1}, pythonpath=[],
                             metrics_file="/m", extra={"CLOUD_ML_TRIAL_ID": "3", "CLOUD_ML_HP_METRIC_FILE": "/t",
                                                       "RANK": "5"})
    assert env == {"PYTHONUNBUFFERED": "1", "CLOUD_ML_JOB_ID": "job1", "CLOUD_ML_HP_METRIC_FILE": "/t",
                   "CLOUD_ML_TRIAL_ID": "3", "GOOGLE_APPLICATION_CREDENTIALS": "/c/key.json",
                   "AWS_SHARED_CREDENTIALS_FILE": "/c/aws", "AWS_CONFIG_FILE": "/c/aws.config",
                   "MLPLATFORM_DATASETS": '{"mnist": "/d/mnist"}',
                   "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1", "WORLD_SIZE": "1", "RANK": "0"}


def test_failed_dataset_is_refused():
    plan = make_plan({}, datasets=(Dataset("broken", "/d/b", state="failed", message="no such bucket"),))
    with pytest.raises(UserInputError) as e:
        local_env.mounts_env(plan)
    assert e.value.field == "datasets[0]"


@pytest.mark.parametrize("key", ["masterConfig", "workerConfig"])
def test_container_refused(key):
    training = custom(workers=1, runtimeVersion="2.11")
    training[key] = {"imageUri": "gcr.io/p/img:1"}
    with pytest.raises(UserInputError) as e:
        local_env.refuse_unrunnable(make_plan(training))
    assert e.value.field == f"trainingInput.{key}.imageUri"


@pytest.mark.parametrize("uris, expected", [
    (["gs://b/t.tar.gz", "s3://b/k/t.whl"], [PackageSource("remote", "gs://b/t.tar.gz", "trainingInput.packageUris[0]"),
                                             PackageSource("remote", "s3://b/k/t.whl", "trainingInput.packageUris[1]")]),
    (["file:///tmp/a%20b.tar.gz", "rel/dir"], [PackageSource("local", "/tmp/a b.tar.gz", "trainingInput.packageUris[0]"),
                                               PackageSource("local", "rel/dir", "trainingInput.packageUris[1]")]),
])
def test_package_sources(uris, expected):
    assert local_env.package_sources(uris) == expected


@pytest.mark.parametrize("shipped", ["configmap://j-package/t-1.tar.gz", "gs://stage/j/packages/0ab/t-1.tar.gz"])
def test_the_shipped_package_is_neither_fetched_nor_refused(shipped):
    assert local_env.package_sources([shipped, "gs://b/dep.whl"], shipped) == [
        PackageSource("shipped", shipped, "trainingInput.packageUris[0]"),
        PackageSource("remote", "gs://b/dep.whl", "trainingInput.packageUris[1]")]


@pytest.mark.parametrize("uri", ["http://x/t.tar.gz", "configmap://cm/t.tar.gz"])
def test_package_source_scheme_refused(uri):
    with pytest.raises(UserInputError) as e:
        local_env.package_sources(["/ok", uri])
    assert e.value.field == "trainingInput.packageUris[1]"


@pytest.mark.parametrize("events, outcome", [
    ([], None),
    ([("worker-replica-0", 0)], None),
    ([("worker-replica-0", 0), ("master-replica-0", 0)], ("SUCCEEDED", None)),
    ([("worker-replica-1", 1)], ("FAILED", "The replica worker 1 exited with a non-zero status of 1.")),
    ([("master-replica-0", 137)], ("FAILED", "The replica master 0 exited with a non-zero status of 137.")),
    ([("ps-replica-0", -9)], ("FAILED", "The replica ps 0 was killed by SIGKILL.")),
    ([("master-replica-0", None)], ("FAILED", "The replica master 0 ended while no server was watching it (the "
                                              "server was down); its exit status is unknown.")),
    ([("master-replica-0", 0), ("worker-replica-0", 1)], ("SUCCEEDED", None)),
])
def test_decide(events, outcome):
    assert local_env.decide(events) == outcome
