"""Whether a widget has a view worth talking to: `Liveness`, one per widget, and `cells`, the
process's record of running cells.

Views say ``alive`` every ``ALIVE_MS`` (10 s, ``static/*.js``) while they exist and their page is
visible. A widget is *awake* while a cell runs (a cell that blocks leaves the views' messages
unread until it ends), and until `QUIET_AFTER_S` have passed since the latest of: its creation,
the last message of any of its views, the end of the last cell. Otherwise it is *quiet*: it sends
nothing and its poll does not poll, so an abandoned notebook (tab closed, user logged out) makes
no kernel message and no request, and counts as idle for an idle culler (jupyter_server counts
every comm message a kernel sends as activity). A view's next message wakes it.

Guarantees: `awake()` is cheap (a clock read), callable from any thread, and never blocks;
`cells` follows IPython's ``pre_execute``/``post_execute`` events (registered once per process,
on first use, when an IPython shell exists); with no shell, no cell ever runs.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

QUIET_AFTER_S = 30.0  # three missed ``alive``s (static/*.js ALIVE_MS = 10 s)


class Cells:
    """Whether a cell runs in this process's IPython shell, and when the last one ended."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self.running = False
        self.ended_at = float("-inf")
        self._installed = False
        self._lock = threading.Lock()

    def install(self) -> None:
        """Follow the shell's cells (once; nothing without a shell). A cell already running (the one
        making the first widget) counts as running until it ends."""
        with self._lock:
            if self._installed:
                return
            self._installed = True
        try:
            from IPython import get_ipython
        except ImportError:
            return
        shell = get_ipython()
        if shell is None:
            return
        self.running = getattr(getattr(shell, "displayhook", None), "exec_result", None) is not None
        shell.events.register("pre_execute", self.started)
        shell.events.register("post_execute", self.ended)

    def started(self) -> None:
        self.running = True

    def ended(self) -> None:
        self.running = False
        self.ended_at = self._clock()


cells = Cells()


class Liveness:
    """One widget's: `heard()` when a view sends anything; `awake()` says whether it may talk."""

    def __init__(self, cells_: Cells | None = None, quiet_after: float | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self._cells = cells_ or cells
        self._cells.install()
        self._quiet_after = quiet_after
        self._clock = clock
        self.heard_at = clock()

    @property
    def quiet_after(self) -> float:
        """`QUIET_AFTER_S` as it is now (a notebook may set it), unless given."""
        return QUIET_AFTER_S if self._quiet_after is None else self._quiet_after

    def heard(self) -> None:
        self.heard_at = self._clock()

    def awake(self) -> bool:
        if self._cells.running:
            return True
        return self._clock() - max(self.heard_at, self._cells.ended_at) < self.quiet_after
