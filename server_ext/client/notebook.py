"""The notebook user's jobs API: plain (blocking) calls, for a kernel's cells.

    from server_ext import client
    job = client.submit("job.yaml", job_id="train_1", args=["--epochs=5"])
    job.wait()                      # → the handle, once SUCCEEDED / FAILED / CANCELLED
    for line in job.logs(): ...     # an iterator of lines; nothing is printed
    job.cancel(); job.widget()      # its widget: a JobDetail (a sweep: its SweepMonitor)

Guarantees:

- Every call goes to the notebook server this kernel runs in (`server_ext.client.from_environment`:
  the kernel inherits the server's URL and token), through `ServerJobs`; errors are
  `server_ext.errors` (`UserInputError` with the field at fault, `JobNotFound`, `JobExists`,
  `JobFinished`, `UpstreamError`).
- The asyncio work runs on **one** background thread with its own loop (`background()`), shared by
  every client and widget of the process, so the kernel's own loop is never blocked by it and
  never runs it; a blocking call waits only for its own answer.
- `JobHandle.logs()` reads the server's SSE stream in batches with back-pressure (at most
  `LOG_QUEUE_BATCHES` batches wait for the reader), so a 100 MB log never sits in memory; closing
  the iterator (or leaving its ``for`` loop) stops the stream.
- The token is never printed, logged, or stored in a handle's repr.
- `submit`'s arguments are read as the CLI reads its flags (`client.submissions.submission_of`). A
  job needs no id: without ``job_id=`` (or a ``jobId`` in the config) it is named
  `submissions.default_job_id`'s ``<module's last part>_<YYYYmmdd_HHMMSS>`` (UTC; ``trainer.task`` →
  ``task_20261203_155402``), as ``local train`` names its runs; one already given out by this
  process gets ``_2``, ``_3``…, and one the server has already gets the next (never a name the user
  chose).
- A Katib Experiment submitted as it is (Katib's own examples) is changed as the CLI changes it
  (`native_experiment.named`, `.notes`: JOB names it, a ``kubeflow`` namespace becomes the
  project); once the server accepted it, `submit` prints each such note on stderr (the cell's
  output), once per submit, as ``kubectl ai-platform`` does.
- Every client's HTTP connections are closed when the interpreter exits (`atexit`, on the client
  thread, waiting at most `CLOSE_AT_EXIT_S`), and when a client is garbage-collected; the
  registry of clients holds them weakly, so a client nobody uses can be collected. Scripts end
  without aiohttp's "Unclosed client session" warnings; `Client.close()` closes earlier.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import getpass
import os
import queue
import sys
import threading
import time
import weakref
from dataclasses import replace
from typing import Any, Iterator, Mapping

from server_ext.client.environment import server_from_environment
from server_ext.client.rest import ServerJobs, list_all
from server_ext.client.service import RemoteService
from server_ext.client.submissions import MadeUpId, experiment_notes, fresh, submission_of
from server_ext.errors import JobExists, UpstreamError
from server_ext.jobs.backend import FINAL

__all__ = ["Client", "JobHandle", "connect", "submit", "job", "jobs", "background"]

LOG_QUEUE_BATCHES = 64
CLOSE_AT_EXIT_S = 2.0  # how long the interpreter's exit waits for the clients' connections to close


class _Background:
    """A daemon thread running one asyncio loop forever."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="mlplatform-client", daemon=True)
        self.thread.start()
        atexit.register(_close_at_exit)  # the thread is a daemon: it still runs while atexit does

    def alive(self) -> bool:
        return self.thread.is_alive() and not self.loop.is_closed()

    def spawn(self, coro) -> concurrent.futures.Future:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro, timeout: float | None = None) -> Any:
        """Run `coro` there and wait for its result (from any thread but the loop's own)."""
        if threading.current_thread() is self.thread:
            raise RuntimeError("a blocking client call was made on the client thread")
        future = self.spawn(coro)
        try:
            return future.result(timeout)
        except BaseException:
            future.cancel()
            raise


_background: _Background | None = None
_lock = threading.RLock()


def background() -> _Background:
    """The process's client thread (started on first use)."""
    global _background
    with _lock:
        if _background is None:
            _background = _Background()
        return _background


_clients_alive: "weakref.WeakSet[Client]" = weakref.WeakSet()  # every Client, held weakly


