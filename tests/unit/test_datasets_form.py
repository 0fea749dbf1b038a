"""Datasets on the hub, pure parts: the request check (every mistake names its field, all told at
once), the PVC the hub makes (whole manifest), what the page and API show of a dataset PVC (the
loader's condition and progress annotation), the datasets page's template, the spawn form's
dataset states, and the wiring `configure(c)` does."""

from __future__ import annotations

import json
import pathlib

import jinja2
import pytest
from traitlets import TraitError
from traitlets.config import Config

from hub_ext.manifests.datasets import (
    CREDENTIAL_ANNOTATION,
    PROGRESS_ANNOTATION,
    DatasetRequest,
    DatasetSettings,
    check_may_delete,
    check_request,
    dataset_label,
    is_dataset,
    percent,
    progress_of,
    pvc_manifest,
    row,
    storage_bytes,
)
from hub_ext.core.entitlements import Project
from hub_ext.core.errors import ConfigError, UserInputError, UserInputErrors
from hub_ext.core.mounts import Available, Dataset
from hub_ext.manifests.mounts import MountSettings
from hub_ext.spawners.form import render_form
from tests.kube.platform_env import PLATFORM

pytestmark = pytest.mark.unit

ROOT = pathlib.Path(__file__).resolve().parents[2]
MOUNTS = MountSettings({"gcp-credential": "gcp-credential", "aws-credential": "aws-credential"})
SETTINGS = DatasetSettings(max_size="500Gi")
CREDS = {"s3-reader": "aws-credential", "gcs-reader": "gcp-credential"}
GOOD = {"name": "imagenet", "source": "gs://vision-data/imagenet/train", "credential": "gcs-reader",
        "size": "200Gi", "description": "train split"}


def check(**changes):
    return check_request({**GOOD, **changes}, CREDS, SETTINGS, "vision")


# -- the request ------------------------------------------------------------------------------------

@pytest.mark.parametrize("changes, expected", [
    ({}, DatasetRequest("imagenet", "gs://vision-data/imagenet/train", "gcs-reader", "200Gi", "train split")),
    ({"source": "s3://raw.bucket_1", "credential": "s3-reader", "size": "500Gi", "description": ""},
     DatasetRequest("imagenet", "s3://raw.bucket_1", "s3-reader", "500Gi", "")),
    ({"source": " gs://public-data/ ", "credential": "", "size": "1.5G "},
     DatasetRequest("imagenet", "gs://public-data/", None, "1.5G", "train split")),
    ({"credential": None, "description": None, "size": "1Mi"},
     DatasetRequest("imagenet", "gs://vision-data/imagenet/train", None, "1Mi", "")),
], ids=["gcs-with-credential", "s3-bucket-only-at-the-maximum", "public-stripped", "smallest"])
def test_a_valid_request_is_read_as_written(changes, expected):
    assert check(**changes) == expected


@pytest.mark.parametrize("changes, field, message", [
    ({"name": ""}, "name", "1-40 lower-case letters"),
    ({"name": "ImageNet"}, "name", "1-40 lower-case letters"),
    ({"name": "x" * 41}, "name", "1-40 lower-case letters"),
    ({"name": "mlplatform-data"}, "name", "may not start with 'mlplatform-'"),
    ({"name": "jupyter-alice"}, "name", "may not start with 'jupyter-'"),
    ({"name": "claim-alice"}, "name", "home volumes"),
    ({"source": ""}, "source", "is required"),
    ({"source": 7}, "source", "must be text"),
    ({"source": "https://example.com/data"}, "source", "must be s3://<bucket>/<prefix> or gs://"),
    ({"source": "s3:/bucket/x"}, "source", "must be s3://<bucket>/<prefix> or gs://"),
    ({"source": "gs://bucket/my data"}, "source", "one word"),
    ({"source": "gs://bucket/x\x00y"}, "source", "one word"),
    ({"source": "gs://bucket/x\ny"}, "source", "one word"),
    ({"source": "gs://Bucket/x"}, "source", "is not a bucket name"),
    ({"source": "gs://ab/x"}, "source", "is not a bucket name"),
    ({"source": "gs:///x"}, "source", "is not a bucket name"),
    ({"source": "gs://bucket/" + "p" * 1025}, "source", "at most 1024"),
    ({"credential": "prod-sa"}, "credential", "has no credential named 'prod-sa'"),
    ({"credential": "s3-reader"}, "credential", "a gs:// source is read with an gcp-credential"),
    ({"source": "s3://raw/x"}, "credential", "a s3:// source is read with an aws-credential"),
    ({"credential": ["gcs-reader"]}, "credential", "must be the name"),
    ({"size": ""}, "size", "is required"),
    ({"size": "10"}, "size", "with a unit"),
    ({"size": "10GB"}, "size", "with a unit"),
    ({"size": "10gi"}, "size", "with a unit"),
    ({"size": "-1Gi"}, "size", "with a unit"),
    ({"size": "1e3Gi"}, "size", "with a unit"),
    ({"size": "512Ki"}, "size", "at least 1Mi"),
    ({"size": "0Gi"}, "size", "at least 1Mi"),
    ({"size": "501Gi"}, "size", "at most 500Gi"),
    ({"size": "1Ti"}, "size", "at most 500Gi"),
    ({"description": "two\nlines"}, "description", "one line"),
])
def test_a_bad_field_is_named(changes, field, message):
    with pytest.raises(UserInputError) as e:
        check(**changes)
    assert e.value.violations == ((field, e.value.message),) and e.value.field == field
    assert message in e.value.message and e.value.status == 400


