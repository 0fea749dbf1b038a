"""Fetch a training job's code packages (``trainingInput.packageUris``) into one directory: the
I/O half (object storage, files); the pure half — parsing URIs and recorded digests, the size
limit read from the env — is `server_ext.jobs.package_uri`.

`fetch_all(uris, dest, env)` is what the Kubernetes init container runs (through the CLI
``python -m server_ext.runtimes.fetch --dest DIR URI...``: exit 0, or exit 1 with one line on stderr
naming the URI) and what the local backend awaits. `put_object(uri, data, env, field)` is the
upload half, used to stage packages (`server_ext.runtimes.kube.package.stage`, `server_ext.runtimes.package.stage`).

URIs (``i`` is the URI's index, used in every error's field ``trainingInput.packageUris[i]``):

- ``gs://bucket/object``: Google Cloud Storage. Credentials: the service-account key FILE named by
  ``GOOGLE_APPLICATION_CREDENTIALS`` (only that type: other credential files, such as
  external-account configurations that run commands or fetch URLs, are refused).
  ``STORAGE_EMULATOR_HOST`` points at an emulator; an emulator takes no tokens, so the key file is
  still read and checked but requests go anonymously (google-cloud-storage itself only goes
  anonymous when given no credentials).
- ``s3://bucket/key``: S3. Credentials: the shared-credentials FILE named by
  ``AWS_SHARED_CREDENTIALS_FILE`` (profile ``AWS_PROFILE``, else ``default``); region from
  ``AWS_REGION``/``AWS_DEFAULT_REGION``, else that profile in ``AWS_CONFIG_FILE`` (a path that does
  not exist counts as no file, as the AWS SDKs take it: the operator's credential webhook names the
  config file of every AWS credential, having read only its metadata), else
  ``us-east-1``; endpoint from ``AWS_ENDPOINT_URL_S3``, else ``AWS_ENDPOINT_URL``.
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
import threading
from typing import Any, BinaryIO, Mapping

from hub_ext.core.errors import PlatformError, UpstreamError, UserInputError
from server_ext.jobs.package_uri import (
    DEFAULT_MAX_BYTES,
    MAX_BYTES_ENV,
    PACKAGES_DIR_ENV,
    Location,
    max_package_bytes,
    parse_all,
    parse_uri,
    recorded_digests,
)

log = logging.getLogger("mlplatform.jobs.fetch")

_CHUNK = 2**20
_PARALLEL = 4
_GCS_SCOPES = ["https://www.googleapis.com/auth/devstorage.read_write"]


class Stores:
    """Clients made from `env` on first use (in a worker thread); remembers secret values to scrub.
    Public: the dataset loader (`server_ext.datasets.load`) reads its stores through it too."""

    def __init__(self, env: Mapping[str, str]):
        self.env = env
        self.secrets: set[str] = set()
        self._clients: dict[str, Any] = {}
        self._lock = threading.Lock()

    def scrub(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, "[redacted]")
        return " ".join(text.split())[:300]

    def client(self, loc: Location) -> Any:
        """The S3 or GCS client (one each, shared by the worker threads)."""
        with self._lock:
            if loc.scheme not in self._clients:
                self._clients[loc.scheme] = (self._make_s3 if loc.scheme == "s3" else self._make_gcs)(loc)
            return self._clients[loc.scheme]

    def _make_s3(self, loc: Location) -> Any:
        import botocore.session
        from botocore import UNSIGNED
        from botocore.config import Config
        from botocore.configprovider import ConstantProvider
        from botocore.credentials import SharedCredentialProvider
        from botocore.exceptions import BotoCoreError

        env = self.env
        profile = env.get("AWS_PROFILE") or "default"
        creds_file, config_file = env.get("AWS_SHARED_CREDENTIALS_FILE"), env.get("AWS_CONFIG_FILE")
        if config_file and not os.path.exists(config_file):
            config_file = None  # as the AWS SDKs read it: an optional file (the operator names it always)
        endpoint = env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL") or None
        keys: dict[str, Any] = {}
        session = botocore.session.Session()  # below: nothing left for it to read from os.environ or ~/.aws
        try:
            for var, value in (("config_file", _readable(config_file, "AWS_CONFIG_FILE", loc) if config_file
                                else os.devnull), ("credentials_file", os.devnull),
                               ("ignore_configured_endpoint_urls", endpoint is None)):
                session.set_config_variable(var, value)
            session.get_component("config_store").set_config_provider(
                "profile", ConstantProvider(profile if profile in session.full_config["profiles"] else None))
            region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or session.get_scoped_config().get("region")
            if creds_file:
                creds = SharedCredentialProvider(_readable(creds_file, "AWS_SHARED_CREDENTIALS_FILE", loc),
                                                 profile_name=profile).load()
                if creds is None:
                    raise UserInputError(loc.field, f"{loc.uri}: the credentials file in AWS_SHARED_CREDENTIALS_FILE "
                                                    f"has no keys for profile {profile!r}")
                self.secrets.update(s for s in (creds.secret_key, creds.token) if s)
                keys = {"aws_access_key_id": creds.access_key, "aws_secret_access_key": creds.secret_key,
                        "aws_session_token": creds.token}
        except BotoCoreError:
            raise UserInputError(loc.field, f"{loc.uri}: the AWS credential or config file is not in the "
                                            "shared-credentials format") from None
        config = Config(retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=10, read_timeout=60,
                        **({} if keys else {"signature_version": UNSIGNED}))
        try:
            return session.create_client("s3", region_name=region or "us-east-1", endpoint_url=endpoint,
                                         config=config, **keys)
        except ValueError:
            raise UpstreamError("reach S3", f"the endpoint {endpoint!r} (AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL) "
                                            "is not a valid URL") from None

    def _make_gcs(self, loc: Location) -> Any:
        from google.auth.credentials import AnonymousCredentials
        from google.auth.exceptions import GoogleAuthError
        from google.cloud import storage
        from google.oauth2 import service_account

        key_file, emulator = self.env.get("GOOGLE_APPLICATION_CREDENTIALS"), self.env.get("STORAGE_EMULATOR_HOST")
        credentials, project = None, None
        if key_file:
            path = _readable(key_file, "GOOGLE_APPLICATION_CREDENTIALS", loc)
            self.secrets.update(_json_secrets(path))
            try:
                credentials = service_account.Credentials.from_service_account_file(path, scopes=_GCS_SCOPES)
                project = credentials.project_id
            except (GoogleAuthError, ValueError, KeyError, TypeError):
                raise UserInputError(loc.field, f"{loc.uri}: the file in GOOGLE_APPLICATION_CREDENTIALS is not a "
                                                "valid service-account key") from None
        endpoint = "https://storage.googleapis.com"  # explicit, so os.environ's STORAGE_EMULATOR_HOST is not read
        if emulator:
            endpoint = emulator if "://" in emulator else f"http://{emulator}"
            credentials = AnonymousCredentials()  # the emulator accepts no tokens (and has no token endpoint)
        return storage.Client(project=project or "<none>", credentials=credentials or AnonymousCredentials(),
                              client_options={"api_endpoint": endpoint})


def _readable(path: str, var: str, loc: Location) -> str:
    if not os.path.isfile(path) or not os.access(path, os.R_OK):
        raise UserInputError(loc.field, f"{loc.uri}: {var} names {path}, which is not a readable file "
                                        "(is the credential mounted?)")
    return path


def _json_secrets(path: str) -> set[str]:
    try:
        doc = json.loads(pathlib.Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    return {str(doc[k]) for k in ("private_key", "client_secret", "refresh_token") if doc.get(k)} \
        if isinstance(doc, dict) else set()


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


def _s3_error(e: Exception, loc: Location, stores: Stores, action: str) -> PlatformError:
    from botocore.exceptions import ClientError, NoCredentialsError

    if isinstance(e, ClientError):
        code = str(e.response.get("Error", {}).get("Code", ""))
        status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if code in ("NoSuchKey", "404", "NotFound"):
            return UserInputError(loc.field, f"{loc.uri} not found")
        if code == "NoSuchBucket":
            return UserInputError(loc.field, f"{loc.uri}: the bucket {loc.bucket!r} does not exist")
        if code in ("AccessDenied", "403", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken",
                    "AllAccessDisabled", "InvalidToken") or status in (401, 403):
            return UserInputError(loc.field, f"{loc.uri}: access denied ({code}); check the aws-credential "
                                             "chosen for the job", 403)
        return UpstreamError(f"{action} {loc.uri}", f"S3 answered {status} {code}")
    if isinstance(e, NoCredentialsError):
        return UserInputError(loc.field, f"{loc.uri}: no AWS credentials; choose an aws-credential", 403)
    return UpstreamError(f"{action} {loc.uri}", stores.scrub(f"{type(e).__name__}: {e}"))


def _gcs_error(e: Exception, loc: Location, stores: Stores, action: str) -> PlatformError:
    from google.api_core import exceptions as gexc
    from google.auth.exceptions import RefreshError

    if isinstance(e, gexc.NotFound):
        return UserInputError(loc.field, f"{loc.uri} not found (no such bucket or object)")
    if isinstance(e, (gexc.Forbidden, gexc.Unauthorized, RefreshError)):
        return UserInputError(loc.field, f"{loc.uri}: access denied; check the gcp-credential chosen for the "
                                         "job", 403)
    if isinstance(e, gexc.GoogleAPICallError):
        return UpstreamError(f"{action} {loc.uri}", f"Cloud Storage answered {e.code}")
    return UpstreamError(f"{action} {loc.uri}", stores.scrub(f"{type(e).__name__}: {e}"))


def _sdk_errors(loc: Location) -> tuple[type[BaseException], ...]:
    """The exceptions an SDK raises for a failed call (anything else is a bug and propagates)."""
    errors: list[type[BaseException]] = [OSError]
    if loc.scheme == "s3":
        from botocore.exceptions import BotoCoreError, ClientError
        errors += [BotoCoreError, ClientError]
    else:
        import requests
        from google.api_core.exceptions import GoogleAPIError
        from google.auth.exceptions import GoogleAuthError
        from google.resumable_media import DataCorruption, InvalidResponse
        errors += [requests.RequestException, GoogleAPIError, GoogleAuthError, DataCorruption, InvalidResponse]
    return tuple(errors)


def _translated(loc: Location, stores: Stores, action: str, fn: Any, *args: Any) -> Any:
    """Run `fn` (SDK calls for `loc`), translating the SDK's exceptions, once, into ours."""
    try:
        return fn(*args)
    except PlatformError:
        raise
    except _sdk_errors(loc) as e:
        raise (_s3_error if loc.scheme == "s3" else _gcs_error)(e, loc, stores, action) from None


def _download(loc: Location, target: pathlib.Path, stores: Stores, max_bytes: int) -> int:
    part = target.with_name(f".{target.name}.part")
    try:
        if loc.scheme in ("file", "configmap"):
            _copy_local(loc, part, stores.env, max_bytes)
        else:
            with open(part, "wb") as f:
                _translated(loc, stores, "fetch", _get_remote, loc, _Capped(f, max_bytes, loc), stores, max_bytes)
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
    await asyncio.to_thread(_translated, loc, stores, "upload to", _put, loc, data, stores, content_type)
    log.info("job %s: uploaded %s bytes to %s", job, len(data), uri)


def main(argv: list[str] | None = None) -> int:
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
