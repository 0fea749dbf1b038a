"""A `JobPlan` as Kubernetes objects: Kubeflow Training Operator v1 ``PyTorchJob``/``TFJob``, or a
``batch/v1`` Job for one plain replica. Pure: plain dicts out, no I/O, the plan is not changed.

`job_manifest(plan, settings)` guarantees:

- the kind is `plan.kind`; ``metadata.name`` is `plan.name` (a DNS label), the namespace is the
  project. Replica types are the operator's (PyTorch: Master/Worker; TensorFlow: Chief/Worker/PS/
  Evaluator) and the training container has the name the operator looks for (``pytorch``,
  ``tensorflow``; ``trainer`` in a batch Job), with the operator's port declared;
- the object is self-describing: annotations hold the exact jobId, the exact owner and
  ``mlplatform.io/job-spec``, the compact JSON of the job's ``jobId``/``labels``/``trainingInput``,
  so `server_ext.jobs.kube.status.job_json` rebuilds the ``ml.v1`` Job from the object alone. The
  object and every pod template carry the managed-by, job and (slugged) owner labels;
- nothing is retried and nothing restarts (``restartPolicy: Never``, ``backoffLimit: 0``), as on
  AI Platform; ``trainingInput.scheduling.maxRunningTime`` becomes ``activeDeadlineSeconds``;
  pods that ended are kept when the job ends, so their logs stay readable (``cleanPodPolicy:
  Running`` removes only pods still running then, e.g. parameter servers, which never exit);
- each pod asks for its replica's CPU and memory (requests = limits) and its accelerators
  (`Accelerator.limits`, requests equal), with the accelerator's node selector and tolerations;
  it runs as `KubeSettings.service_account`, with a memory-backed ``/dev/shm``;
- credentials and datasets are mounted read-only (`hub_ext.manifests.mounts.volumes`); the
  environment holds only their *paths* (``GOOGLE_APPLICATION_CREDENTIALS``,
  ``AWS_SHARED_CREDENTIALS_FILE``, ``AWS_CONFIG_FILE``, ``MLPLATFORM_DATASETS``), never a secret;
- a ``pythonModule`` job fetches ``packageUris`` in an init container (``fetch-code``:
  ``python -m server_ext.runtimes.fetch --job <jobId> --dest <code_dir> <uri>…`` in `KubeSettings.fetcher_image`,
  with the credential mounts) into an emptyDir; the training container installs them with its
  own Python (``pip install --no-deps --no-index --no-build-isolation --target <code_dir>/site``:
  no package index is needed, so an sdist builds with the image's own setuptools and wheel) and
  execs ``python -m <module> <args…>``. The shell script is a constant: the module and arguments reach
  it as ``$0``/``"$@"`` and are never interpolated into it;
- a package shipped in a ConfigMap (`plan.ShippedPackage`, ``--package-path``) is mounted, read-only
  and not optional (the pod waits for it), into the ``fetch-code`` init container only: the volume
  ``package`` projects its one key to ``<name>/<file>`` under `KubeSettings.packages_dir`, which
  ``MLPLATFORM_PACKAGES_DIR`` names, so `server_ext.runtimes.fetch` finds ``configmap://<name>/<file>``
  at ``$MLPLATFORM_PACKAGES_DIR/<name>/<file>``; its URI is already the first of ``packageUris``.
  The training containers never see it;
- a custom container runs its own ``containerCommand``/``containerArgs``; without
  ``containerArgs`` the job's ``args`` are the container's args (AI Platform passed them to the
  ENTRYPOINT). Every word from the job reaches the process as written: ``$`` is escaped against
  Kubernetes' ``$(VAR)`` expansion (`literal`).

`pod_selector(kind, name, task)` is the label selector of one task's pod (the operator's
``training.kubeflow.org/*`` labels; ``batch.kubernetes.io/job-name``, Kubernetes ≥ 1.27; a
TrainJob's JobSet name and completion index, `server_ext.jobs.kube.trainjob`).
`cancel_patch(kind, when)` is a merge patch that suspends the job (its pods are deleted) and
records ``mlplatform.io/cancel-requested``. `resource_path` gives the REST path of a kind.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from typing import Any

from hub_ext.core.credentials import MANAGED_BY
from hub_ext.core.errors import UserInputError
from hub_ext.core.mounts import CREDENTIAL_ENV, Credential, Dataset
from hub_ext.core.slugs import safe_slug
from hub_ext.manifests.mounts import MountSettings, volumes
from hub_ext.manifests.tenancy import SERVICE_ACCOUNT
from server_ext.jobs.model import JOB_ID_ANNOTATION
from server_ext.jobs.package_delivery import digest_env
from server_ext.jobs.package_uri import PACKAGES_DIR_ENV
from server_ext.jobs.plan import JobPlan, Replica, task_name

OWNER_ANNOTATION = "mlplatform.io/owner"
SPEC_ANNOTATION = "mlplatform.io/job-spec"
CANCEL_ANNOTATION = "mlplatform.io/cancel-requested"
JOB_LABEL = "mlplatform.io/job"
OWNER_LABEL = "mlplatform.io/owner"
DEFAULT_FETCHER_IMAGE = "ghcr.io/jupyterhub-mlplatform/trainer-tools:0.1.0"

# kind → (group, version, plural)
API = {"PyTorchJob": ("kubeflow.org", "v1", "pytorchjobs"), "TFJob": ("kubeflow.org", "v1", "tfjobs"),
       "Job": ("batch", "v1", "jobs"), "TrainJob": ("trainer.kubeflow.org", "v1alpha1", "trainjobs")}
_REPLICA_SPECS = {"PyTorchJob": "pytorchReplicaSpecs", "TFJob": "tfReplicaSpecs"}
_REPLICA_TYPES = {
    "PyTorchJob": {"master": "Master", "worker": "Worker"},
    "TFJob": {"master": "Chief", "worker": "Worker", "ps": "PS", "evaluator": "Evaluator"},
}
CONTAINER = {"PyTorchJob": "pytorch", "TFJob": "tensorflow", "Job": "trainer", "TrainJob": "node"}
_PORTS = {"PyTorchJob": [{"name": "pytorchjob-port", "containerPort": 23456, "protocol": "TCP"}],
          "TFJob": [{"name": "tfjob-port", "containerPort": 2222, "protocol": "TCP"}], "Job": [], "TrainJob": []}
TRAINJOB_INDEX = ("jobset.sigs.k8s.io/jobset-name", "batch.kubernetes.io/job-completion-index")
FETCH_RESOURCES = {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}}
_DURATION = re.compile(r"(?P<seconds>\d+)(?:\.(?P<fraction>\d{1,9}))?s")

# Run a pythonModule: on Trainer v2 set what torchrun sets for its process (from the torch policy's
# PET_* variables, one process per node) or the node's TF_CONFIG (from MLPLATFORM_TF_CONFIGS and the
# node's JOB_COMPLETION_INDEX: `trainjob`); install the fetched packages with the runtime's own Python
# (compiled wheels must match it), then exec the module. $0 is the module and "$@" its arguments: nothing from the
# job is ever part of this text. It holds no "$(" and no "$$", so Kubernetes' $(VAR) expansion of
# command lines leaves it as it is.
RUN_MODULE = """\
set -eu
code="$MLPLATFORM_CODE_DIR"
py=python3
command -v python3 >/dev/null || py=python
if [ -n "${PET_NNODES:-}" ] && [ -z "${WORLD_SIZE:-}" ]; then
  export WORLD_SIZE="$PET_NNODES" RANK="$PET_NODE_RANK" LOCAL_RANK=0 MASTER_ADDR="$PET_MASTER_ADDR" \