def test_every_mistake_is_told_at_once_in_field_order():
    with pytest.raises(UserInputErrors) as e:
        check(name="Bad", source="ftp://x", credential="nope", size="lots", description="a\tb")
    assert [f for f, _ in e.value.violations] == ["name", "source", "credential", "size", "description"]
    assert e.value.status == 400


def test_a_body_that_is_not_an_object_is_refused():
    with pytest.raises(UserInputError) as e:
        check_request(["imagenet"], CREDS, SETTINGS, "vision")
    assert e.value.field == "body"


@pytest.mark.parametrize("text, n", [
    ("1Mi", 2 ** 20), ("10Gi", 10 * 2 ** 30), ("1.5Ti", 3 * 2 ** 39), ("500G", 500 * 10 ** 9), ("2k", 2000),
    ("1.000001Ki", 1025), ("3E", 3 * 10 ** 18), (" 4Pi ", 4 * 2 ** 50),
])
def test_storage_sizes_in_bytes_rounded_up(text, n):
    assert storage_bytes(text) == n


@pytest.mark.parametrize("text", ["", "   ", None, 10, "10", "Gi", "1.Gi", "1,5Gi", "10 Gi", "10m", "10Mb"])
def test_a_size_without_a_unit_is_not_a_size(text):
    with pytest.raises(ValueError):
        storage_bytes(text)


def test_the_hub_accepts_no_source_the_loader_would_refuse_and_reads_it_alike():
    """The loader parses the annotation again (`hub_ext.manifests.dataset_source.parse_source`): nothing
    the hub makes may fail there, and the bucket it loads is the one the user named."""
    from hub_ext.operator.rules.datasets import parse_source

    uris = ["s3://raw", "s3://raw/", "gs://vision-data/imagenet/train", "gs://a.b_c-d/x/y/", "s3://raw/a%20b",
            "gs://" + "b" * 222 + "/x", "gs://" + "b" * 223, "s3://raw/" + "p" * 1024, "s3://raw/" + "p" * 1025,
            "s3://Raw/x", "gs://bucket/my data", "gs://bucket/x\x7fy", "file:///etc", "s3:/raw", "gs://-bucket/x"]
    accepted = 0
    for uri in uris:
        try:
            check_request({**GOOD, "source": uri, "credential": ""}, CREDS, SETTINGS, "vision")
        except UserInputError:
            continue
        accepted += 1
        source = parse_source(uri)
        assert (source.scheme, source.bucket) == (uri[:2], uri[5:].partition("/")[0])
    assert accepted == 7


# -- the PVC ----------------------------------------------------------------------------------------

def test_the_pvc_of_a_request():
    request = check()
    assert pvc_manifest("vision", request, SETTINGS, MOUNTS, "alice@example.com") == {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": "imagenet", "namespace": "vision",
            "labels": {"app.kubernetes.io/managed-by": "jupyterhub-mlplatform", "mlplatform.io/dataset": "true"},
            "annotations": {"mlplatform.io/source": "gs://vision-data/imagenet/train",
                            "mlplatform.io/description": "train split",
                            "mlplatform.io/created-by": "alice@example.com",
                            "mlplatform.io/credential": "gcs-reader"}},
        "spec": {"accessModes": ["ReadWriteOnce"], "volumeMode": "Filesystem",
                 "resources": {"requests": {"storage": "200Gi"}}},
    }


