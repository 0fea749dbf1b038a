"""Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it.

Every replica runs `Leader.run()`: every `retry_s` it reads the Lease in its namespace; it takes a
Lease that is absent or whose holder has not renewed for `leaseDurationSeconds`, and renews its
own. Writes carry the read `resourceVersion`, so of two replicas racing for an expired Lease one
wins and the other gets 409 and stays a follower. A leader that cannot renew for the lease
duration (API unreachable, another took it) steps down first: `leading` turns False and the
`on_stopped` callbacks run (the dataset controller cancels its tasks) before another replica can
take over, because it must itself wait out the same duration. `on_elected` callbacks run each time
this replica becomes leader (the controller lists and reconciles every dataset there).
`release()` (at a clean stop) empties the holder so a successor need not wait.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from typing import Awaitable, Callable

from ..kube import Conflict, Kube, KubeError, NotFound

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
        self.kube, self.namespace, self.name, self.identity = kube, namespace, name, identity
        self.duration_s = duration_s
        self.retry_s = max(duration_s / 5, 0.5)
        self.leading = False
        self._elected: list[Callback] = []
        self._stopped: list[Callback] = []
        self._last_renew: dt.datetime | None = None

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
                held = await self._try()
            except KubeError as e:
                log.warning("lease %s/%s: %s", self.namespace, self.name, e.reason)
                held = self.leading and self._last_renew is not None and \
                    (_now() - self._last_renew).total_seconds() < self.duration_s * 2 / 3
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
            self._last_renew = now
            return True
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        renewed = _parse(spec.get("renewTime"))
        duration = spec.get("leaseDurationSeconds") or self.duration_s
        expired = not holder or renewed is None or (now - renewed).total_seconds() > duration
        if holder != self.identity and not expired:
            return False
        transitions = spec.get("leaseTransitions") or 0
        acquired = _parse(spec.get("acquireTime")) if holder == self.identity else now
        lease["spec"] = self._spec(acquired or now, now, transitions + (holder != self.identity))
        try:
            await self.kube.request("PUT", self.path, lease)
        except (Conflict, NotFound):
            return False
        self._last_renew = now
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
