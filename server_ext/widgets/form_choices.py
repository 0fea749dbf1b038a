"""What the submit form offers (accelerators, a sweep spec to start from), what it tells the user
a job will get, and how it reads the sweep box. Pure (the caller passes the hub's answers and the
environment).

Guarantees:

- `accelerator_offers(info, project)` offers exactly the accelerators `project` may use, from the
  same trusted values the jobs API plans with in a JupyterHub (`server_ext.service.hub_catalog.catalogue_of`
  of the hub's ``catalog`` and ``projects`` answers): an accelerator its limits do not list, or
  list as 0, is not offered, and each offer's `Offer.most` is the project's limit (at most the
  model's `MAX_ACCELERATORS` per replica); with no limits (an admin) every catalogue accelerator.
  Each offer's `Offer.value` is a name the job model resolves back to that very catalogue entry
  (`server_ext.jobs.machines.Machines.accelerator`), so choosing it never asks for another one; an
  entry no Google-style name reaches (only an operator's alias would) is not offered.
- When the hub cannot be read, the built-in catalogue is offered and `note` says that the server
  checks the project's limits at Submit (it is the only case a choice can still be refused).
- `runtime_note(info, env)`: on the local runtime (``MLPLATFORM_BACKEND`` is not ``kubernetes``)
  says plainly that a job runs beside the notebook and shares its devices — this server's own
  accelerator (its profile's, else ``CUDA_VISIBLE_DEVICES``) — and that no other GPU or slice is
  taken for it; on Kubernetes, that the job gets the chosen accelerator for itself. Free capacity
  (``capacity``) is shown in the labels on Kubernetes only: a local job takes no free slice. Where
  Kueue holds the accelerators (the project's ``queue_ahead`` in the hub's answer), each label says
  "free now" or "queue: N ahead" (`capacity_words`).
- `SWEEP_TEMPLATE` is a sweep spec that runs as it is (the box shows it once ticked while empty);
  `sweep_spec` reads what the box holds: a whole ``hptuning_config.yaml``, its ``hyperparameters:``
  mapping, or the spec itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from hub_ext.core.mounts import COPY_SUFFIX
from server_ext.errors import PlatformError
from server_ext.jobs.model import MAX_ACCELERATORS

NO_ACCELERATOR = ""
CPU_ONLY = "none (CPU only)"


@dataclass(frozen=True)
class Offer:
    value: str  # the job's acceleratorConfig.type
    label: str
    most: int  # the largest count this project may ask for per replica


def is_local(env: Mapping[str, str]) -> bool:
    """The notebook server's runtime is local (the spawners set ``MLPLATFORM_BACKEND=kubernetes``
    in a Kubernetes notebook pod)."""
    return env.get("MLPLATFORM_BACKEND") != "kubernetes"


def google_name(name: str, catalogue: Mapping) -> str | None:
    """A name the job model resolves to the catalogue entry `name` (``NVIDIA_A100_1G_5GB``,
    ``NVIDIA_TESLA_A100``, ``NVIDIA_H100_80GB``…), or None when none does."""
    from server_ext.jobs.machines import Machines, mig_name

    acc = catalogue[name]
    machines = Machines(catalogue)
    if acc.type == "mig":
        candidates = [mig_name(acc.mig_profile)]
    else:
        tokens = [t for t in re.split(r"[^A-Z0-9]+", (acc.product or acc.display_name or "").upper()) if t]
        while tokens and tokens[0] in ("NVIDIA", "TESLA", "GEFORCE", "QUADRO", "RTX", "GTX"):
            tokens.pop(0)
        candidates = sorted(Machines({name: acc}).names())
        candidates += ["NVIDIA_" + "_".join(tokens[:k]) for k in range(1, len(tokens) + 1)]
    for candidate in candidates:
        try:
            if machines.accelerator(candidate, "accelerator").name == name:
                return candidate
        except PlatformError:
            continue
    return None


def accelerator_offers(info: Mapping, project: str, local: bool = True) -> tuple[list[Offer], str]:
    """(the accelerators `project` may use, first "none (CPU only)"; a note for the user)."""
    from server_ext.jobs.defaults import DEFAULT_ACCELERATORS
    from server_ext.service.hub_catalog import catalogue_of

    catalog, projects = info.get("catalog"), info.get("projects")
    note = ""
    try:
        if catalog is None or projects is None:
            raise LookupError
        catalogue, limits = catalogue_of(catalog, projects, project)
    except LookupError:
        catalogue, limits = dict(DEFAULT_ACCELERATORS), None
        note = ("The hub's catalogue could not be read: the built-in accelerators are offered, and the "
                f"server checks at Submit which of them project {project!r} may use.")
    except PlatformError as e:
        return [Offer(NO_ACCELERATOR, CPU_ONLY, 0)], str(e)
    capacity = (info.get("capacity") or {}).get("accelerators") or {}
    queue = _queue_ahead(projects, project)
    out = [Offer(NO_ACCELERATOR, CPU_ONLY, 0)]
    for name, acc in sorted(catalogue.items()):
        limit = None if limits is None else limits.get(name, 0)
        if limit is not None and limit <= 0:
            continue
        value = google_name(name, catalogue)
        if value is None:
            continue
        most = min(limit or MAX_ACCELERATORS, MAX_ACCELERATORS)
        bits = [acc.display_name or name]
        if limit is not None:
            bits.append(f"at most {limit}")
        if not local and name in capacity:
            bits.append(capacity_words(capacity[name], None if queue is None else queue.get(name)))
        out.append(Offer(value, f"{value} ({', '.join(bits)})", most))
    if limits is not None and len(out) == 1:
        note = f"Project {project!r} may use no accelerator: its jobs run on CPUs."
    return out, note


def _queue_ahead(projects: Any, project: str) -> dict[str, int] | None:
    """The project's ``queue_ahead`` from the hub's projects answer (None: not queued, or malformed)."""
    try:
        entry = next((p for p in projects["projects"] if p["name"] == project), None)
        ahead = entry.get("queue_ahead") if entry else None
        return None if ahead is None else {str(k): int(v) for k, v in ahead.items()}
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def capacity_words(capacity: Mapping, ahead: int | None) -> str:
    """"1 of 2 free now"; where Kueue holds them (`ahead`: the project's workloads waiting for this
    accelerator): "1 of 2 free, queue: 3 ahead", or "0 of 2 free now, a job waits its turn"."""
    free, total = capacity.get("free", "?"), capacity.get("total", "?")
    if ahead:
        return f"{free} of {total} free, queue: {ahead} ahead"
    if ahead is not None and free == 0:
        return f"{free} of {total} free now, a job waits its turn"
    return f"{free} of {total} free now"


def runtime_note(info: Mapping, env: Mapping[str, str]) -> str:
    """What a job submitted from this notebook gets (see the module's docstring)."""
    if not is_local(env):
        return ("Jobs run as their own pods on the cluster: the accelerator chosen is the job's own, "
                "taken from the project's share while the job runs.")
    return ("Local runtime: a job runs as processes beside this notebook and shares its devices, "
            f"{own_devices(info, env)}. No other GPU or slice is taken for it: the accelerator chosen "
            "here is recorded with the job and checked against the project's limits.")


def own_devices(info: Mapping, env: Mapping[str, str]) -> str:
    """This notebook server's accelerator, in words."""
    slug = env.get("MLPLATFORM_PROFILE")
    catalog = info.get("catalog") or {}
    profile = next((p for p in catalog.get("profiles") or [] if isinstance(p, Mapping) and p.get("slug") == slug),
                   None) if slug else None
    if profile is not None:
        name = profile.get("accelerator")
        if not name:
            return f"which are none: this server's profile {slug!r} has no accelerator (CPU only)"
        shown = next((a.get("display_name") for a in catalog.get("accelerators") or []
                      if isinstance(a, Mapping) and a.get("name") == name), None) or name
        return f"{profile.get('accelerator_count') or 1} × {shown} (this server's profile {slug!r})"
    devices = [d for d in (env.get("CUDA_VISIBLE_DEVICES") or "").split(",") if d.strip()]
    if "CUDA_VISIBLE_DEVICES" in env:
        if not devices:
            return "which are none: this server has no GPU (CPU only)"
        return f"this server's {len(devices)} GPU device{'s' if len(devices) != 1 else ''} (CUDA_VISIBLE_DEVICES)"
    return "whatever GPUs this server's machine has"


def mount_choices(info: Mapping, project: str, kind: str) -> list[str]:
    """The names the forms offer for `kind` (``credentials``, ``datasets``) of `project`, from the
    platform's listing in `info`; a dataset whose load has a snapshot is offered a second time as
    ``<name>:copy`` (a private writable copy for the job, `hub_ext.core.mounts.COPY_SUFFIX`)."""
    entries = [c for c in (info.get(kind) or {}).get(kind, [])
               if c.get("name") and c.get("project", project) == project]
    names = {c["name"] for c in entries}
    if kind == "datasets":
        names |= {f"{c['name']}{COPY_SUFFIX}" for c in entries if c.get("snapshot")}
    return sorted(names)


# what the sweep box holds once ticked while empty (the panel's form gets it from submitForm): a
# spec that runs as it is, saying where users already have theirs
SWEEP_TEMPLATE = """\
# The hyperparameters of an AI Platform hptuning_config.yaml: paste the whole file
# (e.g. trainer/hptuning_config.yaml) or only its hyperparameters. The trainer reports
# the metric named by hyperparameterMetricTag; each trial gets --<parameterName>=<value>.
goal: MAXIMIZE
hyperparameterMetricTag: accuracy
maxTrials: 4
maxParallelTrials: 2
algorithm: RANDOM_SEARCH
params:
- parameterName: learning_rate
  type: DOUBLE
  minValue: 0.0001
  maxValue: 0.1
  scaleType: UNIT_LOG_SCALE
"""


def sweep_spec(doc: Any) -> Any:
    """The sweep spec in what the box holds: a whole ``hptuning_config.yaml`` (its
    ``trainingInput.hyperparameters``), a ``hyperparameters:`` mapping, or the spec itself. Pure."""
    if isinstance(doc, Mapping) and isinstance(doc.get("trainingInput"), Mapping) \
            and "hyperparameters" in doc["trainingInput"]:
        return doc["trainingInput"]["hyperparameters"]
    if isinstance(doc, Mapping) and set(doc) == {"hyperparameters"}:
        return doc["hyperparameters"]
    return doc
