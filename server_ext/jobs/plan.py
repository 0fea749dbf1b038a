"""What a training job will run: an `ml.v1` `Job` turned into a `JobPlan` both backends apply. Pure.

`plan_job(job, settings, project=…, owner=…, mounts=…)` decides, once, for every replica role:

- its shape: the machine type (``masterType``…; or the scale tier's, `machines.TIERS`) → CPU,
  memory and accelerators (`Machines`); an ``acceleratorConfig`` overrides the machine's GPUs;
  every accelerator is resolved against the platform catalogue (MIG names included);
- its image: the replica's ``imageUri`` (a custom container), else the trainer image of
  ``runtimeVersion``/``pythonVersion`` from `Runtimes` (an unknown pair is refused, naming the
  field and the versions offered);
- the framework: a custom container or a runtime says ``tensorflow``, ``pytorch`` or none. One
  replica and no framework → a plain process (``batch/v1`` Job on Kubernetes); PyTorch →
  Master/Worker (no parameter servers: refused); TensorFlow, or several replicas without a
  framework (AI Platform gave every custom container ``TF_CONFIG``) → Chief/Worker/PS/Evaluator;
- the code: ``pythonModule`` + ``args`` with ``packageUris`` (``gs://``, ``s3://`` or a package
  shipped with the job), or the container's own entry point (``containerCommand``/``containerArgs``);
  ``jobDir`` is passed as ``--job-dir`` as AI Platform did;
- the mounts: the credentials and datasets the job asked for (already checked against the
  project by `hub_ext.core.mounts.select`).

The runtime and every replica's machine type and accelerator are checked each on its own, so all
their mistakes are told at once (`hub_ext.core.errors.UserInputErrors`); the project's limits, which
need every replica's shape, only once those are valid.

`with_package(plan, sdist, sha256, size, staging_bucket=…)` attaches a package built from
``--package-path`` (`package.build_sdist`, by the caller: `plan_job` stays pure) as a
`ShippedPackage`: how it travels (`package_delivery.choose_delivery`: a ConfigMap owned by the job
when it fits, else the staging bucket, else `UserInputError` naming ``package.path``) and its URI
(``configmap://<job>-package/<file>`` or ``<bucket>/<jobId>/packages/<sha256>/<file>``), which
becomes the first of ``packageUris`` — in the plan and in the job document, so the job describes
itself with it, as AI Platform showed the staged package. Only a ``pythonModule`` job can ship one.

Role names are AI Platform's (``master``, ``worker``, ``ps``, ``evaluator``); task
names are ``<role>-replica-<i>`` as AI Platform's logs had them, and `task_name` also reads the
short spellings (``worker-1``, ``ps-0``, ``chief-0``).
"""

from __future__ import annotations

import dataclasses
import pathlib
import re
from dataclasses import dataclass, field
from typing import Literal, Mapping

from hub_ext.core.catalog import Accelerator
from hub_ext.core.errors import UserInputError, collect
from hub_ext.core.mounts import Credential, Dataset
from server_ext.jobs import package_delivery
from server_ext.jobs.hptuning import Spec, at_once, parse_spec
from server_ext.jobs.machines import Machines
from server_ext.jobs.model import Job, kubernetes_name

ROLES = ("master", "worker", "ps", "evaluator")
_FIELD = {"master": "master", "worker": "worker", "ps": "parameterServer", "evaluator": "evaluator"}
_TASK = re.compile(r"(?P<role>master|chief|worker|ps|parameter[_-]server|evaluator)(?:-replica)?-(?P<index>\d+)")
_ROLE_OF = {"master": "master", "chief": "master", "worker": "worker", "ps": "ps",
            "parameter_server": "ps", "parameter-server": "ps", "evaluator": "evaluator"}
FRAMEWORKS = ("tensorflow", "pytorch")


@dataclass(frozen=True)
class Runtime:
    image: str
    framework: str | None = None  # "tensorflow" | "pytorch" | None


