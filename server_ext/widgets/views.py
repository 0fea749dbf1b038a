"""The notebook widgets: `JobsTable`, `JobDetail`, `SweepMonitor` (anywidget models, one ES module
each under ``static/``, served after ``static/common.js``, their shared helpers) and `Browser`, a box that shows one of them with a `JobDetail` below it;
`widget_of(client, job)` picks a job's widget (a sweep's monitor, else its detail).
Their traits and messages are `protocol.md`'s; the data are `state`'s; the updates come from
`sync` on the client thread.

Guarantees:

- A widget sends bulk data as a snapshot answering a view's ``ready`` and then as deltas
  (`state.diff`), at most one per poll, none when nothing changed. Until a view has asked, each
  update goes out as a snapshot instead of a delta, and the first `UNASKED_POLLS` polls send one
  even when nothing changed: the kernel reads a ``ready`` only between cells, and a snapshot that
  arrives before the view has rendered is not seen, so a view shown by a cell that then blocks
  (``display(widgets.jobs()); job.wait()``) would otherwise stay empty until the cell ends.
- Widgets of one kernel share one `sync.JobsPoll` per (server, project); `close()` unsubscribes and
  stops the widget's log stream.
- A widget no view has spoken to for `liveness.QUIET_AFTER_S` (views say ``alive`` every 10 s
  while shown on a visible page), with no cell running, is quiet: it sends nothing (trait
  updates included) and its poll leaves it out, so an abandoned notebook is idle for an idle
  culler. A view's next message wakes it: it polls at once and makes good what it held back (the
  whole state; a snapshot / log reset as for ``ready``).
- No token, credential or secret is ever put in a trait or message.
"""

from __future__ import annotations

import pathlib
import secrets
import threading
import time
from typing import TYPE_CHECKING, Any, Callable

import anywidget
import ipywidgets
import traitlets as t

from server_ext.errors import PlatformError
from server_ext.jobs.listing import compile_filter
from server_ext.widgets import state
from server_ext.widgets.liveness import Liveness
from server_ext.widgets.sync import JobsPoll, LogFollower, shared_poll

if TYPE_CHECKING:  # the widgets are the notebook API's views: `client.notebook` makes them (JobHandle.widget)
    from server_ext.client.notebook import Client

STATIC = pathlib.Path(__file__).parent / "static"
COMMON = STATIC / "common.js"  # the views' shared helpers and badge CSS, served before each view
CONFIRM_TTL_S = 60.0
UNASKED_POLLS = 15  # polls (about 30 s) that re-send the snapshot while no view has asked for one


def _module(*parts: pathlib.Path) -> str:
    """A view's one ES module (anywidget takes one): `COMMON`, then `parts`, joined; each part uses
    the names of those before it as its own."""
    return "\n".join(path.read_text() for path in (COMMON, *parts))


