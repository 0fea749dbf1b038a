"""A job plan as a Kubeflow Trainer v2 TrainJob (`server_ext.jobs.kube.trainjob`): the whole manifest
against golden YAML, the v1 pod carried over field by field, which plans have no TrainJob, the
task ↔ node mapping, states and cancel. The API server's own schema check of the TrainJob and the
run on real Trainer are in tests/kube/test_trainer_v2.py. ``UPDATE_GOLDEN=1`` regenerates."""

import json
import pathlib
from dataclasses import replace

import kubernetes_validate
import pytest

from hub_ext.core.errors import UserInputError
from server_ext.jobs.kube.kubeflow import cancel_patch, job_manifest, pod_selector, pod_template
from server_ext.jobs.kube.status import job_json
from server_ext.jobs.kube.trainjob import (FETCH, MANAGER, RUNTIME, STEP, TASKS_ANNOTATION, TF_CONFIGS_ENV, tf_config,
                                           trainjob_manifest, unsupported)
from server_ext.jobs.model import parse_job
from server_ext.jobs.package_uri import FETCH_ARGV_ENV
from server_ext.jobs.plan import plan_job
from server_ext.runtimes.kube.project_caches import tasks_of
from tests.unit.golden import assert_golden
from tests.unit.test_job_kubeflow import GOLDEN, K8S_VERSION, PLAN_SETTINGS, SETTINGS, make_plan

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("name", ["pytorchjob-mig-alike", "job-python-module", "custom-container"])
def test_trainjobs_match_the_golden_files(name):
    plan = alike(make_plan("pytorchjob-mig")) if name == "pytorchjob-mig-alike" else make_plan(name)
    assert_golden(GOLDEN / f"trainjob-{name}.yaml", trainjob_manifest(plan, SETTINGS), pathlib.Path(__file__).name)


def alike(plan):
    """The PyTorch plan with every worker like its master (a TrainJob's nodes are alike)."""
    master = plan.replicas[0]
    return replace(plan, replicas=(master, replace(plan.replicas[1], image=master.image, cpu=master.cpu,
                                                   memory_gib=master.memory_gib, accelerator=master.accelerator,
                                                   accelerator_count=master.accelerator_count)))


@pytest.mark.parametrize("name", ["pytorchjob-mig-alike", "job-python-module", "job-shipped-package"])
def test_each_node_is_the_v1_pod_of_the_same_job(name):
    plan = alike(make_plan("pytorchjob-mig")) if name == "pytorchjob-mig-alike" else make_plan(name)
    manifest = trainjob_manifest(plan, SETTINGS)
    v1 = pod_template(replace(plan, trainer_v2=True), plan.replicas[0], SETTINGS)
    (main,), pod = v1["spec"]["containers"], v1["spec"]
    trainer, (patch,) = manifest["spec"]["trainer"], manifest["spec"]["runtimePatches"]
    assert manifest["spec"]["runtimeRef"] == {"name": RUNTIME, "apiGroup": "trainer.kubeflow.org",
                                              "kind": "ClusterTrainingRuntime"}
    assert trainer["numNodes"] == plan.total_replicas
    assert (trainer["image"], trainer["command"], trainer["args"], trainer["env"], trainer["resourcesPerNode"]) == (
        main["image"], main["command"], main["args"], main["env"], main["resources"])
    assert patch["manager"] == MANAGER
    (step,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    template = step["template"]["spec"]["template"]
    assert step["name"] == STEP and template["metadata"] == v1["metadata"]
    node_pod = template["spec"]
    for field in ("serviceAccountName", "securityContext", "volumes", "nodeSelector", "tolerations"):
        assert node_pod.get(field) == pod.get(field), field
    assert node_pod["containers"] == [{"name": STEP, "volumeMounts": main["volumeMounts"],
                                       "securityContext": main["securityContext"]}]
    (fetch,) = pod["initContainers"]
    (fetch_patch,) = node_pod["initContainers"]
    words = fetch["command"][3:]  # after python -m server_ext.runtimes.fetch
    assert fetch_patch == {"name": FETCH, "env": [*fetch["env"], {"name": FETCH_ARGV_ENV, "value": json.dumps(words)}],
                           "volumeMounts": fetch["volumeMounts"], "securityContext": fetch["securityContext"]}
    # the labels, annotations and deadline of the v1 object, and each node's task
    v1_object = job_manifest(plan, SETTINGS)
    assert manifest["kind"] == "TrainJob"
    assert manifest["metadata"] == {**v1_object["metadata"], "annotations": {
        **v1_object["metadata"]["annotations"], TASKS_ANNOTATION: ",".join(plan.task_names())}}
    deadline = v1_object["spec"].get("activeDeadlineSeconds") or v1_object["spec"].get("runPolicy", {}).get(
        "activeDeadlineSeconds")
    assert manifest["spec"].get("activeDeadlineSeconds") == deadline
    kubernetes_validate.validate({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "n"},
                                  "template": {**template, "spec": {**node_pod, "containers": [
                                      {**node_pod["containers"][0], "image": trainer["image"]}]}}},
                                 K8S_VERSION, strict=True)


def test_a_custom_container_fetches_nothing():
    manifest = trainjob_manifest(make_plan("custom-container"), SETTINGS)
    node_pod = manifest["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0][
        "template"]["spec"]["template"]["spec"]
    assert "initContainers" not in node_pod  # the runtime's fetch-code gets no words: it fetches nothing
    assert manifest["spec"]["trainer"]["command"] == ["/app/train"]


