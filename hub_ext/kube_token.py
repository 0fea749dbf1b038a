"""The hub's API token for a notebook server, kept in a Secret rather than in the pod spec (mixin
`HubTokenSecret` of `PlatformSpawner`).

Anyone who may read pods would see a plain env value (kubespawner#398): the token lives in the
Secret ``<pod>-hub-token`` of the server's namespace, created before the pod (replaced when a
server that did not stop cleanly left one) and deleted when the server stops; the pod's env
refers to it (`PlatformSpawner.get_env`). Needs of its host: ``shared.kube``, ``pod_name``,
``namespace``, ``api_token``, ``api_token_secret``, ``user``, ``log``.
"""

from __future__ import annotations

import base64

from .credentials import MANAGED_BY
from .errors import UpstreamError
from .kube import Conflict, KubeError, path_of, reason


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
