"""Fetch a training job's code packages (``trainingInput.packageUris``) into one directory: the
I/O half (object storage, files); the pure half — parsing URIs and recorded digests, the size
limit read from the env — is `server_ext.jobs.package_uri`.

`fetch_all(uris, dest, env)` is what the Kubernetes init container runs (through the CLI
``python -m server_ext.runtimes.fetch --dest DIR URI...``: exit 0, or exit 1 with one line on stderr
naming the URI; without arguments, those words come as a JSON list in ``MLPLATFORM_FETCH_ARGV``
(`FETCH_ARGV_ENV`), as a Trainer v2 runtime's fixed init container gets them, and without that
variable there is nothing to fetch: exit 0) and what the local backend awaits. `put_object(uri, data, env, field)` is the
upload half, used to stage packages (`server_ext.runtimes.kube.package.stage`, `server_ext.runtimes.package.stage`).

URIs (``i`` is the URI's index, used in every error's field ``trainingInput.packageUris[i]``):

- ``gs://bucket/object``: Google Cloud Storage, and ``s3://bucket/key``: S3, with the credentials,
  region and endpoint `server_ext.runtimes.stores.Stores` reads from the environment
  (``GOOGLE_APPLICATION_CREDENTIALS``, ``STORAGE_EMULATOR_HOST``; ``AWS_SHARED_CREDENTIALS_FILE``,
  ``AWS_PROFILE``, ``AWS_CONFIG_FILE``, ``AWS_REGION``, ``AWS_ENDPOINT_URL_S3``…).
- ``configmap://<name>/<file>``: a package shipped with the job in a ConfigMap
  (`server_ext.jobs.package_delivery.package_configmap`), which the pod mounts at
  ``$MLPLATFORM_PACKAGES_DIR/<name>/``; it is copied from there.
- ``file:///abs/path`` or a plain path: copied.

Digests (parsed by `server_ext.jobs.package_uri`): a package's sha256 is recorded where project
members cannot change it without recreating the job (the pod's env and args):
``MLPLATFORM_PACKAGE_DIGESTS`` (`DIGESTS_ENV`, JSON URI → hex, made by `digests_env`;
`server_ext.jobs.package_delivery.digest_env` for a shipped package), a URI's ``#sha256=<hex>``
fragment (pip's spelling), or the content-addressed staging key ``…/packages/<sha256>/<file>`` of a
``gs://``/``s3://`` URI. Bytes without the recorded digest fail that URI, naming both digests (the
package changed after submission); records that disagree are refused before any download. When any
URI fails, the files already fetched are removed: the training container installs nothing.

Guarantees:
- Only `env` is consulted for credentials, endpoints and the packages directory (the CLI passes
  ``os.environ``). Without a credential file, requests are anonymous (public objects only): the
  node's ambient identity (metadata servers, instance roles) is never picked up.
- Each file keeps its base name in `dest`; two URIs with the same base name are refused before
  anything is downloaded, naming both. The result lists the paths in the order of `uris`; when
  several fail, the error raised is that of the first failing URI in that order.
- An object larger than `max_bytes` (default 512 MiB, env ``MLPLATFORM_MAX_PACKAGE_BYTES``:
  `package_uri.max_package_bytes`) is
  refused, checked before and while downloading; a failed download leaves no partial file.
- Errors: `UserInputError` for the caller's mistakes (bad URI, not found, access denied, an
  unreadable credential file, too large); `UpstreamError` for storage that failed or could not be
  reached. No message or log line contains credential contents: secret values read from
  credential files are also scrubbed from any text taken from a library's exception.

Why the official SDKs (botocore, google-cloud-storage) rather than fsspec (s3fs/gcsfs): both are
maintained by the cloud vendors, read exactly the files and variables AI Platform users already
have, and can be given credentials explicitly (nothing from the ambient environment); s3fs pins
aiobotocore, which pins botocore to narrow ranges and fights boto3/moto over its version. Their
calls block, so each runs in `asyncio.to_thread`.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import logging
import os
import pathlib
import shutil
import sys
from typing import Any, BinaryIO, Mapping

from hub_ext.core.errors import PlatformError, UpstreamError, UserInputError
from server_ext.jobs.package_uri import (
    DEFAULT_MAX_BYTES,
    FETCH_ARGV_ENV,
    MAX_BYTES_ENV,
    PACKAGES_DIR_ENV,
    Location,
    max_package_bytes,
    parse_all,
    parse_uri,
    recorded_digests,
)
from server_ext.runtimes.stores import Stores, translated

log = logging.getLogger("mlplatform.jobs.fetch")

_CHUNK = 2**20
_PARALLEL = 4


class _Capped:
    """A writer that refuses to grow past `limit` bytes."""

    def __init__(self, f: BinaryIO, limit: int, loc: Location):
        self.f, self.limit, self.loc, self.size = f, limit, loc, 0

    def write(self, data: bytes) -> int:
        self.size += len(data)
        if self.size > self.limit:
            raise _too_large(self.loc, self.size, self.limit)
        return self.f.write(data)


def _too_large(loc: Location, size: int, limit: int) -> UserInputError:
    return UserInputError(loc.field, f"{loc.uri} is {size / 2**20:.1f} MiB, more than the {limit / 2**20:.1f} MiB "
                                     f"a package may have ({MAX_BYTES_ENV})")


def _download(loc: Location, target: pathlib.Path, stores: Stores, max_bytes: int) -> int:
    part = target.with_name(f".{target.name}.part")
    try:
        if loc.scheme in ("file", "configmap"):
            _copy_local(loc, part, stores.env, max_bytes)
        else:
            with open(part, "wb") as f:
                translated(loc, stores, "fetch", _get_remote, loc, _Capped(f, max_bytes, loc), stores, max_bytes)
        if loc.sha256:
            _verify(loc, part)
        os.replace(part, target)
        return target.stat().st_size
    finally:
        part.unlink(missing_ok=True)


def _verify(loc: Location, part: pathlib.Path) -> None:
    """The fetched bytes have the digest recorded for `loc`, else `UserInputError` (the file is dropped)."""
    h = hashlib.sha256()
    with open(part, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            h.update(chunk)
    if h.hexdigest() != loc.sha256:
        raise UserInputError(loc.field, f"{loc.uri}: its sha256 is {h.hexdigest()}, not {loc.sha256} as recorded "
                                        "in the job when it was submitted: the package was changed after submission "
                                        "(nothing was installed; submit the job again)")


def write_body(body: Any, out: Any) -> None:
    """An S3 ``get_object`` body written to `out` in chunks (never whole in memory), then closed."""
    try:
        for chunk in iter(lambda: body.read(_CHUNK), b""):
            out.write(chunk)
    finally:
        body.close()


def _get_remote(loc: Location, out: _Capped, stores: Stores, max_bytes: int) -> None:
    if loc.scheme == "s3":
        answer = stores.client(loc).get_object(Bucket=loc.bucket, Key=loc.key)
        if answer.get("ContentLength", 0) > max_bytes:
            raise _too_large(loc, answer["ContentLength"], max_bytes)
        write_body(answer["Body"], out)
    else:
        blob = stores.client(loc).bucket(loc.bucket).blob(loc.key)
        blob.reload()
        if (blob.size or 0) > max_bytes:
            raise _too_large(loc, blob.size, max_bytes)
        blob.download_to_file(out)


def _copy_local(loc: Location, part: pathlib.Path, env: Mapping[str, str], max_bytes: int) -> None:
    if loc.scheme == "configmap":
        root = env.get(PACKAGES_DIR_ENV)
        if not root:
            raise UserInputError(loc.field, f"{loc.uri}: the job's package ConfigMap is not mounted here "
                                            f"({PACKAGES_DIR_ENV} is not set)")
        source = pathlib.Path(root) / loc.bucket / loc.key
    else:
        source = pathlib.Path(loc.key).expanduser()
    if not source.is_file():
        raise UserInputError(loc.field, f"{loc.uri} not found" + (f" (looked at {source})" if loc.scheme ==
                                                                   "configmap" else ""))
    size = source.stat().st_size
    if size > max_bytes:
        raise _too_large(loc, size, max_bytes)
    try:
        shutil.copyfile(source, part)
    except PermissionError:
        raise UserInputError(loc.field, f"{loc.uri}: access denied", 403) from None
    except OSError as e:
        raise UpstreamError(f"copy {loc.uri}", e.strerror or type(e).__name__) from None


async def fetch_all(uris: list[str], dest: pathlib.Path, env: Mapping[str, str], *, max_bytes: int | None = None,
                    job: str = "-") -> list[pathlib.Path]:
    """Fetch every URI into `dest` (created if missing); the paths, in the order of `uris`. `max_bytes`:
    the largest object (default: `package_uri.max_package_bytes` of `env`)."""
    locations = parse_all(list(uris), digests=recorded_digests(env))
    limit = max_package_bytes(env) if max_bytes is None else max_bytes
    dest = pathlib.Path(dest)
    await asyncio.to_thread(dest.mkdir, parents=True, exist_ok=True)
    stores = Stores(env)
    gate = asyncio.Semaphore(_PARALLEL)

    async def one(loc: Location) -> pathlib.Path:
        async with gate:
            target = dest / loc.name
            size = await asyncio.to_thread(_download, loc, target, stores, limit)
            log.info("job %s: fetched %s (%s bytes) to %s", job, loc.uri, size, target)
            return target

    results = await asyncio.gather(*(one(loc) for loc in locations), return_exceptions=True)
    for result in results:  # the first failure in the order of `uris`, whichever finished first
        if isinstance(result, BaseException):
            for fetched in results:  # all or nothing: no package of a failed fetch is left to install
                if isinstance(fetched, pathlib.Path):
                    await asyncio.to_thread(fetched.unlink, missing_ok=True)
            if isinstance(result, PlatformError):
                log.warning("job %s: fetching packages failed: %s", job, result)
            raise result
    return list(results)


def _put(loc: Location, data: bytes, stores: Stores, content_type: str) -> None:
    if loc.scheme == "s3":
        stores.client(loc).put_object(Bucket=loc.bucket, Key=loc.key, Body=data, ContentType=content_type)
    else:
        stores.client(loc).bucket(loc.bucket).blob(loc.key).upload_from_string(data, content_type=content_type)


async def put_object(uri: str, data: bytes, env: Mapping[str, str], field: str, *,
                     content_type: str = "application/gzip", job: str = "-") -> None:
    """Upload `data` to a ``gs://`` or ``s3://`` URI with the credentials named in `env`; errors as
    for fetching, under `field`."""
    loc = parse_uri(uri, field)
    if loc.scheme not in ("gs", "s3"):
        raise UserInputError(field, f"{uri}: can only upload to gs:// or s3://")
    stores = Stores(env)
    await asyncio.to_thread(translated, loc, stores, "upload to", _put, loc, data, stores, content_type)
    log.info("job %s: uploaded %s bytes to %s", job, len(data), uri)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:  # a Trainer v2 runtime's fetch-code container: the job's words are in its env, if any
        words = os.environ.get(FETCH_ARGV_ENV)
        if words is None:
            return 0  # a job with nothing to fetch (a custom container)
        argv = json.loads(words)
    parser = argparse.ArgumentParser(prog="python -m server_ext.runtimes.fetch",
                                     description="Fetch a training job's packages into a directory.")
    parser.add_argument("--dest", required=True, type=pathlib.Path, help="the directory to fetch into")
    parser.add_argument("--max-bytes", type=int, default=None, help=f"largest object (default {DEFAULT_MAX_BYTES})")
    parser.add_argument("--job", default="-", help="the job id, for log lines")
    parser.add_argument("-v", "--verbose", action="store_true", help="log each file fetched")
    parser.add_argument("uris", nargs="+", metavar="URI")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.ERROR, format="%(levelname)s %(message)s")
    try:
        paths = asyncio.run(fetch_all(args.uris, args.dest, os.environ, max_bytes=args.max_bytes, job=args.job))
    except PlatformError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    for path in paths:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
