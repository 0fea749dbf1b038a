"""Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it.

Every replica runs `Leader.run()`: every `retry_s` it reads the Lease in its namespace; it takes a
Lease that is absent, released, or whose record (holder, renewTime) it has seen unchanged for
`leaseDurationSeconds` by its own clock (as client-go: never comparing another host's timestamps
with its own, so clock skew does not matter), and renews its own. One attempt is bounded by
`retry_s` (no retries inside it). Writes carry the read `resourceVersion`, so of two replicas racing for an expired Lease one
wins and the other gets 409 and stays a follower. A leader that cannot renew for the lease
duration (API unreachable, another took it) steps down first: `leading` turns False and the
`on_stopped` callbacks run (the dataset controller cancels its tasks) once two thirds of the
duration have passed since its last renewal, before another replica can take over: that one must
see the record unchanged for the whole duration. `on_elected` callbacks run each time
this replica becomes leader (the controller lists and reconciles every dataset there).
`release()` (at a clean stop) empties the holder so a successor need not wait.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from typing import Awaitable, Callable

from hub_ext.kube.client import Conflict, Kube, KubeError, NotFound

log = logging.getLogger("mlplatform.operator.leader")
Callback = Callable[[], Awaitable[None]]


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def _micro(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(value: str | None) -> dt.datetime | None:
    if not value:
        return None
    return dt.datetime.strptime(value.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z" if "." in value
                                else "%Y-%m-%dT%H:%M:%S%z")


class Leader:
    def __init__(self, kube: Kube, namespace: str, name: str, identity: str, duration_s: int = 15):
        self.namespace, self.name, self.identity = namespace, name, identity
        self.duration_s = duration_s
        self.retry_s = max(duration_s / 5, 0.5)
        # no retries inside an attempt, and an attempt never outlasts retry_s (run's wait_for)
        self.kube = Kube(kube.api_client, timeout=self.retry_s, retries=0)
        self.leading = False
        self._elected: list[Callback] = []
        self._stopped: list[Callback] = []
        self._last_renew: float | None = None  # monotonic
        self._record: tuple[str, str] | None = None
        self._record_seen = 0.0  # monotonic time the record was first seen as it is

    @property
    def path(self) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases/{self.name}"

    def on_elected(self, fn: Callback) -> None:
        self._elected.append(fn)

    def on_stopped(self, fn: Callback) -> None:
        self._stopped.append(fn)

    async def run(self) -> None:
        while True:
            try:
                held = await asyncio.wait_for(self._try(), self.retry_s)
            except (KubeError, asyncio.TimeoutError) as e:
                log.warning("lease %s/%s: %s", self.namespace, self.name,
                            e.reason if isinstance(e, KubeError) else "no answer in time")
                held = self.leading and self._last_renew is not None and \
                    time.monotonic() - self._last_renew < self.duration_s * 2 / 3
            await self._set(held)
            await asyncio.sleep(self.retry_s)

    async def _try(self) -> bool:
        lease = await self.kube.get(self.path)
        now = _now()
        if lease is None:
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": self.namespace},
                    "spec": self._spec(now, now, 0)}
            try:
                await self.kube.request("POST", self.path.rsplit("/", 1)[0], body)
            except Conflict:
                return False
            self._last_renew = time.monotonic()
            return True
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        record = (holder, str(spec.get("renewTime") or ""))
        if record != self._record:
            self._record, self._record_seen = record, time.monotonic()
        duration = spec.get("leaseDurationSeconds") or self.duration_s
        expired = not holder or time.monotonic() - self._record_seen > duration
        if holder != self.identity and not expired:
            return False
        transitions = spec.get("leaseTransitions") or 0
        acquired = _parse(spec.get("acquireTime")) if holder == self.identity else now
        lease["spec"] = self._spec(acquired or now, now, transitions + (holder != self.identity))
        try:
            await self.kube.request("PUT", self.path, lease)
        except (Conflict, NotFound):
            return False
        self._last_renew = time.monotonic()
        return True

    def _spec(self, acquired: dt.datetime, renewed: dt.datetime, transitions: int) -> dict:
        return {"holderIdentity": self.identity, "leaseDurationSeconds": self.duration_s,
                "acquireTime": _micro(acquired), "renewTime": _micro(renewed), "leaseTransitions": transitions}

    async def _set(self, held: bool) -> None:
        if held == self.leading:
            return
        self.leading = held
        log.info("%s %s the lease %s/%s", self.identity, "holds" if held else "lost", self.namespace, self.name)
        for fn in self._elected if held else self._stopped:
            try:
                await fn()
            except Exception:  # one callback's failure must not stop the election loop
                log.exception("a leader callback failed")

    async def release(self) -> None:
        if not self.leading:
            return
        await self._set(False)
        try:
            lease = await self.kube.get(self.path)
            if lease and (lease.get("spec") or {}).get("holderIdentity") == self.identity:
                lease["spec"]["holderIdentity"] = ""
                await self.kube.request("PUT", self.path, lease)
        except KubeError as e:
            log.warning("could not release the lease %s/%s: %s", self.namespace, self.name, e.reason)
