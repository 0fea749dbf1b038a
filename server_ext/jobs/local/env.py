"""What each process of a local job gets: argv, environment, code locations, and how the job ends. Pure.

The local runtime runs a job as ``gcloud ai-platform local train`` does: one process per task
(`JobPlan.task_names`), each ``<python> -m <pythonModule> <args…>``. This module decides, from the
plan alone (no I/O: ports and paths come in as arguments):

- `refuse_unrunnable(plan)`: a custom container (any ``<role>Config.imageUri``) cannot run here →
  `UserInputError` naming that field; a job without ``pythonModule`` likewise.
- `package_sources(uris, shipped)`: each ``packageUris`` entry is ``shipped`` (the URI of the
  package shipped with the job, `plan.ShippedPackage.uri`: ``configmap://…`` or its staging
  bucket's; the backend holds a copy of its bytes, so it is never fetched), ``remote`` (``gs://``,
  ``s3://``: fetched by `server_ext.runtimes.fetch`) or ``local`` (a path or ``file://`` URI: an
  sdist/wheel to install, or a package directory whose parent goes on ``PYTHONPATH``); any other
  scheme (a ``configmap://`` URI not shipped with this job included) is refused with the entry's
  field path (``trainingInput.packageUris[1]``).
- `task_env(plan, task, …)`: the base environment plus ``CLOUD_ML_JOB_ID``, the credential and
  dataset paths of the plan (exactly as `hub_ext.core.mounts.select` exposes them: paths only, never
  the files' content), ``PYTHONPATH``, a per-task hypertune metrics file, and the cluster:
  - TensorFlow (``framework == "tensorflow"``, or several replicas and no framework):
    ``TF_CONFIG`` = ``{"cluster": {"master"|"chief": […], "worker": […], "ps": […]}, "task":
    {"type", "index"}, "job": <trainingInput>, "environment": "cloud"}`` with ``127.0.0.1:<port>``
    addresses, ``chief`` when ``useChiefInTfConfig``; evaluators get a task but are not in the
    cluster (as gcloud and TensorFlow do);
  - PyTorch: ``MASTER_ADDR=127.0.0.1``, ``MASTER_PORT``, ``WORLD_SIZE``, ``RANK`` (master 0, worker
    i → i + 1), as the Training Operator sets them.
  Variables set by the caller (`extra`) win over everything but ``TF_CONFIG``/the PyTorch ones.
- `decide(events)`: the job's end from replica exits in the order seen: the master exiting 0 →
  SUCCEEDED; any replica exiting non-zero → FAILED with AI Platform's wording ("The replica
  worker 1 exited with a non-zero status of 1."); an exit status that could not be known (the
  process ended while no server watched it) → FAILED saying so; otherwise still running.
"""

from __future__ import annotations

import json
import signal
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence
from urllib.parse import unquote, urlsplit

from hub_ext.core.errors import UserInputError
from hub_ext.core.mounts import Available, select
from server_ext.jobs.plan import JobPlan

HOST = "127.0.0.1"
_CONFIG_KEYS = ("masterConfig", "workerConfig", "parameterServerConfig", "evaluatorConfig")
_TF_TYPE = {"master": "master", "worker": "worker", "ps": "ps", "evaluator": "evaluator"}
_CLUSTER_ORDER = ("master", "worker", "ps")  # evaluators are not cluster members
REMOTE_SCHEMES = ("gs", "s3")


@dataclass(frozen=True)
class PackageSource:
    kind: str  # "shipped" | "remote" | "local"
    value: str  # the URI (shipped, remote) or the local path
    field: str  # trainingInput.packageUris[i]


def refuse_unrunnable(plan: JobPlan) -> None:
    training = plan.job.training
    for key in _CONFIG_KEYS:
        if (training.get(key) or {}).get("imageUri"):
            raise UserInputError(f"trainingInput.{key}.imageUri", "a custom container cannot run on the local "
                                                                   "runtime; use pythonModule with packageUris, "
                                                                   "or submit to the Kubernetes runtime")
    if not plan.python_module:
        raise UserInputError("trainingInput.pythonModule", "is required on the local runtime")


def package_sources(uris: Iterable[str], shipped: str | None = None) -> list[PackageSource]:
    out = []
    for i, uri in enumerate(uris):
        field = f"trainingInput.packageUris[{i}]"
        parts = urlsplit(uri)
        scheme = parts.scheme.lower()
        if shipped is not None and uri == shipped:
            out.append(PackageSource("shipped", uri, field))
        elif scheme in REMOTE_SCHEMES:
            out.append(PackageSource("remote", uri, field))
        elif scheme == "file":
            out.append(PackageSource("local", unquote(parts.path), field))
        elif not scheme:
            out.append(PackageSource("local", uri, field))
        else:
            raise UserInputError(field, f"{uri}: the local runtime takes gs://, s3://, file:// URIs or local "
                                        f"paths, not {scheme}://")
    return out