def _close_at_exit(timeout: float = CLOSE_AT_EXIT_S) -> None:
    """atexit: close every live client's connections on the client thread, waiting at most `timeout`."""
    bg = _background
    if bg is None or not bg.alive():
        return
    closes = [close for close in (getattr(c.jobs, "close", None) for c in list(_clients_alive)) if callable(close)]
    if not closes:
        return

    async def close_all() -> None:
        await asyncio.gather(*(close() for close in closes), return_exceptions=True)

    try:
        bg.spawn(close_all()).result(timeout)
    except Exception:  # a server that does not answer in time must not hold up the exit
        pass


def _close_collected(jobs: Any) -> None:
    """weakref.finalize of a collected `Client`: close its connections, without waiting."""
    close = getattr(jobs, "close", None)
    bg = _background
    if callable(close) and bg is not None and bg.alive():
        try:
            bg.spawn(close())
        except RuntimeError:  # the loop stopped meanwhile
            pass


def default_project(env: Mapping[str, str] = os.environ) -> str:
    """``$MLPLATFORM_PROJECT``, else the personal project of ``$JUPYTERHUB_USER``, else of the OS
    user running Python (as ``kubectl ai-platform``'s). Only a server the platform spawned sets
    ``MLPLATFORM_PROJECT`` and ``JUPYTERHUB_USER``: a script run elsewhere (``MLPLATFORM_SERVER_URL``)
    names its project with ``MLPLATFORM_PROJECT`` or ``project=``."""
    from hub_ext.core.entitlements import personal_project_name

    return env.get("MLPLATFORM_PROJECT") or personal_project_name(env.get("JUPYTERHUB_USER") or getpass.getuser())


class Client:
    """A notebook server's jobs API for one project, with blocking methods."""

    def __init__(self, base_url: str, token: str, project: str | None = None, *, env: Mapping[str, str] = os.environ,
                 jobs: Any = None):
        """`jobs`: the ml/v1 client to use instead of a `ServerJobs` of (`base_url`, `token`), e.g. a
        stand-in with `ServerJobs`' async methods."""
        self.jobs = jobs if jobs is not None else ServerJobs(base_url, token)  # used only on the background loop
        self.base_url = base_url if base_url.endswith("/") else base_url + "/"
        self.project = project or default_project(env)
        self.bg = background()
        _clients_alive.add(self)
        weakref.finalize(self, _close_collected, self.jobs).atexit = False  # at exit: `_close_at_exit`

    def __repr__(self) -> str:
        return f"Client({self.base_url!r}, project={self.project!r})"

    def call(self, coro, timeout: float | None = None) -> Any:
        return self.bg.run(coro, timeout)

    def close(self) -> None:
        """Close the HTTP connections (a kernel's client lives as long as the kernel; tests and
        scripts close theirs). The client opens them again if used after."""
        close = getattr(self.jobs, "close", None)
        if close is not None:
            self.call(close())

    def submit(self, config: dict | str | os.PathLike | None = None, project: str | None = None,
               package_path: str | os.PathLike | None = None, **flags: Any) -> "JobHandle":
        """Create a job from `config` (a Job dict, a YAML/JSON file path, or YAML text; a Katib
        Experiment too) overridden by `flags`: ``kubectl ai-platform jobs submit training``'s flags
        with ``_`` for ``-`` (``job_id``, ``module_name``, ``scale_tier``, ``labels={...}``,
        ``master_accelerator="type=…,count=1"``, ``credentials=[...]``, ``datasets=[...]``, …) and
        ``args=[...]`` (the trainer's arguments). `package_path`: a directory inside the server's
        root, built and shipped as the job's package. An error found before sending names the
        argument (``module_name``); the server's name its field (``trainingInput.pythonModule``).
        Without ``job_id`` (and no ``jobId`` in the config) the job is named `default_job_id`'s way."""
        project = project or self.project
        said: list[str] = []  # what was changed in a Katib Experiment, told once it is accepted
        sub = submission_of(config, package_path, flags, project, notes=said)
        made_up = isinstance(sub.job.get("jobId"), MadeUpId)  # `default_job_id`'s, not the user's
        service = RemoteService(self.jobs)
        for attempt in range(5):
            try:
                answer = self.call(service.create("", project, sub))
                _tell(said + experiment_notes(sub.job, project))
                return JobHandle(self, project, answer)
            except JobExists:
                if not made_up or attempt == 4:  # a name the user chose is theirs to change
                    raise
                sub = replace(sub, job={**sub.job, "jobId": MadeUpId(fresh(sub.job["jobId"]))})  # another
                # kernel made it up too
        raise AssertionError("unreachable")

    def job(self, job_id: str, project: str | None = None) -> "JobHandle":
        project = project or self.project
        return JobHandle(self, project, self.call(self.jobs.get(project, job_id)))

    def jobs_list(self, filter: str | None = None, project: str | None = None) -> list["JobHandle"]:
        project = project or self.project
        return [JobHandle(self, project, j) for j in self.call(list_all(self.jobs, project, filter))]


