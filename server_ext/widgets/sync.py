"""What keeps the widgets current, on the client thread (`server_ext.client.notebook.background`):
`JobsPoll`, the one poll of a project's jobs shared by every widget of the kernel, and
`LogFollower`, one task's log streaming into a `state.LogBuffer`.

Guarantees:

- One `JobsPoll` per (server, project) per process (`shared_poll`): however many widgets show that
  project, it lists the jobs once per `POLL_S` (the server answers from its watch cache) and
  stops while no widget listens. Subscribers are called on the client thread with the whole
  ``{jobId: job}`` map after every poll; they compute and send their own deltas.
- A subscriber may say whether it is awake (`liveness`): one that is not is left out of the polls
  (it keeps what it last sent: its next delta, once awake, is from there), and while none is
  awake nothing is requested at all; the poll looks again every `POLL_S` (no request) and at once
  when poked.
- `poke()` polls early, but never more often than every `MIN_POLL_S`.
- `LogFollower` emits at most one message per `LOG_FLUSH_S` while lines arrive (none while the log
  is silent); a line after a quiet `LOG_FLUSH_S` goes at once (a job's first line is not held
  back), the lines after it wait for the rest of that second; each ≤ `state.LOG_MAX_BYTES`; it holds at most ``cap`` lines whatever the log's
  size; a dropped stream is resumed after the last line held (never a line twice); the log never
  goes to the kernel's stdout.
- A fast log does not starve the kernel's thread: the reader pauses `PAUSE_S` after every
  `BUSY_S` of reading (the GIL is only handed over when its holder really waits).
- Every callback runs on the client thread; methods called from other threads (the kernel's,
  where the widgets' messages arrive) only schedule work there.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Callable

from server_ext.client.rest import list_all
from server_ext.errors import JobNotFound, PlatformError
from server_ext.widgets import state

if TYPE_CHECKING:  # the widgets are the notebook API's views: `client.notebook` makes them (JobHandle.widget)
    from server_ext.client.notebook import Client

log = logging.getLogger("mlplatform.widgets")

POLL_S = 2.0
MIN_POLL_S = 0.5
LOG_FLUSH_S = 1.0
RETRY_S = 2.0
BUSY_S = 0.02  # a log read faster than it is written: after this long busy, the reader pauses
PAUSE_S = 0.005  # long enough for the kernel's thread to take the GIL (a bare yield is not)

Subscriber = Callable[[dict, str], None]
Awake = Callable[[], bool]


def _always() -> bool:
    return True


class JobsPoll:
    """The jobs of one project, listed every `interval` seconds while anyone listens."""

    def __init__(self, client: Client, project: str, interval: float = POLL_S):
        self.client, self.project, self.interval = client, project, interval
        self.jobs: dict[str, dict] = {}
        self.error = ""
        self.polls = 0
        self._subs: dict[Subscriber, Awake] = {}
        self._task: asyncio.Task | None = None
        self._wake: asyncio.Event | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self.client.bg.loop

    def subscribe(self, callback: Subscriber, awake: Awake = _always) -> Callable[[], None]:
        """Call `callback(jobs, error)` after each poll while `awake()` (and now, if a poll already
        answered); the function returned unsubscribes. Callable from any thread."""
        def add() -> None:
            self._subs[callback] = awake
            if self.polls:
                callback(self.jobs, self.error)
            if self._task is None or self._task.done():
                self._wake = asyncio.Event()
                self._task = self.loop.create_task(self._run())

        def remove() -> None:
            self._subs.pop(callback, None)
        self.loop.call_soon_threadsafe(add)
        return lambda: self.loop.call_soon_threadsafe(remove)

    def poke(self) -> None:
        def wake() -> None:
            if self._wake is not None:
                self._wake.set()
        self.loop.call_soon_threadsafe(wake)

    def _listening(self) -> list[Subscriber]:
        out = []
        for callback, awake in list(self._subs.items()):
            try:
                if awake():
                    out.append(callback)
            except Exception:  # a broken predicate must not stop the others
                log.exception("jobs poll subscriber of %s failed", self.project)
        return out

    async def _run(self) -> None:
        while self._subs:
            if not self._listening():  # quiet: no request until someone wakes
                await self._nap(self.interval)
                continue
            try:
                self.jobs = {j["jobId"]: j for j in await list_all(self.client.jobs, self.project)}
                self.error = ""
            except PlatformError as e:
                self.error = str(e)
                log.info("jobs poll of %s at %s failed: %s", self.project, self.client.base_url, e)
            self.polls += 1
            for callback in self._listening():
                try:
                    callback(self.jobs, self.error)
                except Exception:  # one broken widget must not stop the others
                    log.exception("jobs poll subscriber of %s failed", self.project)
            await asyncio.sleep(MIN_POLL_S)
            await self._nap(max(self.interval - MIN_POLL_S, 0))

    async def _nap(self, seconds: float) -> None:
        """Wait `seconds`, or less if poked."""
        try:
            await asyncio.wait_for(self._wake.wait(), seconds)
        except asyncio.TimeoutError:
            pass
        self._wake.clear()


_polls: dict[tuple[int, str], JobsPoll] = {}


def shared_poll(client: Client, project: str | None = None) -> JobsPoll:
    """The process's poll of `project` on `client`'s server."""
    project = project or client.project
    key = (id(client.jobs), project)
    if key not in _polls:
        _polls[key] = JobsPoll(client, project)
    return _polls[key]


class LogFollower:
    """One task's log, followed into a `LogBuffer`; `emit(message)` gets ``log_reset`` /
    ``log_append`` / ``log_end`` messages (`protocol.md`), `status(text)` problems (``""`` when
    cleared). Runs while `following`; start and stop with `follow(bool)`."""

    def __init__(self, client: Client, project: str, job_id: str, emit: Callable[[dict], None],
                 status: Callable[[str], None] = lambda text: None, task: str = "master-replica-0",
                 cap: int = state.LOG_CAP, flush_s: float = LOG_FLUSH_S, max_bytes: int = state.LOG_MAX_BYTES):
        self.client, self.project, self.job_id = client, project, job_id
        self._emit, self._status = emit, status
        self.task, self.cap, self.flush_s, self.max_bytes = task, cap, flush_s, max_bytes
        self.buffer = state.LogBuffer(cap)
        self.ended = False
        self._reader: asyncio.Task | None = None
        self._flush_at: asyncio.TimerHandle | None = None
        self._sent_at = float("-inf")  # loop time of the last message of lines

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self.client.bg.loop

    def _later(self, fn, *args) -> None:
        self.loop.call_soon_threadsafe(fn, *args)

    # -- called from any thread
    def follow(self, on: bool) -> None:
        self._later(self._follow, on)

    def view_ready(self) -> None:
        self._later(self._view_ready)

    def set_task(self, task: str) -> None:
        self._later(self._set_task, task)

    def close(self) -> None:
        self._later(self._follow, False)

    # -- on the client thread
    def _follow(self, on: bool) -> None:
        if on and (self._reader is None or self._reader.done()) and not self.ended:
            self._reader = self.loop.create_task(self._read())
        elif not on and self._reader is not None:
            self._reader.cancel()
            self._reader = None
            self._flush()

    def _view_ready(self) -> None:
        self.buffer.view_lost()
        self._flush()
        if self.ended:
            self._emit({"type": "log_end", "task": self.task, "state": self._end_state})

    def _set_task(self, task: str) -> None:
        running = self._reader is not None
        self._follow(False)
        self.task, self.buffer, self.ended = task, state.LogBuffer(self.cap), False
        self._flush()
        self._follow(running)

    def _flush(self) -> None:
        if self._flush_at is not None:
            self._flush_at.cancel()
            self._flush_at = None
        message = self.buffer.take(self.task, self.max_bytes)
        if message is not None:
            if message.get("lines"):  # an empty reset (a view's start) holds back no line after it
                self._sent_at = self.loop.time()
            self._emit(message)

    def _line_arrived(self) -> None:
        if self._flush_at is None:  # at once after a quiet flush_s (the lines read meanwhile join it)
            delay = max(0.0, self._sent_at + self.flush_s - self.loop.time())
            self._flush_at = self.loop.call_later(delay, self._flush)

    _end_state = ""

    async def _read(self) -> None:
        task, buffer = self.task, self.buffer
        while True:
            try:
                lines = self.client.jobs.logs(self.project, self.job_id, task, follow=True, after=buffer.last)
                busy_since = self.loop.time()
                try:
                    async for line in lines:
                        buffer.add(line.seq, line.text)
                        self._line_arrived()
                        if self.loop.time() - busy_since > BUSY_S:
                            await asyncio.sleep(PAUSE_S)
                            busy_since = self.loop.time()
                finally:
                    await lines.aclose()
                job = await self.client.jobs.get(self.project, self.job_id)
                self._status("")
                self._flush()
                self.ended, self._end_state = True, job.get("state", "")
                self._emit({"type": "log_end", "task": task, "state": self._end_state})
                return
            except asyncio.CancelledError:
                raise
            except JobNotFound as e:
                self._status(f"no log yet: {e}")
            except PlatformError as e:
                self._status(str(e))
            await asyncio.sleep(RETRY_S)