class _Widget(anywidget.AnyWidget):
    """Common parts: the project, a status line, the shared poll, custom messages dispatched by
    ``type`` to ``_on_<type>`` (on the kernel's thread), whether a view has asked (``ready``)
    yet (`_asked`, read and set on the client thread), and liveness (`liveness.Liveness`): while
    quiet the poll leaves the widget out and `_send` sends nothing; what it held back is made good
    when a view wakes it (`_resume`)."""

    _asked, _unasked_polls = False, 0
    _quiet = False  # as last seen by `_awake`
    _held_state = _held_custom = False  # a trait update / a custom message was held back while quiet

    project = t.Unicode("").tag(sync=True)
    status = t.Unicode("").tag(sync=True)

    def __init__(self, client: Client, project: str | None = None, poll: JobsPoll | None = None, **kwargs: Any):
        self._alive = Liveness()
        self._flip = threading.Lock()
        super().__init__(project=project or client.project, **kwargs)
        self._client = client
        self._poll = poll or shared_poll(client, self.project)
        self.on_msg(self._dispatch)
        self._unsubscribe = self._poll.subscribe(self._on_jobs, self._awake)

    def _handle_msg(self, msg: dict) -> None:
        """Every message of a view (``alive``, ``ready``, a click, a trait it sets, the state a
        reloaded page requests) is heard first: it wakes the widget before it is answered."""
        self._alive.heard()
        self._awake()
        super()._handle_msg(msg)

    def _dispatch(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if isinstance(content, dict) and isinstance(content.get("type"), str):
            handler = getattr(self, "_on_" + content["type"], None)
            if handler is not None:
                handler(content)

    def _on_alive(self, _msg: dict) -> None:
        """A view is shown (`_handle_msg` has heard it)."""

    def _awake(self) -> bool:
        """Whether the widget talks now (any thread). Going quiet schedules `_going_quiet`, waking
        up `_resume`."""
        awake = self._alive.awake()
        with self._flip:
            woke, went = awake and self._quiet, not awake and not self._quiet
            self._quiet = not awake
        if woke:
            self._soon(self._resume)
        elif went:
            self._soon(self._going_quiet)
        return awake

    def _going_quiet(self) -> None:
        """Gone quiet (client thread): a subclass stops what it feeds its views from (a log stream)
        and starts it again in `_resume`. Nothing here: the poll leaves a quiet widget out."""

    def _resume(self) -> None:
        """Woken (client thread): send the whole state if an update was held back, answer as to a
        ``ready`` if a message was (the views' protocol recovers from a gap that way), poll now."""
        state_, custom = self._held_state, self._held_custom
        self._held_state = self._held_custom = False
        if state_:
            self.send_state()
        if custom:
            handler = getattr(self, "_on_ready", None)
            if handler is not None:
                handler({"type": "ready"})
        self._poll.poke()

    def _send(self, msg: dict, buffers: Any = None) -> None:
        """Every message to the views (trait updates and custom messages) passes here: held back
        while quiet (a kernel message counts as the user's activity)."""
        if not self._awake():
            if msg.get("method") == "custom":
                self._held_custom = True
            else:
                self._held_state = True
            return
        super()._send(msg, buffers)

    def _soon(self, fn: Callable, *args: Any) -> None:
        """Run `fn` on the client thread (where the poll's callbacks run: no lock needed)."""
        self._client.bg.loop.call_soon_threadsafe(fn, *args)

    def _on_jobs(self, jobs: dict, error: str) -> None:
        raise NotImplementedError

    def _answer_ready(self) -> None:  # JobsTable, SweepMonitor: they have `_snapshot()`
        self._asked = True
        self.send(self._snapshot())

    def _resend_unasked(self) -> bool:
        """Whether this poll sends a snapshot even though nothing changed (no view has asked yet,
        and the widget is young); counts the polls."""
        self._unasked_polls += 1
        return not self._asked and self._unasked_polls <= UNASKED_POLLS

    def _set_status(self, text: str) -> None:
        if self.status != text:
            self.status = text

    def close(self) -> None:
        self._unsubscribe()
        super().close()


class JobsTable(_Widget):
    """The project's jobs; `filter` (ml.v1 syntax, e.g. ``labels.team=vision``) restricts them."""

    _esm = _module(STATIC / "jobs_table.js")
    state_filter = t.List(t.Unicode()).tag(sync=True)
    label_filter = t.Unicode("").tag(sync=True)
    selected = t.Unicode("").tag(sync=True)
    loading = t.Bool(True).tag(sync=True)

    def __init__(self, client: Client, project: str | None = None, filter: str | None = None, **kwargs: Any):
        self._match = compile_filter(filter)
        self._rows: state.Rows = {}
        self._rev = 0
        super().__init__(client, project, **kwargs)

    @property
    def rows(self) -> state.Rows:
        """The rows as last sent."""
        return self._rows

    def _on_jobs(self, jobs: dict, error: str) -> None:
        new = state.rows(j for j in jobs.values() if self._match(j))
        delta = state.diff(self._rows, new)
        self._rows = new
        self._set_status(error)
        if self.loading:
            self.loading = False
        if self._resend_unasked() or delta is not None:
            self._rev += 1
            self.send({"type": "delta", "rev": self._rev, "now": time.time(), **delta} if self._asked
                      else self._snapshot())

    def _snapshot(self) -> dict:
        return {"type": "snapshot", "rev": self._rev, "now": time.time(), "rows": self._rows}

    def _on_ready(self, _msg: dict) -> None:
        self._soon(self._answer_ready)

    def _on_refresh(self, _msg: dict) -> None:
        self._poll.poke()


class JobDetail(_Widget):
    """One job: its state timeline, one task's live log, cancel with confirmation."""

    _esm = _module(STATIC / "job_detail.js")
    job_id = t.Unicode("").tag(sync=True)
    job = t.Dict().tag(sync=True)
    timeline = t.List().tag(sync=True)
    task = t.Unicode("master-replica-0").tag(sync=True)
    follow = t.Bool(True).tag(sync=True)
    log_cap = t.Int(state.LOG_CAP).tag(sync=True)
    log_url = t.Unicode("").tag(sync=True)

    def __init__(self, client: Client, job_id: str, project: str | None = None, task: str | None = None,
                 follow: bool = True, **kwargs: Any):
        project = project or client.project
        task = task or "master-replica-0"
        self._tokens: dict[str, float] = {}
        self._logs = LogFollower(client, project, job_id, self._send_log, self._set_status, task=task)
        super().__init__(client, project, job_id=job_id, task=task, follow=follow, log_url=self._url(project, job_id, task),
                         **kwargs)
        self.observe(self._task_set, "task")
        self.observe(self._follow_set, "follow")
        self._logs.follow(follow)

    @staticmethod
    def _url(project: str, job_id: str, task: str) -> str:
        from urllib.parse import quote, urlencode

        return (f"ml/v1/projects/{quote(project, safe='')}/jobs/{quote(job_id, safe='')}/logs?"
                + urlencode({"task": task, "follow": "false"}))

    @property
    def log(self) -> state.LogBuffer:
        return self._logs.buffer

    def _send_log(self, message: dict) -> None:
        self.send(message)

    def _on_jobs(self, jobs: dict, error: str) -> None:
        job = jobs.get(self.job_id)
        if job is None:
            self._set_status(error or f"job {self.job_id} not found in project {self.project}")
            return
        self._set_status(error)
        detail = state.detail(job)
        if detail != self.job:
            self.job = detail
        line = state.timeline(self.timeline, job, time.time())
        if line != self.timeline:
            self.timeline = line

    def _task_set(self, change: dict) -> None:
        self.log_url = self._url(self.project, self.job_id, change["new"])
        self._logs.set_task(change["new"])

    def _follow_set(self, change: dict) -> None:
        self._logs.follow(bool(change["new"]))

    def _on_ready(self, _msg: dict) -> None:
        self._logs.view_ready()

    def _going_quiet(self) -> None:
        """No view is left: stop reading the log (resumed after the last line held)."""
        self._logs.follow(False)

    def _resume(self) -> None:
        super()._resume()
        self._logs.follow(self.follow)

    def _on_cancel(self, _msg: dict) -> None:
        now = time.monotonic()
        self._tokens = {k: v for k, v in self._tokens.items() if now - v < CONFIRM_TTL_S}
        token = secrets.token_hex(8)
        self._tokens[token] = now
        state_ = self.job.get("state", "")
        self.send({"type": "confirm_cancel", "token": token,
                   "message": f"Cancel job {self.job_id} ({state_ or 'state unknown'})? Its replicas are stopped."})

    def _on_cancel_confirmed(self, msg: dict) -> None:
        issued = self._tokens.pop(str(msg.get("token")), None)
        if issued is None or time.monotonic() - issued >= CONFIRM_TTL_S:
            self.send({"type": "cancel_result", "ok": False, "message": "the confirmation expired; ask again"})
            return
        self._client.bg.spawn(self._cancel())

    async def _cancel(self) -> None:
        try:
            await self._client.jobs.cancel(self.project, self.job_id)
        except PlatformError as e:
            self.send({"type": "cancel_result", "ok": False, "message": str(e)})
            return
        self.send({"type": "cancel_result", "ok": True, "message": "cancel requested"})
        self._poll.poke()

    def close(self) -> None:
        self._logs.close()
        super().close()


class SweepMonitor(_Widget):
    """A sweep's trials (sortable by objective), its objective per trial and against each
    hyperparameter, and its metric curves."""

    _esm = _module(STATIC / "plot.js", STATIC / "sweep.js")  # the plotting kit, then the view
    job_id = t.Unicode("").tag(sync=True)
    job = t.Dict().tag(sync=True)
    metric_tag = t.Unicode("").tag(sync=True)
    goal = t.Unicode("MAXIMIZE").tag(sync=True)
    best_trial = t.Unicode("").tag(sync=True)
    hp_axes = t.List().tag(sync=True)  # state.hp_axes: the objective-by-hyperparameter plots' axes

    def __init__(self, client: Client, job_id: str, project: str | None = None, **kwargs: Any):
        self._trials: state.Rows = {}
        self._series: dict[str, list] = {}
        self._complete: set[str] = set()  # final trials whose series was read after they ended
        self._rev = 0
        self._updating = False
        self.on_open_trial: Callable[[str], None] | None = None
        super().__init__(client, project, job_id=job_id, **kwargs)

    @property
    def trials(self) -> state.Rows:
        return self._trials

    def _on_jobs(self, jobs: dict, error: str) -> None:
        job = jobs.get(self.job_id)
        self._set_status(error if job is not None or error else f"sweep {self.job_id} not found in {self.project}")
        if job is not None and not self._updating:
            self._updating = True
            self._client.bg.loop.create_task(self._update(job))

    async def _update(self, job: dict) -> None:
        import asyncio

        try:
            trials = state.trial_rows(job)
            wanted = [k for k, r in trials.items() if k not in self._complete]
            answers = await asyncio.gather(*(self._client.jobs.trial_metrics(self.project, self.job_id, k)
                                             for k in wanted), return_exceptions=True)
            points: dict[str, list] = {}
            for key, answer in zip(wanted, answers):
                if isinstance(answer, BaseException):
                    continue
                full = state.series(answer)
                known = len(self._series.get(key, []))
                if len(full) > known:
                    points[key] = full[known:]
                self._series[key] = full
                if trials[key]["state"] in state.FINAL:
                    self._complete.add(key)
            delta = state.diff(self._trials, trials)
            self._trials = trials
            row, tag, goal, best = state.job_row(job), state.metric_tag(job), state.goal(job), state.best_trial(
                trials, state.goal(job))
            for name, value in (("job", row), ("metric_tag", tag), ("goal", goal), ("best_trial", best),
                                ("hp_axes", state.hp_axes(job, trials))):
                if getattr(self, name) != value:
                    setattr(self, name, value)
            if self._resend_unasked() or delta is not None or points:
                self._rev += 1
                self.send({"type": "delta", "rev": self._rev, "now": time.time(),
                           **(delta or {"added": {}, "changed": {}, "removed": []}), "series": points}
                          if self._asked else self._snapshot())
        finally:
            self._updating = False

    def _snapshot(self) -> dict:
        return {"type": "snapshot", "rev": self._rev, "now": time.time(), "trials": self._trials,
                "series": self._series}

    def _on_ready(self, _msg: dict) -> None:
        self._soon(self._answer_ready)

    def _on_open_trial(self, msg: dict) -> None:
        if self.on_open_trial is not None:
            self.on_open_trial(str(msg.get("trialId", "")))


class Browser(ipywidgets.VBox):
    """`main` (a JobsTable or SweepMonitor) with a `JobDetail` shown below it on request."""

    def __init__(self, main: _Widget, client: Client, project: str):
        # a column: the detail gets the box's width (in a row it would be as wide as its longest log line)
        self.main, self.detail_box = main, ipywidgets.VBox()
        self._client, self._project = client, project
        super().__init__([main, self.detail_box])

    @property
    def detail(self) -> JobDetail | None:
        return self.detail_box.children[0] if self.detail_box.children else None

    def show(self, job_id: str, task: str | None = None) -> None:
        old = self.detail
        if old is not None:
            old.close()
        self.detail_box.children = [JobDetail(self._client, job_id, self._project, task=task)] if job_id else []

    def close(self) -> None:
        if self.detail is not None:
            self.detail.close()
        self.main.close()
        super().close()


def sweep_browser(client: Client, job_id: str, project: str | None = None) -> Browser:
    """A `SweepMonitor` of the sweep `job_id` in a `Browser`: an opened trial's log shows below it."""
    project = project or client.project
    monitor = SweepMonitor(client, job_id, project)
    box = Browser(monitor, client, project)
    monitor.on_open_trial = lambda trial: box.show(job_id, task=f"trial-{trial}")
    return box


def widget_of(client: Client, job: dict, project: str | None = None) -> Browser | JobDetail:
    """The widget of a job (its ml.v1 JSON): a sweep's monitor (`sweep_browser`), else its `JobDetail`."""
    if state.is_sweep(job):
        return sweep_browser(client, job["jobId"], project)
    return JobDetail(client, job["jobId"], project)