def test_jobs_a_trainjob_cannot_run_say_why():
    assert unsupported(make_plan("job-python-module")) == ""
    assert unsupported(alike(make_plan("pytorchjob-mig"))) == ""
    assert "differ from its master" in unsupported(make_plan("pytorchjob-mig"))
    assert "differ from its master" in unsupported(make_plan("tfjob-chief-worker-ps"))
    with pytest.raises(ValueError, match="cannot run as a TrainJob"):
        trainjob_manifest(make_plan("tfjob-chief-worker-ps"), SETTINGS)
    custom = make_plan("custom-container")
    several = replace(custom, replicas=(custom.replicas[0], replace(custom.replicas[0], role="worker", count=2)))
    assert "reads its own TF_CONFIG" in unsupported(several)  # the Training Operator sets it per replica


def test_tasks_are_nodes_by_completion_index():
    obj = trainjob_manifest(alike(make_plan("pytorchjob-mig")), SETTINGS)
    assert tasks_of("TrainJob", obj) == ["master-replica-0", "worker-replica-0", "worker-replica-1"]
    sel = "jobset.sigs.k8s.io/jobset-name=x,batch.kubernetes.io/job-completion-index="
    assert pod_selector("TrainJob", "x", "master-replica-0") == sel + "0"
    assert pod_selector("TrainJob", "x", "worker-1") == sel + "2"
    for task in ("ps-replica-0", "master-replica-1", "evaluator-replica-0"):
        with pytest.raises(UserInputError) as e:
            pod_selector("TrainJob", "x", task)
        assert e.value.field == "task"


@pytest.mark.parametrize("status, state", [
    ({}, "QUEUED"),
    ({"jobsStatus": [{"name": "node", "active": 3, "ready": 0}]}, "PREPARING"),
    ({"jobsStatus": [{"name": "node", "active": 3, "ready": 2}]}, "RUNNING"),
    ({"conditions": [{"type": "Suspended", "status": "True"}]}, "QUEUED"),
    ({"conditions": [{"type": "Complete", "status": "True", "lastTransitionTime": "2026-12-07T10:00:00Z"}]},
     "SUCCEEDED"),
    ({"conditions": [{"type": "Failed", "status": "True", "message": "jobset failed"}]}, "FAILED"),
])
def test_trainjob_states(status, state):
    obj = {**trainjob_manifest(make_plan("job-python-module"), SETTINGS), "status": status}
    assert job_json(obj)["state"] == state


def test_cancel_suspends_the_trainjob():
    assert cancel_patch("TrainJob", "2026-12-07T10:00:00Z")["spec"] == {"suspend": True}


def test_a_one_replica_tensorflow_job_gets_ai_platforms_tf_config():
    for chief in (False, True):
        training = {"pythonModule": "trainer.task", "packageUris": ["gs://b/t.tar.gz"], "args": ["--epochs=3"],
                    **({"useChiefInTfConfig": True} if chief else {})}
        plan = plan_job(parse_job({"jobId": "census_1", "trainingInput": training}), PLAN_SETTINGS, project="vision",
                        owner="alice@example.com")
        assert plan.framework == "tensorflow" and unsupported(plan) == ""  # AI Platform's default runtime
        env = {e["name"]: e["value"] for e in trainjob_manifest(plan, SETTINGS)["spec"]["trainer"]["env"]}
        primary = "chief" if chief else "master"
        assert json.loads(env["TF_CONFIG"]) == {"cluster": {primary: ["census-1-node-0-0.census-1:2222"]},
                                                "task": {"type": primary, "index": 0}, "environment": "cloud",
                                                "job": plan.job.training}


def test_a_tensorflow_job_of_several_alike_nodes_gives_each_its_tf_config():
    training = {"pythonModule": "trainer.task", "packageUris": ["gs://b/t.tar.gz"], "scaleTier": "CUSTOM",
                "masterType": "n1-standard-4", "workerType": "n1-standard-4", "workerCount": 2,
                "parameterServerType": "n1-standard-4", "parameterServerCount": 1,
                "evaluatorType": "n1-standard-4", "evaluatorCount": 1}
    plan = plan_job(parse_job({"jobId": "wide", "trainingInput": training}), PLAN_SETTINGS, project="vision",
                    owner="alice@example.com")
    assert unsupported(plan) == ""
    manifest = trainjob_manifest(plan, SETTINGS)
    assert manifest["metadata"]["annotations"][TASKS_ANNOTATION] == \
        "master-replica-0,worker-replica-0,worker-replica-1,ps-replica-0,evaluator-replica-0"
    env = {e["name"]: e["value"] for e in manifest["spec"]["trainer"]["env"]}
    shared = json.loads(env[TF_CONFIGS_ENV])
    node = lambda k: f"wide-node-0-{k}.wide:2222"  # noqa: E731
    assert shared["cluster"] == {"master": [node(0)], "worker": [node(1), node(2)], "ps": [node(3)]}
    assert shared["tasks"] == [{"type": "master", "index": 0}, {"type": "worker", "index": 0},
                               {"type": "worker", "index": 1}, {"type": "ps", "index": 0},
                               {"type": "evaluator", "index": 0}]
    assert [tf_config(plan, k)["task"] for k in range(5)] == shared["tasks"]
    assert "TF_CONFIG" not in env  # each node's own, made by the launcher from its completion index
    assert pod_selector("TrainJob", "wide", "ps-replica-0", manifest["metadata"]["annotations"][
        TASKS_ANNOTATION].split(",")).endswith("batch.kubernetes.io/job-completion-index=3")