MASTER_PORT="$PET_MASTER_PORT"
fi
if [ -n "${MLPLATFORM_TF_CONFIGS:-}" ] && [ -z "${TF_CONFIG:-}" ]; then
  TF_CONFIG=`"$py" -c 'import json, os
c = json.loads(os.environ["MLPLATFORM_TF_CONFIGS"])
c["task"] = c.pop("tasks")[int(os.environ["JOB_COMPLETION_INDEX"])]
print(json.dumps(c, sort_keys=True))'`
  export TF_CONFIG
fi
find "$code" -mindepth 1 -maxdepth 1 -type f -exec "$py" -m pip install --quiet --upgrade --no-deps --no-index \
--no-build-isolation --no-cache-dir --disable-pip-version-check --target "$code/site" {} +
export PYTHONPATH="$code/site${PYTHONPATH:+:$PYTHONPATH}"
exec "$py" -m "$0" "$@"
"""


@dataclass(frozen=True)
class KubeSettings:
    mounts: MountSettings
    service_account: str = SERVICE_ACCOUNT
    fetcher_image: str = DEFAULT_FETCHER_IMAGE  # an image holding this package (server_ext.runtimes.fetch)
    code_dir: str = "/mlplatform/code"
    packages_dir: str = "/mlplatform/packages"  # where a package ConfigMap is mounted (fetch-code only)
    fs_group: int | None = 100  # the group that may read mounted credentials (mode 0440)
    run_as: tuple[int, int] | None = None  # (uid, gid) every container runs as (non-root); None: the image's user
    training_api: str = "auto"  # v1 | v2 | auto: Training Operator v1 or Trainer v2 (`runtimes.kube.backend`)


def api_version(kind: str) -> str:
    group, version, _ = API[kind]
    return f"{group}/{version}"


def owner_reference(kind: str, obj: dict) -> dict:
    """The ownerReference to the created job object `obj` of `kind` (what goes with it: its package
    ConfigMap, its dataset copies)."""
    meta = obj["metadata"]
    return {"apiVersion": obj.get("apiVersion") or api_version(kind), "kind": obj.get("kind") or kind,
            "name": meta["name"], "uid": meta["uid"]}


def resource_path(kind: str, namespace: str, name: str | None = None) -> str:
    """``/apis/kubeflow.org/v1/namespaces/<ns>/pytorchjobs[/<name>]``, ``/apis/batch/v1/…/jobs``."""
    group, version, plural = API[kind]
    path = f"/apis/{group}/{version}/namespaces/{namespace}/{plural}"
    return f"{path}/{name}" if name else path


def replica_type(kind: str, role: str) -> str:
    """The operator's replica type of a plan role (``TFJob``, ``master`` → ``Chief``)."""
    try:
        return _REPLICA_TYPES[kind][role]
    except KeyError:
        raise ValueError(f"a {kind} has no replica type for role {role!r}") from None