# runtimeVersion → pythonVersion → trainer image. AI Platform's runtime versions were TensorFlow
# releases; "pytorch-…" entries are this platform's. Operators replace or extend the table.
DEFAULT_RUNTIMES: dict[str, dict[str, Runtime]] = {
    **{v: {"3.7": Runtime(f"tensorflow/tensorflow:{v}.0", "tensorflow")}
       for v in ("2.1", "2.2", "2.3", "2.4", "2.5", "2.6", "2.7", "2.8", "2.11")},
    "pytorch-2.3": {"3.10": Runtime("pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime", "pytorch")},
    "pytorch-2.5": {"3.11": Runtime("pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime", "pytorch")},
}


@dataclass(frozen=True)
class Runtimes:
    table: Mapping[str, Mapping[str, Runtime]] = field(default_factory=lambda: DEFAULT_RUNTIMES)
    default_version: str = "2.11"

    def pick(self, version: str | None, python: str | None) -> tuple[str, str, Runtime]:
        version = version or self.default_version
        pythons = self.table.get(version)
        if pythons is None:
            raise UserInputError("trainingInput.runtimeVersion", f"no runtime {version!r} here (offered: "
                                                                 f"{', '.join(sorted(self.table))})")
        if python is None:
            python = sorted(pythons)[-1]
        if python not in pythons:
            raise UserInputError("trainingInput.pythonVersion", f"runtime {version} has Python "
                                                                f"{', '.join(sorted(pythons))}, not {python!r}")
        return version, python, pythons[python]


@dataclass(frozen=True)
class Replica:
    role: str  # one of ROLES
    count: int
    image: str
    cpu: float
    memory_gib: float
    accelerator: Accelerator | None = None
    accelerator_count: int = 0
    command: tuple[str, ...] = ()  # a custom container's command (empty: the plan's module)
    args: tuple[str, ...] = ()  # a custom container's args

    def task_names(self) -> list[str]:
        return [f"{self.role}-replica-{i}" for i in range(self.count)]


@dataclass(frozen=True)
class ShippedPackage:
    """An sdist shipped with the job (``--package-path``). The file must exist until the job is submitted."""

    path: pathlib.Path  # the sdist, on the submitting machine
    sha256: str
    size: int
    delivery: Literal["configmap", "bucket"]
    uri: str  # where the job fetches it from: configmap://<name>/<file>, or the staging gs:// / s3:// URI

    @property
    def filename(self) -> str:
        return self.path.name

    @property
    def configmap(self) -> str | None:
        """The ConfigMap's name when it travels in one."""
        return package_delivery.configmap_name_of(self.uri) if self.delivery == "configmap" else None


@dataclass(frozen=True)
class JobPlan:
    job: Job
    project: str  # the project (namespace)
    owner: str  # the JupyterHub user who submitted it
    name: str  # the Kubernetes name (`model.kubernetes_name`)
    framework: str | None  # "tensorflow" | "pytorch" | None
    replicas: tuple[Replica, ...]  # master first
    python_module: str | None = None
    args: tuple[str, ...] = ()  # the trainer's arguments (``--job-dir`` included)
    package_uris: tuple[str, ...] = ()
    runtime_version: str | None = None
    python_version: str | None = None
    credentials: tuple[Credential, ...] = ()
    datasets: tuple[Dataset, ...] = ()
    sweep: Spec | None = None  # trainingInput.hyperparameters: each trial runs this plan's replicas
    package: ShippedPackage | None = None  # set by `with_package`
    trainer_v2: bool = False  # runs as a Kubeflow Trainer v2 TrainJob (the Kubernetes backend decides)

    @property
    def kind(self) -> str:
        """``TrainJob`` (on Trainer v2), else ``Job`` (one replica, no framework), ``PyTorchJob`` or ``TFJob``."""
        if self.trainer_v2:
            return "TrainJob"
        if self.framework == "pytorch":
            return "PyTorchJob"
        if self.framework == "tensorflow" or self.total_replicas > 1:
            return "TFJob"
        return "Job"

    @property
    def total_replicas(self) -> int:
        return sum(r.count for r in self.replicas)

    def task_names(self) -> list[str]:
        return [t for r in self.replicas for t in r.task_names()]

    def replica(self, role: str) -> Replica | None:
        return next((r for r in self.replicas if r.role == role), None)


@dataclass(frozen=True)
class PlanSettings:
    machines: Machines
    runtimes: Runtimes = field(default_factory=Runtimes)
    # the project's accelerator limits (name → at most this many at once; a name not listed: none);
    # None: no limit here (Kubernetes: the project's ResourceQuota decides; admins)
    limits: Mapping[str, int] | None = None


