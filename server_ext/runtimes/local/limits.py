"""How many processes one local job may run at once, and the refusal of a job that needs more.

Guarantees:

- `max_processes_from(environ)`: ``$MLPLATFORM_LOCAL_MAX_PROCESSES`` (which the CLI's local runtime
  reads too), else `DEFAULT_MAX_PROCESSES` (32: PREMIUM_1's 31 replicas fit); anything but a whole
  number from 1 to 999999 is a `ConfigError` naming the variable. The server passes
  ``c.MLPlatformApp.local_max_processes`` to the backend instead.
- `refuse_too_many(plan, most)`: a job with more replicas (master, workers, parameter servers,
  evaluators) than `most` is a `UserInputError` naming the count field (``trainingInput.workerCount``
  and the like, or ``trainingInput.scaleTier`` for a tier's replicas) and how to get more. A sweep's
  parallel trials are checked by the sweeps (``maxParallelTrials``). Kubernetes has no such limit:
  there the project's quota decides.
"""

from __future__ import annotations

import re
from typing import Mapping

from hub_ext.core.errors import ConfigError, Problem, UserInputError
from server_ext.jobs.plan import JobPlan

DEFAULT_MAX_PROCESSES = 32  # PREMIUM_1's 31 replicas fit
MAX_PROCESSES_ENV = "MLPLATFORM_LOCAL_MAX_PROCESSES"
_COUNT_FIELD = {"worker": "workerCount", "ps": "parameterServerCount", "evaluator": "evaluatorCount"}


def max_processes_from(environ: Mapping[str, str]) -> int:
    """``$MLPLATFORM_LOCAL_MAX_PROCESSES``, else `DEFAULT_MAX_PROCESSES`; `ConfigError` when it is not a
    whole number from 1 to 999999."""
    text = environ.get(MAX_PROCESSES_ENV, "").strip()
    if not text:
        return DEFAULT_MAX_PROCESSES
    if not re.fullmatch(r"[0-9]{1,6}", text) or int(text) < 1:
        raise ConfigError([Problem(MAX_PROCESSES_ENV, "must be a whole number of processes from 1 to 999999")])
    return int(text)


def refuse_too_many(plan: JobPlan, most: int) -> None:
    """A job with more replicas than `most` (see the module docstring)."""
    total = plan.total_replicas
    if total <= most:
        return
    if plan.job.training.get("scaleTier", "BASIC") != "CUSTOM":
        field = "trainingInput.scaleTier"
    else:
        role = max((r for r in plan.replicas if r.role in _COUNT_FIELD), key=lambda r: r.count).role
        field = f"trainingInput.{_COUNT_FIELD[role]}"
    counts = ", ".join(f"{r.count} {r.role}" for r in plan.replicas)
    raise UserInputError(field, f"the job would run {total} processes at once ({counts}); the local runtime "
                                f"runs at most {most} for one job (c.MLPlatformApp.local_max_processes or "
                                f"${MAX_PROCESSES_ENV}); ask for fewer or use the Kubernetes runtime")