def pod_selector(kind: str, name: str, task: str, tasks: list[str] | None = None) -> str:
    """The label selector of the pod of `task` (``worker-replica-1``, ``ps-0``…) of job `name`; a
    TrainJob's node is the task's place in `tasks` (the job's, in node order) where given."""
    canonical = task_name(task)
    role, _, index = canonical.rpartition("-replica-")
    if kind == "Job":
        if canonical != "master-replica-0":
            raise UserInputError("task", f"the job has no task {task!r} (it has master-replica-0)")
        return f"batch.kubernetes.io/job-name={name}"
    if kind == "TrainJob" and tasks is not None:
        if canonical not in tasks:
            raise UserInputError("task", f"the job has no task {task!r} (it has {', '.join(tasks)})")
        return f"{TRAINJOB_INDEX[0]}={name},{TRAINJOB_INDEX[1]}={tasks.index(canonical)}"
    if kind == "TrainJob":  # node 0 is the master, node k ≥ 1 worker k-1 (`trainjob`)
        if canonical not in ("master-replica-0", f"worker-replica-{index}") or not index.isdigit():
            raise UserInputError("task", f"the job has no task {task!r} (its tasks are master-replica-0 and "
                                         "worker-replica-<k>)")
        return f"{TRAINJOB_INDEX[0]}={name},{TRAINJOB_INDEX[1]}={0 if role == 'master' else int(index) + 1}"
    if role not in _REPLICA_TYPES[kind]:
        raise UserInputError("task", f"a {kind} has no {role} tasks")
    return (f"training.kubeflow.org/job-name={name},"
            f"training.kubeflow.org/replica-type={replica_type(kind, role).lower()},"
            f"training.kubeflow.org/replica-index={index}")


def cancel_patch(kind: str, when: str) -> dict:
    """A JSON merge patch: suspend the job (the controller deletes its pods) and record when."""
    spec = {"suspend": True} if kind in ("Job", "TrainJob") else {"runPolicy": {"suspend": True}}
    return {"metadata": {"annotations": {CANCEL_ANNOTATION: when}}, "spec": spec}


def labels(plan: JobPlan) -> dict[str, str]:
    return {**MANAGED_BY, JOB_LABEL: plan.name, OWNER_LABEL: safe_slug(plan.owner, max_length=63)}


