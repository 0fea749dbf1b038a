"""The hub's API token for a notebook server, kept in a Secret rather than in the pod spec (part
`HubTokenSecret` of `PlatformSpawner`).

Anyone who may read pods would see a plain env value (kubespawner#398). Guarantees: the token lives
only in the Secret ``<pod>-hub-token`` (`secret_name`) of the server's namespace, labelled as the
platform's and annotated with its user; `write` makes it before the pod (replacing one that a server
which did not stop cleanly left); `delete` removes it (the spawner's post-stop hook, also when the
pod was already gone), and `delete_later` once more `LATE_CREATE_DELAY` s later unless the server is
starting or running again (a dead hub's create may land late). The pod's env refers to it
(`PlatformSpawner.get_env`). A failure to write is an `UpstreamError`; one to delete is logged.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from typing import Awaitable, Callable

from hub_ext.core.credentials import MANAGED_BY
from hub_ext.core.errors import UpstreamError
from hub_ext.kube.client import Conflict, Kube, KubeError, path_of, reason

LATE_CREATE_DELAY = 15.0  # seconds after a stop when the token Secret is deleted once more
_LATER: set = set()  # the pending follow-up deletes (kept referenced until they finish)


def secret_name(pod_name: str) -> str:
    """The token Secret's name for the server's pod."""
    return f"{pod_name}-hub-token"


class HubTokenSecret:
    """The token Secret of one server where it is now: `namespace`, its pod `pod_name`."""

    def __init__(self, kube: Kube, namespace: str, pod_name: str, log: logging.Logger | logging.LoggerAdapter,
                 log_name: str):
        self.kube, self.namespace, self.name = kube, namespace, secret_name(pod_name)
        self.log, self.log_name = log, log_name

    async def write(self, token: str, username: str) -> None:
        body = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                "metadata": {"name": self.name, "namespace": self.namespace,
                             "labels": {**MANAGED_BY, "component": "singleuser-token"},
                             "annotations": {"hub.jupyter.org/username": username}},
                "data": {"token": base64.b64encode(token.encode()).decode()}}
        try:
            try:
                await self.kube.create(body)
            except Conflict:
                await self.kube.replace(body)  # left from a server that did not stop cleanly
        except KubeError as e:
            raise UpstreamError("store the server's hub token", reason(e)) from None

    async def delete(self) -> None:
        try:
            await self.kube.delete(path_of("Secret", self.namespace, self.name))
        except KubeError as e:
            self.log.warning("could not delete the token Secret of %s: %s", self.log_name, reason(e))


def delete_later(delete: Callable[[], Awaitable[None]], unless: Callable[[], bool],
                 delay: float = LATE_CREATE_DELAY) -> None:
    """Run `delete()` (the server's token Secret, where the server is then) after `delay` s, unless
    `unless()` (the server is starting or running again) by then. A hub that died while it wrote
    the Secret may have left the create in flight (through a proxy, a loaded API server): it can
    land after the restarted hub stopped the server, and nothing would own it. (The leftover Secret
    once seen in tests/hub/test_kube_restart.py had another cause: a server with no pod was stopped
    without its cleanup, see `PlatformSpawner.run_post_stop_hook`.)"""
    async def later() -> None:
        await asyncio.sleep(delay)
        if not unless():
            await delete()

    task = asyncio.ensure_future(later())
    _LATER.add(task)
    task.add_done_callback(_LATER.discard)
