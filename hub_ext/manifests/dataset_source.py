"""Where a dataset's data comes from, as its PVC says it: the source URI (``s3://bucket/prefix`` or
``gs://bucket/prefix``, `parse_source`), the credential it is read with, and the loader's progress.
Pure. The hub writes these on a dataset PVC (`hub_ext.manifests.datasets`) and the operator reads
them (`hub_ext.operator.rules.datasets`): one vocabulary for both."""

from __future__ import annotations

import re
from dataclasses import dataclass

from hub_ext.core.credentials import AWS, GCP
from hub_ext.core.errors import bounded

CREDENTIAL_ANNOTATION = "mlplatform.io/credential"
PROGRESS_ANNOTATION = "mlplatform.io/progress"
SCHEMES = {"s3": AWS, "gs": GCP}  # a source's scheme → the credential kind it is read with
_BUCKET = re.compile(r"[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]")


@dataclass(frozen=True)
class Source:
    uri: str
    scheme: str  # "s3" | "gs"
    bucket: str
    prefix: str  # "" (the whole bucket) or a folder, ending in "/"

    @property
    def kind(self) -> str:
        """The credential kind that reads it."""
        return SCHEMES[self.scheme]


def parse_source(uri: object) -> Source:
    """``s3://bucket/prefix`` or ``gs://bucket/prefix`` → `Source`, else ValueError (its message
    says what is wrong, quoting at most a bounded part of `uri`)."""
    if not isinstance(uri, str) or not uri:
        raise ValueError("must be s3://<bucket>/<prefix> or gs://<bucket>/<prefix>")
    scheme, sep, rest = uri.partition("://")
    if not sep or scheme not in SCHEMES:
        raise ValueError(f"{bounded(uri, 100)!r} must be s3://<bucket>/<prefix> or gs://<bucket>/<prefix>")
    bucket, _, prefix = rest.partition("/")
    if not _BUCKET.fullmatch(bucket):
        raise ValueError(f"{bounded(bucket, 100)!r} is not a bucket name (3-222 lower-case letters, digits, "
                         "'.', '-' or '_')")
    if len(prefix) > 1024 or any(ord(ch) < 32 or ord(ch) == 127 for ch in prefix):
        raise ValueError("the prefix must be at most 1024 characters, without control characters")
    if prefix and not prefix.endswith("/"):
        prefix += "/"
    return Source(uri, scheme, bucket, prefix)
