"""Where the jobs service is built, for the notebook server extension (`server_ext.app`) and
``kubectl ai-platform`` (`server_ext.cli.main`) alike: a `JobService` over its backend, plan
settings, the caller's projects and the project's credentials and datasets.

- `local_service`: a started `LocalBackend` on a state directory (the server's, the CLI's
  ``--local``, a ``local train`` run's own);
- `kube_service`: a `KubeBackend` on a connected cluster (its watches start with it);
- `dry_run_service`: the `server_ext.runtimes.dry_run.DryRun` backend (``--dry-run``: Kubernetes
  manifests, or the local runtime's Job), planning with the built-in catalogue;
- `one_project`: the projects of a caller that may use one (the CLI: Kubernetes RBAC gates the
  project, the local runtime trusts its users); `local_files`: the local runtime's credentials and
  datasets, the files under a projects directory (none without one).

Each face decides which (the server's configuration, the CLI's target) and owns closing it
(``service.backend.close()``, and the cluster's connection it opened).
"""

from __future__ import annotations

import os
import pathlib
from typing import Any

from hub_ext.core.mounts import Available
from server_ext.jobs.defaults import DEFAULT_ACCELERATORS, DEFAULT_CREDENTIAL_TYPES
from server_ext.jobs.plan import PlanSettings
from server_ext.jobs.tables import JobTables
from server_ext.runtimes.dry_run import DryRun
from server_ext.service.jobs import Files, JobService, Projects, Settings


def one_project(project: str) -> Projects:
    async def projects(caller: str) -> list[str]:
        return [project]

    return projects


def local_files(root: str | pathlib.Path | None) -> Files:
    """The local runtime's credentials and datasets: the files under `root` (`hub_ext.local.files`)."""
    from hub_ext.local.files import project_files

    async def files(project: str) -> Available:
        return project_files(pathlib.Path(root), project) if root else Available()

    return files


def mount_settings() -> Any:
    from hub_ext.manifests.mounts import MountSettings

    return MountSettings(DEFAULT_CREDENTIAL_TYPES)


async def local_service(tables: JobTables, state_dir: pathlib.Path, projects: Projects, files: Files, *,
                        accelerators: Any = None, max_processes: int | None = None,
                        settings_for: Settings | None = None) -> JobService:
    """A `JobService` over a started `LocalBackend` on `state_dir`; plans with `accelerators` (else
    the built-in catalogue), or per project with `settings_for`."""
    from server_ext.runtimes.local.backend import LocalBackend

    backend = LocalBackend(state_dir, max_processes=max_processes)
    await backend.start()
    return JobService(backend, tables.plan_settings(accelerators or DEFAULT_ACCELERATORS), projects, files,
                      settings_for=settings_for)


def notebook_user() -> tuple[int, int] | None:
    """The (uid, gid) this process runs as (the notebook server's, or the CLI's in its terminal); None for root."""
    uid = os.getuid()
    return None if uid == 0 else (uid, os.getgid())


def kube_service(kube: Any, tables: JobTables, projects: Projects, files: Files, *,
                 settings: PlanSettings | None = None, settings_for: Settings | None = None) -> JobService:
    """A `JobService` over a `KubeBackend` on `kube` (an API client's root, `server_ext.runtimes.kube.target.connect`)."""
    from server_ext.runtimes.kube.backend import KubeBackend

    backend = KubeBackend(kube, tables.kube_settings(mount_settings(), notebook_user()))
    return JobService(backend, settings or tables.plan_settings(DEFAULT_ACCELERATORS), projects, files,
                      settings_for=settings_for)


def dry_run_service(tables: JobTables, project: str, *, local: bool,
                    state_dir: pathlib.Path | None = None) -> JobService:
    """A `JobService` whose backend creates nothing and answers what it would (`DryRun`): the local
    runtime's (`state_dir`: where it would keep a package) or Kubernetes' (the Kubernetes client
    library must be installed: `ImportError` otherwise)."""
    backend = DryRun(None, state_dir) if local else DryRun(tables.kube_settings(mount_settings(), notebook_user()))
    return JobService(backend, tables.plan_settings(DEFAULT_ACCELERATORS), one_project(project))
