"""Cloud credentials: what a valid one looks like, and the Secret that holds it. Pure.

A credential is a small set of files, validated here by content, so the same checks serve the hub
page and the REST API, and need only a Secret's data:

- ``gcp-credential``: ``key.json``, a Google service-account key: a JSON object with
  ``type: "service_account"``, ``project_id``, ``private_key`` (PEM) and ``client_email``.
- ``aws-credential``: ``credentials``, an AWS shared-credentials file with a ``[default]``
  profile holding ``aws_access_key_id`` and ``aws_secret_access_key`` (and
  ``aws_session_token`` for temporary ``ASIA…`` keys), plus an optional ``config`` file with the
  ``region``.

`files_from_fields` turns what a user types (a pasted JSON key; AWS key fields) into those
files; `validate_files` checks files from anywhere. Errors name the field and what is wrong and
never contain any part of the submitted value. `secret_manifest` builds the Secret.

Names (`check_name`): a credential is a Secret in its project's namespace, so it may not take a
name the platform uses there, now or later; refused (on ``name``) are names

- starting ``mlplatform-`` (`RESERVED_PREFIXES`): every object the hub keeps in a project
  (`hub_ext.manifests.tenancy`: the ServiceAccount ``mlplatform-runner``, Role, member RoleBindings,
  quota, the ``mlplatform-catalog`` ConfigMap) and any it adds later;
- starting ``jupyter-``: KubeSpawner names notebook pods ``jupyter-<user>[--<server>]`` and the
  Secrets it makes for them after the pod (its internal-SSL Secret is named like the pod);
- ending ``-hub-token`` (`RESERVED_SUFFIXES`): a notebook server's hub token, ``<pod>-hub-token``;
- ending ``-package``: a job's trainer package ConfigMap, ``<job>-package``
  (`server_ext.runtimes.package`); a ConfigMap and a Secret may share a name in Kubernetes, but a
  credential that reads like a job's package is refused all the same.

Kubernetes' own names in a namespace (``default``, ``kube-root-ca.crt``) are a ServiceAccount and
a ConfigMap, not Secrets, or cannot be credential names (dots). Admission policies that keep
project pods off platform Secrets refuse the same patterns (a unit test holds them together).

Deleting (`check_may_delete`): a credential in a team project belongs to the team (any member
may mount it), but only its creator (the ``mlplatform.io/created-by`` annotation the hub writes)
or a hub admin may delete it; one without the annotation (made outside the hub) only an admin.
"""

from __future__ import annotations

import base64
import configparser
import json
import re
from dataclasses import dataclass
from typing import Any, Mapping

from hub_ext.core.errors import UserInputError

GCP, AWS = "gcp-credential", "aws-credential"
KINDS = (GCP, AWS)
MAX_BYTES = 64 * 1024
CREDENTIAL_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?")
KIND_LABEL = "mlplatform.io/credential"
DESCRIPTION = "mlplatform.io/description"
CREATED_BY = "mlplatform.io/created-by"
MANAGED_BY = {"app.kubernetes.io/managed-by": "jupyterhub-mlplatform"}
FILES = {GCP: ("key.json",), AWS: ("credentials", "config")}
RESERVED_PREFIXES = ("mlplatform-", "jupyter-")
RESERVED_SUFFIXES = ("-hub-token", "-package")

_PROJECT_ID = re.compile(r"[a-z][-a-z0-9]{4,28}[a-z0-9]")
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[A-Za-z]{2,}")
_PEM = re.compile(r"-----BEGIN (RSA )?PRIVATE KEY-----\s+[A-Za-z0-9+/=\s]+-----END (RSA )?PRIVATE KEY-----\s*")
_AWS_KEY_ID = re.compile(r"(AKIA|ASIA|AIDA|AROA)[A-Z0-9]{12,124}")
_AWS_SECRET = re.compile(r"[A-Za-z0-9/+=]{16,128}")
_AWS_TOKEN = re.compile(r"[A-Za-z0-9/+=]{16,4096}")
_AWS_REGION = re.compile(r"[a-z]{2}(-[a-z]+)+-\d{1,2}")


@dataclass(frozen=True)
class CredentialFiles:
    kind: str
    files: Mapping[str, str]  # file name → content


