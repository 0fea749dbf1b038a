"""The one interface the REST API, widgets and CLI use to run jobs; two implementations: the
Kubernetes backend (Kubeflow Training Operator CRs, `batch/v1` Jobs) and the local backend
(processes on this machine, state in SQLite).

A job is always answered as the `ml.v1` Job JSON (`GoogleCloudMlV1__Job`: int64 as strings,
``state`` one of QUEUED, PREPARING, RUNNING, SUCCEEDED, FAILED, CANCELLING, CANCELLED, RFC 3339
times). Every method is scoped by project; a job of another project is `JobNotFound`.

A sweep (a job with ``trainingInput.hyperparameters``) is a job too: its JSON carries
``trainingOutput`` (``isHyperparameterTuningJob``, ``completedTrialCount``,
``hyperparameterMetricTag``, ``trials[]`` with ``trialId`` "1", "2", … in creation order,
``hyperparameters``, ``finalMetric``, ``state``, times, ``isTrialStoppedEarly``); its tasks are
named ``trial-<id>`` (that trial's master) and ``trial-<id>/<task>`` (e.g.
``trial-3/worker-replica-1``).

Log streams are async iterators of `LogLine`: ``seq`` numbers the lines of one task's log from 1,
so a reader resumes with ``after=<last seq seen>`` (the SSE ``Last-Event-ID``) and never sees a
line twice or misses one. With ``follow`` the stream ends when the task has ended and every line
was sent; without it, it ends at the current end of the log. A line carries what its runtime
keeps of it: ``time`` (when it was written, RFC 3339 UTC with ``Z``) and ``stream`` (``stdout`` or
``stderr``, the trainer's stream); None where the runtime does not know (a line's time is never
made up from when it was read).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import AsyncIterator, Protocol

from server_ext.jobs.plan import JobPlan

STATES = ("QUEUED", "PREPARING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLING", "CANCELLED")
FINAL = ("SUCCEEDED", "FAILED", "CANCELLED")


@dataclass(frozen=True)
class LogLine:
    seq: int  # 1-based line number in this task's log
    task: str  # e.g. "master-replica-0"
    text: str  # the line, without its newline
    time: str | None = None  # when it was written (RFC 3339 UTC, "2026-12-04T03:20:01.123456Z"), if known
    stream: str | None = None  # "stdout" or "stderr", where the runtime keeps them apart


class JobBackend(Protocol):
    async def submit(self, plan: JobPlan) -> dict:
        """Create the job (all or nothing); `JobExists` if the jobId is taken in the project."""

    async def get(self, project: str, job_id: str) -> dict:
        """The job; `JobNotFound`."""

    async def list(self, project: str) -> list[dict]:
        """Every job of the project (from a cache: no API request per call where it can)."""

    async def cancel(self, project: str, job_id: str) -> dict:
        """Stop every replica; the job goes CANCELLING then CANCELLED. `JobFinished` if it already ended."""

    def logs(self, project: str, job_id: str, task: str = "master-replica-0", *, follow: bool = False,
             after: int = 0) -> AsyncIterator[LogLine]:
        """One task's log lines after line `after`."""

    async def trial_metrics(self, project: str, job_id: str, trial_id: str) -> list[dict]:
        """A sweep trial's intermediate metric as a time series, oldest first:
        ``[{"trainingStep": "10", "objectiveValue": 0.31, "time": "2026-…Z"}, …]`` (the
        hyperparameterMetricTag's reports); `JobNotFound` for an unknown job or trial id."""

    async def close(self) -> None:
        """Stop watches and background tasks (processes of running local jobs keep running)."""
