"""A notebook server's choice of credentials and datasets for jobs, rebuilt from the hub's platform
API answers (`hub_ext.core.mounts.metadata`): the same paths the hub's spawner mounts, per project,
and where a Kubernetes job mounts them."""

import pytest

from hub_ext.core.errors import UpstreamError, UserInputError
from hub_ext.core.mounts import Available, metadata, select
from hub_ext.manifests.mounts import MountSettings, credential_from_secret, dataset_from_pvc, volumes
from server_ext.service.hub_files import available_from_answers

pytestmark = pytest.mark.unit

HUB = MountSettings({"gcp-credential": "gcp-credential", "aws-credential": "aws-credential"},
                    credentials_root="/var/run/creds", datasets_root="/data")  # not the defaults
SECRETS = [{"type": "gcp-credential", "metadata": {"name": "sa"}, "data": {"key.json": ""}},
           {"type": "aws-credential", "metadata": {"name": "s3"}, "data": {"credentials": "", "config": ""}},
           {"type": "aws-credential", "metadata": {"name": "s3-plain"}, "data": {"credentials": ""}}]
PVC = {"metadata": {"name": "coco", "annotations": {"mlplatform.io/source": "s3://b/coco"}},
       "status": {"conditions": [{"type": "Loaded", "status": "False", "reason": "Loading", "message": "40%"}]}}


def answers(project: str = "vision") -> tuple[dict, dict]:
    creds = tuple(credential_from_secret(s, HUB) for s in SECRETS)
    return ({"credentials": metadata(creds, project) + metadata(creds[:1], "other")},
            {"datasets": metadata([dataset_from_pvc(PVC, HUB)], project)})


def test_the_hub_metadata_gives_back_what_the_hub_mounts():
    creds, datasets = answers()
    assert creds["credentials"][1] == {"project": "vision", "name": "s3", "description": "", "type": "aws-credential",
                                       "path": "/var/run/creds/s3/credentials", "config_path": "/var/run/creds/s3/config"}
    assert "config_path" not in creds["credentials"][2]
    got = available_from_answers(creds, datasets, "vision")
    assert got == Available(tuple(credential_from_secret(s, HUB) for s in SECRETS), (dataset_from_pvc(PVC, HUB),))
    assert [c.name for c in available_from_answers(creds, datasets, "other").credentials] == ["sa"]
    assert available_from_answers(None, None, "vision") == Available()  # the hub refused: nothing to mount
    # a dataset still loading is refused by the same rule as at spawn
    with pytest.raises(UserInputError, match="is loading: 40%"):
        select(got, [], ["coco"], "vision")


def test_a_job_mounts_each_credential_where_its_paths_point():
    creds, datasets = answers()
    got = available_from_answers(creds, datasets, "vision")
    env = select(got, ["sa", "s3"], [], "vision")
    _, mounts = volumes(got.credentials, (), MountSettings({}))  # the job's settings keep the default root
    dirs = [m["mountPath"] for m in mounts]
    assert dirs == ["/var/run/creds/sa", "/var/run/creds/s3", "/var/run/creds/s3-plain"]
    assert all(any(path.startswith(d + "/") for d in dirs) for path in env.values())


def test_a_malformed_answer_is_an_upstream_error_not_an_empty_choice():
    with pytest.raises(UpstreamError, match="malformed"):
        available_from_answers({"credentials": [{"project": "vision", "name": "x"}]}, None, "vision")