def check_name(name: Any, field_name: str = "name", new: bool = True) -> str:
    """A valid credential name; a `new` one (to be created) must not be reserved. An existing one
    may be (made before a pattern was reserved), so that it can still be named to delete it."""
    if not isinstance(name, str) or not CREDENTIAL_NAME.fullmatch(name):
        raise UserInputError(field_name, "must be 1-40 lower-case letters, digits or '-', starting and ending "
                                         "with a letter or digit")
    if not new:
        return name
    for prefix in RESERVED_PREFIXES:
        if name.startswith(prefix):
            raise UserInputError(field_name, f"may not start with {prefix!r}: the platform names its own objects so")
    for suffix in RESERVED_SUFFIXES:
        if name.endswith(suffix):
            raise UserInputError(field_name, f"may not end with {suffix!r}: the platform names its own objects so")
    return name


def is_reserved(name: str) -> bool:
    """True for a name the platform uses or may use in a project (see the module docstring)."""
    return name.startswith(RESERVED_PREFIXES) or name.endswith(RESERVED_SUFFIXES)


def check_may_delete(name: str, created_by: str | None, username: str, admin: bool,
                     what: str = "credential") -> None:
    """Allow `username` to delete the `what` (a credential, a dataset) `name` whose object records
    `created_by` (None: no annotation), or raise `UserInputError` on ``name`` (403)."""
    if admin or (created_by and created_by == username):
        return
    if created_by:
        raise UserInputError("name", f"the {what} {name!r} belongs to the project, but only its creator "
                                     f"{created_by} or an administrator may delete it", 403)
    raise UserInputError("name", f"the {what} {name!r} was not made through the hub; only an administrator may "
                                 "delete it", 403)


def check_kind(kind: Any, field_name: str = "type") -> str:
    if kind not in KINDS:
        raise UserInputError(field_name, f"must be one of {', '.join(KINDS)}")
    return kind


def _text(fields: Mapping[str, Any], key: str, required: bool = True) -> str:
    value = fields.get(key)
    if value in (None, ""):
        if required:
            raise UserInputError(key, "is required")
        return ""
    if not isinstance(value, str):
        raise UserInputError(key, "must be text")
    if len(value.encode()) > MAX_BYTES:
        raise UserInputError(key, f"is larger than {MAX_BYTES // 1024} KiB")
    value = value.strip()
    if key != "key_json" and any(ord(ch) < 32 or ord(ch) == 127 or ch.isspace() for ch in value):
        raise UserInputError(key, "must be one word: no spaces, line breaks or control characters")
    return value


def files_from_fields(kind: str, fields: Mapping[str, Any]) -> CredentialFiles:
    """The files for what a user submitted: ``key_json`` for GCP; ``aws_access_key_id``,
    ``aws_secret_access_key``, optional ``aws_session_token`` and ``region`` for AWS."""
    check_kind(kind)
    if kind == GCP:
        return validate_files(GCP, {"key.json": _text(fields, "key_json")}, prefix="key_json")
    profile = {"aws_access_key_id": _text(fields, "aws_access_key_id"),
               "aws_secret_access_key": _text(fields, "aws_secret_access_key")}
    token = _text(fields, "aws_session_token", required=False)
    if token:
        profile["aws_session_token"] = token
    files = {"credentials": _ini(profile)}
    region = _text(fields, "region", required=False)
    if region:
        files["config"] = _ini({"region": region})
    return validate_files(AWS, files, prefix="")


def _ini(values: Mapping[str, str]) -> str:
    return "[default]\n" + "".join(f"{k} = {v}\n" for k, v in values.items())


def validate_files(kind: str, files: Mapping[str, str], prefix: str | None = None) -> CredentialFiles:
    """Check a credential's files by content. `prefix` is how fields are named in errors
    (default: the file name, as a webhook reporting on a Secret's data would)."""
    check_kind(kind)
    unknown = sorted(set(files) - set(FILES[kind]))
    if unknown:
        raise UserInputError(f"data.{unknown[0]}", f"a {kind} holds only {', '.join(FILES[kind])}")
    if kind == GCP:
        _check_gcp(files.get("key.json"), "key.json" if prefix is None else prefix)
    else:
        _check_aws(files, prefix)
    return CredentialFiles(kind, dict(files))


