"""The notebook side's exception tree (it extends the hub side's, so one boundary handles both).

    hub_ext.core.errors.PlatformError
     ├── UserInputError     a field of a job spec, flag or REST body is wrong: HTTP 400
     │                      INVALID_ARGUMENT (403 PERMISSION_DENIED for a project the caller may
     │                      not use); CLI exit 2; nothing is created
     │   └── UserInputErrors  several at once: one ``fieldViolation`` each, in order
     ├── UpstreamError      Kubernetes (or object storage) failed: HTTP 502 UNAVAILABLE
     ├── JobNotFound        no such job in that project: HTTP 404 NOT_FOUND; CLI exit 1
     ├── JobExists          the jobId is taken in that project: HTTP 409 ALREADY_EXISTS
     ├── JobFinished        cancel of a job that already ended: HTTP 400 FAILED_PRECONDITION
     └── ConfigError        the operator's settings are wrong (naming the keys): HTTP 503 UNAVAILABLE

`google_error(e)` is the one translation to Google's error JSON and HTTP status. Messages never
contain secret values or stack traces.
"""

from __future__ import annotations

from hub_ext.core.errors import (
    ConfigError,
    PlatformError,
    UpstreamError,
    UserInputError,
    UserInputErrors,
    collect,
    errors_of,
)

__all__ = ["PlatformError", "UserInputError", "UserInputErrors", "collect", "errors_of", "UpstreamError", "JobNotFound",
           "JobExists", "JobFinished",
           "google_error"]


class JobNotFound(PlatformError):
    status, code = 404, "NOT_FOUND"

    def __init__(self, project: str, job_id: str):
        self.project, self.job_id = project, job_id
        super().__init__(f"Job projects/{project}/jobs/{job_id} not found")


class JobExists(PlatformError):
    status, code = 409, "ALREADY_EXISTS"

    def __init__(self, project: str, job_id: str):
        self.project, self.job_id = project, job_id
        super().__init__(f"Job projects/{project}/jobs/{job_id} already exists")


class JobFinished(PlatformError):
    status, code = 400, "FAILED_PRECONDITION"

    def __init__(self, job_id: str, state: str):
        self.job_id, self.state = job_id, state
        super().__init__(f"Job {job_id} is {state}; only a running or queued job can be cancelled")


def google_error(e: PlatformError) -> tuple[int, dict]:
    """(HTTP status, Google's error body ``{"error": {"code", "message", "status", "details"}}``). A
    `UserInputError` gives one ``google.rpc.BadRequest`` detail with a ``fieldViolation``
    (``field``, ``description``) for each of its ``violations``; the message lists them all."""
    details: list[dict] = []
    if isinstance(e, UserInputError):
        status = e.status
        code = {403: "PERMISSION_DENIED", 409: "FAILED_PRECONDITION"}.get(e.status, "INVALID_ARGUMENT")
        details.append({"@type": "type.googleapis.com/google.rpc.BadRequest",
                        "fieldViolations": [{"field": field, "description": description} for field, description
                                            in (getattr(e, "violations", None) or ((e.field, e.message),))]})
    elif isinstance(e, UpstreamError):
        status, code = 502, "UNAVAILABLE"
    elif isinstance(e, ConfigError):
        status, code = 503, "UNAVAILABLE"
    elif isinstance(e, (JobNotFound, JobExists, JobFinished)):
        status, code = e.status, e.code
    else:
        status, code = 500, "INTERNAL"
    message = str(e) if status != 500 else "internal error; the server log has the details"
    return status, {"error": {"code": status, "message": message, "status": code, "details": details}}
