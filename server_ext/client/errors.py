"""Google's error JSON (as `server_ext.errors.google_error` writes it) back into the exceptions the
job backends raise, so a caller of `ServerJobs` handles errors exactly as a caller of `JobService`.
Pure.

    HTTP status / error.status          raised
    400 FAILED_PRECONDITION             JobFinished (cancel of a job that already ended)
    400, 409 (other), 401, 403          UserInputError(field, description, status): the first
                                        fieldViolation's; "token" for a refused credential (403)
    404 NOT_FOUND (Google's JSON)       JobNotFound(project, job_id)
    404 otherwise (no such route)       UpstreamError: the server has no ml/v1 API
    409 ALREADY_EXISTS                  JobExists(project, job_id)
    5xx, anything else                  UpstreamError (``could not X: Y`` from the server is kept as is)

A `UserInputError` read from an answer carries **every** fieldViolation of it, in order, as
``violations``: a tuple of ``(field, description)`` pairs (empty when the answer names no field);
`field` and `message` are the first's, and its text lists them all (``f1: d1; f2: d2``). This
server sends one for each independent mistake of a request (`hub_ext.core.errors.UserInputErrors`), as
other ml.v1 servers may, and the submit form shows each next to its field.

Connection failures are `UpstreamError` too (`unreachable`). Messages are the server's (never a
stack trace: the server does not send one).
"""

from __future__ import annotations

import re
from typing import Any

from server_ext.errors import JobExists, JobFinished, JobNotFound, PlatformError, UpstreamError, UserInputError

_UPSTREAM = re.compile(r"could not (.+?): (.*)", re.S)
_FINISHED = re.compile(r"Job \S+ is ([A-Z_]+);")


def _error(body: Any) -> dict:
    error = body.get("error") if isinstance(body, dict) else None
    return error if isinstance(error, dict) else {}


def violations(error: dict) -> tuple[tuple[str, str], ...]:
    """Every ``(field, description)`` of the error's ``fieldViolations`` (all its details), in order;
    entries without a field are skipped, a missing description is ``""``."""
    out = []
    for detail in error.get("details") or []:
        for violation in (detail.get("fieldViolations") or []) if isinstance(detail, dict) else []:
            if isinstance(violation, dict) and violation.get("field"):
                out.append((str(violation["field"]), str(violation.get("description") or "")))
    return tuple(out)


def _user_input(violated: tuple[tuple[str, str], ...], field: str, message: str, status: int) -> UserInputError:
    e = UserInputError(field, message, status)
    e.violations = violated
    if len(violated) > 1:
        e.args = ("; ".join(f"{f}: {d}" for f, d in violated),)
    return e


def from_response(status: int, body: Any, *, action: str, project: str, job_id: str | None = None) -> PlatformError:
    """The exception for an error answer (`status` >= 400, `body` its parsed JSON or None)."""
    error = _error(body)
    name = error.get("status")
    message = str(error.get("message") or f"HTTP {status}")
    violated = violations(error)
    field, description = violated[0] if violated else (None, None)
    if status == 400 and name == "FAILED_PRECONDITION" and job_id:
        found = _FINISHED.search(message)
        finished = JobFinished(job_id, found.group(1) if found else "finished")
        finished.args = (message,)
        return finished
    if status == 404:
        if name == "NOT_FOUND" and job_id:
            return JobNotFound(project, job_id)
        return UpstreamError(action, f"the notebook server has no ml/v1 jobs API here ({message}); is the "
                                     "server_ext extension enabled?")
    if status == 409 and name == "ALREADY_EXISTS" and job_id:
        return JobExists(project, job_id)
    if status in (401, 403) and field is None:
        return _user_input((), "token", f"the notebook server refused the credentials ({message})", 403)
    if 400 <= status < 500 and status not in (404, 405):
        return _user_input(violated, field or "request", description or message, status)
    found = _UPSTREAM.fullmatch(message)
    if found:
        return UpstreamError(found.group(1), found.group(2))
    return UpstreamError(action, message if name else f"HTTP {status}: {message}")


def unreachable(action: str, url: str, e: BaseException) -> UpstreamError:
    reason = str(e) or type(e).__name__
    return UpstreamError(action, f"the notebook server at {url} did not answer ({reason})")
