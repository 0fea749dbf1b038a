"""A `JobPlan` as a Kubeflow Trainer v2 ``TrainJob`` (``trainer.kubeflow.org/v1alpha1``) on the
platform's ClusterTrainingRuntime (`RUNTIME`, shipped in ``helm-values/trainer-runtimes.yaml``).
Pure: plain dicts out, no I/O, the plan is not changed.

`trainjob_manifest(plan, settings)` guarantees, beside what `kubeflow.job_manifest` guarantees of
the v1 object (the same annotations, labels, mounts, environment, security and package delivery:
every pod is `kubeflow.pod_template` of the plan's replica, carried over field by field):

- the TrainJob runs on `RUNTIME`: Trainer makes a JobSet whose replicated job ``node`` is one
  indexed Job of ``trainer.numNodes`` pods, node k the plan's k-th task (`TASKS_ANNOTATION`: the
  master, its workers, parameter servers, evaluators); the job ends with node 0 (the runtime's
  success policy); its torch policy gives each pod ``PET_NNODES``,
  ``PET_NODE_RANK``, ``PET_MASTER_ADDR`` (node 0's stable name through the JobSet's headless
  Service) and ``PET_MASTER_PORT``, which `kubeflow.RUN_MODULE` turns into ``WORLD_SIZE``,
  ``RANK``, ``MASTER_ADDR``, ``MASTER_PORT`` as torchrun does for one process per node;
- the container ``node`` gets the replica's image, command, args, environment and resources
  (``trainer``); everything else of the pod template (ServiceAccount, pod security, volumes, node
  selector, tolerations, labels, the containers' mounts and security) is one runtime patch owned
  by `MANAGER`. The runtime's fixed ``fetch-code`` init container gets its words in
  ``MLPLATFORM_FETCH_ARGV`` (`server_ext.runtimes.fetch`), and fetches nothing without them;
- a TensorFlow job (AI Platform's default runtime) gets the ``TF_CONFIG`` AI Platform gave it
  (`tf_config`: ``master``, or ``chief`` with ``useChiefInTfConfig``, ``worker``, ``ps`` at the
  nodes' stable names, the job's ``trainingInput``, ``environment: cloud``): one replica as is,
  several as `TF_CONFIGS_ENV`, which the launcher turns into each node's own (`_tf_env`);
- ``trainingInput.scheduling.maxRunningTime`` becomes ``activeDeadlineSeconds``; nothing restarts
  (the runtime: ``restartPolicy: Never``, no JobSet restarts, ``backoffLimit: 0``).

`on_trainer_v2(plan, training_api, served)` decides whether a plan runs as a TrainJob, and
`why_not_v2` says why not (for a cluster without the Training Operator, where that is an error);
`unsupported(plan)` says why a plan cannot run as a TrainJob (its replicas differ, or it is a
custom container of several TensorFlow replicas, which reads its own ``TF_CONFIG``), or "".
`kubeflow.pod_selector` selects one task's pod (the JobSet's name, the node's completion index) and
`kubeflow.cancel_patch` suspends the TrainJob (Trainer suspends its JobSet, whose pods go).
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from server_ext.jobs.kube.kubeflow import (
    OWNER_ANNOTATION,
    SPEC_ANNOTATION,
    KubeSettings,
    deadline_seconds,
    labels,
    pod_template,
    spec_annotation,
)
from server_ext.jobs.model import JOB_ID_ANNOTATION
from server_ext.jobs.package_uri import FETCH_ARGV_ENV
from server_ext.jobs.plan import JobPlan

KIND = "TrainJob"
API_VERSION = "trainer.kubeflow.org/v1alpha1"
RUNTIME = "mlplatform-torch"  # helm-values/trainer-runtimes.yaml
STEP = "node"  # the runtime's replicated job and its trainer container
FETCH = "fetch-code"
MANAGER = "mlplatform.io/planner"
_FETCH_PREFIX = ["python", "-m", "server_ext.runtimes.fetch"]
TF_PORT = 2222
TF_CONFIGS_ENV = "MLPLATFORM_TF_CONFIGS"
TASKS_ANNOTATION = "mlplatform.io/tasks"  # the task of each node, in node order


def unsupported(plan: JobPlan) -> str:
    """Why `plan` has no TrainJob of ours, or "" when it has one."""
    if _tensorflow(plan) and plan.total_replicas > 1 and any(r.command for r in plan.replicas):
        return ("a custom container of several TensorFlow replicas reads its own TF_CONFIG, which the Training "
                "Operator (TFJob) sets per replica")
    first = plan.replicas[0]
    for r in plan.replicas[1:]:
        if (r.image, r.cpu, r.memory_gib, r.accelerator, r.accelerator_count, r.command, r.args) != (
                first.image, first.cpu, first.memory_gib, first.accelerator, first.accelerator_count, first.command,
                first.args):
            return (f"its {r.role} replicas differ from its master (image, machine or accelerator): a TrainJob's "
                    "nodes are alike")
    return ""


def on_trainer_v2(plan: JobPlan, training_api: str, served: bool) -> bool:
    """Whether `plan` runs as a TrainJob: ``training_api`` ``v2``, or ``auto`` where the cluster
    serves Trainer v2 (`served`), and a TrainJob of ours can run it."""
    return (training_api == "v2" or (training_api == "auto" and served)) and not unsupported(plan)


def why_not_v2(plan: JobPlan, training_api: str, served: bool) -> str:
    """Why `plan` does not run as a TrainJob (`on_trainer_v2` false), in words for its submitter."""
    if training_api == "v1":
        return "the platform's job tables say training_api: v1"
    if training_api == "auto" and not served:
        return "the cluster serves no Kubeflow Trainer v2 (trainer.kubeflow.org/v1alpha1) either"
    return unsupported(plan)


def _tensorflow(plan: JobPlan) -> bool:
    """Whether the plan's v1 object is a TFJob (TensorFlow, or several replicas without a framework)."""
    return replace(plan, trainer_v2=False).kind == "TFJob"


