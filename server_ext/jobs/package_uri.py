"""Package URIs, their recorded digests and the size limit, as `server_ext.runtimes.fetch` reads them. Pure.

`parse_uri` turns one URI (``gs://``, ``s3://``, ``configmap://``, ``file://`` or a path) into a
`Location`, with the sha256 its bytes must have when one is recorded: a ``#sha256=<hex>`` fragment
(pip's spelling), the content-addressed staging key ``…/packages/<sha256>/<file>``, or
``MLPLATFORM_PACKAGE_DIGESTS`` (`DIGESTS_ENV`, JSON URI → hex, written into the job's pod at
submit by `digests_env`). `parse_all` parses a job's list, refusing two files of the same name and
records that disagree. Errors are `UserInputError` naming ``trainingInput.packageUris[i]``.
`max_package_bytes` reads the largest package a fetch accepts from ``MLPLATFORM_MAX_PACKAGE_BYTES``
(`MAX_BYTES_ENV`, default `DEFAULT_MAX_BYTES`, 512 MiB).
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import posixpath
import re
from dataclasses import dataclass
from typing import Mapping
from urllib.parse import unquote, urlsplit

from hub_ext.core.errors import UserInputError

FIELD = "trainingInput.packageUris"
DIGESTS_ENV = "MLPLATFORM_PACKAGE_DIGESTS"
PACKAGES_DIR_ENV = "MLPLATFORM_PACKAGES_DIR"  # where a pod finds its package ConfigMaps
FETCH_ARGV_ENV = "MLPLATFORM_FETCH_ARGV"  # the fetcher's arguments (JSON list) where its command is fixed (Trainer v2)
MAX_BYTES_ENV = "MLPLATFORM_MAX_PACKAGE_BYTES"
DEFAULT_MAX_BYTES = 512 * 2**20
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class Location:
    """One parsed URI. `bucket` is the bucket or ConfigMap name (empty for files); `key` the object
    key, file name in the ConfigMap, or local path."""

    uri: str
    field: str
    scheme: str  # "gs" | "s3" | "configmap" | "file"
    bucket: str
    key: str
    sha256: str | None = None  # the digest the fetched bytes must have (see the module docstring)

    @property
    def name(self) -> str:
        return posixpath.basename(self.key) if self.scheme != "file" else pathlib.Path(self.key).name


def parse_uri(uri: str, field: str) -> Location:
    """Pure: `uri` → `Location`, or `UserInputError(field, …)`."""
    if not isinstance(uri, str) or not uri.strip():
        raise UserInputError(field, "must be a gs://, s3://, configmap:// or file URI")
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    pinned = _fragment_digest(uri, parts.fragment, field) if scheme in ("gs", "s3", "configmap", "file") else None
    if scheme in ("gs", "s3", "configmap"):
        key = parts.path.lstrip("/")
        if not parts.netloc or not key or key.endswith("/"):
            raise UserInputError(field, f"{uri} must name one file: {scheme}://<bucket>/<path>")
        staged = _staged_digest(key) if scheme in ("gs", "s3") else None
        if pinned and staged and pinned != staged:
            raise UserInputError(field, f"{uri}: its #sha256 fragment and its staging key name different digests")
        return Location(uri, field, scheme, parts.netloc, key, pinned or staged)
    if scheme == "file":
        return Location(uri, field, "file", "", unquote(parts.path), pinned)
    if scheme:
        raise UserInputError(field, f"{uri}: unsupported scheme {scheme}:// (use gs://, s3://, configmap:// "
                                    "or a local path)")
    return Location(uri, field, "file", "", uri)


def _fragment_digest(uri: str, fragment: str, field: str) -> str | None:
    if not fragment:
        return None
    name, _, value = fragment.partition("=")
    if name != "sha256" or not _SHA256.fullmatch(value):
        raise UserInputError(field, f"{uri}: the only fragment understood is #sha256=<64 lower-case hex digits>")
    return value


def _staged_digest(key: str) -> str | None:
    """The digest in the platform's staging key ``…/packages/<sha256>/<file>``."""
    parts = key.split("/")
    if len(parts) >= 3 and parts[-3] == "packages" and _SHA256.fullmatch(parts[-2]):
        return parts[-2]
    return None


def digests_env(digests: Mapping[str, str]) -> str:
    """Pure: the value of `DIGESTS_ENV` recording `digests` (URI → sha256 hex digest)."""
    for uri, digest in digests.items():
        if not _SHA256.fullmatch(digest):
            raise ValueError(f"the sha256 of {uri} must be 64 lower-case hex digits")
    return json.dumps(dict(digests), sort_keys=True, separators=(",", ":"))


def recorded_digests(env: Mapping[str, str]) -> dict[str, str]:
    """Pure: `DIGESTS_ENV` read from `env` ({} when unset); malformed → `UserInputError` naming it."""
    text = env.get(DIGESTS_ENV)
    if not text:
        return {}
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    if not isinstance(doc, dict) or not all(isinstance(k, str) and isinstance(v, str) and _SHA256.fullmatch(v)
                                            for k, v in doc.items()):
        raise UserInputError(DIGESTS_ENV, "must be a JSON object of URI → sha256 (64 lower-case hex digits)")
    return doc


def max_package_bytes(env: Mapping[str, str]) -> int:
    """`MAX_BYTES_ENV` read from `env` (`DEFAULT_MAX_BYTES` when unset); malformed → `UserInputError` naming it."""
    text = env.get(MAX_BYTES_ENV)
    try:
        return int(text) if text else DEFAULT_MAX_BYTES
    except ValueError:
        raise UserInputError(MAX_BYTES_ENV, "must be a whole number of bytes") from None


def parse_all(uris: list[str], field: str = FIELD, digests: Mapping[str, str] | None = None) -> list[Location]:
    """Pure: every URI parsed; two with the same base name are refused, naming both. `digests`
    (URI → sha256, `recorded_digests`) pins URIs too; one that disagrees with the URI's own is refused."""
    locations = [parse_uri(u, f"{field}[{i}]") for i, u in enumerate(uris)]
    for i, loc in enumerate(locations):
        recorded = (digests or {}).get(loc.uri)
        if recorded and loc.sha256 and recorded != loc.sha256:
            raise UserInputError(loc.field, f"{loc.uri}: {DIGESTS_ENV} records a different sha256 than the URI")
        if recorded:
            locations[i] = dataclasses.replace(loc, sha256=recorded)
    seen: dict[str, Location] = {}
    for loc in locations:
        if not loc.name:
            raise UserInputError(loc.field, f"{loc.uri} must name a file")
        other = seen.setdefault(loc.name, loc)
        if other is not loc:
            raise UserInputError(loc.field, f"{loc.uri} and {other.uri} ({other.field}) have the same file "
                                            f"name {loc.name!r}; rename one")
    return locations
