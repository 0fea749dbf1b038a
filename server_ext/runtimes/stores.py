"""The object stores' clients, made only from the environment given, and their failures said once in
the platform's errors (`server_ext.runtimes.fetch` fetches and uploads packages through them; the
dataset loader, `server_ext.datasets.load`, reads its sources through them too).

Guarantees of `Stores(env)`:

- Only `env` is consulted for credentials and endpoints. Without a credential file, requests are
  anonymous (public objects only): the node's ambient identity (metadata servers, instance roles)
  is never picked up.
- ``gs://``: the service-account key FILE named by ``GOOGLE_APPLICATION_CREDENTIALS`` (only that
  type: other credential files, such as external-account configurations that run commands or fetch
  URLs, are refused). ``STORAGE_EMULATOR_HOST`` points at an emulator; an emulator takes no tokens,
  so the key file is still read and checked but requests go anonymously.
- ``s3://``: the shared-credentials FILE named by ``AWS_SHARED_CREDENTIALS_FILE`` (profile
  ``AWS_PROFILE``, else ``default``); region from ``AWS_REGION``/``AWS_DEFAULT_REGION``, else that
  profile in ``AWS_CONFIG_FILE`` (a path that does not exist counts as no file, as the AWS SDKs take
  it), else ``us-east-1``; endpoint from ``AWS_ENDPOINT_URL_S3``, else ``AWS_ENDPOINT_URL``.
- One client per store, made on first use and shared by worker threads. A credential file that is
  missing, unreadable or not of its kind is `UserInputError` naming the variable; an endpoint that
  is not a URL is `UpstreamError`.
- Secret values read from credential files are remembered (`secrets`) and scrubbed from any text
  taken from a library's exception (`scrub`): no message or log line contains them.

`translated` runs SDK calls for one URI and says their failures once: `UserInputError` (not found,
no such bucket, access denied: 403) or `UpstreamError` (the store failed or was unreachable).
"""

from __future__ import annotations

import json
import os
import pathlib
import threading
from typing import Any, Mapping

from hub_ext.core.errors import PlatformError, UpstreamError, UserInputError
from server_ext.jobs.package_uri import Location

_GCS_SCOPES = ["https://www.googleapis.com/auth/devstorage.read_write"]


class Stores:
    """Clients made from `env` on first use (in a worker thread); remembers secret values to scrub."""

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


def translated(loc: Location, stores: Stores, action: str, fn: Any, *args: Any) -> Any:
    """Run `fn` (SDK calls for `loc`), translating the SDK's exceptions, once, into ours."""
    try:
        return fn(*args)
    except PlatformError:
        raise
    except _sdk_errors(loc) as e:
        raise (_s3_error if loc.scheme == "s3" else _gcs_error)(e, loc, stores, action) from None