def spec_annotation(doc: dict) -> str:
    return json.dumps({k: doc[k] for k in ("jobId", "labels", "trainingInput") if k in doc},
                      sort_keys=True, separators=(",", ":"))


def cpu_quantity(cpu: float) -> str:
    return str(int(cpu)) if float(cpu).is_integer() else f"{round(cpu * 1000)}m"


def memory_quantity(gib: float) -> str:
    return f"{int(gib)}Gi" if float(gib).is_integer() else f"{round(gib * 1024)}Mi"


def deadline_seconds(duration: str | None) -> int | None:
    """A Google duration (``7200s``, ``1.5s``) as whole seconds, rounded up."""
    if duration is None:
        return None
    m = _DURATION.fullmatch(duration.strip())
    nanos = int(m["seconds"]) * 10**9 + int((m["fraction"] or "").ljust(9, "0")) if m else 0
    if nanos <= 0:
        raise UserInputError("trainingInput.scheduling.maxRunningTime",
                             "must be a positive duration in seconds such as 7200s")
    return -(-nanos // 10**9)


def mount_env(credentials: tuple[Credential, ...], datasets: tuple[Dataset, ...]) -> list[dict]:
    """The variables that point at mounted files: paths only, never their content."""
    env: dict[str, str] = {}
    for c in credentials:
        env[CREDENTIAL_ENV[c.type]] = c.path
        if c.config_path:
            env["AWS_CONFIG_FILE"] = c.config_path
    if datasets:
        env["MLPLATFORM_DATASETS"] = json.dumps({d.name: d.path for d in datasets}, sort_keys=True)
    return [{"name": k, "value": v} for k, v in sorted(env.items())]


def literal(words) -> list[str]:
    """Job-given command words as Kubernetes must receive them to pass them on unchanged: it expands
    ``$(VAR)`` in container commands and args and reads ``$$`` as ``$``."""
    return [w.replace("$", "$$") for w in words]


def _resources(replica: Replica) -> dict:
    amounts = {"cpu": cpu_quantity(replica.cpu), "memory": memory_quantity(replica.memory_gib)}
    if replica.accelerator is not None and replica.accelerator_count:
        amounts.update(replica.accelerator.limits(replica.accelerator_count))
    return {"requests": dict(amounts), "limits": dict(amounts)}


def _runs_module(plan: JobPlan, replica: Replica) -> bool:
    return bool(plan.python_module) and not (replica.command or replica.args)


# Pod Security "restricted" as far as any image allows (running as non-root is the image's choice)
CONTAINER_SECURITY = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
POD_SECURITY = {"seccompProfile": {"type": "RuntimeDefault"}}


def _main_container(plan: JobPlan, replica: Replica, settings: KubeSettings, mounts: list[dict]) -> dict:
    job_env = [{"name": "CLOUD_ML_JOB_ID", "value": plan.job.job_id},
               {"name": "PYTHONUNBUFFERED", "value": "1"}]
    c: dict[str, Any] = {"name": CONTAINER[plan.kind], "image": replica.image}
    if _runs_module(plan, replica):
        c["command"] = ["sh", "-c", RUN_MODULE]
        c["args"] = literal([plan.python_module, *plan.args])
        job_env.append({"name": "MLPLATFORM_CODE_DIR", "value": settings.code_dir})
        mounts = [*mounts, {"name": "code", "mountPath": settings.code_dir}]
    else:
        if replica.command:
            c["command"] = literal(replica.command)
        args = replica.args or plan.args
        if args:
            c["args"] = literal(args)
    c["env"] = job_env + mount_env(plan.credentials, plan.datasets)
    if _PORTS[plan.kind]:
        c["ports"] = [dict(p) for p in _PORTS[plan.kind]]
    c["resources"] = _resources(replica)
    c["volumeMounts"] = [*mounts, {"name": "dshm", "mountPath": "/dev/shm"}]
    c["securityContext"] = copy.deepcopy(CONTAINER_SECURITY)
    return c


def _package_volume(plan: JobPlan) -> dict | None:
    """The volume of the package ConfigMap: its one file at ``<name>/<file>``."""
    pkg = plan.package
    if pkg is None or pkg.configmap is None:
        return None
    item = {"key": pkg.filename, "path": f"{pkg.configmap}/{pkg.filename}"}
    return {"name": "package", "configMap": {"name": pkg.configmap, "optional": False, "items": [item]}}


def _fetch_container(plan: JobPlan, settings: KubeSettings, credential_mounts: list[dict]) -> dict:
    env = [{"name": "CLOUD_ML_JOB_ID", "value": plan.job.job_id}, *mount_env(plan.credentials, ())]
    mounts = [*credential_mounts, {"name": "code", "mountPath": settings.code_dir}]
    if plan.package is not None:  # the fetcher installs only the bytes that were submitted
        env.append(digest_env(plan.package.uri, plan.package.sha256))
    if _package_volume(plan) is not None:
        env.append({"name": PACKAGES_DIR_ENV, "value": settings.packages_dir})
        mounts.append({"name": "package", "mountPath": settings.packages_dir, "readOnly": True})
    return {
        "name": "fetch-code", "image": settings.fetcher_image, "terminationMessagePolicy": "FallbackToLogsOnError",
        "command": ["python", "-m", "server_ext.runtimes.fetch", "--job", plan.job.job_id, "--dest", settings.code_dir,
                    *plan.package_uris],
        "env": env,
        "resources": {k: dict(v) for k, v in FETCH_RESOURCES.items()},
        "volumeMounts": mounts,
        "securityContext": copy.deepcopy(CONTAINER_SECURITY),
    }


def pod_template(plan: JobPlan, replica: Replica, settings: KubeSettings) -> dict:
    """The pod template of one replica role (as the operator or the Job controller will run it)."""
    vols, mounts = volumes(plan.credentials, plan.datasets, settings.mounts, run_as_root=settings.fs_group is None)
    vols = [*vols, {"name": "dshm", "emptyDir": {"medium": "Memory"}}]
    spec: dict[str, Any] = {"serviceAccountName": settings.service_account, "restartPolicy": "Never"}
    spec["securityContext"] = copy.deepcopy(POD_SECURITY)
    if settings.fs_group is not None:
        spec["securityContext"]["fsGroup"] = settings.fs_group
    if settings.run_as is not None:
        uid, gid = settings.run_as
        spec["securityContext"].update(runAsUser=uid, runAsGroup=gid, runAsNonRoot=True)
    if _runs_module(plan, replica):
        if plan.package_uris:  # a custom image may bring the module itself
            _, credential_mounts = volumes(plan.credentials, (), settings.mounts)
            spec["initContainers"] = [_fetch_container(plan, settings, credential_mounts)]
            package = _package_volume(plan)
            if package is not None:
                vols.append(package)
        vols.append({"name": "code", "emptyDir": {}})
    spec["containers"] = [_main_container(plan, replica, settings, mounts)]
    spec["volumes"] = vols
    acc = replica.accelerator if replica.accelerator_count else None
    if acc is not None and acc.node_selector:
        spec["nodeSelector"] = acc.node_selector_dict()
    if acc is not None and acc.tolerations:
        spec["tolerations"] = acc.tolerations_list()
    return {"metadata": {"labels": labels(plan)}, "spec": spec}


def job_manifest(plan: JobPlan, settings: KubeSettings) -> dict:
    """The one object that runs `plan` (see the module docstring for what it guarantees)."""
    kind = plan.kind
    training = plan.job.training
    deadline = deadline_seconds((training.get("scheduling") or {}).get("maxRunningTime"))
    metadata = {
        "name": plan.name, "namespace": plan.project, "labels": labels(plan),
        "annotations": {JOB_ID_ANNOTATION: plan.job.job_id, OWNER_ANNOTATION: plan.owner,
                        SPEC_ANNOTATION: spec_annotation(dict(plan.job.doc))},
    }
    if kind == "Job":
        spec: dict[str, Any] = {"backoffLimit": 0}
        if deadline is not None:
            spec["activeDeadlineSeconds"] = deadline
        spec["template"] = pod_template(plan, plan.replicas[0], settings)
    else:
        run_policy: dict[str, Any] = {"backoffLimit": 0, "cleanPodPolicy": "Running"}
        if deadline is not None:
            run_policy["activeDeadlineSeconds"] = deadline
        spec = {_REPLICA_SPECS[kind]: {
            replica_type(kind, r.role): {"replicas": r.count, "restartPolicy": "Never",
                                         "template": pod_template(plan, r, settings)}
            for r in plan.replicas}, "runPolicy": run_policy}
    return {"apiVersion": api_version(kind), "kind": kind, "metadata": metadata, "spec": spec}
