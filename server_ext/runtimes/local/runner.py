"""Running one local job's processes: its packages prepared, one process per task started, watched
until the job's outcome is known, and every process stopped before that outcome is written
(`LocalBackend` submits, recovers and cancels; this module runs).

Guarantees (the states a job goes through here):

- QUEUED at submit → PREPARING while fetching/installing (`local_package`: a package that cannot be
  had, or pip failing, is FAILED saying so; pip's output goes to the master's log) → RUNNING once
  every process started (`local_procs.start_replica`, the environment from `local_env.task_env`,
  free ports for the tasks that listen) → SUCCEEDED when the master exits 0, FAILED when any replica
  exits non-zero (AI Platform's message: "The replica worker 1 exited with a non-zero status of 1.",
  `local_env.decide`);
- a cancel (the job's `Live.cancel`) → CANCELLED once every process group ended (SIGTERM, SIGKILL
  after the backend's ``grace_s``), unless the replicas' exits recorded before the cancel was acted
  on already decide the job (a master that had exited 0: SUCCEEDED; a program that ended before
  the cancel keeps its outcome);
- when a job ends, the replicas still running are stopped the same way before the final state is
  written (`JobRecords.finish_record`), so a final state means no process is left;
- while it runs, the last progress line of the master's log (`server_ext.jobs.progress`) is the
  job's ``trainingOutput.progress``, looked at every ``poll_s``, written at most every
  `PROGRESS_EVERY_S`, and once more after the last process ended;
- each replica's pid, start time and exit are kept in the job's record (`JobRecord.procs`) as they
  change, so a later backend re-adopts or judges them (`supervise` is what it runs for them).
"""

from __future__ import annotations

import asyncio
import logging
import pathlib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Protocol

from hub_ext.core.ports import free_ports
from server_ext.jobs import progress
from server_ext.jobs.local.env import HOST, command, decide, mounts_env, port_tasks, task_env
from server_ext.jobs.plan import JobPlan
from server_ext.runtimes.local import package as local_package
from server_ext.runtimes.local.procs import Replica, read_chunk, start_replica, stop, wait_any
from server_ext.runtimes.local.store import JobRecord, JobRecords

log = logging.getLogger("mlplatform.jobs.local")


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


class Host(JobRecords, Protocol):
    """What a run needs of its backend: the records, and how processes are run."""

    python: str  # the interpreter of every replica and of pip
    grace_s: float  # SIGTERM to SIGKILL
    poll_s: float  # how often processes are looked at


@dataclass
class Live:
    procs: dict[str, Replica] = field(default_factory=dict)
    cancel: asyncio.Event = field(default_factory=asyncio.Event)
    installer: asyncio.subprocess.Process | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)  # set once the final state is written


class Failed(Exception):
    """The job cannot run; the message is its errorMessage."""


async def run(host: Host, rec: JobRecord, plan: JobPlan, live: Live, base: dict, extra: dict) -> None:
    pythonpath: list[str] = []
    if not live.cancel.is_set():
        await host.update_record(rec, state="PREPARING")
        pythonpath = await prepare(host, rec, plan, live, base)
    if not live.cancel.is_set():
        await spawn(host, rec, plan, live, base, extra, pythonpath)
    await supervise(host, rec, live)


async def prepare(host: Host, rec: JobRecord, plan: JobPlan, live: Live, base: dict) -> list[str]:
    """Fetch and install the packages; the PYTHONPATH entries for the replicas."""
    job_dir = host.job_dir(rec.project, rec.job_id)
    try:
        files, dirs = await local_package.locate(plan, job_dir, {**base, **mounts_env(plan)},
                                                 f"{rec.project}/{rec.job_id}")
    except local_package.PackagesUnavailable as e:
        raise Failed(str(e)) from None
    if not files:
        return dirs

    def started(process: asyncio.subprocess.Process | None) -> None:
        live.installer = process

    try:
        site = await local_package.install(files, python=host.python, state_dir=host.state_dir,
                                           project=rec.project, log_path=job_dir / f"{rec.tasks[0]}.log",
                                           env=base, cancelled=live.cancel, started=started)
    except local_package.InstallFailed as e:
        raise Failed(f"Installing the job's packages failed (pip exited with status {e.code}); the "
                     f"{rec.tasks[0]} log has pip's output.") from None
    return [str(site), *dirs] if site is not None else dirs


