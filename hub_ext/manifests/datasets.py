"""Datasets added through the hub: what a valid request is, the PVC that holds one, and how a
dataset PVC reads on the hub's pages. Pure.

A dataset is a PVC in a project namespace (`hub_ext.manifests.mounts`: the dataset label, the source
and description annotations) that the operator's loader fills from S3 or GCS
(`hub_ext.operator.dataset_controller`). A request (`check_request`: the hub page's form or a REST
body) names

- ``name``: the PVC's name, a credential-like name (`hub_ext.core.credentials.check_name`: 1-40
  lower-case letters, digits and '-', none of the names the platform keeps for itself) that also
  does not start ``claim-`` (KubeSpawner's home volumes are ``claim-<user>[--<server>]``);
- ``source``: ``s3://<bucket>/<prefix>`` or ``gs://<bucket>/<prefix>`` (`check_source`; the
  prefix is optional; one word: no spaces or control characters; a bucket as the loader reads it);
- ``credential`` (optional; none: a public bucket): one of the project's credentials, of the kind
  the scheme is read with (`SCHEMES`: an ``aws-credential`` for ``s3://``, a ``gcp-credential``
  for ``gs://``); the caller passes the project's credentials (name → kind);
- ``size``: a Kubernetes storage quantity with a unit (``10Gi``, ``500G``, ``1.5Ti``), at least
  `MIN_SIZE` and at most the configured maximum (`DatasetSettings.max_size`);
- ``description`` (optional): one line (`hub_ext.core.credentials.check_description`).

Every mistake of a request is told at once, each naming its field (`hub_ext.core.errors.collect`);
a credential's name is the only value of the project's ever repeated.

The PVC (`pvc_manifest`): the dataset label (`MountSettings.dataset_label`: ``key`` means the
value ``"true"``; ``key=value`` that value), ``app.kubernetes.io/managed-by``, the source, the
credential (`CREDENTIAL_ANNOTATION`, only when one is named), the description and the creator
(`hub_ext.core.credentials.CREATED_BY`); ``spec.accessModes`` `DatasetSettings.access_modes` (default
``ReadWriteOnce``: the loader writes it once and servers mount it read-only; servers on several
nodes need ``ReadWriteMany`` and a StorageClass that has it), ``storageClassName`` only when one
is configured (else the cluster's default class). Until the loader reports on it, a PVC with a
source reads as loading ("waiting for the loader to start": `hub_ext.manifests.mounts.dataset_state`),
so a dataset is never offered as ready before it is filled.

Deleting (`check_may_delete`): as with credentials, any member of a team project mounts its
datasets, but only the creator or a hub admin deletes one (one without the creator annotation:
only an admin).

Reading (`row`, `row_of`): what the page and the API show of a dataset: its state and message
(`hub_ext.manifests.mounts.dataset_state`, the loader's ``Loaded`` condition: "12 of 1000 objects,
1.2 MB of 100 MB" while loading, the reason when failed), the loader's progress numbers
(`progress_of`, the JSON annotation `PROGRESS_ANNOTATION`) and a percentage (bytes, else objects),
"deleting" for a PVC being deleted (pods still use it); never anything of a credential but its name.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Mapping

from hub_ext.core.credentials import CREATED_BY, MANAGED_BY, check_description, check_name
from hub_ext.core.credentials import check_may_delete as credential_rule
from hub_ext.core.errors import ConfigError, Problem, UserInputError, bounded, collect
from hub_ext.core.mounts import Dataset
from hub_ext.manifests.mounts import MountSettings, dataset_from_pvc
from hub_ext.manifests.dataset_source import CREDENTIAL_ANNOTATION, PROGRESS_ANNOTATION, SCHEMES, parse_source

ACCESS_MODES = ("ReadWriteOnce", "ReadWriteMany")  # the loader writes the volume: no read-only mode
RESERVED_PREFIXES = ("claim-",)  # KubeSpawner's home PVCs
MIN_SIZE = "1Mi"
PROGRESS_KEYS = ("objects_done", "objects_total", "bytes_done", "bytes_total")

_QUANTITY = re.compile(r"\d{1,15}(\.\d{1,6})?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)")  # a number with a unit
_LABEL_SELECTOR = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_./]*)(?:==?([-A-Za-z0-9_.]*))?")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


@dataclass(frozen=True)
class DatasetSettings:
    """How the hub makes dataset PVCs (PlatformSpawner's ``dataset_*`` traits)."""
    max_size: str = "1Ti"
    storage_class: str = ""  # "": the cluster's default StorageClass
    access_modes: tuple[str, ...] = ("ReadWriteOnce",)


@dataclass(frozen=True)
class DatasetRequest:
    name: str
    source: str
    credential: str | None
    size: str
    description: str = ""


def storage_bytes(text: Any) -> int:
    """Bytes of a storage quantity with a unit (``10Gi``, ``1.5T``), rounded up, as the Kubernetes
    client's ``parse_quantity`` reads it; ValueError (saying what is wrong, never quoting more than a
    bounded part) otherwise. A unit is required here: a bare ``10`` is ten bytes to Kubernetes."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("is required: a size such as 10Gi")
    if not _QUANTITY.fullmatch(text.strip()):
        raise ValueError("must be a size with a unit: Ki, Mi, Gi, Ti (1024-based) or k, M, G, T (1000-based), "
                         "e.g. 10Gi or 500G")
    from kubernetes.utils.quantity import parse_quantity  # the Kubernetes client's parser

    return math.ceil(parse_quantity(text.strip()))


def check_size(value: Any, max_size: str, field_name: str = "size") -> str:
    try:
        size = storage_bytes(value)
    except ValueError as e:
        raise UserInputError(field_name, str(e)) from None
    if size < storage_bytes(MIN_SIZE):
        raise UserInputError(field_name, f"must be at least {MIN_SIZE}")
    if size > storage_bytes(max_size):
        raise UserInputError(field_name, f"may be at most {max_size} on this hub")
    return value.strip()


def check_source(value: Any, field_name: str = "source") -> str:
    """``s3://bucket/prefix`` or ``gs://bucket/prefix`` (prefix optional), as written: one word that
    the loader's own parser (`hub_ext.manifests.dataset_source.parse_source`) reads."""
    if value in (None, ""):
        raise UserInputError(field_name, "is required: s3://<bucket>/<prefix> or gs://<bucket>/<prefix>")
    if not isinstance(value, str):
        raise UserInputError(field_name, "must be text")
    value = value.strip()
    if any(ord(ch) < 32 or ord(ch) == 127 or ch.isspace() for ch in value):
        raise UserInputError(field_name, "must be one word: no spaces, line breaks or control characters")
    try:
        parse_source(value)
    except ValueError as e:
        raise UserInputError(field_name, str(e)) from None
    return value


def check_credential(value: Any, source: str | None, credentials: Mapping[str, str], project: str,
                     field_name: str = "credential") -> str | None:
    """The named credential (None: none, the bucket is public); it must be one of `credentials`
    (the project's: name → kind) and of the kind `source`'s scheme is read with (when the source
    is valid)."""
    if value in (None, ""):
        return None
    if not isinstance(value, str):
        raise UserInputError(field_name, "must be the name of one of the project's credentials")
    value = value.strip()
    kind = credentials.get(value)
    if kind is None:
        raise UserInputError(field_name, f"the project {project!r} has no credential named "
                                         f"{bounded(value, 40)!r}; add it on the credentials page first, or "
                                         "leave this empty for a public bucket")
    scheme = source.partition("://")[0] if source else None
    if scheme in SCHEMES and SCHEMES[scheme] != kind:
        raise UserInputError(field_name, f"a {scheme}:// source is read with an {SCHEMES[scheme]}, and "
                                         f"{value!r} is a {kind}")
    return value


def check_dataset_name(name: Any, field_name: str = "name") -> str:
    name = check_name(name, field_name)
    for prefix in RESERVED_PREFIXES:
        if name.startswith(prefix):
            raise UserInputError(field_name, f"may not start with {prefix!r}: the servers' home volumes are named so")
    return name


def check_existing_name(name: Any, field_name: str = "name") -> str:
    """A name an existing dataset PVC may have (a DNS label: one made outside the hub may be longer
    or reserved), to name it for deleting."""
    if not isinstance(name, str) or not _DNS_LABEL.fullmatch(name):
        raise UserInputError(field_name, "must be a dataset's name: 1-63 lower-case letters, digits or '-'")
    return name


def check_request(body: Any, credentials: Mapping[str, str], settings: DatasetSettings,
                  project: str) -> DatasetRequest:
    """The request in `body` (a form's or a JSON object's fields), every mistake told at once."""
    if not isinstance(body, Mapping):
        raise UserInputError("body", "must be a JSON object")
    with collect() as problems:
        name = problems.check(check_dataset_name, body.get("name"))
        source = problems.check(check_source, body.get("source"))
        credential = problems.check(check_credential, body.get("credential"), source, credentials, project)
        size = problems.check(check_size, body.get("size"), settings.max_size)
        description = problems.check(check_description, body.get("description"))
    return DatasetRequest(name, source, credential, size, description)


def dataset_label(selector: str) -> tuple[str, str]:
    """The label a dataset PVC carries for the configured selector (``key`` → ``"true"``;
    ``key=value`` → that value); `ConfigError` on ``PlatformSpawner.dataset_label`` for a selector
    that names no single label (the hub cannot make such a dataset)."""
    m = _LABEL_SELECTOR.fullmatch(selector.strip())
    if not m:
        raise ConfigError([Problem("PlatformSpawner.dataset_label", f"{selector!r} is not a selector of one label "
                                                                   "(key or key=value), so the hub cannot label the "
                                                                   "datasets it makes")])
    return m.group(1), "true" if m.group(2) is None else m.group(2)


def is_dataset(pvc: Mapping, selector: str) -> bool:
    """`pvc` carries the dataset label as `selector` asks (a bare key: any value)."""
    key, value = dataset_label(selector)
    labels = (pvc.get("metadata") or {}).get("labels") or {}
    bare = "=" not in selector
    return key in labels and (bare or labels[key] == value)


def pvc_manifest(namespace: str, request: DatasetRequest, settings: DatasetSettings, mounts: MountSettings,
                 created_by: str) -> dict:
    """The PVC of a checked request (see the module docstring)."""
    key, value = dataset_label(mounts.dataset_label)
    annotations = {mounts.source_annotation: request.source, mounts.description_annotation: request.description,
                   CREATED_BY: created_by}
    if request.credential:
        annotations[CREDENTIAL_ANNOTATION] = request.credential
    spec: dict[str, Any] = {"accessModes": list(settings.access_modes), "volumeMode": "Filesystem",
                            "resources": {"requests": {"storage": request.size}}}
    if settings.storage_class:
        spec["storageClassName"] = settings.storage_class
    return {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": request.name, "namespace": namespace, "labels": {**MANAGED_BY, key: value},
                     "annotations": annotations},
        "spec": spec,
    }


