"""Clients of the notebook server's own ml/v1 API, for code running inside that server (the
kubectl plugin in its terminal, widgets in its kernels): `ServerJobs` (the REST + SSE client),
`RemoteService` (`JobService`'s interface over it) and `from_environment`; for notebook cells, the
blocking API of `client.notebook`: `submit`, `job`, `jobs`, `connect` → `JobHandle`s."""

from __future__ import annotations

import os
from typing import Mapping

from server_ext.client.environment import server_from_environment
from server_ext.client.notebook import Client, JobHandle, connect, job, jobs, submit
from server_ext.client.rest import ServerJobs
from server_ext.client.service import RemoteService

__all__ = ["ServerJobs", "RemoteService", "from_environment", "server_from_environment",
           "Client", "JobHandle", "connect", "submit", "job", "jobs"]


def from_environment(env: Mapping[str, str] = os.environ) -> ServerJobs | None:
    """A client of the notebook server this process runs inside (see `client.environment`), or None
    when it runs in none."""
    found = server_from_environment(env)
    return ServerJobs(*found) if found else None
