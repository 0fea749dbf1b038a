"""The jobs service: what every face (REST, widgets, kubectl plugin) calls. One method per
`ml.v1` `projects.jobs` verb, each checking that the caller may use the project first.

- `create(user, project, body)`: the body is a Job document as Google's API takes it (REST JSON or a
  gcloud ``--config`` file already loaded), plus one platform field, ``mounts``
  (``{"credentials": [names], "datasets": [names]}``), which is checked against what the project
  has (`hub_ext.mounts.select`) and never echoed back. The job is parsed and validated
  (`model.parse_job`), planned (`plan.plan_job`) and only then submitted: before anything is
  created, every independent mistake of the body, the mounts and the plan is raised at once
  (`UserInputErrors`, one violation per field; a lone one as the `UserInputError` it is).
- `create(…, package_path=DIR, staging_bucket=URI)`: ``--package-path``. After every check above
  (a bad job spec never spends a build; ``packageUris`` may then be left out) the package is built
  (`package.build_sdist`) into a temporary directory, attached to the plan (`plan.with_package`:
  a ConfigMap when it fits, else the staging bucket, else `UserInputError` naming
  ``--package-path``) and submitted; the temporary directory is removed once the backend has it.
- `create(user, project, experiment)`: a body with ``"kind": "Experiment"`` is a user's own Katib
  Experiment: the backend's ``submit_experiment(project, user, body)`` takes it as it is
  (`native_experiment`); a backend without one (local) refuses it, naming ``kind``.
- `list(user, project, filter, page_size, page_token)`: `listing.page` over the backend's list.
- `get`, `cancel`, `logs`, `trial_metrics`: the backend's, for that project only.

A project the caller may not use is refused with `UserInputError("project", …, 403)` for every
verb, so another project's job ids are not even confirmed to exist.
"""

from __future__ import annotations

import asyncio
import pathlib
import tempfile
from dataclasses import dataclass
from typing import Any, AsyncIterator, Awaitable, Callable

from hub_ext.errors import UserInputError, collect
from hub_ext.mounts import Available, select, selected

from . import package
from .backend import JobBackend, LogLine
from .listing import page
from .model import parse_job
from .plan import PlanSettings, plan_job, task_name, with_package

Projects = Callable[[str], Awaitable[list[str]]]  # user → the projects they may use
Files = Callable[[str], Awaitable[Available]]  # project → its credentials and datasets


async def _no_files(project: str) -> Available:
    return Available()


# the refusal of a Katib Experiment by a backend that cannot run one (the local one; also --dry-run's)
LOCAL_EXPERIMENT = ("a Katib Experiment needs the Kubernetes runtime; here, submit the sweep as "
                    "trainingInput.hyperparameters")
Settings = Callable[[str, str], Awaitable[PlanSettings]]  # (project, user) → its catalogue, tables and limits


@dataclass
class JobService:
    backend: JobBackend
    settings: PlanSettings
    projects: Projects
    files: Files = _no_files
    package_limit: int = package.CONFIGMAP_LIMIT  # the largest sdist shipped in a ConfigMap
    settings_for: Settings | None = None  # per project (a cluster's published catalogue); else `settings`

    async def _check(self, user: str, project: str) -> None:
        mine = await self.projects(user)
        if project not in mine:  # the user's own projects, named to them: a script's --project is often
            # a Google Cloud project's id
            yours = ", ".join(sorted(mine)) or "none"
            raise UserInputError("project", f"{user!r} may not use project {project!r} (the projects of this "
                                            f"platform you may use: {yours})", 403)

    async def create(self, user: str, project: str, body: Any, package_path: pathlib.Path | None = None,
                     staging_bucket: str | None = None) -> dict:
        await self._check(user, project)
        if not isinstance(body, dict):
            raise UserInputError("job", "must be a JSON object")
        if body.get("kind") == "Experiment":  # a user's own Katib Experiment, taken as it is
            submit = getattr(self.backend, "submit_experiment", None)
            if submit is None:
                raise UserInputError("kind", LOCAL_EXPERIMENT)
            if package_path is not None:
                raise UserInputError("--package-path", "a Katib Experiment is submitted as it is: its trialSpec "
                                                       "names its own image and code")
            return await submit(project, user, body)
        body = dict(body)
        mounts = body.pop("mounts", None) or {}
        if not isinstance(mounts, dict) or not set(mounts) <= {"credentials", "datasets"}:
            raise UserInputError("mounts", "must be a mapping with 'credentials' and/or 'datasets' lists")
        with collect() as problems:  # the body's, the mounts' and the plan's mistakes are told together
            job = problems.check(parse_job, body, shipped_package=package_path is not None)
            available = await self.files(project) if mounts else Available()
            mounts_ok = problems.check(select, available, mounts.get("credentials"), mounts.get("datasets"),
                                       project) is not None
            if job is not None:
                settings = await self.settings_for(project, user) if self.settings_for else self.settings
                chosen = mounts if mounts_ok else {}
                plan = problems.check(
                    plan_job, job, settings, project=project, owner=user,
                    credentials=tuple(selected(available.credentials, chosen.get("credentials"), "credentials")),
                    datasets=tuple(selected(available.datasets, chosen.get("datasets"), "datasets")))
        if package_path is None:
            return await self.backend.submit(plan)
        if not plan.python_module:
            raise UserInputError("--package-path", "needs a pythonModule (--module-name) to run from the package")
        if staging_bucket:
            package.check_staging_bucket(staging_bucket)
        with tempfile.TemporaryDirectory(prefix="mlplatform-package-") as tmp:
            sdist = await package.build_sdist(pathlib.Path(package_path), pathlib.Path(tmp))
            sha256, size = await asyncio.to_thread(package.digest, sdist)
            plan = with_package(plan, sdist, sha256, size, staging_bucket=staging_bucket,
                                limit=self.package_limit)
            return await self.backend.submit(plan)

    async def list(self, user: str, project: str, filter: str | None = None, page_size: Any = None,
                   page_token: str | None = None) -> dict:
        await self._check(user, project)
        return page(await self.backend.list(project), page_size, page_token, filter)

    async def get(self, user: str, project: str, job_id: str) -> dict:
        await self._check(user, project)
        return await self.backend.get(project, job_id)

    async def cancel(self, user: str, project: str, job_id: str) -> dict:
        await self._check(user, project)
        return await self.backend.cancel(project, job_id)

    async def trial_metrics(self, user: str, project: str, job_id: str, trial_id: str) -> list[dict]:
        await self._check(user, project)
        return await self.backend.trial_metrics(project, job_id, trial_id)

    async def logs(self, user: str, project: str, job_id: str, task: str | None = None, *, follow: bool = False,
                   after: int = 0) -> AsyncIterator[LogLine]:
        """Checks run before the first line is asked for, so a refusal is an error, not an empty stream."""
        await self._check(user, project)
        await self.backend.get(project, job_id)
        name = task_name(task) if task else "master-replica-0"
        return self.backend.logs(project, job_id, name, follow=follow, after=after)