async def spawn(host: Host, rec: JobRecord, plan: JobPlan, live: Live, base: dict, extra: dict,
                pythonpath: list[str]) -> None:
    job_dir = host.job_dir(rec.project, rec.job_id)
    wanted = port_tasks(plan)
    ports = dict(zip(wanted, free_ports(len(wanted), HOST)))
    argv = command(plan, host.python)
    for task in rec.tasks:
        env = task_env(plan, task, base=base, ports=ports, pythonpath=pythonpath,
                       metrics_file=str(job_dir / f"{task}.metrics"), extra=extra)
        replica = await start_replica(task, argv, env, job_dir, job_dir / f"{task}.log", job_dir / f"{task}.exit")
        live.procs[task] = replica
        rec.procs[task] = replica.state()
        log.info("job %s/%s: started %s (pid %s)", rec.project, rec.job_id, task, replica.pid)
    if live.cancel.is_set():
        await host.update_record(rec)
    else:
        await host.update_record(rec, state="RUNNING", startTime=now())


async def stop_replicas(host: Host, rec: JobRecord, live: Live) -> None:
    left = await stop(live.procs.values(), host.grace_s)
    if left:
        log.warning("job %s/%s: process groups %s outlived SIGKILL", rec.project, rec.job_id,
                    ", ".join(map(str, left)))


_MARK = progress.PREFIX.encode()
PROGRESS_EVERY_S = 1.0  # the most often a running job's record takes a new progress report


class ProgressTail:
    """The master's log read as it grows, for the last progress line in it (`server_ext.jobs.progress`)."""

    def __init__(self, path: pathlib.Path):
        self.path, self.offset, self.pending = path, 0, b""
        self.unwritten: dict | None = None  # the last report read and not yet in the job's record
        self.written_at = float("-inf")  # when a report last went into it (the event loop's clock)

    async def latest(self) -> dict | None:
        found = None
        while chunk := await asyncio.to_thread(read_chunk, self.path, self.offset):
            self.offset += len(chunk)
            *lines, self.pending = (self.pending + chunk).split(b"\n")
            marked = [raw for raw in lines if _MARK in raw]  # a long log is split, not decoded line by line
            found = progress.latest((raw.decode("utf-8", "replace"), now()) for raw in marked) or found
        return found


async def _report_progress(host: Host, rec: JobRecord, tail: ProgressTail, final: bool = False) -> None:
    """The last report read into the job's record: at most every `PROGRESS_EVERY_S` while the job
    runs (each write changes its etag: a watcher is told), and whatever is left at its end."""
    tail.unwritten = await tail.latest() or tail.unwritten
    clock = asyncio.get_running_loop().time()
    if tail.unwritten is not None and (final or clock - tail.written_at >= PROGRESS_EVERY_S):
        reported, tail.unwritten, tail.written_at = tail.unwritten, None, clock
        await host.update_record(rec, trainingOutput={**(rec.job.get("trainingOutput") or {}), "progress": reported})


async def supervise(host: Host, rec: JobRecord, live: Live) -> None:
    events = [(task, r.code) for task, r in live.procs.items() if r.ended]
    tail = ProgressTail(host.job_dir(rec.project, rec.job_id) / f"{rec.tasks[0]}.log")  # the master first
    while True:
        await _report_progress(host, rec, tail)
        for task, r in live.procs.items():
            if r.ended or r.alive():
                continue
            events.append((task, await r.finish()))
            rec.procs[task] = r.state()
            log.info("job %s/%s: %s ended with status %s", rec.project, rec.job_id, task, r.code)
        if live.cancel.is_set():
            # a program that ended before the cancel was acted on (its wrapper still recording
            # it) keeps its outcome: a finished trial is not "stopped early"
            ended = [(t, c) for t, r in live.procs.items() if not r.ended
                     and (c := await asyncio.to_thread(r.ended_by_itself)) is not None]
            decision = decide(events + ended)
            await stop_replicas(host, rec, live)
            await _report_progress(host, rec, tail, final=True)
            await host.finish_record(rec, *(decision or ("CANCELLED",)))
            return
        decision = decide(events)
        if decision is None and all(r.ended for r in live.procs.values()):
            decision = ("FAILED", "Every replica ended but the master's end was not seen.")
        if decision is not None:
            await stop_replicas(host, rec, live)
            await _report_progress(host, rec, tail, final=True)
            await host.finish_record(rec, *decision)
            return
        await wait_any(live.procs.values(), live.cancel, host.poll_s)