class JobHandle:
    """One job. `job` is its JSON as last read; `state` reads it again unless it has ended."""

    def __init__(self, client: Client, project: str, job: dict):
        self.client, self.project, self.job = client, project, job
        self.id: str = job["jobId"]

    def __repr__(self) -> str:
        return f"JobHandle({self.id!r}, project={self.project!r}, state={self.job.get('state')!r})"

    @property
    def state(self) -> str:
        if self.job.get("state") not in FINAL:
            self.refresh()
        return self.job["state"]

    def refresh(self) -> "JobHandle":
        self.job = self.client.call(self.client.jobs.get(self.project, self.id))
        return self

    def wait(self, timeout: float | None = None, poll: float = 1.0) -> "JobHandle":
        """Block until the job has ended (`TimeoutError` after `timeout` s); the handle, refreshed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.refresh().job.get("state") not in FINAL:
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"job {self.id} is still {self.job.get('state')} after {timeout} s")
            time.sleep(poll if deadline is None else max(min(poll, deadline - time.monotonic()), 0))
        return self

    def cancel(self) -> "JobHandle":
        """Ask the server to cancel (`JobFinished` if the job already ended); the handle, refreshed."""
        self.client.call(self.client.jobs.cancel(self.project, self.id))
        return self.refresh()

    def logs(self, task: str | None = None, follow: bool = False) -> Iterator[str]:
        """The lines of one task's log (``master-replica-0`` by default; a sweep's ``trial-3``); with
        `follow`, until the task ends. Lines are yielded, never printed."""
        return _log_lines(self.client, self.client.jobs.logs(self.project, self.id, task, follow=follow))

    def widget(self):
        """This job's widget: a `JobDetail` (state timeline, live log, cancel), or for a sweep (a job
        with ``hyperparameters``) its `SweepMonitor` with an opened trial's log below it."""
        from server_ext.widgets import views

        return views.widget_of(self.client, self.job, project=self.project)


def _log_lines(client: Client, lines) -> Iterator[str]:
    out: queue.Queue = queue.Queue()
    end = object()

    async def pump() -> None:
        batch: list[str] = []
        loop = asyncio.get_running_loop()
        scheduled = False

        def flush() -> None:
            nonlocal batch, scheduled
            scheduled = False
            if batch:
                out.put(batch)
                batch = []

        try:
            async for line in lines:
                batch.append(line.text)
                if not scheduled:  # runs once this network chunk's lines have been read
                    scheduled = True
                    loop.call_soon(flush)
                while out.qsize() >= LOG_QUEUE_BATCHES:
                    await asyncio.sleep(0.01)
            flush()
            out.put(end)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # handed to the reader, who raises it
            flush()
            out.put(e)
        finally:
            await lines.aclose()

    future = client.bg.spawn(pump())
    try:
        while True:
            item = out.get()
            if item is end:
                return
            if isinstance(item, BaseException):
                raise item
            yield from item
    finally:
        future.cancel()


def _tell(notes: list[str]) -> None:
    if notes:
        sys.stderr.write("".join(note + "\n" for note in notes))
        sys.stderr.flush()


# --------------------------------------------------------------------- the kernel's default client

_clients: dict[tuple[str, str, str | None], Client] = {}


def connect(project: str | None = None, env: Mapping[str, str] = os.environ) -> Client:
    """The client of the notebook server this kernel runs in (one per server and project)."""
    found = server_from_environment(env)
    if found is None:
        raise UpstreamError("find the notebook server", "this kernel runs in no notebook server (neither "
                            "JUPYTERHUB_SERVICE_URL + JUPYTERHUB_API_TOKEN nor MLPLATFORM_SERVER_URL + "
                            "MLPLATFORM_SERVER_TOKEN is set)")
    key = (*found, project or default_project(env))
    with _lock:
        if key not in _clients:
            _clients[key] = Client(*found, project=key[2], env=env)
        return _clients[key]


def submit(config: Any = None, project: str | None = None, package_path: Any = None, **flags: Any) -> JobHandle:
    """`Client.submit` on this kernel's notebook server."""
    return connect(project).submit(config, project, package_path, **flags)


def job(job_id: str, project: str | None = None) -> JobHandle:
    return connect(project).job(job_id)


def jobs(filter: str | None = None, project: str | None = None) -> list[JobHandle]:
    """The project's jobs (ml.v1 `filter`, e.g. ``state=RUNNING``, ``labels.team=vision``), newest first."""
    return connect(project).jobs_list(filter)
