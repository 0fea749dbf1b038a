"""`server_ext.runtimes.package` and `package_delivery`: sdists built by the real PyPA `build` front end in a subprocess, the
delivery choice, the ConfigMap, and staging to real object stores (then fetched back)."""

from __future__ import annotations

import base64
import hashlib
import pathlib
import shutil
import tarfile

import pytest

from hub_ext.core.errors import UserInputError
from server_ext.jobs.package_delivery import (
    CONFIGMAP_LIMIT,
    choose_delivery,
    configmap_uri,
    package_configmap,
    staging_uri,
)
from server_ext.jobs.package_uri import PACKAGES_DIR_ENV
from server_ext.runtimes.fetch import fetch_all
from server_ext.runtimes.package import build_sdist, stage

pytestmark = pytest.mark.local

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "trainer"
OWNER = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "my-job", "uid": "0f1e2d3c-aaaa-bbbb"}


def members(sdist: pathlib.Path) -> list[str]:
    with tarfile.open(sdist) as tar:
        return [m.split("/", 1)[1] for m in tar.getnames() if "/" in m]


def make_package(root: pathlib.Path, name: str = "mytrainer") -> pathlib.Path:
    pkg = root / name
    (pkg / "sub" / "__pycache__").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "task.py").write_text("print('training')\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    (pkg / "config.yaml").write_text("lr: 0.1\n")
    return pkg


async def test_plain_package_directory_gets_a_generated_project(tmp_path):
    pkg = make_package(tmp_path / "work")
    sdist = await build_sdist(pkg, tmp_path / "dist")
    assert sdist == tmp_path / "dist" / "mytrainer-0.0.0.tar.gz"
    found = members(sdist)
    for path in ("mytrainer/__init__.py", "mytrainer/task.py", "mytrainer/sub/__init__.py", "mytrainer/config.yaml",
                 "pyproject.toml", "PKG-INFO"):
        assert path in found
    assert not [m for m in found if "__pycache__" in m or m.endswith(".pyc")]
    assert sorted(p.name for p in (tmp_path / "work").iterdir()) == ["mytrainer"]  # the user's tree untouched


async def test_project_with_pyproject_is_built_as_it_is(tmp_path):
    if (EXAMPLE / "pyproject.toml").is_file() and (EXAMPLE / "trainer" / "__init__.py").is_file():
        project = tmp_path / "trainer-project"
        shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("__pycache__", "dist", "*.egg-info"))
        package = project / "trainer"
    else:  # the example is not there yet: a small setuptools project
        project = tmp_path / "trainer-project"
        package = make_package(project, "trainer")
        (project / "pyproject.toml").write_text(
            '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n'
            '[project]\nname = "mlplatform-example-trainer"\nversion = "0.1.0"\n')
    sdist = await build_sdist(package, tmp_path / "dist")
    assert sdist.name.startswith("mlplatform_example_trainer-") or sdist.name.startswith("mlplatform-example-trainer-")
    assert "trainer/__init__.py" in members(sdist)


async def test_build_errors_are_user_errors(tmp_path):
    with pytest.raises(UserInputError, match=r"package\.path: .*not a Python package directory"):
        await build_sdist(tmp_path, tmp_path / "dist")
    project = tmp_path / "broken"
    pkg = make_package(project)
    (project / "setup.py").write_text("raise SystemExit('boom: the setup script is broken')\n")
    with pytest.raises(UserInputError) as e:
        await build_sdist(pkg, tmp_path / "dist")
    assert e.value.field == "package.path" and "boom: the setup script is broken" in e.value.message
    other = tmp_path / "other-project"
    pkg = make_package(other)
    make_package(other, "unrelated")
    (other / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "unrelated"\nversion = "1.0"\n[tool.setuptools]\npackages = ["unrelated"]\n')
    with pytest.raises(UserInputError, match=r"does not package 'mytrainer'"):
        await build_sdist(pkg, tmp_path / "dist")
    assert not (tmp_path / "dist").exists() or not list((tmp_path / "dist").iterdir())


@pytest.mark.parametrize("size, limit, bucket, expected", [
    (10, CONFIGMAP_LIMIT, None, "configmap"),
    (CONFIGMAP_LIMIT, CONFIGMAP_LIMIT, None, "configmap"),
    (CONFIGMAP_LIMIT, CONFIGMAP_LIMIT, "gs://staging", "configmap"),
    (CONFIGMAP_LIMIT + 1, CONFIGMAP_LIMIT, "gs://staging", "bucket"),
    (5_000_000, 1_000_000, "s3://staging/prefix", "bucket"),
    (5_000_000, 1_000_000, None, "package.path: the package is 5.0 MB, more than the 1.0 MB that can ship inside "
                                 "the cluster; set --staging-bucket"),
    (CONFIGMAP_LIMIT + 1, CONFIGMAP_LIMIT, "", "package.path: the package is 0.9 MB, more than the 0.9 MB"),
])
def test_choose_delivery(size, limit, bucket, expected):
    if expected in ("configmap", "bucket"):
        assert choose_delivery(size, limit, bucket) == expected
    else:
        with pytest.raises(UserInputError) as e:
            choose_delivery(size, limit, bucket)
        assert str(e.value).startswith(expected)


def test_package_configmap_whole_manifest():
    data = b"\x1f\x8bfake sdist"
    assert package_configmap("my-job", "alice", data, "trainer-0.0.0.tar.gz", OWNER) == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "my-job-package",
            "namespace": "alice",
            "labels": {"app.kubernetes.io/managed-by": "jupyterhub-mlplatform", "mlplatform.io/job": "my-job"},
            "annotations": {"mlplatform.io/package-sha256": hashlib.sha256(data).hexdigest()},
            "ownerReferences": [OWNER],
        },
        "immutable": True,
        "binaryData": {"trainer-0.0.0.tar.gz": base64.b64encode(data).decode()},
    }
    assert configmap_uri("my-job", "trainer-0.0.0.tar.gz") == "configmap://my-job-package/trainer-0.0.0.tar.gz"
    with pytest.raises(UserInputError, match="more than"):
        package_configmap("my-job", "alice", b"x" * 101, "t.tar.gz", OWNER, limit=100)
    with pytest.raises(UserInputError, match="cannot be a ConfigMap key"):
        package_configmap("my-job", "alice", data, "a b.tar.gz", OWNER)


