"""`server_ext.runtimes.fetch` against a real S3 server (moto, IAM auth on) and a real GCS emulator on
loopback, credentials given as FILES named by environment variables; and its CLI as a subprocess."""

from __future__ import annotations

import hashlib
import logging
import os
import pathlib
import subprocess
import sys

import pytest

from hub_ext.core.errors import UpstreamError, UserInputError
from server_ext.jobs.package_uri import PACKAGES_DIR_ENV, parse_all
from server_ext.runtimes.fetch import fetch_all

pytestmark = pytest.mark.local

ROOT = pathlib.Path(__file__).resolve().parents[2]
CANARY = "CANARY-d0-not-leak-5f3a9c"


def no_canary(text: str, *secrets: str) -> None:
    for secret in (CANARY, *secrets):
        assert secret not in text


def logs_clean(caplog, *secrets: str) -> None:
    for record in caplog.records:
        no_canary(record.getMessage(), *secrets)


# -- pure parsing --------------------------------------------------------------------------------

@pytest.mark.parametrize("uris, field, text", [
    (["gs://b/a/t.tar.gz", "s3://c/b/t.tar.gz"], "trainingInput.packageUris[1]",
     "s3://c/b/t.tar.gz and gs://b/a/t.tar.gz (trainingInput.packageUris[0]) have the same file name"),
    (["gs://bucket"], "trainingInput.packageUris[0]", "must name one file"),
    (["gs://bucket/dir/"], "trainingInput.packageUris[0]", "must name one file"),
    (["x.tar.gz", "http://host/p.tar.gz"], "trainingInput.packageUris[1]", "unsupported scheme http://"),
])
def test_bad_uri_lists_are_refused_naming_the_index(uris, field, text):
    with pytest.raises(UserInputError) as e:
        parse_all(uris)
    assert e.value.field == field and text in e.value.message


def test_parse_keeps_base_names():
    names = [(loc.scheme, loc.bucket, loc.name) for loc in parse_all(
        ["gs://b/p/a-1.tar.gz", "s3://c/k/b.whl", "configmap://job-package/c.tar.gz", "file:///tmp/d.tar.gz", "e.zip"])]
    assert names == [("gs", "b", "a-1.tar.gz"), ("s3", "c", "b.whl"), ("configmap", "job-package", "c.tar.gz"),
                     ("file", "", "d.tar.gz"), ("file", "", "e.zip")]


# -- S3 --------------------------------------------------------------------------------------------

