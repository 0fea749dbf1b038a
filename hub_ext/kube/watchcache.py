"""A watch cache: one list, then one watch at a time with bookmarks, resumed from the last
resourceVersion seen; a re-list only when the API answers 410 Gone (or the watch breaks in a way
a resume cannot fix).

Readers call `items()` (no API request). `state` is ``"starting"``, ``"ready"``,
``"forbidden"`` (the hub may not list this kind: the cache stops and readers treat the data as
unknown) or ``"retrying"`` (the API failed; the last good data stays until it recovers).
`on_change` is called (no arguments) after every change, for waiters. `transform` is applied to
every object before it is kept (e.g. to drop a Secret's data, keeping only its keys). A writer
that changed an object itself may `put` or `remove` it at once, so its own next read sees the
change before the watch event arrives; a `put` of an answer the watch has already gone past (the
cache's list or events are at or beyond the answer's resourceVersion) is dropped, so a late
answer never hides a later change or a deletion the watch delivered first (etcd's
resourceVersions are compared as numbers; one that is not a number is put as before).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable

from hub_ext.kube.client import Forbidden, Gone, Kube, KubeError, error_of, reason


def _number(rv: object) -> int | None:
    try:
        return int(str(rv))
    except ValueError:
        return None

log = logging.getLogger("mlplatform.watchcache")


class WatchCache:
    def __init__(self, kube: Kube, path: str, *, label_selector: str = "", field_selector: str = "",
                 watch_timeout: int = 300, retry_delay: float = 1.0, on_change: Callable[[], None] | None = None,
                 transform: Callable[[dict], dict] | None = None, list_timeout: float = 120):
        self.kube, self.path = kube, path
        self.query = {k: v for k, v in (("labelSelector", label_selector), ("fieldSelector", field_selector)) if v}
        self.watch_timeout, self.retry_delay, self.on_change = watch_timeout, retry_delay, on_change
        self.transform = transform or (lambda obj: obj)
        self.list_timeout = list_timeout
        self._delay = retry_delay
        self.state = "starting"
        self.error = ""
        self._items: dict[str, dict] = {}
        self._rv: str | None = None
        self._task: asyncio.Task | None = None
        self._loaded = asyncio.Event()
        self.lists = 0  # how many full lists it made (for tests and benchmarks)

    def items(self, namespace: str | None = None) -> list[dict]:
        if namespace is None:
            return list(self._items.values())
        prefix = f"{namespace}/"
        return [o for k, o in self._items.items() if k.startswith(prefix)]

    def put(self, obj: dict) -> None:
        known, given = _number(self._rv), _number((obj.get("metadata") or {}).get("resourceVersion"))
        if known is not None and given is not None and given <= known:
            return  # the watch has told the cache this, or more, already
        self._items[self._key(obj)] = self.transform(obj)
        self._changed()

    def remove(self, namespace: str, name: str) -> None:
        self._items.pop(f"{namespace}/{name}", None)
        self._changed()

    @property
    def known(self) -> bool:
        return self.state in ("ready", "retrying") and self._loaded.is_set()

    def start(self) -> "WatchCache":
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())
        return self

    async def wait_loaded(self, timeout: float = 10) -> bool:
        """Wait for the first list (or a definite failure); True when data is there."""
        self.start()
        try:
            await asyncio.wait_for(self._loaded.wait(), timeout)
        except asyncio.TimeoutError:
            pass
        return self.known

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
            self._task = None

    @staticmethod
    def _key(obj: dict) -> str:
        meta = obj.get("metadata") or {}
        return f"{meta.get('namespace', '')}/{meta.get('name')}"

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    async def _list(self) -> None:
        body = await self.kube.list(self.path, timeout=self.list_timeout, **self.query)
        self.lists += 1
        self._items = {self._key(o): self.transform(o) for o in body.get("items") or []}
        self._rv = (body.get("metadata") or {}).get("resourceVersion")
        self.state, self._delay = "ready", self.retry_delay
        self._loaded.set()
        self._changed()

    async def _run(self) -> None:
        while True:
            try:
                if self._rv is None:
                    await self._list()
                await self._watch_once()
            except asyncio.CancelledError:
                raise
            except Gone:
                self._rv = None  # too old: list again
                continue
            except KubeError as e:
                if isinstance(e, Forbidden) or e.code == 401:
                    self.state, self.error = "forbidden", reason(e)
                    log.warning("watch cache %s: %s; treating its data as unknown", self.path, self.error)
                    self._loaded.set()
                    self._changed()
                    return
                await self._retrying(e)
            except Exception as e:  # the connection broke, or a bad line: resume (or re-list) after a pause
                await self._retrying(e)

    async def _retrying(self, e: BaseException) -> None:
        """Pause before trying again: doubling from `retry_delay` up to 60 s, back to the start once an
        event or list gets through."""
        if self.state != "retrying":
            log.warning("watch cache %s: %s; retrying", self.path, reason(e))
        self.state, self.error = "retrying", reason(e)
        await asyncio.sleep(self._delay)
        self._delay = min(self._delay * 2, 60.0)

    async def _watch_once(self) -> None:
        query = {**self.query, "resourceVersion": self._rv, "allowWatchBookmarks": "true",
                 "timeoutSeconds": str(self.watch_timeout)}
        async for event in self.kube.watch(self.path, **query):
            kind, obj = event.get("type"), event.get("object") or {}
            if kind == "ERROR":
                if obj.get("code") == 410:
                    self._rv = None
                    return
                raise error_of(obj.get("code") or 500, obj.get("reason") or "watch error", None, f"watch {self.path}")
            rv = (obj.get("metadata") or {}).get("resourceVersion")
            if rv:
                self._rv = rv
            if kind == "BOOKMARK":
                continue
            if kind == "DELETED":
                self._items.pop(self._key(obj), None)
            else:
                self._items[self._key(obj)] = self.transform(obj)
            self.state, self._delay = "ready", self.retry_delay
            self._changed()
