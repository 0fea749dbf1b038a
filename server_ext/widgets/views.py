"""The notebook widgets: `JobsTable`, `JobDetail`, `SweepMonitor` (anywidget models, one ES module
each under ``static/``, served after ``static/common.js``, their shared helpers) and `Browser`, a box that shows one of them with a `JobDetail` below it;
`widget_of(client, job)` picks a job's widget (a sweep's monitor, else its detail).
Their traits and messages are `protocol.md`'s; the data are `state`'s; the updates come from
`sync` on the client thread; what they share (snapshots and deltas, the shared poll, liveness):
`widget_base.Widget`.

Guarantees:

- Each widget sends as `widget_base` says: a snapshot answering ``ready``, then deltas, at most
  one per poll; quiet while no view speaks to it.
- `JobDetail` streams one task's log (`sync.LogFollower`, stopped while quiet and by `close()`);
  a cancel needs the view's confirmation with a one-time token, valid `CONFIRM_TTL_S` seconds.
- `SweepMonitor` reads each trial's metric series until the trial has ended, and sends only the
  new points.
- No token, credential or secret is ever put in a trait or message.
"""

from __future__ import annotations

import secrets
import time
from typing import TYPE_CHECKING, Any, Callable

import ipywidgets
import traitlets as t

from server_ext.errors import PlatformError
from server_ext.jobs import progress
from server_ext.jobs.listing import compile_filter
from server_ext.widgets import state
from server_ext.widgets.sync import LogFollower
from server_ext.widgets.widget_base import STATIC, Widget, module

if TYPE_CHECKING:  # the widgets are the notebook API's views: `client.notebook` makes them (JobHandle.widget)
    from server_ext.client.notebook import Client

CONFIRM_TTL_S = 60.0


class JobsTable(Widget):
    """The project's jobs; `filter` (ml.v1 syntax, e.g. ``labels.team=vision``) restricts them."""

    _esm = module(STATIC / "jobs_table.js")
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


class JobDetail(Widget):
    """One job: its state timeline, one task's live log, cancel with confirmation."""

    _esm = module(STATIC / "job_detail.js")
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
        self._log_progress: dict | None = None  # the last progress line of the master's log seen
        self._server_progress = False  # whether the job's own JSON carries its progress
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
        if self.task == "master-replica-0":  # the primary reports progress; a v1 job's shows only in its log
            reported = progress.latest((text, None) for text in message.get("lines") or [])
            if reported is not None:
                self._log_progress = reported
                if not self._server_progress:
                    self.job = {**self.job, "progress": reported}

    def _on_jobs(self, jobs: dict, error: str) -> None:
        job = jobs.get(self.job_id)
        if job is None:
            self._set_status(error or f"job {self.job_id} not found in project {self.project}")
            return
        self._set_status(error)
        detail = state.detail(job)
        self._server_progress = detail["progress"] is not None  # a TrainJob's, a local job's
        if not self._server_progress:
            detail["progress"] = self._log_progress
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


class SweepMonitor(Widget):
    """A sweep's trials (sortable by objective), its objective per trial and against each
    hyperparameter, and its metric curves."""

    _esm = module(STATIC / "plot.js", STATIC / "sweep.js")  # the plotting kit, then the view
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

    def __init__(self, main: Widget, client: Client, project: str):
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
