"""The hub side's one exception tree; each boundary translates it once.

    PlatformError
     ├── ConfigError        operator configuration is wrong: the hub refuses to start, and
     │                      `mlplatform check-config` prints every problem with its field path
     │                      (e.g. ``accelerators['1g.5gb'].profile``)
     ├── UserInputError     a user's choice (form POST, REST `user_options`) is not allowed or
     │                      malformed: HTTP 400/403 naming the field; nothing is started
     └── UpstreamError      the Kubernetes API failed (after retries): HTTP 502 with the reason;
                            nothing half-made is left behind

Messages never contain secret values.
"""

from __future__ import annotations

from dataclasses import dataclass


class PlatformError(Exception):
    """Base of every error the platform raises on purpose."""


@dataclass(frozen=True)
class Problem:
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class ConfigError(PlatformError):
    """One or more configuration problems, each with the path of the field at fault."""

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        super().__init__("invalid platform configuration:\n" + "\n".join(f"  {p}" for p in self.problems))


def bounded(text: str, limit: int) -> str:
    """`text`, or its start with how much was cut: an error quoting a user's 100 KB value must not
    echo it whole to their page, the logs or a terminal."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text) - limit} more characters)"


class UserInputError(PlatformError):
    """A user-supplied field is invalid or not permitted. `status` is 400 or 403. The field's name
    and the message are bounded (`bounded`): they may quote what the user sent."""

    def __init__(self, field: str, message: str, status: int = 400):
        field, message = bounded(str(field), 200), bounded(str(message), 1000)
        self.field, self.message, self.status = field, message, status
        super().__init__(f"{field}: {message}")


class UpstreamError(PlatformError):
    """Kubernetes (or another service the hub depends on) failed; `reason` is safe to show."""

    status = 502

    def __init__(self, action: str, reason: str):
        self.action, self.reason = action, reason
        super().__init__(f"could not {action}: {reason}")


def http_answer(e: PlatformError) -> tuple[int, str]:
    """(HTTP status, message) for an error at a web boundary; the message is safe to show and is
    escaped for tornado's `HTTPError(status, log_message)` formatting."""
    if isinstance(e, UserInputError):
        status = e.status
    elif isinstance(e, UpstreamError):
        status = e.status
    else:
        status = 500
    text = str(e) if status != 500 else "the platform is misconfigured; an administrator has been told"
    return status, text.replace("%", "%%")
