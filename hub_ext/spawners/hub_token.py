"""The hub's API token for a notebook server, kept in a Secret rather than in the pod spec (mixin
`HubTokenSecret` of `PlatformSpawner`).

Anyone who may read pods would see a plain env value (kubespawner#398): the token lives in the
Secret ``<pod>-hub-token`` of the server's namespace, created before the pod (replaced when a
server that did not stop cleanly left one) and deleted when the server has stopped (the spawner's
post-stop hook, also when the pod was already gone), and once more `LATE_CREATE_DELAY` s later
unless the server is starting or running again (a dead hub's create may land late); the pod's env
refers to it (`PlatformSpawner.get_env`). Needs of its host: ``shared.kube``, ``pod_name``,
``namespace``, ``api_token``, ``api_token_secret``, ``user``, ``log``.
"""

from __future__ import annotations

import asyncio
import base64

from hub_ext.core.credentials import MANAGED_BY
from hub_ext.core.errors import UpstreamError
from hub_ext.kube.client import Conflict, KubeError, path_of, reason

LATE_CREATE_DELAY = 15.0  # seconds after a stop when the token Secret is deleted once more
_LATER: set = set()  # the pending follow-up deletes (kept referenced until they finish)


class HubTokenSecret:
    @property
    def token_secret_name(self) -> str:
        return f"{self.pod_name}-hub-token"

    async def _write_token_secret(self) -> None:
        kube = self.shared.kube
        body = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                "metadata": {"name": self.token_secret_name, "namespace": self.namespace,
                             "labels": {**MANAGED_BY, "component": "singleuser-token"},
                             "annotations": {"hub.jupyter.org/username": self.user.name}},
                "data": {"token": base64.b64encode(self.api_token.encode()).decode()}}
        try:
            try:
                await kube.create(body)
            except Conflict:
                await kube.replace(body)  # left from a server that did not stop cleanly
        except KubeError as e:
            raise UpstreamError("store the server's hub token", reason(e)) from None

    async def _delete_token_secret(self) -> None:
        if not self.api_token_secret:
            return
        try:
            await self.shared.kube.delete(path_of("Secret", self.namespace, self.token_secret_name))
        except KubeError as e:
            self.log.warning("could not delete the token Secret of %s: %s", self._log_name, reason(e))

    def _delete_token_secret_later(self, delay: float = LATE_CREATE_DELAY) -> None:
        """Delete the token Secret once more after `delay` s, unless the server is starting or
        running again by then. A hub that died while it wrote the Secret may have left the create in
        flight (through a proxy, a loaded API server): it can land after the restarted hub stopped
        the server, and nothing would own it. (The leftover Secret once seen in
        tests/hub/test_kube_restart.py had another cause: a server with no pod was stopped without its
        cleanup, see `PlatformSpawner.run_post_stop_hook`.)"""
        async def later() -> None:
            await asyncio.sleep(delay)
            if not (self.pending or self.ready or getattr(self, "_starting", False)):
                await self._delete_token_secret()

        task = asyncio.ensure_future(later())
        _LATER.add(task)
        task.add_done_callback(_LATER.discard)