_TRIAL = re.compile(r"trial-(?P<trial>[1-9][0-9]*)(?:/(?P<task>.+))?")


def task_name(text: str, plan: JobPlan | None = None) -> str:
    """The canonical task name (``worker-replica-1``; in a sweep ``trial-3`` or
    ``trial-3/worker-replica-1``) of a user's spelling; with `plan`, it must exist. Indexes and
    trial numbers are ASCII digits, at most 6 and 9 of them; a trial's task is not another trial."""
    spelled = text.strip().lower()
    sweep = _TRIAL.fullmatch(spelled) if len(spelled) <= 100 else None
    if sweep and len(sweep["trial"]) <= 9 and not (sweep["task"] or "").strip().startswith("trial-"):
        inner = task_name(sweep["task"]) if sweep["task"] else None
        return f"trial-{sweep['trial']}" + (f"/{inner}" if inner and inner != "master-replica-0" else "")
    m = _TASK.fullmatch(spelled) if len(spelled) <= 100 else None
    if not m or not m["index"].isascii() or len(m["index"]) > 6:  # \d takes "١"; int() refuses 4,300 digits
        raise UserInputError("task", "must look like master-replica-0, worker-1, ps-0 or (a sweep's) trial-3")
    name = f"{_ROLE_OF[m['role']]}-replica-{int(m['index'])}"
    if plan is not None and name not in plan.task_names():
        raise UserInputError("task", f"the job has no task {text!r} (it has {', '.join(plan.task_names())})")
    return name


def _replica(t: Mapping, role: str, count: int, runtime_image: str | None, settings: PlanSettings,
             tier_fields: frozenset[str], problems: collect, runtime_failed: bool = False) -> Replica | None:
    """The replica, or None with its mistakes kept in `problems` (its machine type and its
    ``acceleratorConfig`` are checked each on their own; the image only when the runtime was found)."""
    key = _FIELD[role]
    config = t.get(f"{key}Config") or {}
    machine_name = t.get(f"{key}Type")
    where = "trainingInput.scaleTier" if f"{key}Type" in tier_fields else f"trainingInput.{key}Type"
    found = len(problems.errors)
    machine = problems.check(settings.machines.machine, machine_name, where) if machine_name else None
    cpu, memory = (machine.cpu, machine.memory_gib) if machine else (4, 15)
    acc_name, acc_count = (machine.accelerator, machine.count) if machine else (None, 0)
    acc_config = config.get("acceleratorConfig")
    acc_where = f"trainingInput.{key}Config.acceleratorConfig.type"
    if acc_config:
        acc_name, acc_count = acc_config["type"], int(acc_config.get("count", "1"))
    else:
        acc_where = where
    # only the GPUs of AI Platform's legacy names (and so of BASIC_GPU) may stand in: an a2-highgpu or
    # an operator's machine names exactly what it needs
    implied = not acc_config and settings.machines.is_legacy(machine_name)
    accelerator = problems.check(settings.machines.accelerator, acc_name, acc_where, implied=implied) \
        if acc_name else None
    image = config.get("imageUri") or runtime_image
    if not image and not runtime_failed:
        problems.add(f"trainingInput.{key}Config.imageUri", "is required: the master has a custom container and "
                                                            "no runtimeVersion is set")
    if len(problems.errors) > found or not image:
        return None
    return Replica(role, count, image, cpu, memory, accelerator, acc_count if accelerator else 0,
                   tuple(config.get("containerCommand") or ()), tuple(config.get("containerArgs") or ()))


def _within_limits(replicas: list[Replica], sweep, limits: Mapping[str, int], project: str) -> None:
    """Refuse (403) a job that alone asks for more of an accelerator than `project` may use at once
    (a sweep: its parallel trials together)."""
    parallel = at_once(sweep) if sweep else 1
    asked: dict[str, int] = {}
    for r in replicas:
        if r.accelerator is None:
            continue
        name = r.accelerator.name
        asked[name] = asked.get(name, 0) + r.count * r.accelerator_count * parallel
        if asked[name] > limits.get(name, 0):
            where = f"trainingInput.{_FIELD[r.role]}Config.acceleratorConfig"
            limit = limits.get(name, 0)
            allowed = f"at most {limit} at once" if limit else "none"
            raise UserInputError(where, f"project {project!r} may use {allowed} of {r.accelerator.display_name}; "
                                        f"this job asks for {asked[name]}", 403)


