"""The jobs service names some fields as the CLI spells them (``--package-path``,
``--staging-bucket``, ``task-name``) or as `hub_ext.mounts` does (``credentials[0]``); a REST
client sent ``package.path``, ``package.stagingBucket``, the query parameter ``task`` and
``mounts.credentials[0]``. `for_create` and `for_logs` rename a `UserInputError` (same message,
same status) to the name the client used, each mistake of a `UserInputErrors` on its own;
anything else passes unchanged. Pure.
"""

from __future__ import annotations

from typing import Any

from ..errors import UserInputError, UserInputErrors, errors_of

_CREATE = {"--package-path": "package.path", "--staging-bucket": "package.stagingBucket"}
_MOUNTS = ("credentials", "datasets")
_LOGS = {"task-name": "task", "--task-name": "task"}


def _renamed(e: UserInputError, field: str) -> UserInputError:
    return e if field == e.field else UserInputError(field, e.message, e.status)


def _each(e: UserInputError, rename) -> UserInputError:
    if not isinstance(e, UserInputErrors):
        return rename(e)
    renamed = [rename(one) for one in errors_of(e)]
    return e if all(a is b for a, b in zip(renamed, errors_of(e))) else UserInputErrors(renamed)


def for_create(e: UserInputError, body: Any) -> UserInputError:
    """`e` from `JobService.create(body)` as the REST body names it. ``credentials[i]`` is a mount
    only when the body has no top-level ``credentials`` (that one is refused as an unknown field)."""
    return _each(e, lambda one: _for_create(one, body))


def _for_create(e: UserInputError, body: Any) -> UserInputError:
    if e.field in _CREATE:
        return _renamed(e, _CREATE[e.field])
    root = e.field.split("[", 1)[0]
    if root in _MOUNTS and isinstance(body, dict) and root not in body and "mounts" in body:
        return _renamed(e, f"mounts.{e.field}")
    return e


def for_logs(e: UserInputError) -> UserInputError:
    return _each(e, lambda one: _renamed(one, _LOGS[one.field]) if one.field in _LOGS else one)
