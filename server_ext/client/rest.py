"""`ServerJobs`: an async client of a notebook server's ``ml/v1/projects/{project}/jobs…`` API
(`server_ext.rest.handlers`), for code that runs *inside* that server — the kubectl plugin in a
terminal, widgets in a kernel — so that every face shares the server's one watch cache.

Guarantees:

- The methods mirror `JobService`'s without ``user`` (the server knows its user): the same
  arguments, the same answers (the ml.v1 Job JSON; ``{"jobs", "nextPageToken"}`` for a page), the
  same exceptions (`client.errors` maps Google's error JSON back to `server_ext.errors`; a server
  that cannot be reached is `UpstreamError`).
- `logs` is an async iterator of `LogLine` read incrementally from the SSE stream. A connection
  that drops (or ends without the closing ``end`` event) is reopened with ``Last-Event-ID`` = the
  last line received, so no line is lost or repeated; after `RESUME_ATTEMPTS` reconnections in a
  row that bring no line it gives up with `UpstreamError`. Each `LogLine` keeps the event's
  ``"time"`` (RFC 3339, where the runtime keeps one: a Kubernetes log read with ``timestamps=true``,
  a local job's log) and ``"stream"`` (``stdout``/``stderr``, where the runtime keeps them apart);
  None where the event has none: no time or stream is made up for a line.
- Requests carry ``Authorization: token <token>``; the token is never logged or put in a URL.
- One `aiohttp.ClientSession` per instance, opened on first use on the running loop; `close()`
  (or ``async with``) releases it.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, AsyncIterator
from urllib.parse import quote

from server_ext.client.errors import from_response, unreachable
from server_ext.client.sse import SSEParser
from server_ext.errors import UpstreamError
from server_ext.jobs.backend import LogLine

log = logging.getLogger("mlplatform.client")

RESUME_ATTEMPTS = 5
RESUME_DELAY_S = 0.2  # doubled after each failed reconnection, up to 2 s


def _q(part: str) -> str:
    return quote(str(part), safe="")


class ServerJobs:
    def __init__(self, base_url: str, token: str, *, request_timeout: float = 300.0,
                 stream_idle_timeout: float = 60.0):
        """`base_url` is the server's, with its trailing slash (``http://127.0.0.1:8888/user/alice/``);
        `stream_idle_timeout` is how long a log stream may stay silent before it is reopened (the
        server sends a keepalive every 15 s)."""
        self.base_url = base_url if base_url.endswith("/") else base_url + "/"
        self._token = token
        self._request_timeout = request_timeout
        self._idle_timeout = stream_idle_timeout
        self._session = None

    def __repr__(self) -> str:
        return f"ServerJobs({self.base_url!r})"

    async def __aenter__(self) -> "ServerJobs":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()

    def _open(self):
        import aiohttp

        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(headers={"Authorization": f"token {self._token}"})
        return self._session

    def _url(self, project: str, *rest: str):
        from yarl import URL

        path = "/".join(["ml", "v1", "projects", _q(project), "jobs", *rest])
        return URL(self.base_url + path, encoded=True)

    async def _call(self, method: str, url, *, action: str, project: str, job_id: str | None = None,
                    body: Any = None, params: dict | None = None) -> Any:
        import aiohttp

        kwargs: dict[str, Any] = {"timeout": aiohttp.ClientTimeout(total=None, sock_connect=30,
                                                                   sock_read=self._request_timeout)}
        if params:
            kwargs["params"] = params
        if body is not None:
            kwargs["data"] = json.dumps(body)
            kwargs["headers"] = {"Content-Type": "application/json"}
        try:
            async with self._open().request(method, url, **kwargs) as resp:
                text = await resp.text()
                status = resp.status
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as e:
            raise unreachable(action, self.base_url, e) from None
        try:
            answer = json.loads(text) if text else None
        except ValueError:
            answer = None
        if status >= 400:
            raise from_response(status, answer, action=action, project=project, job_id=job_id)
        return answer

    async def create(self, project: str, body: dict) -> dict:
        """Create a job from `body` (a Job, plus the platform fields ``mounts`` and ``package``:
        ``{"path": DIR, "stagingBucket": URI}``, DIR inside the server's root directory)."""
        job_id = body.get("jobId") if isinstance(body, dict) else None
        return await self._call("POST", self._url(project), body=body, action=f"create job {job_id}",
                                project=project, job_id=job_id if isinstance(job_id, str) else None)

    async def list(self, project: str, filter: str | None = None, page_size: Any = None,
                   page_token: str | None = None) -> dict:
        params = {k: str(v) for k, v in (("filter", filter), ("pageSize", page_size), ("pageToken", page_token))
                  if v not in (None, "")}
        answer = await self._call("GET", self._url(project), params=params, action=f"list the jobs of {project}",
                                  project=project)
        return answer if isinstance(answer, dict) else {"jobs": []}

    async def get(self, project: str, job_id: str) -> dict:
        return await self._call("GET", self._url(project, _q(job_id)), action=f"get job {job_id}",
                                project=project, job_id=job_id)

    async def cancel(self, project: str, job_id: str) -> dict:
        return await self._call("POST", self._url(project, _q(job_id) + ":cancel"), body={},
                                action=f"cancel job {job_id}", project=project, job_id=job_id) or {}

    async def trial_metrics(self, project: str, job_id: str, trial_id: str) -> list[dict]:
        answer = await self._call("GET", self._url(project, f"{_q(job_id)}/trials/{_q(str(trial_id))}/metrics"),
                                  action=f"read trial {trial_id} of {job_id}", project=project, job_id=job_id)
        return (answer or {}).get("metrics", [])

    async def logs(self, project: str, job_id: str, task: str | None = None, *, follow: bool = False,
                   after: int = 0) -> AsyncIterator[LogLine]:
        """One task's log lines after line `after` (``master-replica-0`` by default); with `follow`,
        until the task has ended."""
        import aiohttp

        url = self._url(project, _q(job_id), "logs")
        params = {"follow": "true" if follow else "false"}
        if task:
            params["task"] = task
        action = f"stream the log of job {job_id}"
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=self._idle_timeout)
        last, failures = max(int(after), 0), 0
        while True:
            parser = SSEParser()
            progressed = False
            try:
                async with self._open().get(url, params=params, timeout=timeout,
                                            headers={"Last-Event-ID": str(last), "Accept": "text/event-stream"}) \
                        as resp:
                    if resp.status >= 400:
                        text = await resp.text()
                        try:
                            answer = json.loads(text)
                        except ValueError:
                            answer = None
                        raise from_response(resp.status, answer, action=action, project=project, job_id=job_id)
                    async for chunk in resp.content.iter_any():
                        for event in parser.feed(chunk):
                            if event.type == "end":
                                return
                            if event.type != "message":
                                continue
                            line = _log_line(event.data, action)
                            if line.seq <= last:
                                continue  # already given (a server that resent from further back)
                            last, progressed = line.seq, True
                            yield line
                reason: BaseException = ConnectionResetError("the stream ended before its end event")
            except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as e:
                reason = e
            failures = 0 if progressed else failures + 1
            if failures >= RESUME_ATTEMPTS:
                raise unreachable(action, self.base_url, reason)
            log.info("log stream of job %s/%s task %s dropped after line %s (%s); resuming", project, job_id,
                     task or "master-replica-0", last, reason)
            await asyncio.sleep(min(RESUME_DELAY_S * 2 ** max(failures - 1, 0), 2.0))


def _log_line(data: str, action: str) -> LogLine:
    try:
        raw = json.loads(data)
        seq, task, text = int(raw["seq"]), str(raw["task"]), str(raw["text"])
        when, stream = raw.get("time"), raw.get("stream")
    except (ValueError, KeyError, TypeError, AttributeError):
        raise UpstreamError(action, "the notebook server sent a malformed log event") from None
    return LogLine(seq, task, text, when if isinstance(when, str) and when else None,
                   stream if stream in ("stdout", "stderr") else None)


async def list_all(jobs: ServerJobs, project: str, filter: str | None = None) -> list[dict]:
    """Every job of `project` matching `filter` (all pages), newest first."""
    out, token = [], None
    while True:
        page = await jobs.list(project, filter, 100, token)
        out += page.get("jobs", [])
        token = page.get("nextPageToken")
        if not token:
            return out
