"""The create body's platform fields, read for the REST face: ``"package": {"path": "trainer",
"stagingBucket": "gs://…"}`` (``--package-path`` / ``--staging-bucket``) and ``"mounts"``, into a
`server_ext.jobs.submission.Submission` (`read_create_body`). Pure except reading the file system
to resolve the package path.

The path is the package directory, relative to the notebook server's root directory (an absolute
path must lie inside it too); after resolving symbolic links it must still be inside the root, and
be a directory. It is at most `MAX_PATH` characters with no control character (NUL included) or
lone surrogate, and one the file system refuses (a name too long, a symbolic link loop) is refused
too. Anything else is `UserInputError` naming ``package.path`` or ``package`` (a bad
``stagingBucket``, a bad path and bad mounts all at once, `submission.from_rest`).
The field is never echoed back (the job's ``packageUris`` show what was shipped).
"""

from __future__ import annotations

import pathlib
from typing import Any

from server_ext.errors import UserInputError
from server_ext.jobs.submission import MAX_PATH, Submission, from_rest, path_text

__all__ = ["MAX_PATH", "read_create_body", "inside_root"]


def read_create_body(body: Any, project: str, root: pathlib.Path) -> Submission:
    return from_rest(body, project, resolve=lambda text: str(inside_root(text, root)))


def inside_root(text: str, root: pathlib.Path) -> pathlib.Path:
    """The directory `text` names under `root`, resolved; else `UserInputError` naming ``package.path``."""
    path_text(text)
    root = root.resolve()
    try:
        path = (root / text).resolve()
        inside = path == root or root in path.parents
        is_dir = inside and path.is_dir()
    except (OSError, ValueError, RuntimeError):  # too long a name, not encodable, a symbolic link loop
        raise UserInputError("package.path", f"{text[:100]!r} is not a directory the server can read") from None
    if not inside:
        raise UserInputError("package.path", "must be a directory inside the notebook server's root directory")
    if not is_dir:
        raise UserInputError("package.path", f"{text[:100]!r} is not a directory")
    return path