def test_the_pvc_of_a_public_dataset_with_a_storage_class_and_a_label_value():
    request = check(credential="", description="")
    settings = DatasetSettings("1Ti", "filestore-rwx", ("ReadWriteMany",))
    mounts = MountSettings(MOUNTS.credential_types, dataset_label="example.com/dataset=yes",
                           source_annotation="example.com/source", description_annotation="example.com/about")
    assert pvc_manifest("team-a", request, settings, mounts, "bob") == {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": "imagenet", "namespace": "team-a",
            "labels": {"app.kubernetes.io/managed-by": "jupyterhub-mlplatform", "example.com/dataset": "yes"},
            "annotations": {"example.com/source": "gs://vision-data/imagenet/train", "example.com/about": "",
                            "mlplatform.io/created-by": "bob"}},
        "spec": {"accessModes": ["ReadWriteMany"], "volumeMode": "Filesystem", "storageClassName": "filestore-rwx",
                 "resources": {"requests": {"storage": "200Gi"}}},
    }


@pytest.mark.parametrize("selector, label", [
    ("mlplatform.io/dataset", ("mlplatform.io/dataset", "true")), ("dataset=yes", ("dataset", "yes")),
    ("a.b/c==d", ("a.b/c", "d")), ("k=", ("k", "")),
])
def test_the_dataset_label_of_a_selector(selector, label):
    assert dataset_label(selector) == label


@pytest.mark.parametrize("selector", ["a in (b)", "!a", "a!=b", "a,b", ""])
def test_a_selector_of_more_than_one_label_is_no_dataset_label(selector):
    with pytest.raises(ConfigError) as e:
        dataset_label(selector)
    assert [p.path for p in e.value.problems] == ["PlatformSpawner.dataset_label"]


def test_a_dataset_is_a_pvc_with_the_label():
    pvc = {"metadata": {"labels": {"mlplatform.io/dataset": "anything"}}}
    assert is_dataset(pvc, "mlplatform.io/dataset") and not is_dataset(pvc, "mlplatform.io/dataset=true")
    assert not is_dataset({"metadata": {"labels": {"other": "true"}}}, "mlplatform.io/dataset")
    assert not is_dataset({"metadata": {}}, "mlplatform.io/dataset")


def test_a_new_dataset_reads_as_loading_until_the_loader_reports():
    made = pvc_manifest("vision", check(), SETTINGS, MOUNTS, "alice")
    assert row({**made, "status": {"phase": "Pending"}}, MOUNTS) == {
        "project": "vision", "name": "imagenet", "source": "gs://vision-data/imagenet/train",
        "credential": "gcs-reader", "size": "200Gi", "description": "train split", "created_by": "alice",
        "state": "loading", "message": "waiting for the loader to start", "progress": None, "percent": None}


def test_the_annotations_are_the_loaders():
    from hub_ext.operator.rules import datasets as loader

    assert (CREDENTIAL_ANNOTATION, PROGRESS_ANNOTATION) == (loader.CREDENTIAL_ANNOTATION, loader.PROGRESS_ANNOTATION)


# -- deleting ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("created_by, user, admin, allowed", [
    ("alice", "alice", False, True), ("alice", "bob", False, False), ("alice", "bob", True, True),
    (None, "alice", False, False), (None, "root", True, True),
])
def test_only_the_creator_or_an_admin_deletes(created_by, user, admin, allowed):
    if allowed:
        check_may_delete("imagenet", created_by, user, admin)
        return
    with pytest.raises(UserInputError) as e:
        check_may_delete("imagenet", created_by, user, admin)
    assert (e.value.field, e.value.status) == ("name", 403)
    assert (f"only its creator {created_by}" if created_by else "not made through the hub") in e.value.message


# -- reading a dataset PVC --------------------------------------------------------------------------

def pvc(conditions=(), progress=None, deleting=False, **annotations):
    meta = {"name": "imagenet", "namespace": "vision", "labels": {"mlplatform.io/dataset": "true"},
            "annotations": {"mlplatform.io/source": "gs://vision-data/imagenet", "mlplatform.io/description": "train",
                            "mlplatform.io/created-by": "alice", "mlplatform.io/credential": "gcs-reader",
                            **({PROGRESS_ANNOTATION: progress} if progress is not None else {}), **annotations}}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-04T12:00:00Z"
    return {"metadata": meta, "spec": {"resources": {"requests": {"storage": "200Gi"}}},
            "status": {"capacity": {"storage": "200Gi"}, "conditions": list(conditions)}}


