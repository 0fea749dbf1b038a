"""`ml/v1/projects/{project}/jobs…` under the notebook server's base URL, mirroring `ml.v1`'s
`projects.jobs`:

    POST   …/jobs                      create (body: a Job; 409 ALREADY_EXISTS for a taken jobId;
                                       platform fields "mounts" and "package", see rest.package_field;
                                       or a Katib Experiment: what is changed in it, e.g. a replaced
                                       namespace, comes as ``Warning: 299 - "<note>"`` headers, as
                                       the Kubernetes API server warns)
    GET    …/jobs?filter=&pageSize=&pageToken=   list
    GET    …/jobs/{jobId}              get
    POST   …/jobs/{jobId}:cancel       cancel (empty body, answers ``{}`` as Google's does)
    GET    …/jobs/{jobId}/logs?task=&follow=true   Server-Sent Events (see `LogsHandler`)
    GET    …/jobs/{jobId}/trials/{trialId}/metrics   a sweep trial's metric series
    GET    ml/v1/projects              the projects the user may use: ``{"projects": [{"name"}]}``
                                       (the JupyterLab panel's project switcher)

Every method is authenticated (the server's own identity provider: the hub's OAuth in a
JupyterHub, a token otherwise) and authorized on the resource ``mlplatform``; the jobs service
then checks the project. Errors are Google's error JSON (`rest.errors`), naming fields as the
client sent them (the jobs service names them so: ``package.path``, ``task``,
``mounts.credentials[0]``; a query parameter that is not UTF-8); every other path under ``ml/v1``
(`NotFoundHandler`) answers 404 ``NOT_FOUND``, or 400 naming ``jobId``/``trialId`` when an id is
malformed. Handlers are thin: parse (`rest.inputs`, `rest.package_field` → a `Submission`), call
one service method, render.

Activity: only requests that change something (``POST``: create, cancel) count as the user's
activity of the server; reads (the widgets' polls, log streams, lists, gets) do not, so a notebook
left open with live widgets does not keep an idle culler from stopping its server.
"""

from __future__ import annotations

import asyncio
import json
import pathlib
import re
from typing import Any
from urllib.parse import unquote_to_bytes

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from jupyter_server.extension.handler import ExtensionHandlerMixin
from jupyter_server.utils import url_path_join
from tornado import web
from tornado.iostream import StreamClosedError

from server_ext.errors import PlatformError, UserInputError, UserInputErrors
from server_ext.jobs.kube.native_experiment import notes
from server_ext.jobs.model import JOB_ID, parse_job
from server_ext.rest import inputs
from server_ext.rest.errors import error_body
from server_ext.rest.package_field import read_create_body

AUTH_RESOURCE = "mlplatform"
KEEPALIVE_S = 15.0
FLUSH_BYTES = 64 * 1024
_PATH_FIELDS = {"job_id": "jobId", "trial_id": "trialId"}  # route groups → the API's names


class _Handler(ExtensionHandlerMixin, APIHandler):
    auth_resource = AUTH_RESOURCE
    # What counts as the user's activity (jupyter_server's ``api_last_activity``, which an idle
    # culler reads through the hub): creating and cancelling a job; never reading (lists, gets,
    # log streams, trial metrics), which the widgets and panels do every few seconds by themselves.
    ACTIVE_METHODS = frozenset({"POST"})

    @property
    def _track_activity(self) -> bool:  # read by APIHandler.update_api_activity
        return self.request.method in self.ACTIVE_METHODS
    _checked = False  # set once `prepare` has authenticated the request
    _bad_path: UserInputError | None = None  # a path segment that was not UTF-8, told after authentication

    @property
    def user(self) -> str:
        return self.current_user.username

    async def service(self):
        return await self.extensionapp.job_service()

    async def prepare(self) -> None:
        await super().prepare()
        # every method, those a handler lacks (405) included, needs the server's credentials, even
        # where the server is configured to let unauthenticated requests reach handlers
        if self.current_user is None and self.request.method != "OPTIONS":
            raise web.HTTPError(403)
        self._checked = True
        if self._bad_path is not None:
            raise self._bad_path

    def decode_argument(self, value: bytes, name: str | None = None) -> str:
        """A path segment or query parameter as text; one that is not UTF-8 is refused naming it
        (tornado's own 400 names nothing). Path segments are decoded before authentication."""
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            error = UserInputError(_PATH_FIELDS.get(name or "", name or "path"), "is not valid UTF-8")
            if self._checked:
                raise error from None
            self._bad_path = error
            return ""

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc = (kwargs.get("exc_info") or (None, None, None))[1]
        status, body = error_body(status_code, exc)
        if status >= 500:
            self.log.error("ml/v1 %s %s failed for %s", self.request.method, self.request.path,
                           getattr(self.current_user, "username", "-"), exc_info=kwargs.get("exc_info"))
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(body))

    def log_exception(self, typ, value, tb) -> None:
        if isinstance(value, PlatformError):
            self.log.info("ml/v1 %s %s for %s: %s", self.request.method, self.request.path,
                          getattr(self.current_user, "username", "-"), value)
        else:
            super().log_exception(typ, value, tb)

    def send_error(self, status_code: int = 500, **kwargs: Any) -> None:
        exc = (kwargs.get("exc_info") or (None, None, None))[1]
        if isinstance(exc, PlatformError):
            status_code = error_body(status_code, exc)[0]
        super().send_error(status_code, **kwargs)

    def json_body(self) -> Any:
        return inputs.json_body(self.request.body)


