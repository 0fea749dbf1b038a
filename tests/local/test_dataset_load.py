"""The dataset loader program (`python -m server_ext.datasets.load`) as the loader Job runs it: a
subprocess against the real S3 server (moto, IAM auth on) and the GCS emulator on loopback,
credentials as FILES named by the environment. It copies exactly the folder, resumes a killed
load without copying twice, removes what the source no longer has, and fails with a reason the
user can act on and never a secret."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import uuid

import pytest

from server_ext.datasets.load_dir import MANIFEST, TMP_DIR, prune
from tests.local.object_stores import S3Store

pytestmark = pytest.mark.local

ROOT = pathlib.Path(__file__).resolve().parents[2]
CANARY = "CANARY-d0-not-leak-7e21b4"
STORE_VARS = ("AWS_", "GOOGLE_", "STORAGE_EMULATOR_HOST")


def base_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(STORE_VARS)}


def load(source: str, dest: pathlib.Path, env: dict, *args: str) -> tuple[int, list[dict], str]:
    proc = subprocess.run([sys.executable, "-m", "server_ext.datasets.load", "--source", source, "--dest", str(dest),
                           *args], env={**base_env(), **env}, cwd=ROOT, capture_output=True, text=True, timeout=120)
    return proc.returncode, [json.loads(line) for line in proc.stdout.splitlines()], proc.stderr


def tree(d: pathlib.Path) -> dict[str, bytes]:
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*"))
            if p.is_file() and p.name != MANIFEST}


def put_many(store, prefix: str, n: int) -> dict[str, bytes]:
    """`n` objects of a few hundred bytes in 7 folders under `prefix` (one client for all)."""
    objects = {f"d{i % 7}/f{i:03}.bin": os.urandom(200 + i) for i in range(n)}
    client = store.client()
    for rel, data in objects.items():
        if isinstance(store, S3Store):
            client.put_object(Bucket=store.bucket, Key=f"{prefix}/{rel}", Body=data)
        else:
            client.bucket(store.bucket).blob(f"{prefix}/{rel}").upload_from_string(data)
    return objects


def s3_prefix() -> str:
    return f"ds-{uuid.uuid4().hex[:8]}"


async def test_s3_folder_loads_whole_and_nothing_beside_it(s3_store, tmp_path):
    prefix = s3_prefix()
    objects = put_many(s3_store, prefix, 60)
    s3_store.put(f"{prefix}-old/not-this.bin", b"x")  # a sibling folder with the same start
    s3_store.put(f"{prefix}/empty/", b"")  # a folder marker
    env = s3_store.credentials_env(tmp_path / "creds")
    code, lines, err = load(f"s3://{s3_store.bucket}/{prefix}", tmp_path / "out", env, "--interval", "0.01")
    assert code == 0, (lines, err)
    assert tree(tmp_path / "out") == objects
    assert not (tmp_path / "out" / TMP_DIR).exists()
    total = sum(len(v) for v in objects.values())
    assert lines[-1] == {"phase": "done", "objects_done": 60, "objects_total": 60, "bytes_done": total,
                         "bytes_total": total, "objects_copied": 60, "objects_kept": 0, "files_removed": 0}
    assert all(line["phase"] in ("listing", "copying", "done") for line in lines)
    manifest = json.loads((tmp_path / "out" / MANIFEST).read_text())
    assert manifest["source"] == f"s3://{s3_store.bucket}/{prefix}/" and set(manifest["files"]) == set(objects)
    # again: everything is there, nothing is copied
    code, lines, _ = load(f"s3://{s3_store.bucket}/{prefix}/", tmp_path / "out", env)
    assert code == 0 and lines[-1]["objects_copied"] == 0 and lines[-1]["objects_kept"] == 60


async def test_a_killed_load_resumes_and_copies_each_object_once(s3_store, tmp_path):
    prefix = s3_prefix()
    objects = put_many(s3_store, prefix, 200)
    env = {**base_env(), **s3_store.credentials_env(tmp_path / "creds")}
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "server_ext.datasets.load", "--source", f"s3://{s3_store.bucket}/{prefix}",
           "--dest", str(out), "--parallel", "1", "--interval", "0.02"]
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    for line in proc.stdout:
        doc = json.loads(line)
        assert doc["phase"] != "done", "the load finished before it could be killed"
        if doc["phase"] == "copying" and doc["objects_done"] >= 20:
            proc.send_signal(signal.SIGKILL)  # a node lost: no chance to tidy up
            break
    proc.wait(10)
    proc.stdout.close()
    first = {p.relative_to(out).as_posix(): p.stat().st_ino for p in out.rglob("*.bin")}
    assert 20 <= len(first) < 200
    assert all((out / rel).read_bytes() == objects[rel] for rel in first)  # no file is half an object
    recorded = set(json.loads((out / MANIFEST).read_text())["files"])
    assert recorded and recorded <= set(first)
    code, lines, err = load(f"s3://{s3_store.bucket}/{prefix}", out, env)
    assert code == 0, (lines, err)
    assert tree(out) == objects
    final = lines[-1]
    assert final["objects_kept"] == len(recorded) and final["objects_copied"] == 200 - len(recorded)
    again = {p.relative_to(out).as_posix(): p.stat().st_ino for p in out.rglob("*.bin")}
    assert all(again[rel] == first[rel] for rel in recorded)  # what was recorded was not written again


async def test_a_changed_source_reloads_into_the_same_directory(s3_store, tmp_path):
    prefix, other = s3_prefix(), s3_prefix()
    objects = put_many(s3_store, prefix, 20)
    env = s3_store.credentials_env(tmp_path / "creds")
    out = tmp_path / "out"
    assert load(f"s3://{s3_store.bucket}/{prefix}", out, env)[0] == 0
    # the bucket changes: one object rewritten with the same size, one removed, one added
    objects["d0/f000.bin"] = os.urandom(len(objects["d0/f000.bin"]))
    s3_store.put(f"{prefix}/d0/f000.bin", objects["d0/f000.bin"])
    s3_store.client().delete_object(Bucket=s3_store.bucket, Key=f"{prefix}/d1/f001.bin")
    del objects["d1/f001.bin"]
    objects["new/added.bin"] = b"added"
    s3_store.put(f"{prefix}/new/added.bin", b"added")
    # and someone left things in the volume: a stray file, a link out of it, an empty folder
    (out / "stray.txt").write_text("x")
    (out / "d2" / "link").symlink_to("/etc/passwd")
    (out / "empty" / "deeper").mkdir(parents=True)
    code, lines, err = load(f"s3://{s3_store.bucket}/{prefix}", out, env)
    assert code == 0, (lines, err)
    assert tree(out) == objects
    assert not (out / "empty").exists() and not (out / "d2" / "link").is_symlink()
    assert lines[-1]["objects_copied"] == 2 and lines[-1]["files_removed"] == 3  # f001, stray.txt, link
    # another source into the same volume: only its objects remain
    others = put_many(s3_store, other, 5)  # some of the same file names: copied again all the same
    code, lines, _ = load(f"s3://{s3_store.bucket}/{other}", out, env)
    assert code == 0 and tree(out) == others
    assert lines[-1]["objects_copied"] == 5 and lines[-1]["files_removed"] == len(set(objects) - set(others))
    assert json.loads((out / MANIFEST).read_text())["source"] == f"s3://{s3_store.bucket}/{other}/"


async def test_wrong_credentials_fail_with_a_reason_and_no_secret(s3_store, tmp_path):
    prefix = s3_prefix()
    put_many(s3_store, prefix, 3)
    source = f"s3://{s3_store.bucket}/{prefix}"
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.bin").write_bytes(b"a file of an earlier load")
    cases = [
        (s3_store.credentials_env(tmp_path / "denied", s3_store.denied_key_id, s3_store.denied_secret),
         "AccessDenied", "access denied (AccessDenied) listing", s3_store.denied_secret),
        (s3_store.credentials_env(tmp_path / "unknown", "AKIAUNKNOWN000000000", CANARY),
         "AccessDenied", "access denied (InvalidAccessKeyId) listing", CANARY),
    ]
    for env, reason, text, secret in cases:
        code, lines, err = load(source, tmp_path / "out", env)
        assert code == 2, (lines, err)
        assert lines[-1]["phase"] == "failed" and lines[-1]["reason"] == reason and text in lines[-1]["error"]
        assert "the dataset's credential must be an aws-credential allowed to list and read this bucket" in \
            lines[-1]["error"]
        assert secret not in json.dumps(lines) + err
    assert (tmp_path / "out" / "keep.bin").exists()  # a failed listing removes nothing
    env = s3_store.credentials_env(tmp_path / "ok")
    code, lines, _ = load(f"s3://no-such-bucket-{uuid.uuid4().hex[:6]}/x", tmp_path / "out", env)
    assert code == 2 and lines[-1]["reason"] == "NotFound" and "does not exist" in lines[-1]["error"]
    code, lines, _ = load(f"s3://{s3_store.bucket}/nothing-here-{uuid.uuid4().hex[:6]}", tmp_path / "out", env)
    assert code == 2 and lines[-1]["reason"] == "NotFound" and "check the bucket and the prefix" in lines[-1]["error"]
    missing = {**env, "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "not-mounted")}
    code, lines, _ = load(source, tmp_path / "out", missing)
    assert code == 2 and lines[-1]["reason"] == "BadCredential" and "is the credential mounted?" in lines[-1]["error"]
    assert (tmp_path / "out" / "keep.bin").exists()


async def test_an_unreachable_store_is_retried_not_final(s3_store, tmp_path):
    env = {**s3_store.credentials_env(tmp_path / "creds"), "AWS_ENDPOINT_URL_S3": "http://127.0.0.1:9"}
    code, lines, err = load(f"s3://{s3_store.bucket}/x", tmp_path / "out", env)
    assert code == 1, (lines, err)  # the Job tries again
    assert lines[-1]["phase"] == "failed" and lines[-1]["reason"] == "Unreachable"


async def test_an_unsafe_key_fails_the_load_before_anything_is_removed(s3_store, tmp_path):
    prefix = s3_prefix()
    s3_store.put(f"{prefix}/ok.bin", b"ok")
    s3_store.put(f"{prefix}/.mlplatform-load.json", b"{}")  # would be the loader's own manifest
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "earlier.bin").write_bytes(b"x")
    code, lines, _ = load(f"s3://{s3_store.bucket}/{prefix}", tmp_path / "out", s3_store.credentials_env(tmp_path / "c"))
    assert code == 2 and lines[-1]["reason"] == "BadKey" and ".mlplatform-load.json" in lines[-1]["error"]
    assert (tmp_path / "out" / "earlier.bin").exists()


async def test_gcs_loads_and_a_bad_key_file_says_so_without_its_content(gcs_store, tmp_path):
    prefix = s3_prefix()
    objects = put_many(gcs_store, prefix, 15)
    env = gcs_store.credentials_env(tmp_path / "gcp")
    code, lines, err = load(f"gs://{gcs_store.bucket}/{prefix}", tmp_path / "out", env)
    assert code == 0, (lines, err)
    assert tree(tmp_path / "out") == objects and lines[-1]["objects_copied"] == 15
    code, lines, _ = load(f"gs://{gcs_store.bucket}/{prefix}", tmp_path / "out", env)
    assert code == 0 and lines[-1]["objects_kept"] == 15  # the MD5s recorded match
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"type": "service_account", "private_key": CANARY, "client_email": "x@y"}))
    code, lines, err = load(f"gs://{gcs_store.bucket}/{prefix}", tmp_path / "out2",
                            {**env, "GOOGLE_APPLICATION_CREDENTIALS": str(bad)})
    assert code == 2 and lines[-1]["reason"] == "BadCredential" and "not a valid service-account key" in \
        lines[-1]["error"]
    assert CANARY not in json.dumps(lines) + err


def test_prune_keeps_only_the_wanted_files(tmp_path):
    for rel in ("a/b/keep.bin", "a/drop.bin", "c/d/e/drop.bin", "top.bin", "x/y"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(b"12345")
    (tmp_path / MANIFEST).write_text("{}")
    (tmp_path / TMP_DIR).mkdir()
    (tmp_path / "a" / "dirlink").symlink_to(tmp_path / "c")
    present, removed = prune(tmp_path, {"a/b/keep.bin", "top.bin", "x", "new/not-yet.bin"})
    assert present == {"a/b/keep.bin": 5, "top.bin": 5}  # "x" is a folder now: its file goes, then the folder
    assert removed == 4
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == \
        [MANIFEST, TMP_DIR, "a", "a/b", "a/b/keep.bin", "top.bin"]