def _check_gcp(text: str | None, where: str) -> None:
    if not text:
        raise UserInputError(where, "is required: paste the service-account key (JSON)")
    try:
        key = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than Python's JSON reader goes
        raise UserInputError(where, "is not valid JSON") from None
    if not isinstance(key, dict):
        raise UserInputError(where, "must be a JSON object (a service-account key)")
    if key.get("type") != "service_account":
        raise UserInputError(f"{where}.type", "must be \"service_account\" (a service-account key, not a user "
                                              "or external-account credential)")
    checks = (("project_id", _PROJECT_ID, "must be a Google Cloud project id"),
              ("private_key", _PEM, "must be a PEM private key"),
              ("client_email", _EMAIL, "must be the service account's e-mail address"))
    for key_name, pattern, message in checks:
        value = key.get(key_name)
        if not isinstance(value, str) or not value:
            raise UserInputError(f"{where}.{key_name}", "is required")
        if not pattern.fullmatch(value):
            raise UserInputError(f"{where}.{key_name}", message)


_INI_KEYS = {"credentials": {"aws_access_key_id", "aws_secret_access_key", "aws_session_token"},
             "config": {"region"}}


def _read_ini(text: str, where: str) -> Mapping[str, str]:
    """The [default] profile; any other section or key is refused (an AWS config may run commands:
    ``credential_process``), and so is a value with spaces or control characters."""
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error:
        raise UserInputError(where, "is not a valid INI file") from None
    if parser.sections() != ["default"]:
        raise UserInputError(where, "must hold exactly one profile, [default]")
    profile = parser["default"]
    for key, value in profile.items():
        if key not in _INI_KEYS[where]:
            raise UserInputError(f"{where}.{key}", f"is not allowed (only {', '.join(sorted(_INI_KEYS[where]))})")
        if not value or any(ord(ch) < 32 or ord(ch) == 127 or ch.isspace() for ch in value):
            raise UserInputError(f"{where}.{key}", "must be one word: no spaces, line breaks or control characters")
    return profile


def _check_aws(files: Mapping[str, str], prefix: str | None) -> None:
    def name(file: str, key: str) -> str:
        return key if prefix == "" else f"{prefix or file}.{key}"

    if not files.get("credentials"):
        raise UserInputError("credentials" if prefix is None else "aws_access_key_id", "is required")
    profile = _read_ini(files["credentials"], "credentials")
    key_id = profile.get("aws_access_key_id", "")
    secret = profile.get("aws_secret_access_key", "")
    token = profile.get("aws_session_token", "")
    if not key_id:
        raise UserInputError(name("credentials", "aws_access_key_id"), "is required")
    if not _AWS_KEY_ID.fullmatch(key_id):
        raise UserInputError(name("credentials", "aws_access_key_id"),
                             "must be an AWS access key id (16-128 upper-case letters and digits, starting "
                             "AKIA or ASIA)")
    if not secret:
        raise UserInputError(name("credentials", "aws_secret_access_key"), "is required")
    if not _AWS_SECRET.fullmatch(secret):
        raise UserInputError(name("credentials", "aws_secret_access_key"), "must be an AWS secret access key")
    if key_id.startswith("ASIA") and not token:
        raise UserInputError(name("credentials", "aws_session_token"),
                             "is required with temporary (ASIA…) access keys")
    if token and not _AWS_TOKEN.fullmatch(token):
        raise UserInputError(name("credentials", "aws_session_token"), "must be an AWS session token")
    if files.get("config"):
        region = _read_ini(files["config"], "config").get("region", "")
        if region and not _AWS_REGION.fullmatch(region):
            raise UserInputError(name("config", "region"), "must be an AWS region such as eu-west-1")


def secret_manifest(namespace: str, name: str, secret_type: str, creds: CredentialFiles, description: str,
                    created_by: str) -> dict:
    """The Secret for a validated credential (`secret_type`: the configured Secret type of its kind)."""
    return {
        "apiVersion": "v1", "kind": "Secret", "type": secret_type,
        "metadata": {"name": name, "namespace": namespace,
                     "labels": {**MANAGED_BY, KIND_LABEL: creds.kind},
                     "annotations": {DESCRIPTION: description, CREATED_BY: created_by}},
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in sorted(creds.files.items())},
    }


def check_description(value: Any) -> str:
    if value in (None, ""):
        return ""
    if not isinstance(value, str) or len(value) > 200 or any(ord(ch) < 32 for ch in value):
        raise UserInputError("description", "must be one line of at most 200 characters")
    return value
