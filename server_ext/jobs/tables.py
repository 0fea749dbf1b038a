"""The operator's job tables, from one mapping: ``c.MLPlatformApp.job_tables`` in the notebook
server, ``jobs:`` in the kubectl plugin's settings file. Pure.

Every key is optional::

    machines:                  # machine type names, added to or overriding the built-in ones
      dgx-slice: {cpu: 8, memory_gib: 60, accelerator: NVIDIA_A100_1G_5GB, count: 1}
    accelerator_aliases:       # Google's accelerator name → a catalogue name
      NVIDIA_TESLA_V100: a100
    legacy_gpu: a100           # the GPU of AI Platform's K80/P100/V100 machine names and BASIC_GPU
                               # (default: the catalogue's first whole GPU)
    runtimes:                  # runtimeVersion → pythonVersion → trainer image (and framework)
      "2.15": {"3.11": {image: registry.example.com/tf:2.15, framework: tensorflow}}
    replace_runtimes: false    # true: `runtimes` replaces the built-in table instead of extending it
    default_runtime_version: "2.15"
    fetcher_image: registry.example.com/mlplatform/trainer-tools:0.1.0   # the fetch-code init container
    run_as: notebook           # who a job's containers run as on Kubernetes: ``notebook`` (default): the
                               # user the notebook server runs as (runAsUser/runAsGroup, runAsNonRoot),
                               # unless that is root; ``image``: each image's own user
    training_api: auto         # what runs a job on Kubernetes: ``auto`` (default): ``v2`` where the
                               # cluster serves Trainer v2, else ``v1``; ``v2``: a Kubeflow Trainer v2
                               # TrainJob on helm-values/trainer-runtimes.yaml wherever one can run the
                               # job (its replicas alike); ``v1``: the Training Operator (PyTorchJob,
                               # TFJob) or a batch Job

`parse_tables(doc, where)` checks the whole mapping and raises one `ConfigError` listing every
problem by its key (``<where>.machines.dgx-slice.cpu``); catalogue names (aliases, `legacy_gpu`)
are checked when a job is planned, since on Kubernetes each project publishes its own catalogue.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from hub_ext.core.catalog import Accelerator
from hub_ext.core.errors import ConfigError, Problem
from hub_ext.manifests.mounts import MountSettings
from server_ext.jobs.kube.kubeflow import DEFAULT_FETCHER_IMAGE, KubeSettings
from server_ext.jobs.machines import Machine, Machines
from server_ext.jobs.plan import DEFAULT_RUNTIMES, FRAMEWORKS, PlanSettings, Runtime, Runtimes

KEYS = ("machines", "accelerator_aliases", "legacy_gpu", "runtimes", "replace_runtimes",
        "default_runtime_version", "fetcher_image", "run_as", "training_api")
RUN_AS = ("notebook", "image")
TRAINING_APIS = ("v1", "v2", "auto")


@dataclass(frozen=True)
class JobTables:
    machines: Mapping[str, Machine] = field(default_factory=dict)
    aliases: Mapping[str, str] = field(default_factory=dict)
    legacy_gpu: str | None = None
    runtimes: Runtimes = field(default_factory=Runtimes)
    fetcher_image: str = DEFAULT_FETCHER_IMAGE
    run_as: str = "notebook"
    training_api: str = KubeSettings.training_api  # the one default: ``auto``

    def plan_settings(self, accelerators: Mapping[str, Accelerator],
                      limits: Mapping[str, int] | None = None) -> PlanSettings:
        return PlanSettings(Machines(accelerators, extra=self.machines, aliases=self.aliases,
                                     legacy_gpu=self.legacy_gpu), self.runtimes, limits)

    def kube_settings(self, mounts: MountSettings, notebook_user: tuple[int, int] | None = None) -> KubeSettings:
        """`notebook_user`: the (uid, gid) the notebook server runs as, None where that is root."""
        run_as = notebook_user if self.run_as == "notebook" else None
        return KubeSettings(mounts, fetcher_image=self.fetcher_image, run_as=run_as, training_api=self.training_api)


def parse_tables(doc: Any, where: str) -> JobTables:
    if doc is None:
        return JobTables()
    if not isinstance(doc, Mapping):
        raise ConfigError([Problem(where, "must be a mapping")])
    problems = [Problem(f"{where}.{key}", f"unknown key (known: {', '.join(KEYS)})") for key in doc if key not in KEYS]
    machines = {name: m for name, m in ((n, _machine(spec, f"{where}.machines.{n}", problems))
                                        for n, spec in _mapping(doc, "machines", where, problems).items()) if m}
    aliases = _mapping(doc, "accelerator_aliases", where, problems)
    for name, target in aliases.items():
        if not isinstance(target, str) or not target:
            problems.append(Problem(f"{where}.accelerator_aliases.{name}", "must be a catalogue accelerator name"))
    legacy_gpu = _text(doc, "legacy_gpu", where, problems)
    fetcher_image = _text(doc, "fetcher_image", where, problems) or DEFAULT_FETCHER_IMAGE
    table = {_version(version, f"{where}.runtimes", problems): _pythons(pythons, f"{where}.runtimes.{version}", problems)
             for version, pythons in _mapping(doc, "runtimes", where, problems).items()}
    replace = doc.get("replace_runtimes", False)
    if not isinstance(replace, bool):
        problems.append(Problem(f"{where}.replace_runtimes", "must be true or false"))
        replace = False
    if replace and not table:
        problems.append(Problem(f"{where}.runtimes", "is required with replace_runtimes: true (no runtime left)"))
    table = table if replace else {**DEFAULT_RUNTIMES, **table}
    default_version = doc.get("default_runtime_version")
    default_version = (Runtimes().default_version if default_version is None
                       else _version(default_version, f"{where}.default_runtime_version", problems, own=True))
    if table and default_version not in table:
        problems.append(Problem(f"{where}.default_runtime_version",
                                f"{default_version!r} is not in the runtimes table ({', '.join(sorted(table))})"))
    run_as = doc.get("run_as", "notebook")
    if run_as not in RUN_AS:
        problems.append(Problem(f"{where}.run_as", f"must be one of {', '.join(RUN_AS)} (got {run_as!r})"))
    training_api = doc.get("training_api", KubeSettings.training_api)
    if training_api not in TRAINING_APIS:
        problems.append(Problem(f"{where}.training_api",
                                f"must be one of {', '.join(TRAINING_APIS)} (got {training_api!r})"))
    if problems:
        raise ConfigError(problems)
    return JobTables(machines, {str(k): v for k, v in aliases.items()}, legacy_gpu,
                     Runtimes(table, default_version), fetcher_image, run_as, training_api)


def _mapping(doc: Mapping, key: str, where: str, problems: list[Problem]) -> Mapping:
    value = doc.get(key) or {}
    if not isinstance(value, Mapping):
        problems.append(Problem(f"{where}.{key}", "must be a mapping"))
        return {}
    return value


def _text(doc: Mapping, key: str, where: str, problems: list[Problem]) -> str | None:
    value = doc.get(key)
    if value is not None and (not isinstance(value, (str, int, float)) or isinstance(value, bool) or value == ""):
        problems.append(Problem(f"{where}.{key}", "must be a non-empty string"))
        return None
    return None if value is None else str(value)


def _version(key: Any, where: str, problems: list[Problem], own: bool = False) -> str:
    """A version (a key of `where`, or with `own` the value at `where`), which YAML must not read as a number."""
    if not isinstance(key, str) or not key:
        problems.append(Problem(where if own else f"{where}.{key}",
                                f"quote the version (\"{key}\"): YAML reads it as a number, so 2.10 would become 2.1"
                                if isinstance(key, (int, float)) and not isinstance(key, bool)
                                else "must be a version such as \"2.11\""))
    return str(key)


def _machine(spec: Any, where: str, problems: list[Problem]) -> Machine | None:
    if not isinstance(spec, Mapping):
        problems.append(Problem(where, "must be a mapping with cpu and memory_gib"))
        return None
    unknown = set(spec) - {"cpu", "memory_gib", "accelerator", "count"}
    if unknown:
        problems.append(Problem(f"{where}.{sorted(unknown)[0]}", "unknown key (known: cpu, memory_gib, accelerator, "
                                                                  "count)"))
    numbers = {}
    for key in ("cpu", "memory_gib"):
        value = spec.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            problems.append(Problem(f"{where}.{key}", "must be a positive number"))
        else:
            numbers[key] = float(value)
    accelerator, count = spec.get("accelerator"), spec.get("count", 1 if spec.get("accelerator") else 0)
    if accelerator is not None and (not isinstance(accelerator, str) or not accelerator):
        problems.append(Problem(f"{where}.accelerator", "must be an accelerator name such as NVIDIA_A100_1G_5GB"))
    if isinstance(count, bool) or not isinstance(count, int) or count < 0 or (accelerator and count == 0):
        problems.append(Problem(f"{where}.count", "must be a whole number of accelerators (≥ 1 with an accelerator)"))
    if len(numbers) < 2:
        return None
    return Machine(numbers["cpu"], numbers["memory_gib"], accelerator or None, count if accelerator else 0)


def _pythons(spec: Any, where: str, problems: list[Problem]) -> dict[str, Runtime]:
    if not isinstance(spec, Mapping) or not spec:
        problems.append(Problem(where, "must map Python versions to {image, framework}"))
        return {}
    out = {}
    for python, entry in spec.items():
        at = f"{where}.{python}"
        python = _version(python, where, problems)
        if not isinstance(entry, Mapping) or not isinstance(entry.get("image"), str) or not entry["image"]:
            problems.append(Problem(at, "must have an image"))
            continue
        framework = entry.get("framework")
        if framework is not None and framework not in FRAMEWORKS:
            problems.append(Problem(f"{at}.framework", f"must be one of {', '.join(FRAMEWORKS)} (or absent)"))
            continue
        unknown = set(entry) - {"image", "framework"}
        if unknown:
            problems.append(Problem(f"{at}.{sorted(unknown)[0]}", "unknown key (known: image, framework)"))
        out[python] = Runtime(entry["image"], framework)
    return out
