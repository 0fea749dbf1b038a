"""Google's error JSON for every failure of the `ml/v1` handlers, in one place.

`error_body(status, exc)`: a `PlatformError` is translated by `server_ext.errors.google_error`; a
tornado `HTTPError` (no credentials → 403, unknown route → 404, malformed JSON → 400) keeps its
status and gets Google's status name; anything else is a 500 whose body says only that the
server log has the details (never a stack trace).
"""

from __future__ import annotations

from http.client import responses

from tornado.web import HTTPError

from server_ext.errors import PlatformError, google_error

_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
           405: "UNIMPLEMENTED", 409: "ALREADY_EXISTS", 429: "RESOURCE_EXHAUSTED", 502: "UNAVAILABLE",
           503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}


def error_body(status: int, exc: BaseException | None) -> tuple[int, dict]:
    if isinstance(exc, PlatformError):
        return google_error(exc)
    if isinstance(exc, HTTPError):
        message = exc.log_message % exc.args if exc.log_message and exc.args else exc.log_message
        message = message or exc.reason or responses.get(status, "error")
    elif status >= 500:
        message = "internal error; the server log has the details"
    else:
        message = responses.get(status, "error")
    return status, {"error": {"code": status, "message": message, "status": _STATUS.get(status, "INTERNAL" if status >= 500
                                                                                       else "FAILED_PRECONDITION"),
                              "details": []}}