class ProjectsHandler(_Handler):
    @web.authenticated
    @authorized("read")
    async def get(self):
        service = await self.service()
        names = await service.projects(self.user)
        self.finish(json.dumps({"projects": [{"name": n} for n in sorted(names)]}))


class JobsHandler(_Handler):
    @web.authenticated
    @authorized("read")
    async def get(self, project: str):
        service = await self.service()
        out = await service.list(self.user, project, self.get_query_argument("filter", None),
                                 self.get_query_argument("pageSize", None), self.get_query_argument("pageToken", None))
        self.finish(json.dumps(out))

    @web.authenticated
    @authorized("write")
    async def post(self, project: str):
        service = await self.service()
        sent = self.json_body()
        try:
            submission = read_create_body(sent, project, pathlib.Path(self.serverapp.root_dir))
        except UserInputError as e:
            raise _with_body_mistakes(e, sent) from None
        job = await service.create(self.user, project, submission)
        body = submission.job
        if isinstance(body, dict) and body.get("kind") == "Experiment":
            for note in notes(body, project):
                self.add_header("Warning", f"299 - {json.dumps(note)}")
        self.finish(json.dumps(job))


def _with_body_mistakes(package_error: UserInputError, sent: Any) -> UserInputError:
    """A bad ``package`` or ``mounts`` field together with the job body's own mistakes (the body
    checked as one whose code a package ships, when one is sent; nothing is created)."""
    if not isinstance(sent, dict) or sent.get("kind") == "Experiment":
        return package_error
    try:
        parse_job({k: v for k, v in sent.items() if k not in ("package", "mounts")},
                  shipped_package="package" in sent)
    except UserInputError as e:
        return UserInputErrors([package_error, e])
    return package_error


class JobHandler(_Handler):
    @web.authenticated
    @authorized("read")
    async def get(self, project: str, job_id: str):
        service = await self.service()
        self.finish(json.dumps(await service.get(self.user, project, job_id)))


class CancelHandler(_Handler):
    @web.authenticated
    @authorized("write")
    async def post(self, project: str, job_id: str):
        service = await self.service()
        await service.cancel(self.user, project, job_id)
        self.finish("{}")


class TrialMetricsHandler(_Handler):
    """A sweep trial's intermediate metric: ``{"metrics": [{"trainingStep", "objectiveValue", "time"}]}``."""

    @web.authenticated
    @authorized("read")
    async def get(self, project: str, job_id: str, trial_id: str):
        service = await self.service()
        self.finish(json.dumps({"metrics": await service.trial_metrics(self.user, project, job_id, trial_id)}))


