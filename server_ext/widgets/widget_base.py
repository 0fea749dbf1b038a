"""What every polled notebook widget shares (`views.JobsTable`, `JobDetail`, `SweepMonitor` are
`Widget`s): its ES module, its project and status line, the shared poll, the views' custom messages,
and liveness. Their traits and messages are `protocol.md`'s.

Guarantees:

- A widget sends bulk data as a snapshot answering a view's ``ready`` and then as deltas
  (`state.diff`), at most one per poll, none when nothing changed. Until a view has asked, each
  update goes out as a snapshot instead of a delta, and the first `UNASKED_POLLS` polls send one
  even when nothing changed (`Widget._resend_unasked`): the kernel reads a ``ready`` only between
  cells, and a snapshot that arrives before the view has rendered is not seen, so a view shown by
  a cell that then blocks (``display(widgets.jobs()); job.wait()``) would otherwise stay empty
  until the cell ends.
- Widgets of one kernel share one `sync.JobsPoll` per (server, project); `close()` unsubscribes.
- A widget no view has spoken to for `liveness.QUIET_AFTER_S` (views say ``alive`` every 10 s
  while shown on a visible page), with no cell running, is quiet: it sends nothing (trait
  updates included) and its poll leaves it out, so an abandoned notebook is idle for an idle
  culler. A view's next message wakes it: it polls at once and makes good what it held back (the
  whole state; a snapshot / log reset as for ``ready``).
- A view's ES module is `COMMON` (the views' shared helpers and badge CSS) followed by its own
  parts (`module`), all under ``static/``: nothing is fetched from elsewhere.
"""

from __future__ import annotations

import pathlib
import threading
from typing import TYPE_CHECKING, Any, Callable

import anywidget
import traitlets as t

from server_ext.widgets.liveness import Liveness
from server_ext.widgets.sync import JobsPoll, shared_poll

if TYPE_CHECKING:  # the widgets are the notebook API's views: `client.notebook` makes them (JobHandle.widget)
    from server_ext.client.notebook import Client

STATIC = pathlib.Path(__file__).parent / "static"
COMMON = STATIC / "common.js"  # the views' shared helpers and badge CSS, served before each view
UNASKED_POLLS = 15  # polls (about 30 s) that re-send the snapshot while no view has asked for one


def module(*parts: pathlib.Path) -> str:
    """A view's one ES module (anywidget takes one): `COMMON`, then `parts`, joined; each part uses
    the names of those before it as its own."""
    return "\n".join(path.read_text() for path in (COMMON, *parts))


class Widget(anywidget.AnyWidget):
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
