"""The hub side's one exception tree; each boundary translates it once.

    PlatformError
     ├── ConfigError        operator configuration is wrong: the hub refuses to start, and
     │                      `mlplatform check-config` prints every problem with its field path
     │                      (e.g. ``accelerators['1g.5gb'].profile``)
     ├── UserInputError     a user's choice (form POST, REST `user_options`) is not allowed or
     │                      malformed: HTTP 400/403 naming the field; nothing is started
     │   └── UserInputErrors  several independent mistakes of one request, all told at once
     │                      (``violations``); `collect()` gathers them at a call site
     └── UpstreamError      the Kubernetes API failed (after retries): HTTP 502 with the reason;
         │                  nothing half-made is left behind
         └── KubeError      (`hub_ext.kube.client`, the one module that reads the API's answers) with
                            NotFound, Conflict, Gone, Forbidden, Invalid (the API's field
                            causes) and Unavailable (429, 5xx, timeouts, no connection)

Messages never contain secret values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable


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
    and the message are bounded (`bounded`): they may quote what the user sent. ``violations`` is
    every ``(field, message)`` it stands for: its own one here, several in `UserInputErrors`."""

    def __init__(self, field: str, message: str, status: int = 400):
        field, message = bounded(str(field), 200), bounded(str(message), 1000)
        self.field, self.message, self.status = field, message, status
        super().__init__(f"{field}: {message}")

    @property
    def violations(self) -> tuple[tuple[str, str], ...]:
        return self.__dict__.get("violations", ((self.field, self.message),))

    @violations.setter
    def violations(self, value: tuple[tuple[str, str], ...]) -> None:  # several, or as a server sent them
        self.__dict__["violations"] = tuple(value)


class UserInputErrors(UserInputError):
    """Several independent mistakes of one request, in the order found. `field`, `message` (and so
    a caller that reads only those) are the first's; ``errors`` are the single `UserInputError`s
    (nested ones flattened) and ``violations`` their ``(field, message)`` pairs; the text lists them
    all (``f1: m1; f2: m2``). The status is theirs when they agree (all 403: every one is a
    permission), else 400. Build it with `collect()`; `raise_all` raises a lone error as it is."""

    def __init__(self, errors: Iterable[UserInputError]):
        flat: list[UserInputError] = []
        for e in errors:
            flat.extend(e.errors if isinstance(e, UserInputErrors) else (e,))
        if not flat:
            raise ValueError("UserInputErrors needs at least one error")
        statuses = {e.status for e in flat}
        super().__init__(flat[0].field, flat[0].message, statuses.pop() if len(statuses) == 1 else 400)
        self.errors = tuple(flat)
        self.violations = tuple((e.field, e.message) for e in flat)
        self.args = ("; ".join(f"{e.field}: {e.message}" for e in flat),)


def errors_of(e: UserInputError) -> tuple[UserInputError, ...]:
    """The single errors `e` stands for (itself, or a `UserInputErrors`' own)."""
    return e.errors if isinstance(e, UserInputErrors) else (e,)


def raise_all(errors: list[UserInputError]) -> None:
    """Nothing when `errors` is empty; the one error as it is; else `UserInputErrors` of them all."""
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise UserInputErrors(errors)


class collect:
    """Gathers the independent checks of one request so all their mistakes are told at once::

        with collect() as problems:
            problems.check(check_labels, labels)          # a UserInputError is kept, None returned
            if bad: problems.add("jobId", "is required")
            if not problems.failed("trainingInput.scaleTier"):
                ...                                       # a check that needs a valid tier
        # leaving the block raises what was kept (`raise_all`); a UserInputError raised inside the
        # block stops it and is told after those kept before it

    Any other exception passes through unchanged."""

    def __init__(self) -> None:
        self.errors: list[UserInputError] = []

    def __enter__(self) -> "collect":
        return self

    def __exit__(self, kind, value, tb) -> bool:
        if value is not None and (not isinstance(value, UserInputError) or not self.errors):
            return False  # passes through as it is
        errors, self.errors = self.errors + ([value] if value is not None else []), []
        if value is not None:
            raise UserInputErrors(errors) from None
        raise_all(errors)
        return False

    def add(self, field: str, message: str, status: int = 400) -> None:
        self.errors.append(UserInputError(field, message, status))

    def check(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)``; a `UserInputError` it raises is kept and None returned."""
        try:
            return fn(*args, **kwargs)
        except UserInputError as e:
            self.errors.append(e)
            return None

    def failed(self, *fields: str) -> bool:
        """Whether a mistake was kept in one of `fields` or inside one (``a`` covers ``a.b``, ``a[0]``)."""
        return any(f == name or f.startswith((name + ".", name + "["))
                   for e in self.errors for f, _ in e.violations for name in fields)

    def __bool__(self) -> bool:
        return bool(self.errors)


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
