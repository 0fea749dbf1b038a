"""The create body's platform field ``"package": {"path": "trainer", "stagingBucket": "gs://…"}``:
the REST face of ``--package-path`` / ``--staging-bucket``. Pure (except reading the file system
to resolve the path).

`split_package(body, root)` returns ``(body without it, package dir or None, staging bucket or
None)``. The path is the package directory, relative to the notebook server's root directory (an
absolute path must lie inside it too); after resolving symbolic links it must still be inside the
root, and be a directory. Anything else is `UserInputError` naming ``package.path`` or
``package``. The field is never echoed back (the job's ``packageUris`` show what was shipped).
"""

from __future__ import annotations

import pathlib
from typing import Any

from ..errors import UserInputError


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
    if bucket is not None and not isinstance(bucket, str):
        raise UserInputError("package.stagingBucket", "must be a gs:// or s3:// bucket")
    root = root.resolve()
    path = (root / spec["path"]).resolve()
    if path != root and root not in path.parents:
        raise UserInputError("package.path", "must be a directory inside the notebook server's root directory")
    if not path.is_dir():
        raise UserInputError("package.path", f"{spec['path']!r} is not a directory")
    return body, path, bucket or None
