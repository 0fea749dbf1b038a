"""`RemoteService`: `JobService`'s methods, signatures and exceptions, answered by a notebook
server's ml/v1 API (`ServerJobs`) instead of a backend in this process. This is how
`kubectl ai-platform` run inside a notebook server uses the server's jobs (one backend, the
server's) without any change to its commands.

- ``user`` is accepted and ignored: the server acts for its own user and checks the project.
- ``package_path`` becomes the create body's ``"package": {"path": <absolute path>,
  "stagingBucket": …}``; the server builds it, and refuses a directory outside its root. Errors
  naming ``package``/``package.path`` name ``--package-path`` here, ``package.stagingBucket``
  ``--staging-bucket``, and ``mounts.credentials[i]``/``mounts.datasets[i]`` ``--credentials``/
  ``--datasets``, as `JobService`'s own errors do.
- `logs` returns the line iterator (as `JobService.logs`); a refusal is raised by its first step.
"""

from __future__ import annotations

import pathlib
from dataclasses import dataclass
from typing import Any, AsyncIterator

from ..errors import UserInputError
from ..jobs.backend import LogLine
from .rest import ServerJobs

_PACKAGE_FLAGS = {"package": "--package-path", "package.path": "--package-path",
                  "package.stagingBucket": "--staging-bucket"}
_MOUNT_FLAGS = {"mounts.credentials": "--credentials", "mounts.datasets": "--datasets"}


@dataclass
class RemoteService:
    jobs: ServerJobs

    async def create(self, user: str, project: str, body: Any, package_path: pathlib.Path | None = None,
                     staging_bucket: str | None = None) -> dict:
        if package_path is not None:
            if not isinstance(body, dict):
                raise UserInputError("job", "must be a JSON object")
            spec = {"path": str(pathlib.Path(package_path).resolve())}
            if staging_bucket:
                spec["stagingBucket"] = staging_bucket
            body = {**body, "package": spec}
        try:
            return await self.jobs.create(project, body)
        except UserInputError as e:
            flag = _PACKAGE_FLAGS.get(e.field) or _MOUNT_FLAGS.get(e.field.split("[")[0])
            if flag:
                raise UserInputError(flag, e.message, e.status) from None
            raise

    async def list(self, user: str, project: str, filter: str | None = None, page_size: Any = None,
                   page_token: str | None = None) -> dict:
        return await self.jobs.list(project, filter, page_size, page_token)

    async def get(self, user: str, project: str, job_id: str) -> dict:
        return await self.jobs.get(project, job_id)

    async def cancel(self, user: str, project: str, job_id: str) -> dict:
        return await self.jobs.cancel(project, job_id)

    async def trial_metrics(self, user: str, project: str, job_id: str, trial_id: str) -> list[dict]:
        return await self.jobs.trial_metrics(project, job_id, trial_id)

    async def logs(self, user: str, project: str, job_id: str, task: str | None = None, *, follow: bool = False,
                   after: int = 0) -> AsyncIterator[LogLine]:
        return self.jobs.logs(project, job_id, task, follow=follow, after=after)

    async def close(self) -> None:
        await self.jobs.close()