async def test_s3_fetch_with_a_credentials_file(s3_store, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    data = os.urandom(3000)
    uri = s3_store.put("jobs/a/trainer-0.1.tar.gz", data)
    env = s3_store.credentials_env(tmp_path / "creds")
    [path] = await fetch_all([uri], tmp_path / "out", env)
    assert path == tmp_path / "out" / "trainer-0.1.tar.gz" and path.read_bytes() == data
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["trainer-0.1.tar.gz"]
    logs_clean(caplog, s3_store.secret)


async def test_only_the_given_env_counts(s3_store, gcs_store, tmp_path, monkeypatch):
    """The process environment's AWS/GCS settings are ignored; AWS_PROFILE picks the profile in the files.
    (Not AWS_PROFILE itself in the process environment: the in-process moto server would read it.)"""
    uris = [s3_store.put("env/s3.tar.gz", b"s3"), gcs_store.put("env/gs.tar.gz", b"gs")]
    for var, value in {"AWS_ENDPOINT_URL_S3": "http://127.0.0.1:9", "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
                       "AWS_ACCESS_KEY_ID": "AKIALEAK", "AWS_SECRET_ACCESS_KEY": "leak", "AWS_REGION": "ap-south-1",
                       "STORAGE_EMULATOR_HOST": "http://127.0.0.1:9"}.items():
        monkeypatch.setenv(var, value)
    env = {**s3_store.credentials_env(tmp_path / "aws"), **gcs_store.credentials_env(tmp_path / "gcp")}
    creds = pathlib.Path(env["AWS_SHARED_CREDENTIALS_FILE"])
    creds.write_text(f"[default]\naws_access_key_id = {s3_store.denied_key_id}\n"
                     f"aws_secret_access_key = {s3_store.denied_secret}\n"
                     f"[dev]\naws_access_key_id = {s3_store.key_id}\naws_secret_access_key = {s3_store.secret}\n")
    pathlib.Path(env["AWS_CONFIG_FILE"]).write_text("[profile dev]\nregion = eu-north-1\n")
    paths = await fetch_all(uris, tmp_path / "out", {**env, "AWS_PROFILE": "dev"})
    assert [p.read_bytes() for p in paths] == [b"s3", b"gs"]
    with pytest.raises(UserInputError, match=r"packageUris\[0\]: .*access denied \(AccessDenied\)"):
        await fetch_all(uris, tmp_path / "out2", env)  # the default profile: a user without s3 permissions


async def test_an_aws_config_file_that_does_not_exist_counts_as_none(s3_store, tmp_path):
    """The operator's credential webhook names the config file of every AWS credential (it reads only
    metadata); a credential without one must still fetch, as the AWS SDKs read a missing one."""
    s3_store.put("pkgs/noconfig.tar.gz", b"no config")
    env = s3_store.credentials_env(tmp_path / "aws")
    env["AWS_CONFIG_FILE"] = str(tmp_path / "aws" / "absent" / "config")
    paths = await fetch_all([f"s3://{s3_store.bucket}/pkgs/noconfig.tar.gz"], tmp_path / "out", env)
    assert [p.read_bytes() for p in paths] == [b"no config"]


@pytest.mark.parametrize("case, field, text, status", [
    ("missing key", "trainingInput.packageUris[1]", "s3://{bucket}/nope/x.tar.gz not found", 400),
    ("wrong bucket", "trainingInput.packageUris[1]", "the bucket 'no-such-bucket-here' does not exist", 400),
    ("wrong secret", "trainingInput.packageUris[0]", "access denied (SignatureDoesNotMatch)", 403),
    ("no permission", "trainingInput.packageUris[0]", "access denied (AccessDenied)", 403),
    ("unknown key id", "trainingInput.packageUris[0]", "access denied (InvalidAccessKeyId)", 403),
    ("no credentials", "trainingInput.packageUris[0]", "access denied", 403),
    ("credentials file missing", "trainingInput.packageUris[0]",
     "AWS_SHARED_CREDENTIALS_FILE names {missing}, which is not a readable file", 400),
])
async def test_s3_errors_name_the_uri_and_never_the_secret(s3_store, tmp_path, caplog, case, field, text, status):
    caplog.set_level(logging.DEBUG)
    good = s3_store.put("jobs/b/good.tar.gz", b"good")
    env = s3_store.credentials_env(tmp_path / "creds")
    uris = [good, f"s3://{s3_store.bucket}/nope/x.tar.gz"]
    missing = str(tmp_path / "nowhere" / "credentials")
    if case == "wrong bucket":
        uris[1] = "s3://no-such-bucket-here/x.tar.gz"
    elif case == "wrong secret":
        env = s3_store.credentials_env(tmp_path / "creds", secret=CANARY)
    elif case == "no permission":
        env = s3_store.credentials_env(tmp_path / "creds", s3_store.denied_key_id, s3_store.denied_secret)
    elif case == "unknown key id":
        env = s3_store.credentials_env(tmp_path / "creds", "AKIAUNKNOWN000000000", CANARY)
    elif case == "no credentials":
        env = {"AWS_ENDPOINT_URL_S3": s3_store.endpoint}
    elif case == "credentials file missing":
        env["AWS_SHARED_CREDENTIALS_FILE"] = missing
    with pytest.raises(UserInputError) as e:
        await fetch_all(uris, tmp_path / "out", env)
    assert e.value.field == field and e.value.status == status
    assert text.format(bucket=s3_store.bucket, missing=missing) in e.value.message
    no_canary(str(e.value), s3_store.secret)
    logs_clean(caplog, s3_store.secret)
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.endswith(".part")]


async def test_s3_size_cap_and_unreachable_endpoint(s3_store, tmp_path):
    uri = s3_store.put("jobs/c/big.tar.gz", b"x" * 5000)
    env = s3_store.credentials_env(tmp_path / "creds")
    with pytest.raises(UserInputError, match=r"packageUris\[0\]: s3://.*big.tar.gz is 0.0 MiB, more than"):
        await fetch_all([uri], tmp_path / "out", env, max_bytes=4096)
    assert list((tmp_path / "out").iterdir()) == []
    env["AWS_ENDPOINT_URL_S3"] = "http://127.0.0.1:9"
    with pytest.raises(UpstreamError, match=r"could not fetch s3://.*big.tar.gz"):
        await fetch_all([uri], tmp_path / "out", env)


# -- GCS -------------------------------------------------------------------------------------------

