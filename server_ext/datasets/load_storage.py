"""The dataset loader's object storage: listing a source folder and copying one object into the
dataset's directory, on S3 or Cloud Storage, with every failure said as a `LoadError` a user can act
on (`load` runs the program).

Guarantees:

- the stores are `server_ext.runtimes.stores.Stores` (credentials and endpoints from the
  environment, exactly as the code fetcher reads them; none: anonymous);
- `list_objects` lists every object under the prefix (folder markers skipped, each key checked by
  `load_plan.relative_path`), counting into `seen`; `copy_object` writes one object under
  ``DIR/.mlplatform-tmp/`` and renames it into place (a file in DIR is always a whole object),
  recording its size and ETag/MD5 in the `Progress`; both stop at the next chunk once `stop` is set
  (`LoadError` Interrupted);
- `guarded` turns a failure into a `LoadError`: AccessDenied, NotFound (the bucket), BadCredential
  (a missing or wrong credential file, no credentials), NoSpace (the volume is full), SourceChanged
  (an object removed while loading), Unreachable, StorageError, WriteError. Text taken from a
  library's exception is scrubbed of the credential file's secrets (`Stores.scrub`).
"""

from __future__ import annotations

import errno
import os
import pathlib
import threading
import uuid
from typing import Any, Callable

from hub_ext.core.errors import UpstreamError, UserInputError
from hub_ext.operator.rules.datasets import Source
from server_ext.datasets.load_dir import TMP_DIR
from server_ext.datasets.load_plan import LoadError, Obj, Progress, relative_path
from server_ext.jobs.package_uri import Location
from server_ext.runtimes.fetch import write_body
from server_ext.runtimes.stores import Stores

FIELD = "--source"
_DENIED = {"AccessDenied", "403", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "AllAccessDisabled",
           "InvalidToken", "AccountProblem"}


def _location(src: Source) -> Location:
    return Location(src.uri, FIELD, src.scheme, src.bucket, src.prefix)


def _sdk_errors(scheme: str) -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = [OSError]
    if scheme == "s3":
        from botocore.exceptions import BotoCoreError, ClientError
        errors += [BotoCoreError, ClientError]
    else:
        import requests
        from google.api_core.exceptions import GoogleAPIError
        from google.auth.exceptions import GoogleAuthError
        from google.resumable_media import DataCorruption, InvalidResponse
        errors += [requests.RequestException, GoogleAPIError, GoogleAuthError, DataCorruption, InvalidResponse]
    return tuple(errors)


def _error(e: BaseException, src: Source, stores: Stores, action: str, key: str | None) -> LoadError:
    """One SDK or disk failure as a `LoadError` the user can act on (scrubbed of secrets)."""
    where = f"{action} {src.scheme}://{src.bucket}/{key if key is not None else src.prefix}"
    if isinstance(e, OSError) and not isinstance(e, _sdk_errors(src.scheme)[1:]):  # the disk's, not the storage's
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            return LoadError("NoSpace", f"the dataset's volume is full while {where}; give the dataset a larger size")
        return LoadError("WriteError", f"could not write the dataset's volume while {where}: "
                                       f"{e.strerror or type(e).__name__}")
    if src.scheme == "s3":
        from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError

        if isinstance(e, ClientError):
            code = str(e.response.get("Error", {}).get("Code", ""))
            status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code == "NoSuchBucket":
                return LoadError("NotFound", f"the bucket {src.bucket!r} does not exist ({where})")
            if code in ("NoSuchKey", "404", "NotFound"):
                return LoadError("SourceChanged", f"{where}: the object was removed while loading; the load starts over")
            if code in _DENIED or status in (401, 403):
                return LoadError("AccessDenied", f"access denied ({code}) {where}: the dataset's credential must be an "
                                                 "aws-credential allowed to list and read this bucket")
            return LoadError("StorageError", f"S3 answered {status} {code} {where}")
        if isinstance(e, NoCredentialsError):
            return LoadError("BadCredential", f"no AWS credentials {where}")
        if isinstance(e, EndpointConnectionError):
            return LoadError("Unreachable", f"could not reach S3 {where}: {stores.scrub(str(e))}")
    else:
        from google.api_core import exceptions as gexc
        from google.auth.exceptions import RefreshError

        if isinstance(e, gexc.NotFound):
            if key is not None:
                return LoadError("SourceChanged", f"{where}: the object was removed while loading; the load starts over")
            return LoadError("NotFound", f"the bucket {src.bucket!r} does not exist ({where})")
        if isinstance(e, (gexc.Forbidden, gexc.Unauthorized, RefreshError)):
            return LoadError("AccessDenied", f"access denied {where}: the dataset's credential must be a "
                                             "gcp-credential allowed to list and read this bucket")
        if isinstance(e, gexc.GoogleAPICallError):
            return LoadError("StorageError", f"Cloud Storage answered {e.code} {where}")
    return LoadError("StorageError", f"{where}: {stores.scrub(f'{type(e).__name__}: {e}')}")


def guarded(src: Source, stores: Stores, action: str, key: str | None, fn: Callable, *args: Any) -> Any:
    try:
        return fn(*args)
    except LoadError:
        raise
    except UserInputError as e:  # Stores: a credential file that is missing or not of its kind
        raise LoadError("BadCredential", e.message) from None
    except UpstreamError as e:  # Stores: an endpoint that is not a URL
        raise LoadError("StorageError", str(e)) from None
    except _sdk_errors(src.scheme) as e:
        raise _error(e, src, stores, action, key) from None


def list_objects(src: Source, stores: Stores, seen: list[int], stop: threading.Event) -> list[Obj]:
    client = stores.client(_location(src))
    out: list[Obj] = []
    if src.scheme == "s3":
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=src.bucket, Prefix=src.prefix)
        items = ((o["Key"], o["Size"], o.get("ETag", "")) for page in pages for o in page.get("Contents") or [])
    else:
        items = ((b.name, b.size, b.md5_hash or b.etag or str(b.generation or ""))
                 for b in client.list_blobs(src.bucket, prefix=src.prefix or None))
    for key, size, etag in items:
        if stop.is_set():
            raise LoadError("Interrupted", "the loader was stopped")
        path = relative_path(key, src.prefix)
        if path is not None:
            out.append(Obj(key, path, int(size or 0), str(etag)))
            seen[0] = len(out)
    return out


class _Counting:
    """A file writer that counts the bytes and stops when told."""

    def __init__(self, f, progress: Progress, stop: threading.Event):
        self.f, self.progress, self.stop = f, progress, stop

    def write(self, data: bytes) -> int:
        if self.stop.is_set():
            raise LoadError("Interrupted", "the loader was stopped")
        self.progress.add_bytes(len(data))
        return self.f.write(data)


def copy_object(src: Source, stores: Stores, obj: Obj, dest: pathlib.Path, progress: Progress,
                stop: threading.Event) -> None:
    part = dest / TMP_DIR / uuid.uuid4().hex
    client = stores.client(_location(src))
    try:
        with open(part, "wb") as f:
            out = _Counting(f, progress, stop)
            etag = obj.etag
            if src.scheme == "s3":
                answer = client.get_object(Bucket=src.bucket, Key=obj.key)
                etag = str(answer.get("ETag") or etag)
                write_body(answer["Body"], out)
            else:
                client.bucket(src.bucket).blob(obj.key).download_to_file(out)
        size = part.stat().st_size
        target = dest / obj.path
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(part, target)
        progress.finished(obj, size, etag)
    finally:
        part.unlink(missing_ok=True)