def plan_job(job: Job, settings: PlanSettings, *, project: str, owner: str,
             credentials: tuple[Credential, ...] = (), datasets: tuple[Dataset, ...] = ()) -> JobPlan:
    t = dict(job.training)
    tier = t.get("scaleTier", "BASIC")
    tier_fields: frozenset[str] = frozenset()
    if tier != "CUSTOM":
        t.update(settings.machines.tiers[tier])
        tier_fields = frozenset(settings.machines.tiers[tier])
    custom_image = (t.get("masterConfig") or {}).get("imageUri")
    version = python = None
    framework = None
    runtime_image = None
    with collect() as problems:  # the runtime and each replica's machine and accelerator are told together
        runtime_failed = False
        if t.get("runtimeVersion") or not custom_image:
            picked = problems.check(settings.runtimes.pick, t.get("runtimeVersion"), t.get("pythonVersion"))
            runtime_failed = picked is None
            if picked:
                version, python, runtime = picked
                runtime_image, framework = runtime.image, runtime.framework
        replicas = [_replica(t, "master", 1, runtime_image, settings, tier_fields, problems, runtime_failed)]
        for role in ROLES[1:]:
            count = int(t.get(f"{_FIELD[role]}Count", "0"))
            if count:
                replicas.append(_replica(t, role, count, runtime_image, settings, tier_fields, problems,
                                         runtime_failed))
        if framework == "pytorch" and any(r and r.role in ("ps", "evaluator") for r in replicas):
            problems.add("trainingInput.parameterServerCount", "PyTorch jobs have a master and workers only")
    sweep = parse_spec(t["hyperparameters"]) if t.get("hyperparameters") else None
    if settings.limits is not None:  # what the replicas ask for at once: needs them all valid
        _within_limits(replicas, sweep, settings.limits, project)
    args = list(t.get("args") or ())
    if t.get("jobDir"):
        args.append(f"--job-dir={t['jobDir']}")
    return JobPlan(job=job, project=project, owner=owner, name=kubernetes_name(job.job_id), framework=framework,
                   replicas=tuple(replicas), python_module=t.get("pythonModule"), args=tuple(args),
                   package_uris=tuple(t.get("packageUris") or ()), runtime_version=version, python_version=python,
                   credentials=tuple(credentials), datasets=tuple(datasets), sweep=sweep)


def with_package(plan: JobPlan, sdist: pathlib.Path, sha256: str, size: int, *, staging_bucket: str | None = None,
                 limit: int = package_delivery.CONFIGMAP_LIMIT) -> JobPlan:
    """`plan` with the sdist at `sdist` shipped (see the module docstring); `plan` is not changed."""
    if plan.package is not None:
        raise ValueError(f"job {plan.job.job_id} already ships {plan.package.filename}")
    if not plan.python_module:
        raise UserInputError(package_delivery.FIELD, "needs a pythonModule (--module-name) to run from the package")
    sdist = pathlib.Path(sdist)
    filename = sdist.name
    clash = next((u for u in plan.package_uris if u.rstrip("/").rpartition("/")[2] == filename), None)
    if clash:
        raise UserInputError(package_delivery.FIELD, f"the package's file {filename!r} has the same name as "
                                                     f"{clash} in packageUris; rename one")
    delivery = package_delivery.choose_delivery(size, limit, staging_bucket)
    if delivery == "configmap":
        uri = package_delivery.configmap_uri(plan.name, package_delivery.check_filename(filename))
    else:
        uri = package_delivery.staging_uri_of(staging_bucket or "", plan.job.job_id, sha256, filename)
    uris = (uri, *plan.package_uris)
    doc = dict(plan.job.doc)
    doc["trainingInput"] = {**doc["trainingInput"], "packageUris": list(uris)}
    return dataclasses.replace(plan, job=Job(doc), package_uris=uris,
                               package=ShippedPackage(sdist, sha256, size, delivery, uri))
