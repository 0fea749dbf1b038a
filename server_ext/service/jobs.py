"""The jobs service: what every face (REST, widgets, kubectl plugin) calls. One method per
`ml.v1` `projects.jobs` verb, each checking that the caller may use the project first.

- `create(user, project, submission)`: a `Submission` (`server_ext.jobs.submission`: the Job
  document as Google's API takes it, the package to build, the mounts), or a bare Job body. The
  mounts are checked against what the project has (`hub_ext.core.mounts.choose_mounts`) and never echoed back;
  a dataset still loading is accepted by a backend whose pods are held until their datasets are
  loaded (``holds_for_datasets``: Kubernetes, with the operator's webhook), refused by the others.
  The job is parsed and validated (`Submission.to_job`), planned (`plan.plan_job`) and only then
  submitted: before anything is created, every independent mistake of the body, the mounts and the
  plan is raised at once (`UserInputErrors`, one violation per field; a lone one as the
  `UserInputError` it is). Every field is named in REST terms (``mounts.credentials[0]``,
  ``package.path``, ``package.stagingBucket``, ``task``), at their source (the package, plan and
  runtime modules name them so too); the faces rename them at their edge (the CLI to its flags).
- With a package: after every check above (a bad job spec never spends a build; ``packageUris``
  may then be left out) the package is built (`package.build_sdist`) into a temporary directory,
  attached to the plan (`plan.with_package`: a ConfigMap when it fits, else the staging bucket,
  else `UserInputError` naming ``package.path``) and submitted; the temporary directory is removed
  once the backend has it.
- A Katib Experiment (``"kind": "Experiment"``) is a user's own: the backend's
  ``submit_experiment(project, user, body)`` takes it as it is (`native_experiment`); a backend
  without one (local) refuses it, naming ``kind``.
- `list(user, project, filter, page_size, page_token)`: `listing.page` over the backend's list.
- `get`, `cancel`, `logs`, `trial_metrics`: the backend's, for that project only (a bad task of
  `logs` names ``task``, before the stream or at its first line).

A project the caller may not use is refused with `UserInputError("project", …, 403)` for every
verb, so another project's job ids are not even confirmed to exist.
"""

from __future__ import annotations

import asyncio
import pathlib
import tempfile
from dataclasses import dataclass
from typing import Any, AsyncIterator, Awaitable, Callable

from hub_ext.core.errors import UserInputError, UserInputErrors, collect, errors_of
from hub_ext.core.mounts import Available, choose_mounts
from server_ext.jobs.backend import JobBackend, LogLine
from server_ext.jobs.listing import page
from server_ext.jobs.package_delivery import CONFIGMAP_LIMIT, check_staging_bucket
from server_ext.jobs.plan import PlanSettings, plan_job, task_name, with_package
from server_ext.jobs.submission import Submission
from server_ext.runtimes import package

Projects = Callable[[str], Awaitable[list[str]]]  # user → the projects they may use
Files = Callable[[str], Awaitable[Available]]  # project → its credentials and datasets


async def _no_files(project: str) -> Available:
    return Available()


# the refusal of a Katib Experiment by a backend that cannot run one (the local one; also a local --dry-run's)
LOCAL_EXPERIMENT = ("a Katib Experiment needs the Kubernetes runtime; here, submit the sweep as "
                    "trainingInput.hyperparameters")
Settings = Callable[[str, str], Awaitable[PlanSettings]]  # (project, user) → its catalogue, tables and limits


@dataclass
class JobService:
    backend: JobBackend
    settings: PlanSettings
    projects: Projects
    files: Files = _no_files
    package_limit: int = CONFIGMAP_LIMIT  # the largest sdist shipped in a ConfigMap
    settings_for: Settings | None = None  # per project (a cluster's published catalogue); else `settings`

    async def _check(self, user: str, project: str) -> None:
        mine = await self.projects(user)
        if project not in mine:  # the user's own projects, named to them: a script's --project is often
            # a Google Cloud project's id
            yours = ", ".join(sorted(mine)) or "none"
            raise UserInputError("project", f"{user!r} may not use project {project!r} (the projects of this "
                                            f"platform you may use: {yours})", 403)

    async def create(self, user: str, project: str, submission: Submission | Any) -> dict:
        await self._check(user, project)
        if not isinstance(submission, Submission):
            if not isinstance(submission, dict):
                raise UserInputError("job", "must be a JSON object")
            submission = Submission(submission, project)
        sub, body = submission, submission.job
        if sub.is_experiment:  # a user's own Katib Experiment, taken as it is
            submit = getattr(self.backend, "submit_experiment", None)
            if submit is None:
                raise UserInputError("kind", LOCAL_EXPERIMENT)
            if sub.package is not None:
                raise UserInputError("package.path", "a Katib Experiment is submitted as it is: its trialSpec "
                                                     "names its own image and code")
            return await submit(project, user, dict(body))
        mounts = sub.mounts
        with collect() as problems:  # the body's, the mounts' and the plan's mistakes are told together
            job = problems.check(sub.to_job)
            available = await self.files(project) if mounts else Available()
            chosen = problems.check(_nested, "mounts", choose_mounts, available, list(mounts.credentials),
                                    list(mounts.datasets), project, getattr(self.backend, "holds_for_datasets", False),
                                    True)  # copies: only where a dataset has a snapshot (Kubernetes)
            if job is not None:
                settings = await self.settings_for(project, user) if self.settings_for else self.settings
                plan = problems.check(plan_job, job, settings, project=project, owner=user,
                                      credentials=chosen.credentials if chosen else (),
                                      datasets=chosen.datasets if chosen else ())
        if sub.package is None:
            return await self.backend.submit(plan)
        if not plan.python_module:
            raise UserInputError("package.path", "needs a pythonModule (--module-name) to run from the package")
        if sub.package.staging_bucket:
            check_staging_bucket(sub.package.staging_bucket)
        with tempfile.TemporaryDirectory(prefix="mlplatform-package-") as tmp:
            sdist = await package.build_sdist(pathlib.Path(sub.package.path), pathlib.Path(tmp))
            sha256, size = await asyncio.to_thread(package.digest, sdist)
            plan = with_package(plan, sdist, sha256, size, staging_bucket=sub.package.staging_bucket,
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


def _nested(prefix: str, check: Callable[..., Any], *args: Any) -> Any:
    """`check(*args)`, its mistakes' fields under `prefix` (``credentials[0]`` → ``mounts.credentials[0]``)."""
    try:
        return check(*args)
    except UserInputError as e:
        nested = [UserInputError(f"{prefix}.{one.field}", one.message, one.status) for one in errors_of(e)]
        raise (nested[0] if len(nested) == 1 else UserInputErrors(nested)) from None