async def test_configmap_round_trip_through_fetch(tmp_path):
    """What the pod sees: the ConfigMap's binaryData mounted under $MLPLATFORM_PACKAGES_DIR/<name>/."""
    data = b"sdist bytes"
    cm = package_configmap("my-job", "alice", data, "trainer-0.0.0.tar.gz", OWNER)
    mount = tmp_path / "packages" / cm["metadata"]["name"]
    mount.mkdir(parents=True)
    for key, value in cm["binaryData"].items():
        (mount / key).write_bytes(base64.b64decode(value))
    [path] = await fetch_all([configmap_uri("my-job", "trainer-0.0.0.tar.gz")], tmp_path / "out",
                             {PACKAGES_DIR_ENV: str(tmp_path / "packages")})
    assert path.read_bytes() == data


def test_staging_uri():
    data = b"abc"
    digest = hashlib.sha256(data).hexdigest()
    assert staging_uri("gs://bkt/", "job_1", data, "t.tar.gz") == f"gs://bkt/job_1/packages/{digest}/t.tar.gz"
    assert staging_uri("s3://bkt/a/b", "j", data, "t.tar.gz") == f"s3://bkt/a/b/j/packages/{digest}/t.tar.gz"
    for bad in ("bkt", "http://bkt", "gs://", "gs:///"):
        with pytest.raises(UserInputError, match="package.stagingBucket"):
            staging_uri(bad, "j", data, "t.tar.gz")


@pytest.mark.parametrize("store", ["s3", "gcs"])
async def test_stage_then_fetch_back(store, s3_store, gcs_store, tmp_path):
    sdist = tmp_path / "trainer-0.0.0.tar.gz"
    sdist.write_bytes(b"\x1f\x8b" + bytes(range(256)) * 40)
    if store == "s3":
        bucket, env = f"s3://{s3_store.bucket}/staging", s3_store.credentials_env(tmp_path / "creds")
    else:
        bucket, env = f"gs://{gcs_store.bucket}/staging", gcs_store.credentials_env(tmp_path / "creds")
    uri = await stage(sdist, bucket, "my_job", env)
    digest = hashlib.sha256(sdist.read_bytes()).hexdigest()
    assert uri == f"{bucket}/my_job/packages/{digest}/trainer-0.0.0.tar.gz"
    [path] = await fetch_all([uri], tmp_path / "out", env)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest


async def test_stage_errors_name_the_staging_bucket(s3_store, tmp_path):
    sdist = tmp_path / "t.tar.gz"
    sdist.write_bytes(b"x")
    env = s3_store.credentials_env(tmp_path / "creds", s3_store.denied_key_id, s3_store.denied_secret)
    with pytest.raises(UserInputError) as e:
        await stage(sdist, f"s3://{s3_store.bucket}", "j", env)
    assert e.value.field == "package.stagingBucket" and e.value.status == 403 and "access denied" in e.value.message
    env = s3_store.credentials_env(tmp_path / "creds")
    with pytest.raises(UserInputError, match="bucket 'no-such-staging-bucket' does not exist"):
        await stage(sdist, "s3://no-such-staging-bucket", "j", env)