LOADING = {"type": "Loaded", "status": "False", "reason": "Loading", "message": "12 of 1000 objects, 1.2 MB of 100 MB"}
PROGRESS = json.dumps({"phase": "copying", "objects_done": 12, "objects_total": 1000, "bytes_done": 1_200_000,
                       "bytes_total": 100_000_000})
BASE = {"project": "vision", "name": "imagenet", "source": "gs://vision-data/imagenet", "credential": "gcs-reader",
        "size": "200Gi", "description": "train", "created_by": "alice"}


def test_a_loading_dataset_shows_the_loaders_message_and_progress():
    assert row(pvc([LOADING], PROGRESS), MOUNTS) == {
        **BASE, "state": "loading", "message": "12 of 1000 objects, 1.2 MB of 100 MB",
        "progress": {"objects_done": 12, "objects_total": 1000, "bytes_done": 1_200_000, "bytes_total": 100_000_000},
        "percent": 1}


def test_a_failed_dataset_shows_the_reason_and_no_progress():
    failed = {"type": "Loaded", "status": "False", "reason": "Failed",
              "message": "the credential 'gcs-reader' may not read gs://vision-data (403)"}
    assert row(pvc([failed], PROGRESS), MOUNTS) == {
        **BASE, "state": "failed", "message": "the credential 'gcs-reader' may not read gs://vision-data (403)",
        "progress": None, "percent": None}


def test_a_loaded_dataset_and_one_being_deleted():
    loaded = {"type": "Loaded", "status": "True", "reason": "Loaded", "message": "1000 objects, 100 MB"}
    assert row(pvc([loaded], PROGRESS), MOUNTS) == {**BASE, "state": "ready", "message": "",
                                                    "progress": None, "percent": None}
    assert row(pvc([LOADING], PROGRESS, deleting=True), MOUNTS)["state"] == "deleting"
    assert row(pvc([LOADING], PROGRESS, deleting=True), MOUNTS)["percent"] is None


@pytest.mark.parametrize("annotation, expected", [
    (None, None), ("", None), ("{not json", None), ("[1]", None), ("[" * 5000 + "]" * 5000, None),
    ('{"phase": "listing", "objects_listed": 40}', None),
    ('{"objects_done": -1, "objects_total": true, "bytes_done": "5", "bytes_total": 10}', {"bytes_total": 10}),
    ('{"objects_done": 3, "objects_total": 4, "error": "x"}', {"objects_done": 3, "objects_total": 4}),
])
def test_the_progress_annotation_is_read_defensively(annotation, expected):
    assert progress_of(pvc([LOADING], annotation)) == expected


@pytest.mark.parametrize("progress, expected", [
    (None, None), ({}, None), ({"objects_done": 3, "objects_total": 4}, 75),
    ({"objects_done": 3, "objects_total": 4, "bytes_done": 10, "bytes_total": 1000}, 1),
    ({"objects_done": 0, "objects_total": 0, "bytes_total": 0}, None), ({"bytes_done": 20, "bytes_total": 10}, 100),
])
def test_how_far_a_load_is(progress, expected):
    assert percent(progress) == expected


# -- the pages --------------------------------------------------------------------------------------

def render_page(**context):
    """The datasets page's template under a stand-in for JupyterHub's page.html."""
    env = jinja2.Environment(loader=jinja2.ChoiceLoader([
        jinja2.DictLoader({"page.html": "{% block main %}{% endblock %}"}),
        jinja2.FileSystemLoader(ROOT / "hub_ext" / "templates")]), autoescape=True)
    defaults = {"error": "", "kept": {}, "managed": True, "where": "", "max_size": "1Ti", "credentials": [],
                "xsrf": "X"}
    return env.get_template("mlplatform-datasets.html").render(**{**defaults, **context})


class User:
    def __init__(self, name, admin=False):
        self.name, self.admin = name, admin


VISION = Project("vision", "Vision team", False, frozenset(), None)


def test_the_page_shows_state_progress_and_reason_and_delete_only_to_whom_may():
    loading = row(pvc([LOADING], PROGRESS), MOUNTS)
    failed = {**row(pvc([{**LOADING, "reason": "Failed", "message": "403 from <gcs>"}]), MOUNTS),
              "name": "coco", "created_by": "bob"}
    html = render_page(user=User("alice"), projects=[(VISION, [loading, failed])],
                       credentials=[{"project": "vision", "name": "gcs-reader", "type": "gcp-credential"}])
    assert 'data-dataset="imagenet" data-state="loading"' in html and 'aria-valuenow="1"' in html
    assert "12 of 1000 objects, 1.2 MB of 100 MB" in html
    assert 'data-dataset="coco" data-state="failed"' in html and "403 from &lt;gcs&gt;" in html  # escaped
    assert 'aria-label="Delete imagenet"' in html and 'aria-label="Delete coco"' not in html
    assert '<option value="gcs-reader" >gcs-reader (gcp-credential)</option>' in html
    assert "window.location.reload" in html  # looks again while something loads
    admin = render_page(user=User("root", admin=True), projects=[(VISION, [loading, failed])])
    assert 'aria-label="Delete imagenet"' in admin and 'aria-label="Delete coco"' in admin
    settled = render_page(user=User("alice"), projects=[(VISION, [failed])])
    assert "window.location.reload" not in settled


