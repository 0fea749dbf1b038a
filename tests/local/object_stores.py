"""Real object stores on loopback for the local tier: moto's S3 server (in a thread, with IAM
authentication switched on, so a wrong or unauthorised key is really refused) and
gcp-storage-emulator (a subprocess). Both listen on 127.0.0.1 on free ports; one of each per session.

`s3_server()` and `gcs_server(log_path)` (context managers) start and stop one each, for code
outside pytest (the benchmarks); the fixtures below are those, once per session.

Fixtures (registered by tests/local/conftest.py):
- `s3_store`: `S3Store` — endpoint, a bucket, an IAM user allowed ``s3:*`` and one allowed
  nothing, and `credentials_env(...)`, which writes AWS shared-credentials/config FILES and returns
  the environment naming them (paths only, as `hub_ext.core.mounts` exposes credentials).
- `gcs_store`: `GcsStore` — the emulator's URL, a bucket, `put`, and `credentials_env(...)`, which
  writes a well-formed service-account key (a fresh RSA key) and returns the environment naming it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import pathlib
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from typing import Iterator

import pytest
import requests

from hub_ext.core.ports import free_port

ALLOW_ALL_S3 = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}


@dataclass
class S3Store:
    endpoint: str
    bucket: str
    key_id: str
    secret: str
    denied_key_id: str
    denied_secret: str

    def client(self):
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                            aws_access_key_id=self.key_id, aws_secret_access_key=self.secret)

    def put(self, key: str, data: bytes) -> str:
        self.client().put_object(Bucket=self.bucket, Key=key, Body=data)
        return f"s3://{self.bucket}/{key}"

    def get(self, key: str) -> bytes:
        return self.client().get_object(Bucket=self.bucket, Key=key)["Body"].read()

    def credentials_env(self, directory: pathlib.Path, key_id: str | None = None, secret: str | None = None,
                        region: str = "eu-west-1") -> dict[str, str]:
        directory.mkdir(parents=True, exist_ok=True)
        creds = directory / "aws-credentials"
        creds.write_text(f"[default]\naws_access_key_id = {key_id or self.key_id}\n"
                         f"aws_secret_access_key = {secret or self.secret}\n")
        config = directory / "aws-config"
        config.write_text(f"[default]\nregion = {region}\n")
        return {"AWS_SHARED_CREDENTIALS_FILE": str(creds), "AWS_CONFIG_FILE": str(config),
                "AWS_ENDPOINT_URL_S3": self.endpoint}


@dataclass
class GcsStore:
    url: str
    bucket: str

    def client(self):
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage

        return storage.Client(project="test", credentials=AnonymousCredentials(),
                              client_options={"api_endpoint": self.url})

    def put(self, name: str, data: bytes) -> str:
        self.client().bucket(self.bucket).blob(name).upload_from_string(data)
        return f"gs://{self.bucket}/{name}"

    def get(self, name: str) -> bytes:
        return self.client().bucket(self.bucket).blob(name).download_as_bytes()

    def credentials_env(self, directory: pathlib.Path, canary: str = "") -> dict[str, str]:
        """A service-account key FILE (real RSA key; `canary` as its private_key_id) and the env naming it."""
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        pem = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()
        directory.mkdir(parents=True, exist_ok=True)
        key = directory / "key.json"
        key.write_text(json.dumps({
            "type": "service_account", "project_id": "test-project", "private_key_id": canary or uuid.uuid4().hex,
            "private_key": pem, "client_email": "trainer@test-project.iam.gserviceaccount.com",
            "client_id": "1", "token_uri": "https://oauth2.googleapis.com/token"}))
        return {"GOOGLE_APPLICATION_CREDENTIALS": str(key), "STORAGE_EMULATOR_HOST": self.url}


@contextlib.contextmanager
def s3_server() -> Iterator[S3Store]:
    """moto's S3 server in a thread of this process, IAM auth on, with a bucket and two users."""
    import boto3
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    try:
        setup = dict(endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="setup",
                     aws_secret_access_key="setup")
        iam = boto3.client("iam", **setup)
        iam.create_user(UserName="reader")
        iam.put_user_policy(UserName="reader", PolicyName="s3", PolicyDocument=json.dumps(ALLOW_ALL_S3))
        allowed = iam.create_access_key(UserName="reader")["AccessKey"]
        iam.create_user(UserName="nobody")
        denied = iam.create_access_key(UserName="nobody")["AccessKey"]
        bucket = f"packages-{uuid.uuid4().hex[:8]}"
        boto3.client("s3", **setup).create_bucket(Bucket=bucket)
        requests.post(f"{endpoint}/moto-api/reset-auth", data="0", timeout=10).raise_for_status()  # keys checked
        yield S3Store(endpoint, bucket, allowed["AccessKeyId"], allowed["SecretAccessKey"],
                      denied["AccessKeyId"], denied["SecretAccessKey"])
    finally:
        requests.post(f"{endpoint}/moto-api/reset-auth", data="inf", timeout=10)
        server.stop()


@contextlib.contextmanager
def gcs_server(log_path: pathlib.Path) -> Iterator[GcsStore]:
    """gcp-storage-emulator as a subprocess (in memory, its output in `log_path`), with a bucket;
    `RuntimeError` if it does not answer after three tries."""
    bucket = f"packages-{uuid.uuid4().hex[:8]}"
    log = log_path.open("wb")
    try:
        for _attempt in range(3):
            port = free_port()
            proc = subprocess.Popen([sys.executable, "-m", "gcp_storage_emulator", "start", "--host", "127.0.0.1",
                                     "--port", str(port), "--in-memory", "--default-bucket", bucket, "-q"],
                                    stdout=log, stderr=subprocess.STDOUT)
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 20
            while proc.poll() is None and time.monotonic() < deadline:
                try:
                    if requests.get(f"{url}/storage/v1/b/{bucket}", timeout=1).status_code == 200:
                        break
                except requests.ConnectionError:
                    time.sleep(0.1)
            if proc.poll() is None and time.monotonic() < deadline:
                break
            proc.kill()
            proc.wait()
        else:
            raise RuntimeError(f"gcp-storage-emulator did not start; see its log {log_path}")
        try:
            yield GcsStore(url, bucket)
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    finally:
        log.close()


@pytest.fixture(scope="session")
def s3_store():
    with s3_server() as store:
        yield store


@pytest.fixture(scope="session")
def gcs_store(tmp_path_factory):
    with contextlib.ExitStack() as stack:
        try:
            store = stack.enter_context(gcs_server(tmp_path_factory.mktemp("gcs-emulator") / "emulator.log"))
        except RuntimeError:
            pytest.fail("gcp-storage-emulator did not start; see its log under the pytest tmp dir")
        yield store
