"""Choosing credentials and datasets: env of paths only, every bad choice named by its field."""

import json

import pytest

from hub_ext.errors import UserInputError
from hub_ext.local_files import project_files
from hub_ext.mounts import Available, Credential, Dataset, select

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