def command(plan: JobPlan, python: str) -> list[str]:
    return [python, "-m", str(plan.python_module), *plan.args]


def uses_tf_config(plan: JobPlan) -> bool:
    return plan.framework == "tensorflow" or (plan.framework is None and plan.total_replicas > 1)


def port_tasks(plan: JobPlan) -> list[str]:
    """The tasks that need a port of their own (in this order)."""
    if plan.framework == "pytorch":
        return [plan.task_names()[0]]
    if uses_tf_config(plan):
        return [t for r in plan.replicas if r.role in _CLUSTER_ORDER for t in r.task_names()]
    return []


def _split(task: str) -> tuple[str, int]:
    role, _, index = task.rpartition("-replica-")
    return role, int(index)


def tf_config(plan: JobPlan, task: str, ports: Mapping[str, int]) -> dict:
    primary = "chief" if plan.job.training.get("useChiefInTfConfig") else "master"
    names = {**_TF_TYPE, "master": primary}
    cluster = {names[r.role]: [f"{HOST}:{ports[t]}" for t in r.task_names()]
               for r in plan.replicas if r.role in _CLUSTER_ORDER}
    role, index = _split(task)
    return {"cluster": cluster, "task": {"type": names[role], "index": index},
            "job": json.loads(json.dumps(dict(plan.job.training))), "environment": "cloud"}


def torch_env(plan: JobPlan, task: str, ports: Mapping[str, int]) -> dict[str, str]:
    role, index = _split(task)
    master = plan.task_names()[0]
    return {"MASTER_ADDR": HOST, "MASTER_PORT": str(ports[master]), "WORLD_SIZE": str(plan.total_replicas),
            "RANK": str(0 if role == "master" else index + 1)}


def mounts_env(plan: JobPlan) -> dict[str, str]:
    """The credential and dataset variables (paths only), by `hub_ext.core.mounts.select`'s rules."""
    available = Available(plan.credentials, plan.datasets)
    return select(available, [c.name for c in plan.credentials], [d.name for d in plan.datasets], plan.project,
                  allow_loading=True)


# The notebook server's own credentials: a job is not the server, and its environment may be
# logged (as a user's env dump would), so these never reach a job's processes.
SERVER_SECRETS = ("JUPYTERHUB_API_TOKEN", "JPY_API_TOKEN", "JUPYTERHUB_CLIENT_ID", "JUPYTER_TOKEN",
                  "MLPLATFORM_SERVER_TOKEN")


def task_env(plan: JobPlan, task: str, *, base: Mapping[str, str], ports: Mapping[str, int],
             pythonpath: Sequence[str], metrics_file: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in base.items() if k not in SERVER_SECRETS}
    env.update(mounts_env(plan))
    env["CLOUD_ML_JOB_ID"] = plan.job.job_id
    env["CLOUD_ML_HP_METRIC_FILE"] = metrics_file
    env.setdefault("PYTHONUNBUFFERED", "1")
    path = list(pythonpath) + ([base["PYTHONPATH"]] if base.get("PYTHONPATH") else [])
    if path:
        env["PYTHONPATH"] = ":".join(path)
    env.update(extra or {})
    for key in ("TF_CONFIG", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK"):
        env.pop(key, None)
    if plan.framework == "pytorch":
        env.update(torch_env(plan, task, ports))
    elif uses_tf_config(plan):
        env["TF_CONFIG"] = json.dumps(tf_config(plan, task, ports), sort_keys=True)
    return env


def replica_label(task: str) -> str:
    """``worker-replica-1`` → ``worker 1``, ``ps-replica-0`` → ``ps 0`` (AI Platform's words)."""
    role, index = _split(task)
    return f"{_TF_TYPE.get(role, role)} {index}"


def replica_failure(task: str, code: int | None) -> str:
    label = replica_label(task)
    if code is None:
        return (f"The replica {label} ended while no server was watching it (the server was down); its exit "
                "status is unknown.")
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"The replica {label} was killed by {name}."
    return f"The replica {label} exited with a non-zero status of {code}."


def decide(events: Sequence[tuple[str, int | None]]) -> tuple[str, str | None] | None:
    """(state, errorMessage) once the exits seen so far (in order) end the job; else None."""
    for task, code in events:
        if code is None or code != 0:
            return "FAILED", replica_failure(task, code)
        if _split(task)[0] == "master":
            return "SUCCEEDED", None
    return None