def check_may_delete(name: str, created_by: str | None, username: str, admin: bool) -> None:
    """Allow `username` to delete the dataset `name` whose PVC records `created_by`: the
    credentials' rule (`hub_ext.core.credentials.check_may_delete`), worded for a dataset."""
    credential_rule(name, created_by, username, admin, what="dataset")


def progress_of(pvc: Mapping) -> dict[str, int] | None:
    """The loader's progress numbers (`PROGRESS_KEYS`, non-negative integers; others dropped) from
    the `PROGRESS_ANNOTATION`; None without one (or when it is not a JSON object)."""
    text = ((pvc.get("metadata") or {}).get("annotations") or {}).get(PROGRESS_ANNOTATION)
    if not text:
        return None
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(doc, dict):
        return None
    out = {k: doc[k] for k in PROGRESS_KEYS
           if isinstance(doc.get(k), int) and not isinstance(doc.get(k), bool) and doc[k] >= 0}
    return out or None


def percent(progress: Mapping[str, int] | None) -> int | None:
    """How far a load is, 0-100: bytes when their total is known, else objects; None when neither is."""
    for done, total in (("bytes_done", "bytes_total"), ("objects_done", "objects_total")):
        if progress and progress.get(total):
            return max(0, min(100, progress.get(done, 0) * 100 // progress[total]))
    return None


def row_of(d: Dataset, project: str, credential: str | None = None, created_by: str | None = None,
           progress: Mapping[str, int] | None = None, deleting: bool = False) -> dict:
    """What the page and the API show of the dataset `d` of `project`."""
    loading = d.state == "loading" and not deleting
    return {"project": project, "name": d.name, "source": d.source, "credential": credential, "size": d.size,
            "description": d.description, "created_by": created_by,
            "state": "deleting" if deleting else d.state, "message": d.message,
            "progress": dict(progress) if loading and progress else None,
            "percent": percent(progress) if loading else None}


def row(pvc: Mapping, mounts: MountSettings) -> dict:
    """`row_of` a dataset PVC."""
    meta = pvc.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    return row_of(dataset_from_pvc(dict(pvc), mounts), meta.get("namespace", ""),
                  annotations.get(CREDENTIAL_ANNOTATION) or None, annotations.get(CREATED_BY) or None,
                  progress_of(pvc), bool(meta.get("deletionTimestamp")))
