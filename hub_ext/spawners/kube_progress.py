"""What a `PlatformSpawner`'s start tells the user while it runs (part `StartProgress`, one per
``progress()`` stream), in JupyterHub's event shape ``{"progress": int, "message": str}``.

Guarantees: the start's stage ("preparing your project", "waiting for the dataset …", "waiting for
a free 1g.5gb MIG slice …", "creating the notebook pod") is told each time it changes; the pod's
Kubernetes events are told once the plan is applied, in plain words
(`hub_ext.manifests.progress_text.describe`), each event once, and only this start's pod's (its
namespace, not before the plan was applied: an earlier pod of the same name, or one of that name
in another namespace, is not described); right after where the pod was scheduled, what it was given
("assigned MIG slice 1g.5gb on node dgx-03"). No message is sent twice in a row, and none empty.
Values: 20 while preparing or waiting (a dataset's load 20 → 50 as it goes), 60 after.
"""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator, Callable, Iterable, Mapping

from hub_ext.manifests.progress_text import assigned, describe, scheduled_node
from hub_ext.spawners.queue_watch import QueueWatch
from hub_ext.spawners.runtime import Plan


class StartProgress:
    """One ``progress()`` stream's memory: the stage told last, the message sent last, the events told."""

    def __init__(self) -> None:
        self.stage: str | None = None
        self.sent: str | None = None
        self.seen: set[str] = set()  # event uids already described

    def updates(self, stage: str | None, stage_percent: int | None, plan: Plan | None, events: Iterable[dict] | None,
                namespace: str, since: str,
                capacity: Callable[[], Mapping[str, tuple[int, int]]]) -> list[dict]:
        """The events to send now: `stage` if it changed (`stage_percent`: how far a dataset it waits
        for has loaded), then `events` of the pod of `plan` (None: events are not watched) in
        `namespace` from `since` (``%Y-%m-%dT%H:%M:%S``, UTC); `capacity()` is the free capacity."""
        messages = []
        if stage != self.stage:
            self.stage = stage
            messages.append(stage)
        if plan is not None and events is not None:  # only once this spawn's pod is decided
            fresh = []
            for ev in events:
                uid = ev["metadata"].get("uid") or ev["metadata"].get("name")
                when = ev.get("lastTimestamp") or ev.get("eventTime") or ""
                if uid in self.seen or ev["metadata"].get("namespace") != namespace or when[:19] < since:
                    continue  # described already, another namespace's pod of that name, or an earlier pod's
                self.seen.add(uid)
                fresh.append(ev)
            if fresh:
                acc, count = plan.accelerator, plan.count
                free = capacity() if acc else {}
                for ev in fresh:  # what the pod was given right after where it was scheduled
                    messages.append(describe(ev, acc, count, free))
                    if acc and (node := scheduled_node(ev)):
                        messages.append(assigned(acc, count, node=node))
        out = []
        for message in messages:
            if message and message != self.sent:
                self.sent = message
                value = 20 if message.startswith(("preparing", "waiting")) else 60
                loaded = stage_percent if message == self.stage else None
                if loaded is not None:  # a dataset's load: 20 → 50 as it goes
                    value = 20 + loaded * 30 // 100
                out.append({"progress": value, "message": message})
        return out

    async def follow(self, spawner: Any) -> AsyncIterator[dict]:
        """The events of a `PlatformSpawner`'s start until it is done, every half second: its stage
        (where Kueue holds the accelerators, the queue's sentence while it waits: `QueueWatch`),
        and its pod's events."""
        queue = QueueWatch(spawner.shared.kube, spawner.runtime.accelerators)
        while True:
            started = spawner._start_future
            done = started is not None and started.done()
            plan = getattr(spawner, "_plan", None)
            stage = getattr(spawner, "_stage", None)
            if getattr(spawner, "_queued", False) and plan is not None and plan.accelerator is not None:
                if not done:
                    stage = await queue.sentence(spawner.namespace, spawner.pod_name, plan.accelerator,
                                                 plan.count) or stage
                elif not started.cancelled() and started.exception() is None:
                    stage = queue.started(plan.accelerator, plan.count) or stage
            events = spawner.events if plan is not None and spawner.events_enabled else None
            for event in self.updates(stage, getattr(spawner, "_stage_percent", None), plan, events, spawner.namespace,
                                      getattr(spawner, "_planned_at", ""),
                                      lambda: spawner.shared.view.capacity(spawner.runtime.accelerators)):
                yield event
            if done:
                return
            await asyncio.sleep(0.5)
