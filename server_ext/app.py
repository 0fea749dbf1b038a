"""`MLPlatformApp`, the notebook server extension: the `ml/v1` jobs REST + SSE API under the
server's base URL, backed by one jobs service (and so one watch cache) per server.

Configuration (``jupyter_server_config.py``, or ``--MLPlatformApp.backend=kubernetes``)::

    c.MLPlatformApp.backend = "local"            # or "kubernetes"
    c.MLPlatformApp.state_dir = "~/.local/share/mlplatform"   # local backend: jobs.sqlite and logs
    c.MLPlatformApp.projects = ["alice", "vision"]            # else: the hub's platform API, else
                                                              # the user's personal project
    c.MLPlatformApp.accelerators = {...}         # hub_ext.catalog syntax; default: the built-in catalogue

The backend starts on the first request (not at server start) and stops with the server.
"""

from __future__ import annotations

import asyncio
import os
import pathlib

from jupyter_server.extension.application import ExtensionApp
from traitlets import Dict, Enum, List, Unicode, default

from hub_ext.catalog import parse_accelerators
from hub_ext.entitlements import personal_project_name

from .config import default_state_dir
from .jobs.defaults import DEFAULT_ACCELERATORS
from .jobs.machines import Machines
from .jobs.plan import PlanSettings
from .jobs.service import JobService
from .rest.handlers import routes


class MLPlatformApp(ExtensionApp):
    name = "mlplatform"
    load_other_extensions = True

    backend = Enum(["local", "kubernetes"], default_value="local",
                   help="""Where jobs run: processes on this machine, or the Kubernetes cluster.

                   c.MLPlatformApp.backend = "kubernetes"
                   """).tag(config=True)

    state_dir = Unicode(help="""The local backend's state (jobs.sqlite, logs).

                        c.MLPlatformApp.state_dir = "/home/jovyan/.local/share/mlplatform"
                        """).tag(config=True)

    @default("state_dir")
    def _default_state_dir(self):
        return str(default_state_dir())

    projects = List(Unicode(), help="""The projects this server's user may use (empty: ask the hub's platform
                    API when in a JupyterHub, else the user's personal project).

                    c.MLPlatformApp.projects = ["alice", "vision"]
                    """).tag(config=True)

    accelerators = Dict(help="""The accelerator catalogue (hub_ext.catalog syntax); empty: the built-in one.

                        c.MLPlatformApp.accelerators = {"1g.5gb": {"type": "mig", "profile": "1g.5gb"}}
                        """).tag(config=True)

    def initialize_settings(self):
        self._service: JobService | None = None
        self._service_lock = asyncio.Lock()

    def initialize_handlers(self):
        self.handlers.extend(routes)

    async def _projects(self, user: str) -> list[str]:
        return list(self.projects) or [personal_project_name(user)]

    async def job_service(self) -> JobService:
        async with self._service_lock:
            if self._service is None:
                self._service = await self._make_service()
            return self._service

    async def _make_service(self) -> JobService:
        accelerators = parse_accelerators(self.accelerators) if self.accelerators else DEFAULT_ACCELERATORS
        settings = PlanSettings(Machines(accelerators))
        if self.backend == "local":
            from .jobs.local_backend import LocalBackend

            backend = LocalBackend(pathlib.Path(os.path.expanduser(self.state_dir)))
            await backend.start()
        else:
            raise NotImplementedError("the kubernetes backend is wired in by server_ext.jobs.kube_backend")
        self.log.info("mlplatform jobs: %s backend started", self.backend)
        return JobService(backend, settings, self._projects)

    async def stop_extension(self):
        if getattr(self, "_service", None) is not None:
            await self._service.backend.close()
