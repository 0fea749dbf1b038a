"""The progress of running dataset loads: while a loader Job runs, one asyncio task per dataset
reads the newest loader pod's last log lines every `OperatorSettings.progress_interval` seconds
(`DatasetApi.last_words`) and writes the ``Loading`` message and ``mlplatform.io/progress`` when
they change (the decisions about the load itself: `dataset_controller`).

What `ProgressFollowers` guarantees:

- at most one task per dataset, following one load: starting the load it already follows changes
  nothing, starting another replaces it;
- all the tasks share one budget of `OperatorSettings.progress_reads` reads a second (aiolimiter's
  leaky bucket), so a thousand loads at once cost the API server what twenty do, each read less often;
- a task writes only under the dataset's lock (the controller's), and only while it is still the
  task following that dataset: one stopped or replaced while it waited for the lock writes nothing,
  so a late progress write never follows the outcome the reconcile writes under the same lock;
- a task ends when it is stopped (its Job ended, its PVC went: `stop`), when this replica stops
  leading (`stop_all`), or on its own when the leader stops leading; an API error is logged and the
  next read tried.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable

from aiolimiter import AsyncLimiter

from hub_ext.kube.client import KubeError
from hub_ext.operator.context import OperatorContext
from hub_ext.operator.dataset_api import DatasetApi, Key
from hub_ext.operator.rules import datasets as ds

log = logging.getLogger("mlplatform.operator.datasets")


class ProgressFollowers:
    def __init__(self, ctx: OperatorContext, api: DatasetApi, lock_for: Callable[[Key], asyncio.Lock]):
        self.ctx, self.settings, self.api = ctx, ctx.settings, api
        self._lock = lock_for
        self._watchers: dict[Key, tuple[str, asyncio.Task]] = {}  # the load id it follows, the task
        self._progress_budget = AsyncLimiter(self.settings.progress_reads, 1.0)

    def following(self, key: Key, load_id: str) -> bool:
        """Whether a task follows the load `load_id` of the dataset `key` now."""
        watching = self._watchers.get(key)
        return bool(watching and watching[0] == load_id and not watching[1].done())

    def start(self, key: Key, spec: ds.DatasetSpec) -> None:
        running = self._watchers.get(key)
        if running and running[0] == spec.load_id and not running[1].done():
            return
        self.stop(key)
        task = asyncio.create_task(self._follow(key, spec), name=f"dataset-progress-{key[0]}/{key[1]}")
        self._watchers[key] = (spec.load_id, task)

    def stop(self, key: Key) -> None:
        running = self._watchers.pop(key, None)
        if running and running[1] is not asyncio.current_task():
            running[1].cancel()

    def stop_all(self) -> None:
        for _, task in self._watchers.values():
            task.cancel()
        self._watchers.clear()

    async def _follow(self, key: Key, spec: ds.DatasetSpec) -> None:
        """Every `progress_interval` s while this replica leads: the loader's progress onto the PVC."""
        written: tuple[str, str] | None = None
        while self.ctx.leader.leading:
            await asyncio.sleep(self.settings.progress_interval)
            try:
                async with self._progress_budget:
                    pod, progress = await self.api.last_words(spec)
                message = (ds.waiting_message(pod) if progress is None else None) or \
                    ds.progress_message(progress, spec.source.uri)
                if (message, ds.progress_annotation(progress)) != written:
                    async with self._lock(key):
                        if self._watchers.get(key, ("", None))[1] is not asyncio.current_task():
                            return  # replaced or stopped while waiting for the lock
                        await self.api.write_progress(spec, message, progress)
                    written = (message, ds.progress_annotation(progress))
            except KubeError as e:
                log.warning("dataset %s/%s: progress not read or written: %s", *key, e.reason)
