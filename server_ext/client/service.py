"""`RemoteService`: `JobService`'s methods, signatures and exceptions, answered by a notebook
server's ml/v1 API (`ServerJobs`) instead of a backend in this process. This is how
`kubectl ai-platform` run inside a notebook server uses the server's jobs (one backend, the
server's) without any change to its commands.

- ``user`` is accepted and ignored: the server acts for its own user and checks the project.
- `create` sends the `Submission` as the REST create body (`submission.to_rest`), its package
  path made absolute (the server builds it, and refuses a directory outside its root). Errors
  name fields as the server's do, in REST terms (``package.path``, ``mounts.credentials[0]``),
  as `JobService`'s own: a face renames them at its edge.
- `logs` returns the line iterator (as `JobService.logs`); a refusal is raised by its first step.
"""

from __future__ import annotations

import pathlib
from dataclasses import dataclass, replace
from typing import Any, AsyncIterator

from server_ext.client.rest import ServerJobs
from server_ext.jobs.backend import LogLine
from server_ext.jobs.submission import Submission, to_rest


@dataclass
class RemoteService:
    jobs: ServerJobs

    async def create(self, user: str, project: str, submission: Submission | Any) -> dict:
        if not isinstance(submission, Submission):
            return await self.jobs.create(project, submission)
        if submission.package is not None:
            absolute = str(pathlib.Path(submission.package.path).resolve())
            submission = replace(submission, package=replace(submission.package, path=absolute))
        return await self.jobs.create(project, to_rest(submission))

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