def test_the_page_keeps_what_was_typed_after_a_refusal_and_says_where_local_datasets_live():
    html = render_page(user=User("alice"), projects=[(VISION, [])], error="size: may be at most 1Ti on this hub",
                       kept={"project": "vision", "name": "imagenet", "source": "gs://b/x", "size": "2Ti"})
    assert 'id="dataset-error">size: may be at most 1Ti on this hub<' in html
    assert 'value="imagenet"' in html and 'value="gs://b/x"' in html and 'value="2Ti"' in html
    assert "No datasets yet." in html
    local = render_page(user=User("alice"), projects=[(VISION, [])], managed=False, where="/srv/projects")
    assert "/srv/projects/&lt;project&gt;/datasets/&lt;name&gt;/" in local and 'id="add-dataset"' not in local


def test_the_spawn_form_shows_the_loaders_message_and_a_failed_ones_reason():
    files = {"vision": Available((), (Dataset("coco", "/d/coco", "loading", "12 of 1000 objects, 1.2 MB of 100 MB"),
                                      Dataset("raw", "/d/raw", "failed", "AccessDenied: the credential may not list"),
                                      Dataset("mnist", "/d/mnist")))}
    html = render_form([VISION], (), {}, files)
    assert "loading: 12 of 1000 objects, 1.2 MB of 100 MB" in html
    assert "failed: AccessDenied: the credential may not list" in html
    assert 'id="dataset--vision--raw" disabled>' in html
    assert 'id="dataset--vision--coco">' in html and 'id="dataset--vision--mnist">' in html


def test_the_spawn_form_says_where_credentials_and_datasets_come_from_when_there_are_none():
    files = {"vision": Available(), "user-alice": Available((), (Dataset("mnist", "/d/mnist"),))}
    alice = Project("user-alice", "alice (personal)", True, frozenset(), {})
    html = render_form([VISION, alice], (), {}, files, hub_url="/base/hub/")
    hint = html[html.index("mlplatform-no-mounts"):]
    assert "Nothing to mount from" in hint and VISION.display_name in hint and "alice (personal)" not in hint
    assert 'href="/base/hub/mlplatform/credentials"' in hint and 'href="/base/hub/mlplatform/datasets"' in hint
    assert "mlplatform-no-mounts" not in render_form([alice], (), {}, files)
    assert "mlplatform-no-mounts" not in render_form([VISION], (), {}, None)  # no mounts at all (no runtime files)


# -- configuration ----------------------------------------------------------------------------------

def test_configure_registers_the_page_the_api_and_the_scope():
    from hub_ext.setup import configure

    c = Config()
    c.JupyterHub.spawner_class = "platform"
    c.PlatformSpawner = Config(PLATFORM)
    configure(c)
    paths = [h[0] for h in c.JupyterHub.extra_handlers]
    assert {"/mlplatform/datasets", "/api/mlplatform/users/([^/]+)/projects/([^/]+)/datasets",
            "/api/mlplatform/users/([^/]+)/projects/([^/]+)/datasets/([^/]+)"} <= set(paths)
    assert "custom:mlplatform:datasets" in c.JupyterHub.custom_scopes
    (user_role,) = [r for r in c.JupyterHub.load_roles if r["name"] == "user"]
    assert "custom:mlplatform:datasets!user" in user_role["scopes"]


@pytest.mark.parametrize("trait, value", [("dataset_max_size", "lots"), ("dataset_max_size", "10"),
                                          ("dataset_access_modes", ["ReadOnlyMany"]), ("dataset_access_modes", [])])
def test_a_bad_dataset_setting_is_refused_naming_it(trait, value):
    from hub_ext.spawners.dataset_config import DatasetConfig

    with pytest.raises(TraitError, match=f"PlatformSpawner.{trait}"):
        DatasetConfig(**{trait: value})
    assert DatasetConfig().dataset_settings() == DatasetSettings("1Ti", "", ("ReadWriteOnce",))
