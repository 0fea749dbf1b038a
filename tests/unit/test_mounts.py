"""Choosing credentials and datasets: env of paths only, every bad choice named by its field."""

import json

import pytest

from hub_ext.core.errors import UserInputError
from hub_ext.core.mounts import Available, Credential, Dataset, select
from hub_ext.local.files import project_files

pytestmark = pytest.mark.unit

AVAILABLE = Available(
    (Credential("prod-sa", "gcp-credential", "/p/vision/credentials/prod-sa.json"),
     Credential("dev-sa", "gcp-credential", "/p/vision/credentials/dev-sa.json"),
     Credential("s3", "aws-credential", "/p/vision/credentials/s3.aws")),
    (Dataset("imagenet", "/p/vision/datasets/imagenet"), Dataset("coco", "/p/vision/datasets/coco")),
)


def test_select_gives_paths_in_env():
    assert select(AVAILABLE, ["prod-sa", "s3"], ["coco", "imagenet"], "vision") == {
        "GOOGLE_APPLICATION_CREDENTIALS": "/p/vision/credentials/prod-sa.json",
        "AWS_SHARED_CREDENTIALS_FILE": "/p/vision/credentials/s3.aws",
        "MLPLATFORM_DATASETS": json.dumps({"coco": "/p/vision/datasets/coco",
                                           "imagenet": "/p/vision/datasets/imagenet"}),
    }
    assert select(AVAILABLE, None, [], "vision") == {}


@pytest.mark.parametrize("creds, datasets, field, status", [
    (["nope"], [], "credentials[0]", 403),
    (["prod-sa", "dev-sa"], [], "credentials[1]", 400),
    ([], ["coco", "other"], "datasets[1]", 403),
    ([1], [], "credentials", 400),
    ({"a": 1}, [], "credentials", 400),
])
def test_bad_choices(creds, datasets, field, status):
    with pytest.raises(UserInputError) as e:
        select(AVAILABLE, creds, datasets, "vision")
    assert (e.value.field, e.value.status) == (field, status)


def test_project_files_reads_names_and_types_only(tmp_path):
    (tmp_path / "vision" / "credentials").mkdir(parents=True)
    (tmp_path / "vision" / "credentials" / "sa.json").write_text("{}")
    (tmp_path / "vision" / "credentials" / "keys.aws").write_text("[default]\n")
    (tmp_path / "vision" / "credentials" / "notes.txt").write_text("ignored")
    (tmp_path / "vision" / "datasets" / "mnist").mkdir(parents=True)
    got = project_files(tmp_path, "vision")
    assert got == Available(
        (Credential("keys", "aws-credential", str(tmp_path / "vision/credentials/keys.aws")),
         Credential("sa", "gcp-credential", str(tmp_path / "vision/credentials/sa.json"))),
        (Dataset("mnist", str(tmp_path / "vision/datasets/mnist")),))
    assert project_files(tmp_path, "empty") == Available()


COPYABLE = Available(datasets=(Dataset("frames", "/datasets/frames", snapshot="frames-snap-abc"),
                               Dataset("raw", "/datasets/raw"),
                               Dataset("later", "/datasets/later", "loading", "3 of 9 objects",
                                       snapshot="later-snap-old")))


def test_a_copy_is_chosen_with_its_suffix_and_mounted_writable_from_its_own_claim():
    from dataclasses import replace

    from hub_ext.core.mounts import choose_mounts
    from hub_ext.manifests.mounts import MountSettings, volumes

    mounts = choose_mounts(COPYABLE, None, ["frames:copy"], "vision", allow_copies=True)
    (d,) = mounts.datasets
    assert (d.name, d.copy, d.path) == ("frames", True, "/datasets/frames")
    assert json.loads(mounts.env["MLPLATFORM_DATASETS"]) == {"frames": "/datasets/frames"}  # where it always is
    vols, vol_mounts = volumes([], [replace(d, claim="job-frames-copy")], MountSettings({}))
    assert vols[0]["persistentVolumeClaim"] == {"claimName": "job-frames-copy", "readOnly": False}
    assert vol_mounts[0]["readOnly"] is False
    shared = choose_mounts(COPYABLE, None, ["frames"], "vision", allow_copies=True).datasets[0]
    assert volumes([], [shared], MountSettings({}))[0][0]["persistentVolumeClaim"] == {"claimName": "frames",
                                                                                      "readOnly": True}


@pytest.mark.parametrize("choice, allow, words", [
    (["raw:copy"], True, "no writable copy of the dataset 'raw' can be made here"),
    (["later:copy"], True, "is loading: 3 of 9 objects; a copy is made from a loaded dataset"),
    (["frames:copy"], False, "no writable copy of the dataset 'frames' can be made here"),  # the local runtime
    (["frames", "frames:copy"], True, "is chosen twice"),
    (["nope:copy"], True, "has no dataset 'nope'"),
])
def test_a_copy_that_cannot_be_made_is_refused_naming_the_choice(choice, allow, words):
    with pytest.raises(UserInputError) as e:
        select(COPYABLE, None, choice, "vision", allow_loading=True, allow_copies=allow)
    assert e.value.field == f"datasets[{len(choice) - 1}]" and words in e.value.message, e.value.message
