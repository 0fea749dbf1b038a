"""`MLPlatformApp`, the notebook server extension: the `ml/v1` jobs REST + SSE API under the
server's base URL, backed by one jobs service (and so one set of watch caches) per server,
built by `server_ext.service.wiring` as the CLI's is.

Configuration (``jupyter_server_config.py``, or ``--MLPlatformApp.backend=kubernetes``)::

    c.MLPlatformApp.backend = "local"            # or "kubernetes"
    c.MLPlatformApp.state_dir = "~/.local/share/mlplatform"   # local backend: jobs.sqlite and logs
    c.MLPlatformApp.projects = ["alice", "vision"]            # else: the hub's platform API, else
                                                              # the user's personal project
    c.MLPlatformApp.accelerators = {...}         # hub_ext.core.catalog syntax; default: on Kubernetes the
                                                 # catalogue the hub published in each project, else
                                                 # the built-in one
    c.MLPlatformApp.projects_dir = "/srv/mlplatform/projects" # local runtime: credentials and datasets
    c.MLPlatformApp.local_max_processes = 32     # local runtime: processes per job (replicas, and a
                                                 # sweep's parallel trials × replicas)
    c.MLPlatformApp.running_jobs_are_activity = True  # local runtime: a running job keeps the server
                                                 # active for an idle culler (its processes die with it)
    c.MLPlatformApp.job_tables = {...}           # machine types, accelerator aliases, the legacy GPU,
                                                 # runtimes → images, the fetcher image
                                                 # (`server_ext.jobs.tables`)

A job's credentials and datasets (the request's ``mounts``) are chosen from the project's: on the
local runtime the files under ``projects_dir``; on Kubernetes what the hub's platform API lists
for the server's owner (`server_ext.service.hub_files`), or, with no hub, the project's Secrets and PVCs
read through the server's kubeconfig.

Jobs are planned with the project's accelerator limits from trusted values only, so a job that
asks for an accelerator its project may not use, or more of it than allowed, is refused (403,
naming ``trainingInput.<role>Config.acceleratorConfig``): the local runtime in a JupyterHub and the
Kubernetes runtime in a JupyterHub ask the hub's platform API (`server_ext.service.hub_catalog`); the
Kubernetes runtime with no hub reads the catalogue the hub published in the project
(`server_ext.runtimes.kube.target.published`, writable by the hub only).

The spawners set the environment this reads by default: ``MLPLATFORM_BACKEND`` (``kubernetes``
in a PlatformSpawner pod), ``MLPLATFORM_STATE_DIR``, ``MLPLATFORM_PROJECTS_DIR``. The backend
starts on the first request (not at server start) and stops with the server.
"""

from __future__ import annotations

import asyncio
import logging
import os
import pathlib

from jupyter_server._tz import utcnow
from jupyter_server.extension.application import ExtensionApp
from traitlets import Bool, Dict, Enum, Float, Int, List, Unicode, default

from hub_ext.core.catalog import parse_accelerators
from hub_ext.core.errors import ConfigError
from server_ext.jobs.defaults import DEFAULT_ACCELERATORS
from server_ext.jobs.plan import PlanSettings
from server_ext.jobs.tables import parse_tables
from server_ext.rest.handlers import routes
from server_ext.rest.submit_form import routes as submit_form_routes
from server_ext.rest.watch import routes as watch_routes
from server_ext.service import wiring
from server_ext.service.config import default_state_dir
from server_ext.service.hub_catalog import HubCatalog
from server_ext.service.hub_files import HubFiles
from server_ext.service.jobs import JobService
from server_ext.service.projects import HubProjects, StaticProjects


