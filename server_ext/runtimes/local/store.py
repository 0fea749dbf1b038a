"""The local job backend's durable state: one SQLite file (``<state_dir>/jobs.sqlite``, created
``0600``), and the state directory's owner lock (`own_state_dir`, which also makes the directory
its OS user's only).

One row per job, keyed by (project, jobId): the `ml.v1` Job JSON exactly as the API answers it,
the owner, the task names, and per task the process that runs it (pid, start time in clock ticks
from ``/proc/<pid>/stat``, the boot id — together they tell a live process from a reused pid —
and the exit status once known).

Guarantees:
- `insert` is all or nothing and raises `JobExists` when the key is taken (the primary key decides,
  so two backends on one file cannot both create a job).
- Writes are applied in the order they were called: each takes a snapshot of the record when
  called and they run one at a time, so a slow write never overwrites a newer one.
- SQLite runs in a worker thread (`asyncio.to_thread`); the event loop never blocks on disk. A
  statement still running when its caller was cancelled completes before `close` closes the file.

`JobRecords` is what the local sweeps (`local_sweeps`) may ask of the backend that keeps the
records (`local_backend.LocalBackend`): find a record, change or finish it, submit and cancel
jobs, and wait for one to end.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import pathlib
import sqlite3
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping, Protocol

from hub_ext.core.errors import ConfigError, Problem
from hub_ext.local.files import private_dir, private_opener, tighten
from server_ext.errors import JobExists

if TYPE_CHECKING:
    from server_ext.jobs.plan import JobPlan

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    project TEXT NOT NULL,
    job_id TEXT NOT NULL,
    owner TEXT NOT NULL,
    job TEXT NOT NULL,
    tasks TEXT NOT NULL,
    procs TEXT NOT NULL,
    PRIMARY KEY (project, job_id)
)
"""


@dataclass
class JobRecord:
    project: str
    job_id: str
    owner: str
    job: dict  # the ml.v1 Job JSON
    tasks: list[str]
    procs: dict[str, dict] = field(default_factory=dict)  # task → {"pid", "start", "boot", "exit"}

    @property
    def key(self) -> tuple[str, str]:
        return self.project, self.job_id

    def row(self) -> tuple:
        return (self.project, self.job_id, self.owner, json.dumps(self.job, sort_keys=True), json.dumps(self.tasks),
                json.dumps(self.procs, sort_keys=True))


class JobRecords(Protocol):
    """The local jobs' records as their owner lends them: each (project, jobId) has one `JobRecord`,
    changed only through `update_record` and `finish_record` (which save it and stamp its etag)."""

    state_dir: pathlib.Path
    max_processes: int  # the most processes one job may run at once

    def job_dir(self, project: str, job_id: str) -> pathlib.Path:
        """Where the job's logs and metrics files are."""

    def find_record(self, project: str, job_id: str) -> JobRecord | None:
        """The job's record (the object itself, not a copy), or None."""

    def ending(self, project: str, job_id: str) -> asyncio.Event | None:
        """While the job runs here: the event set once its final state is written; None after that
        (or when it is not run here)."""

    async def update_record(self, rec: JobRecord, **fields) -> None:
        """Set `fields` of the record's Job JSON (none: only save it) and save it."""

    async def finish_record(self, rec: JobRecord, state: str, message: str | None = None) -> None:
        """End the job in `state` (``errorMessage`` = `message`) and set its `ending` event."""

    async def submit(self, plan: JobPlan, *, env: Mapping[str, str] | None = None) -> dict:
        """Create and start a job; `env` is added to every replica's environment."""

    async def cancel(self, project: str, job_id: str) -> dict:
        """Cancel a job (`JobFinished` when it has ended)."""


class JobStore:
    """Open with `await JobStore.open(path)`; `close` when done."""

    def __init__(self, db: sqlite3.Connection):
        self._db = db
        self._thread_lock = threading.Lock()
        self._closed = False
        self._order = asyncio.Lock()

    @classmethod
    async def open(cls, path: pathlib.Path) -> "JobStore":
        def connect() -> sqlite3.Connection:
            private_dir(path.parent)
            os.close(private_opener(path, os.O_RDWR | os.O_CREAT))  # SQLite gives its -wal and -shm this mode
            db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=30)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(_SCHEMA)
            return db

        return cls(await asyncio.to_thread(connect))

    def _run(self, sql: str, params: tuple = ()) -> list[tuple]:
        with self._thread_lock:  # one statement at a time, and never on a closed connection
            if self._closed:
                raise RuntimeError("the job store is closed")
            return self._db.execute(sql, params).fetchall()

    def _close(self) -> None:
        with self._thread_lock:
            if not self._closed:
                self._closed = True
                self._db.close()

    async def load(self) -> list[JobRecord]:
        rows = await asyncio.to_thread(self._run, "SELECT project, job_id, owner, job, tasks, procs FROM jobs "
                                                  "ORDER BY rowid")
        return [JobRecord(p, j, o, json.loads(job), json.loads(tasks), json.loads(procs))
                for p, j, o, job, tasks, procs in rows]

    async def insert(self, rec: JobRecord) -> None:
        row = rec.row()
        async with self._order:
            try:
                await asyncio.to_thread(self._run, "INSERT INTO jobs (project, job_id, owner, job, tasks, procs) "
                                                   "VALUES (?, ?, ?, ?, ?, ?)", row)
            except sqlite3.IntegrityError:
                raise JobExists(rec.project, rec.job_id) from None

    async def save(self, rec: JobRecord) -> None:
        row = rec.row()
        async with self._order:
            await asyncio.to_thread(self._run, "UPDATE jobs SET owner = ?, job = ?, tasks = ?, procs = ? "
                                               "WHERE project = ? AND job_id = ?", (*row[2:], *row[:2]))

    async def close(self) -> None:
        # not under `_order`: a write whose caller was cancelled may still be running in its thread,
        # and the thread lock (not the asyncio one) is what waits for it
        await asyncio.to_thread(self._close)


def own_state_dir(state_dir: pathlib.Path) -> int:
    """An exclusive lock on `state_dir` (``owner.lock``, holding the owner's pid), kept until the
    descriptor it answers is closed (or the process ends). A second backend on the same directory,
    in this process or another, is refused: it would adopt the first one's running jobs and fail
    those it is still preparing.

    The directory is made its OS user's only (``0700``), and what an earlier run left readable by
    group or others in it (job records, logs, sweeps) is tightened."""
    private_dir(state_dir)
    tighten(state_dir)
    fd = os.open(state_dir / "owner.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        owner = os.read(fd, 32).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise ConfigError([Problem(str(state_dir), f"is in use by another process (pid {owner}): one process at "
                                   "a time runs the local runtime on a state directory (a notebook server, or a "
                                   "kubectl ai-platform --local command such as a stream-logs still following). "
                                   "Reach a notebook server's jobs through it (in its terminal, without --local; "
                                   "elsewhere with MLPLATFORM_SERVER_URL and MLPLATFORM_SERVER_TOKEN), end the "
                                   "other command, or set MLPLATFORM_STATE_DIR to a directory of its own")]) from None
    except OSError:
        os.close(fd)
        raise
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
    except OSError:
        os.close(fd)
        raise
    return fd
