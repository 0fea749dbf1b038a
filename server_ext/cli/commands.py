"""The commands of `kubectl ai-platform`, each thin: parsed arguments in, one `JobService` call (or
a few, for streaming), text out through `server_ext.cli.output`. Results go to `Context.out`,
status messages to `Context.err`; each returns the exit code (0 ok, 1 the operation or the job
failed). Errors are raised, never printed here: `main` translates them once.

- ``jobs submit training``: the `Submission` (its ``--package-path``, ``--staging-bucket``,
  ``--credentials``, ``--datasets`` too) goes to `JobService.create`, which builds the package and
  ships it the same way on every runtime (its errors, named in REST terms, are named by their flags
  here: ``--package-path``); gcloud's submitted block on stderr and ``jobId``/``state`` on stdout
  (with `Context.settle`, only once the job has left QUEUED/PREPARING);
  with ``--stream-logs`` every task's log on stderr until the job ends, then the job's status, and
  exit 1 unless it SUCCEEDED (as gcloud).
- ``jobs list``: every page of the project's jobs (newest first), ``--filter`` applied by the
  service, then ``--sort-by``, ``--limit``; "Listed 0 items." on stderr when there are none.
- ``jobs describe``/``get``, ``jobs stream-logs`` (all tasks, or ``--task-name``; follows until the
  job ends; each line's time is the one the server sent with it, and left empty where the runtime
  keeps none, as gcloud prints a record without a timestamp: never the time it was read; its
  severity, `severity_of`: ERROR for the trainer's stderr, INFO for its stdout, as gcloud shows
  Cloud Logging's records of an AI Platform trainer),
  ``jobs cancel`` (silent, like gcloud; a job that already ended is not an error: gcloud's
  "If the job is already finished, the command will not perform an operation and exit
  successfully", with a status line on stderr saying so; with `Context.settle`, it returns once
  the job is CANCELLED, since this process is what stops its replicas).
- ``local train``: the job runs in the foreground; the master's output is copied to stdout as
  is, and the exit code is 0 only if the job SUCCEEDED. As gcloud's, it runs ``--package-path`` in
  place (a ``file://`` package directory, `flags.local_train_job`): nothing is built.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
from dataclasses import dataclass
from typing import TextIO

from hub_ext.core.errors import UserInputError
from server_ext.cli import output
from server_ext.cli.flags import flagged
from server_ext.errors import JobFinished
from server_ext.jobs.backend import FINAL
from server_ext.jobs.machines import TIERS
from server_ext.jobs.plan import ROLES, task_name
from server_ext.jobs.submission import Submission
from server_ext.service.jobs import JobService

_COUNT_FIELD = {"worker": "workerCount", "ps": "parameterServerCount", "evaluator": "evaluatorCount"}
_LIST_FIELDS = {"pageSize": "--page-size", "filter": "--filter", "pageToken": "--page-size"}


@dataclass
class Context:
    service: JobService
    user: str
    project: str
    out: TextIO
    err: TextIO
    scope: str = ""  # flags to repeat in suggested commands, e.g. " --project team"
    tz: datetime.tzinfo | None = None
    settle: bool = False  # wait until a submitted job has started before returning (the local runtime
                          # prepares jobs in this process: exiting earlier would fail them)


def task_names(job: dict) -> list[str]:
    """Every task of a job, master first (the scale tier's replicas when the tier is not CUSTOM); none
    for a sweep, whose tasks (``trial-N``) appear as it runs (`stream_logs` follows them)."""
    t = dict(job.get("trainingInput") or {})
    if t.get("hyperparameters") or (job.get("trainingOutput") or {}).get("isHyperparameterTuningJob"):
        return []
    tier = t.get("scaleTier", "BASIC")
    if tier != "CUSTOM":
        t.update(TIERS.get(tier, {}))
    names = ["master-replica-0"]
    for role in ROLES[1:]:
        names += [f"{role}-replica-{i}" for i in range(int(t.get(_COUNT_FIELD[role], "0") or 0))]
    return names


def _when(line: object) -> datetime.datetime | None:
    """The time the server gave with `line` (``time``: a datetime or RFC 3339 text), else None: a
    line's time is never made up from when it was read (a finished job's lines would all show now)."""
    stamp = getattr(line, "time", None)
    if isinstance(stamp, datetime.datetime):
        return stamp if stamp.tzinfo else stamp.replace(tzinfo=datetime.timezone.utc)
    if isinstance(stamp, str) and stamp:
        try:
            when = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
        except ValueError:
            return None
        return when if when.tzinfo else when.replace(tzinfo=datetime.timezone.utc)
    return None


def severity_of(line: object) -> str:
    """A line's severity as Cloud Logging gives an AI Platform trainer's: the runtime's ``severity``
    when it has one; else ERROR for a line the trainer wrote to stderr (``stream``), INFO otherwise
    (a runtime that keeps the two streams apart says which; one that merges them gives INFO)."""
    severity = getattr(line, "severity", None)
    if severity:
        return str(severity)
    return "ERROR" if getattr(line, "stream", None) == "stderr" else "INFO"


async def stream_logs(ctx: Context, job_id: str, tasks: list[str], dest: TextIO, *, raw: bool = False,
                      allow_multiline: bool = False) -> None:
    """Follow the tasks' logs until the job ends, printing lines as they come (gcloud's records, or
    the bare text with `raw`)."""

    async def pump(task: str) -> None:
        lines = await ctx.service.logs(ctx.user, ctx.project, job_id, task, follow=True)
        async for line in lines:
            if raw:
                dest.write(line.text + "\n")
            else:
                for text in output.split_multiline(line.text, allow_multiline):
                    dest.write(output.log_record(line.task, text, _when(line), severity_of(line), tz=ctx.tz)
                               + "\n")
            dest.flush()

    async with asyncio.TaskGroup() as group:
        if tasks:
            for task in tasks:
                group.create_task(pump(task))
            return
        # a sweep: each trial's master log, from when the trial appears until the sweep ends
        started: set[str] = set()
        while True:
            job = await ctx.service.get(ctx.user, ctx.project, job_id)
            for trial in (job.get("trainingOutput") or {}).get("trials") or []:
                if trial.get("trialId") and trial["trialId"] not in started:
                    started.add(trial["trialId"])
                    group.create_task(pump(f"trial-{trial['trialId']}"))
            if job.get("state") in FINAL:
                return
            await asyncio.sleep(0.5)


async def _wait_final(ctx: Context, job_id: str, poll: float = 0.5) -> dict:
    """The job once it has ended (the log streams end with their tasks; the state may lag)."""
    while True:
        job = await ctx.service.get(ctx.user, ctx.project, job_id)
        if job.get("state") in FINAL:
            return job
        await asyncio.sleep(poll)


async def _wait_started(ctx: Context, job_id: str, poll: float = 0.2) -> None:
    while (await ctx.service.get(ctx.user, ctx.project, job_id)).get("state") in ("QUEUED", "PREPARING"):
        await asyncio.sleep(poll)


async def submit_training(ctx: Context, args: argparse.Namespace, sub: Submission) -> int:
    """Submit `sub` (`flags.submission_of`'s, already validated), with its package built from its
    path (relative to the working directory); the service's refusals named by their flags."""
    if args.async_:
        ctx.err.write("WARNING: The --async flag is deprecated, as the default behavior is to submit the job "
                      "asynchronously; it can be omitted. For synchronous behavior, please pass --stream-logs.\n\n")
    try:
        job = await ctx.service.create(ctx.user, ctx.project, sub)
    except UserInputError as e:
        raise flagged(e, args) from None
    job_id = job["jobId"]
    if not args.stream_logs:
        if ctx.settle:
            await _wait_started(ctx, job_id)
        ctx.err.write(output.submitted(job_id, True, ctx.scope))
        ctx.out.write(output.job_status(job, ctx.tz))
        return 0
    ctx.err.write(output.submitted(job_id, False))
    ctx.err.flush()
    await stream_logs(ctx, job_id, task_names(job), ctx.err)
    job = await _wait_final(ctx, job_id)
    ctx.out.write(output.job_status(job, ctx.tz))
    return 0 if job.get("state") == "SUCCEEDED" else 1


async def list_jobs(ctx: Context, args: argparse.Namespace) -> int:
    jobs: list[dict] = []
    token = None
    try:
        while True:
            page = await ctx.service.list(ctx.user, ctx.project, args.filter, min(args.page_size or 100, 100), token)
            jobs += page.get("jobs", [])
            token = page.get("nextPageToken")
            if not token or (args.limit and not args.sort_by and len(jobs) >= args.limit):
                break
    except UserInputError as e:
        if e.field in _LIST_FIELDS:
            raise UserInputError(_LIST_FIELDS[e.field], e.message, e.status) from None
        raise
    jobs = output.sort_jobs(jobs, args.sort_by)[: args.limit or None]
    text = output.jobs_listing(jobs, args.format, ctx.tz)
    ctx.out.write(text)
    if not jobs:
        ctx.err.write(output.EMPTY_LIST + "\n")
    return 0


async def describe_job(ctx: Context, args: argparse.Namespace) -> int:
    job = await ctx.service.get(ctx.user, ctx.project, args.job)
    if args.summarize:
        if args.format:
            ctx.err.write("WARNING: --format is ignored with --summarize\n")
        ctx.out.write(output.summary(job, ctx.tz))
    else:
        ctx.out.write(output.describe(job, args.format))
    return 0


async def stream_job_logs(ctx: Context, args: argparse.Namespace) -> int:
    job = await ctx.service.get(ctx.user, ctx.project, args.job)
    if args.task_name:
        try:
            tasks = [task_name(args.task_name)]
        except UserInputError as e:
            raise UserInputError("--task-name", e.message) from None
    else:
        tasks = task_names(job)
    try:
        await stream_logs(ctx, args.job, tasks, ctx.out, allow_multiline=args.allow_multiline_logs)
    except* UserInputError as group:  # the runtime's refusal of the task names ``task``
        raise flagged(group.exceptions[0], args) from None
    return 0


CANCEL_SETTLE_S = 60.0  # how long a cancel on this process's own runtime waits for CANCELLED


async def cancel_job(ctx: Context, args: argparse.Namespace) -> int:
    try:
        await ctx.service.cancel(ctx.user, ctx.project, args.job)
    except JobFinished as e:
        # gcloud: "If the job is already finished, the command will not perform an operation and
        # exit successfully"; the REST API's 400 FAILED_PRECONDITION is said on stderr, not as an error
        ctx.err.write(f"Job [{args.job}] has already ended ({e.state}); there is nothing to cancel.\n")
        return 0
    if ctx.settle:  # the runtime stops the replicas in this process: exiting now would leave them running
        try:
            async with asyncio.timeout(CANCEL_SETTLE_S):
                await _wait_final(ctx, args.job, poll=0.2)
        except TimeoutError:
            ctx.err.write(f"Job [{args.job}] is still being cancelled.\n")
    return 0


async def local_train(ctx: Context, sub: Submission) -> int:
    """Run `sub` (`local_train_job`'s Job) in the foreground."""
    job = await ctx.service.create(ctx.user, ctx.project, sub)
    job_id = job["jobId"]
    try:
        await stream_logs(ctx, job_id, ["master-replica-0"], ctx.out, raw=True)
        job = await _wait_final(ctx, job_id)
    except (asyncio.CancelledError, KeyboardInterrupt):
        try:
            await asyncio.shield(ctx.service.cancel(ctx.user, ctx.project, job_id))
        except JobFinished:
            pass
        raise
    if job.get("state") != "SUCCEEDED":
        reason = f": {job['errorMessage']}" if job.get("errorMessage") else ""
        ctx.err.write(f"ERROR: (kubectl ai-platform.local.train) job {job_id} {job.get('state')}{reason}\n")
        return 1
    return 0


COMMANDS = {"list": list_jobs, "describe": describe_job, "stream-logs": stream_job_logs, "cancel": cancel_job}