class MLPlatformApp(ExtensionApp):
    name = "mlplatform"
    load_other_extensions = True

    backend = Enum(["local", "kubernetes"],
                   help="""Where jobs run: processes on this machine, or the Kubernetes cluster
                   (default: $MLPLATFORM_BACKEND, else local).

                   c.MLPlatformApp.backend = "kubernetes"
                   """).tag(config=True)

    @default("backend")
    def _default_backend(self):
        return "kubernetes" if os.environ.get("MLPLATFORM_BACKEND") == "kubernetes" else "local"

    state_dir = Unicode(help="""The local backend's state (jobs.sqlite, logs).

                        c.MLPlatformApp.state_dir = "/home/jovyan/.local/share/mlplatform"
                        """).tag(config=True)

    @default("state_dir")
    def _default_state_dir(self):
        return str(default_state_dir())

    projects_dir = Unicode(help="""The local runtime's project directories (credentials and datasets, see
                           hub_ext.local.files); default $MLPLATFORM_PROJECTS_DIR; empty: none.

                           c.MLPlatformApp.projects_dir = "/srv/mlplatform/projects"
                           """).tag(config=True)

    @default("projects_dir")
    def _default_projects_dir(self):
        return os.environ.get("MLPLATFORM_PROJECTS_DIR", "")

    projects = List(Unicode(), help="""The projects this server's user may use (empty: ask the hub's platform
                    API when in a JupyterHub, else the user's personal project).

                    c.MLPlatformApp.projects = ["alice", "vision"]
                    """).tag(config=True)

    accelerators = Dict(help="""The accelerator catalogue (hub_ext.core.catalog syntax); empty: on Kubernetes the one
                        the hub published in each project, else the built-in one.

                        c.MLPlatformApp.accelerators = {"1g.5gb": {"type": "mig", "profile": "1g.5gb"}}
                        """).tag(config=True)

    job_tables = Dict(help="""The operator's job tables (server_ext.jobs.tables syntax): machine types,
                      accelerator aliases, the GPU standing in for legacy K80/P100/V100 machine names,
                      runtimeVersion → trainer image, the code-fetcher image. Checked at server start:
                      a mistake is logged naming its key, and the jobs API answers 503 with it.

                      c.MLPlatformApp.job_tables = {"legacy_gpu": "a100",
                          "fetcher_image": "registry.example.com/mlplatform/trainer-tools:0.1.0"}
                      """).tag(config=True)

    local_max_processes = Int(0, min=0, help="""The local runtime's limit on processes for one job: its
                              replicas, and for a sweep its parallel trials × replicas per trial; a job
                              over it is refused (400) naming the count. 0: $MLPLATFORM_LOCAL_MAX_PROCESSES,
                              else 32. Kubernetes jobs are limited by the project's quota instead.

                              c.MLPlatformApp.local_max_processes = 64
                              """).tag(config=True)

    kube_context = Unicode("", help="""The kubeconfig context of the cluster (empty: the current one, or the
                           pod's ServiceAccount inside a cluster).

                           c.MLPlatformApp.kube_context = "dgx-eu"
                           """).tag(config=True)

    running_jobs_are_activity = Bool(True, help="""Local runtime: while a job runs, the server is active
                                     (its last activity moves every `activity_interval` seconds), so
                                     an idle culler does not stop the server, and with it the job's
                                     processes, in the middle of a job. What widgets and panels read
                                     never counts (docs/widgets.md, "Activity").""").tag(config=True)
    activity_interval = Float(10.0, help="Seconds between marks of a running local job's activity.").tag(config=True)

    def initialize_settings(self):
        # the platform's one logger root (`mlplatform.*`) goes out through the server's own handlers
        # and format, like the server's own lines (not bare text on stderr)
        root = logging.getLogger("mlplatform")
        for handler in [h for h in root.handlers if getattr(h, "_mlplatform_server", False)]:
            root.removeHandler(handler)  # an earlier server's of this process
        if not root.handlers and self.serverapp is not None:
            for handler in self.serverapp.log.handlers:
                handler._mlplatform_server = True
                root.addHandler(handler)
            root.setLevel(self.serverapp.log.level)
        # a mistake in the tables must not stop the user's notebook server: it is logged now, naming
        # the key, and every jobs request answers 503 with it (jupyter_server would only log a
        # failed extension, and its routes would be missing)
        self._config_error: ConfigError | None = None
        try:
            self._tables = parse_tables(self.job_tables, "MLPlatformApp.job_tables")
        except ConfigError as e:
            self.log.error("mlplatform jobs: %s", e)
            self._config_error, self._tables = e, parse_tables(None, "")
        self._service: JobService | None = None
        self._service_lock = asyncio.Lock()

    def initialize_handlers(self):
        self.handlers.extend([*submit_form_routes, *watch_routes, *routes])  # before routes' last, catch-all NotFoundHandler

    def _project_source(self):
        api, token = os.environ.get("JUPYTERHUB_API_URL"), os.environ.get("JUPYTERHUB_API_TOKEN")
        if not self.projects and api and token:
            return HubProjects(api, token)
        return StaticProjects(list(self.projects))

    async def job_service(self) -> JobService:
        if self._config_error is not None:
            raise self._config_error
        async with self._service_lock:
            if self._service is None:
                self._service = await self._make_service()
            return self._service

    async def _make_service(self) -> JobService:
        fixed = parse_accelerators(self.accelerators) if self.accelerators else None
        if self.backend == "local":
            service = await wiring.local_service(
                self._tables, pathlib.Path(os.path.expanduser(self.state_dir)), self._project_source(),
                wiring.local_files(self.projects_dir), accelerators=fixed,
                max_processes=self.local_max_processes or None,
                settings_for=None if fixed or self.projects else self._hub_settings())
            if self.running_jobs_are_activity:
                self._activity = asyncio.ensure_future(self._active_while_jobs_run(service.backend))
        else:
            service = await self._kube_service(fixed)
        self.log.info("mlplatform jobs: %s backend started", self.backend)
        return service

    def _hub_settings(self):
        """In a JupyterHub, the local runtime plans with the hub's catalogue and each project's
        accelerator limits (`server_ext.service.hub_catalog`); with no hub, the built-in catalogue."""
        api, token, owner = (os.environ.get(k) for k in ("JUPYTERHUB_API_URL", "JUPYTERHUB_API_TOKEN",
                                                         "JUPYTERHUB_USER"))
        if not (api and token and owner):
            return None
        hub = HubCatalog(api, token)

        async def settings_for(project: str, user: str) -> PlanSettings:
            return self._tables.plan_settings(*await hub(project, user))

        return settings_for

    async def _kube_service(self, fixed) -> JobService:
        from server_ext.runtimes.kube.target import connect, published

        kube, _ = await connect(self.kube_context or None)
        api, token, owner = (os.environ.get(k) for k in ("JUPYTERHUB_API_URL", "JUPYTERHUB_API_TOKEN",
                                                         "JUPYTERHUB_USER"))
        hub = HubCatalog(api, token) if api and token and owner else None

        async def settings_for(project: str, user: str) -> PlanSettings:
            """The project's catalogue and accelerator limits from trusted values only: the hub's
            platform API in a JupyterHub; else (or a hub that is not the platform's) the catalogue
            the hub published in the project, which members cannot change. `fixed` (the operator's
            MLPlatformApp.accelerators) replaces the catalogue, never the limits."""
            answer = await hub.answer(project, user) if hub is not None else None
            if answer is None:
                found = await published(kube, project)
                answer = (found.accelerators, found.limits)
            accelerators, limits = answer
            return self._tables.plan_settings(fixed or accelerators, limits)

        return wiring.kube_service(kube, self._tables, self._project_source(), self._kube_files(kube),
                                   settings=self._tables.plan_settings(fixed or DEFAULT_ACCELERATORS),
                                   settings_for=settings_for)

    def _kube_files(self, kube):
        """Where a job's credentials and datasets are chosen from: the hub's platform API in a
        JupyterHub (this server may not read Secrets), else the project's own objects through
        this server's kubeconfig."""
        api, token, owner = (os.environ.get(k) for k in ("JUPYTERHUB_API_URL", "JUPYTERHUB_API_TOKEN",
                                                         "JUPYTERHUB_USER"))
        if api and token and owner:
            return HubFiles(api, token, owner)
        from hub_ext.kube.cluster import list_available

        mounts = wiring.mount_settings()
        return lambda project: list_available(kube, project, mounts)

    async def _active_while_jobs_run(self, backend) -> None:
        while True:
            if backend.running():
                self.serverapp.web_app.settings["api_last_activity"] = utcnow()
            await asyncio.sleep(self.activity_interval)

    async def stop_extension(self):
        if getattr(self, "_activity", None) is not None:
            self._activity.cancel()
        if getattr(self, "_service", None) is not None:
            await self._service.backend.close()
