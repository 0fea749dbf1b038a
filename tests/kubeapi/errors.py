"""Kubernetes `Status` error bodies.

Every failure the stand-in answers is an `ApiError` rendered as a `kind: Status` object with the
`reason` and `code` a real kube-apiserver uses, so clients' error handling (``e.status == 409``,
``e.reason``) behaves as it does against a cluster.

    ApiError(code, reason, message)
     ├── not_found(...)        404 NotFound
     ├── already_exists(...)   409 AlreadyExists
     ├── conflict(...)         409 Conflict
     ├── invalid(...)          422 Invalid (with field causes)
     ├── forbidden(...)        403 Forbidden
     ├── gone(...)             410 Gone / Expired
     ├── bad_request(...)      400 BadRequest
     └── unsupported_media(.)  415 UnsupportedMediaType
"""

from __future__ import annotations


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str, details: dict | None = None):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self) -> dict:
        body = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            body["details"] = self.details
        return body


def _details(rt, name: str | None) -> dict:
    d = {"kind": rt.plural}
    if rt.group:
        d["group"] = rt.group
    if name:
        d["name"] = name
    return d


def _qualified(rt) -> str:
    return f"{rt.plural}.{rt.group}" if rt.group else rt.plural


def not_found(rt, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{_qualified(rt)} "{name}" not found', _details(rt, name))


def already_exists(rt, name: str) -> ApiError:
    return ApiError(409, "AlreadyExists", f'{_qualified(rt)} "{name}" already exists', _details(rt, name))


def conflict(rt, name: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {_qualified(rt)} "{name}": the object has been modified; '
        "please apply your changes to the latest version and try again",
        _details(rt, name),
    )


def invalid(rt, kind: str, name: str, causes: list[tuple[str, str, str]]) -> ApiError:
    """causes: (field, reason, message) with reason such as FieldValueInvalid / FieldValueRequired."""
    text = "; ".join(f"{field}: {msg}" for field, _, msg in causes)
    details = _details(rt, name)
    details["kind"] = kind
    details["causes"] = [{"reason": r, "message": m, "field": f} for f, r, m in causes]
    return ApiError(422, "Invalid", f'{kind} "{name}" is invalid: {text}', details)


def forbidden(rt, name: str, why: str) -> ApiError:
    return ApiError(403, "Forbidden", f'{_qualified(rt)} "{name}" is forbidden: {why}', _details(rt, name))


def gone(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def unsupported_media(message: str) -> ApiError:
    return ApiError(415, "UnsupportedMediaType", message)


def method_not_allowed(message: str) -> ApiError:
    return ApiError(405, "MethodNotAllowed", message)
