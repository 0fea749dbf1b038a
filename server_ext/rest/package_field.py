"""The create body's platform field ``"package": {"path": "trainer", "stagingBucket": "gs://…"}``:
the REST face of ``--package-path`` / ``--staging-bucket``. Pure (except reading the file system
to resolve the path).

`split_package(body, root)` returns ``(body without it, package dir or None, staging bucket or
None)``. The path is the package directory, relative to the notebook server's root directory (an
absolute path must lie inside it too); after resolving symbolic links it must still be inside the
root, and be a directory. It is at most `MAX_PATH` characters with no control character (NUL
included) or lone surrogate, and one the file system refuses (a name too long, a symbolic link
loop) is refused too. Anything else is `UserInputError` naming ``package.path`` or ``package``
(a bad ``stagingBucket`` and a bad path both at once).
The field is never echoed back (the job's ``packageUris`` show what was shipped).
"""

from __future__ import annotations

import pathlib
import re
from typing import Any

from ..errors import UserInputError, collect

MAX_PATH = 4096  # PATH_MAX on Linux
_UNFIT = re.compile("[\x00-\x1f\x7f\ud800-\udfff]")  # control characters (NUL: "embedded null byte"), lone surrogates


def split_package(body: Any, root: pathlib.Path) -> tuple[Any, pathlib.Path | None, str | None]:
    if not isinstance(body, dict) or "package" not in body:
        return body, None, None
    body = dict(body)
    spec = body.pop("package")
    if not isinstance(spec, dict) or not set(spec) <= {"path", "stagingBucket"} or \
            not isinstance(spec.get("path"), str) or not spec["path"]:
        raise UserInputError("package", "must be {\"path\": \"<package directory>\"} with an optional "
                                        "\"stagingBucket\"")
    bucket = spec.get("stagingBucket")
    with collect() as problems:  # a bad bucket and a bad path are told together
        if bucket is not None and not isinstance(bucket, str):
            problems.add("package.stagingBucket", "must be a gs:// or s3:// bucket")
        path = problems.check(_directory, spec["path"], root)
    return body, path, bucket or None


def _directory(text: str, root: pathlib.Path) -> pathlib.Path:
    if len(text) > MAX_PATH or _UNFIT.search(text):
        raise UserInputError("package.path", f"must be a directory's path: at most {MAX_PATH} characters, "
                                             "no control characters")
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