class LogsHandler(_Handler):
    """One task's log as Server-Sent Events.

    Query: ``task`` (``master-replica-0`` by default; ``worker-1`` and other spellings accepted),
    ``follow`` (``true``/``1``: keep the stream open until the task ends; ``false``/``0``, the
    default: stop at the end of the log; anything else is refused). Resume with the
    ``Last-Event-ID`` header (or ``after=N``), in digits: lines after N are sent.

    Events: ``id: <line number>`` + ``data: {"seq", "task", "text", "time", "stream"}`` per line
    (``time``: RFC 3339 UTC, ``stream``: ``stdout``/``stderr``; null where the runtime does not
    keep them); a comment
    (``: keepalive``) every 15 s of silence; finally ``event: end`` with ``data: {"state"}`` (the
    job's state when the stream ended). Errors before the first byte are Google's error JSON.
    """

    @web.authenticated
    @authorized("read")
    async def get(self, project: str, job_id: str):
        service = await self.service()
        follow = inputs.follow(self.get_query_argument("follow", "false"))
        after = inputs.after(self.request.headers.get("Last-Event-ID"), self.get_query_argument("after", None))
        lines = await service.logs(self.user, project, job_id, self.get_query_argument("task", None),
                                   follow=follow, after=after)
        self.set_header("Content-Type", "text/event-stream")
        self.set_header("Cache-Control", "no-cache")
        self.set_header("X-Accel-Buffering", "no")
        try:
            await self._stream(lines)
            job = await service.get(self.user, project, job_id)
            self.write(f"event: end\ndata: {json.dumps({'state': job.get('state')})}\n\n")
            await self.flush()
        except StreamClosedError:
            return
        finally:
            await lines.aclose()
        self.finish()

    async def _stream(self, lines) -> None:
        """Write `lines` as events. A pump task formats them into a batch; this loop writes and
        flushes whatever has gathered each time the pump waits (for the file, or for room), so the
        cost is per batch, not per line. The pump stops once `FLUSH_BYTES` are waiting, so memory
        stays bounded whatever the log's size or the client's speed."""
        batch: list[str] = []
        size = 0
        ready = asyncio.Event()  # the batch has events, or the pump ended
        room = asyncio.Event()  # the batch was taken: the pump may go on

        async def pump() -> None:
            nonlocal size
            async for line in lines:
                data = {"seq": line.seq, "task": line.task, "text": line.text, "time": line.time, "stream": line.stream}
                chunk = f"id: {line.seq}\ndata: {json.dumps(data)}\n\n"
                batch.append(chunk)
                size += len(chunk)
                ready.set()
                if size >= FLUSH_BYTES:
                    room.clear()
                    await room.wait()

        pumping = asyncio.ensure_future(pump())
        try:
            while batch or not pumping.done():
                if not batch:
                    ready.clear()
                    woken = asyncio.ensure_future(ready.wait())
                    try:
                        done, _ = await asyncio.wait({woken, pumping}, timeout=KEEPALIVE_S,
                                                     return_when=asyncio.FIRST_COMPLETED)
                    finally:
                        woken.cancel()
                    if not done:
                        self.write(": keepalive\n\n")
                        await self.flush()
                    continue
                data = "".join(batch)
                batch.clear()
                size = 0
                room.set()
                self.write(data)
                await self.flush()
            pumping.result()  # the log's own error, if it failed
        finally:
            if not pumping.done():
                pumping.cancel()
                await asyncio.wait({pumping})


class NotFoundHandler(_Handler):
    """Every other path under ``ml/v1`` (registered last): Google's 404 ``NOT_FOUND``, or 400
    naming ``jobId`` or ``trialId`` for an id no job or trial can have (`unmatched`)."""

    def _refuse(self) -> None:
        prefix = url_path_join(self.base_url, "ml/v1")
        path = self.request.path
        raise unmatched(self.request.method or "", path[len(prefix):] if path.startswith(prefix) else path)

    @web.authenticated
    @authorized("read")
    def get(self) -> None:
        self._refuse()

    @web.authenticated
    @authorized("write")
    def post(self) -> None:
        self._refuse()

    @web.authenticated
    @authorized("write")
    def put(self) -> None:
        self._refuse()

    @web.authenticated
    @authorized("write")
    def patch(self) -> None:
        self._refuse()

    @web.authenticated
    @authorized("write")
    def delete(self) -> None:
        self._refuse()


_UNDER_JOB = re.compile(r"/projects/[^/]+/jobs/(?P<job>[^/:]*?)(?P<rest>(?::|%3[Aa]|/).*)?")
_TRIAL = re.compile(r"/trials/(?P<trial>[^/]*)(?:/.*)?")


def unmatched(method: str, path: str) -> Exception:
    """The error for `path` (after ``ml/v1``, still percent-encoded) that no route took."""
    m = _UNDER_JOB.fullmatch(path)
    if m and m["job"]:
        try:
            job_id = unquote_to_bytes(m["job"]).decode("utf-8")
        except UnicodeDecodeError:
            job_id = ""
        if not JOB_ID.fullmatch(job_id):
            return UserInputError("jobId", "must start with a letter and hold only letters, digits and '_'")
        trial = _TRIAL.fullmatch(m["rest"] or "")
        if trial and trial["trial"] and not re.fullmatch(r"[1-9][0-9]*", trial["trial"]):
            return UserInputError("trialId", "must be a trial's number: 1, 2, …")
    shown = path if len(path) <= 200 else path[:200] + "…"
    return web.HTTPError(404, "%s ml/v1%s is not a method of this API", method, shown)


_JOBS = r"/ml/v1/projects/(?P<project>[^/]+)/jobs"
_JOB = _JOBS + r"/(?P<job_id>[A-Za-z][A-Za-z0-9_]*)"
routes = [
    (r"/ml/v1/projects", ProjectsHandler),
    (_JOBS, JobsHandler),
    (_JOB + r"(?::|%3[Aa])cancel", CancelHandler),  # some clients percent-encode the colon
    (_JOB + r"/logs", LogsHandler),
    (_JOB + r"/trials/(?P<trial_id>[1-9][0-9]*)/metrics", TrialMetricsHandler),
    (_JOB, JobHandler),
    (r"/ml/v1(?:/.*)?", NotFoundHandler),  # last: whatever the routes above did not take
]