def tf_config(plan: JobPlan, node: int = 0) -> dict:
    """``TF_CONFIG`` of node `node` of a TensorFlow job, as AI Platform gave it: the cluster (``master``,
    or ``chief`` with ``useChiefInTfConfig``; ``worker``; ``ps``; evaluators are in none) at the nodes'
    stable names (the JobSet's headless Service; node k is the plan's k-th task), the task, the job's
    ``trainingInput``, ``environment: cloud``."""
    primary = "chief" if plan.job.training.get("useChiefInTfConfig") else "master"
    tasks = [(primary if r.role == "master" else r.role, i) for r in plan.replicas for i in range(r.count)]
    cluster: dict[str, list[str]] = {}
    for k, (kind, _) in enumerate(tasks):
        if kind != "evaluator":
            cluster.setdefault(kind, []).append(f"{plan.name}-{STEP}-0-{k}.{plan.name}:{TF_PORT}")
    kind, index = tasks[node]
    return {"cluster": cluster, "task": {"type": kind, "index": index},
            "job": json.loads(json.dumps(dict(plan.job.training))), "environment": "cloud"}


def _tf_env(plan: JobPlan) -> dict:
    """One replica: its ``TF_CONFIG``. Several: ``MLPLATFORM_TF_CONFIGS``, node 0's ``TF_CONFIG``
    without its task and with ``tasks``, every node's task in node order: the launcher
    (`kubeflow.RUN_MODULE`) makes each node's ``TF_CONFIG`` of it by ``JOB_COMPLETION_INDEX`` (each
    pod's index in the JobSet's indexed Job; the job's ``trainingInput`` travels once)."""
    if plan.total_replicas == 1:
        return {"name": "TF_CONFIG", "value": json.dumps(tf_config(plan), sort_keys=True)}
    shared = tf_config(plan)
    del shared["task"]
    shared["tasks"] = [tf_config(plan, k)["task"] for k in range(plan.total_replicas)]
    return {"name": TF_CONFIGS_ENV, "value": json.dumps(shared, sort_keys=True)}


def _container_patch(container: dict) -> dict:
    return {k: container[k] for k in ("name", "env", "volumeMounts", "securityContext") if container.get(k)}


def _fetch_patch(init: dict) -> dict:
    """The fetch-code init container as a patch: its words (after the module) into its env."""
    words = init["command"][len(_FETCH_PREFIX):]
    env = [*init.get("env", []), {"name": FETCH_ARGV_ENV, "value": json.dumps(words)}]
    return _container_patch({**init, "name": FETCH, "env": env})


def trainjob_manifest(plan: JobPlan, settings: KubeSettings) -> dict:
    """The TrainJob that runs `plan` (see the module docstring)."""
    why = unsupported(plan)
    if why:
        raise ValueError(f"job {plan.job.job_id} cannot run as a TrainJob: {why}")
    plan = replace(plan, trainer_v2=True)
    template = pod_template(plan, plan.replicas[0], settings)
    pod = template["spec"]
    (main,) = pod["containers"]
    env = list(main["env"])
    if _tensorflow(plan):
        env.append(_tf_env(plan))
    trainer: dict[str, Any] = {"image": main["image"], "numNodes": plan.total_replicas,
                               "resourcesPerNode": main["resources"], "env": env}
    trainer.update({k: main[k] for k in ("command", "args") if main.get(k)})
    pod_patch: dict[str, Any] = {k: pod[k] for k in ("serviceAccountName", "securityContext", "volumes",
                                                     "nodeSelector", "tolerations") if pod.get(k)}
    pod_patch["containers"] = [_container_patch({**main, "name": STEP, "env": None})]
    if pod.get("initContainers"):
        pod_patch["initContainers"] = [_fetch_patch(c) for c in pod["initContainers"]]
    patch = {"manager": MANAGER, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
        {"name": STEP, "template": {"spec": {"template": {"metadata": {"labels": template["metadata"]["labels"]},
                                                          "spec": pod_patch}}}}]}}}}
    spec: dict[str, Any] = {"runtimeRef": {"name": RUNTIME, "apiGroup": "trainer.kubeflow.org",
                                           "kind": "ClusterTrainingRuntime"},
                            "trainer": trainer, "runtimePatches": [patch]}
    deadline = deadline_seconds((plan.job.training.get("scheduling") or {}).get("maxRunningTime"))
    if deadline is not None:
        spec["activeDeadlineSeconds"] = deadline
    metadata = {"name": plan.name, "namespace": plan.project, "labels": labels(plan),
                "annotations": {JOB_ID_ANNOTATION: plan.job.job_id, OWNER_ANNOTATION: plan.owner,
                                SPEC_ANNOTATION: spec_annotation(dict(plan.job.doc)),
                                TASKS_ANNOTATION: ",".join(plan.task_names())}}
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata, "spec": spec}