async def test_gcs_fetch_with_a_key_file(gcs_store, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    data = os.urandom(5000)
    uri = gcs_store.put("jobs/a/trainer-0.2.tar.gz", data)
    env = gcs_store.credentials_env(tmp_path / "key", canary=CANARY)
    [path] = await fetch_all([uri], tmp_path / "out", env)
    assert path.name == "trainer-0.2.tar.gz" and path.read_bytes() == data
    logs_clean(caplog)


@pytest.mark.parametrize("case, field, text", [
    ("missing object", "trainingInput.packageUris[1]", "gs://{bucket}/nope.tar.gz not found"),
    ("wrong bucket", "trainingInput.packageUris[1]", "gs://no-such-bucket-here/x.tar.gz not found"),
    ("key file missing", "trainingInput.packageUris[0]", "GOOGLE_APPLICATION_CREDENTIALS names {missing}, "
                                                         "which is not a readable file"),
    ("key file malformed", "trainingInput.packageUris[0]", "GOOGLE_APPLICATION_CREDENTIALS is not a valid "
                                                           "service-account key"),
])
async def test_gcs_errors_name_the_uri_and_never_the_key(gcs_store, tmp_path, caplog, case, field, text):
    caplog.set_level(logging.DEBUG)
    good = gcs_store.put("jobs/b/good.tar.gz", b"good")
    env = gcs_store.credentials_env(tmp_path / "key", canary=CANARY)
    key_text = pathlib.Path(env["GOOGLE_APPLICATION_CREDENTIALS"]).read_text()
    uris = [good, f"gs://{gcs_store.bucket}/nope.tar.gz"]
    missing = str(tmp_path / "nowhere.json")
    if case == "wrong bucket":
        uris[1] = "gs://no-such-bucket-here/x.tar.gz"
    elif case == "key file missing":
        env["GOOGLE_APPLICATION_CREDENTIALS"] = missing
    elif case == "key file malformed":
        pathlib.Path(env["GOOGLE_APPLICATION_CREDENTIALS"]).write_text(
            '{"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----\\n%s\\n", '
            '"client_email": "a@b.c", "token_uri": "https://oauth2.googleapis.com/token"}' % CANARY)
    with pytest.raises(UserInputError) as e:
        await fetch_all(uris, tmp_path / "out", env)
    assert e.value.field == field
    assert text.format(bucket=gcs_store.bucket, missing=missing) in e.value.message
    pem_lines = [ln for ln in key_text.split("\\n") if len(ln) > 40]
    no_canary(str(e.value), *pem_lines)
    logs_clean(caplog, *pem_lines)


# -- local files and ConfigMaps ----------------------------------------------------------------------

async def test_files_and_configmap_packages(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.tar.gz").write_bytes(b"A")
    mounted = tmp_path / "packages" / "myjob-package"
    mounted.mkdir(parents=True)
    (mounted / "trainer-0.0.0.tar.gz").write_bytes(b"C")
    env = {PACKAGES_DIR_ENV: str(tmp_path / "packages")}
    paths = await fetch_all([f"file://{tmp_path}/src/a.tar.gz", "configmap://myjob-package/trainer-0.0.0.tar.gz"],
                            tmp_path / "out", env)
    assert [p.read_bytes() for p in paths] == [b"A", b"C"]
    with pytest.raises(UserInputError, match=rf"packageUris\[0\]: .*not mounted here \({PACKAGES_DIR_ENV} is not set"):
        await fetch_all(["configmap://myjob-package/trainer-0.0.0.tar.gz"], tmp_path / "out2", {})
    with pytest.raises(UserInputError, match=r"packageUris\[1\]: configmap://other/x.tar.gz not found"):
        await fetch_all(["configmap://myjob-package/trainer-0.0.0.tar.gz", "configmap://other/x.tar.gz"],
                        tmp_path / "out2", env)


# -- the init container's CLI ------------------------------------------------------------------------

def run_cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "GOOGLE_", "STORAGE_EMULATOR"))}
    return subprocess.run([sys.executable, "-m", "server_ext.runtimes.fetch", *args], env={**base, **env}, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


def test_cli_exit_codes(s3_store, gcs_store, tmp_path):
    s3_uri = s3_store.put("cli/one.tar.gz", b"one")
    gs_uri = gcs_store.put("cli/two.tar.gz", b"two")
    env = {**s3_store.credentials_env(tmp_path / "aws"), **gcs_store.credentials_env(tmp_path / "gcp")}
    ok = run_cli(["--dest", str(tmp_path / "out"), s3_uri, gs_uri], env)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.split() == [str(tmp_path / "out" / "one.tar.gz"), str(tmp_path / "out" / "two.tar.gz")]
    assert hashlib.sha256((tmp_path / "out" / "two.tar.gz").read_bytes()).digest() == hashlib.sha256(b"two").digest()
    bad = run_cli(["--dest", str(tmp_path / "out2"), s3_uri, f"gs://{gcs_store.bucket}/cli/missing.tar.gz"], env)
    assert bad.returncode == 1 and bad.stdout == ""
    assert bad.stderr.strip().splitlines() == [
        f"error: trainingInput.packageUris[1]: gs://{gcs_store.bucket}/cli/missing.tar.gz not found "
        "(no such bucket or object)"]
    denied = run_cli(["--dest", str(tmp_path / "out3"), s3_uri],
                     s3_store.credentials_env(tmp_path / "aws2", secret=CANARY))
    assert denied.returncode == 1 and len(denied.stderr.strip().splitlines()) == 1
    assert "access denied" in denied.stderr and CANARY not in denied.stderr + denied.stdout
