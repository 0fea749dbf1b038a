"""Credentials and datasets as Kubernetes objects, and the pod volumes that mount them. Pure.

- A credential is a Secret whose ``type`` is one of the configured credential Secret types;
  `credential_from_secret` keeps its name, kind, description and file names, never its data.
  It is mounted read-only at ``<credentials_root>/<name>/`` (mode 0440, group = the pod's
  fsGroup, so the notebook user can read it and nobody else on the node; 0400 when the notebook
  runs as root; 0444 in a pod with neither an fsGroup nor root: its user could not read it otherwise). `credential_of_kind` says where a credential of a known kind is seen when only
  its name and kind are known (its Secret's metadata, not its data).
- A dataset is a PVC carrying the dataset label; annotations give its source (``s3://…`` or
  ``gs://…``) and description; its size is the PVC's capacity (or request). Its state comes from
  the ``Loaded`` condition in ``.status.conditions`` (written by the operator's dataset loader,
  `hub_ext.operator.dataset_controller`): True → ready; False with reason ``Failed`` → failed;
  otherwise → loading. Without the condition: loading when the PVC has a source (the loader has not
  started yet), ready when it has none (a dataset an admin filled). A load that has begun but not
  yet ended is not ready even while the condition still says the previous one's True: the operator
  writes ``mlplatform.io/loaded`` (`LOADED_LOAD`, the load the data is of) and ``mlplatform.io/load-id``
  (the load under way) in one request, before the condition. Mounted read-only at
  ``<datasets_root>/<name>``; a private writable copy (a claim made from the load's snapshot,
  `dataset_snapshot`) is mounted writable at the same place.
"""

from __future__ import annotations

import functools
import posixpath
from dataclasses import dataclass
from typing import Iterable, Mapping

from hub_ext.core.credentials import AWS, DESCRIPTION, GCP
from hub_ext.core.mounts import Credential, Dataset
from hub_ext.core.slugs import safe_slug

LOADED = "Loaded"
SOURCE = "mlplatform.io/source"
LOAD_ID = "mlplatform.io/load-id"  # which load the Loaded condition describes (the operator's)
SNAPSHOT = "mlplatform.io/snapshot"  # the ready VolumeSnapshot of a load (hub_ext.operator.snapshots)
LOADED_LOAD = "mlplatform.io/loaded"  # the load whose data the dataset holds (the operator's, once loaded)


@dataclass(frozen=True)
class MountSettings:
    credential_types: Mapping[str, str]  # kind ("gcp-credential") → Secret type
    credentials_root: str = "/etc/mlplatform/credentials"
    datasets_root: str = "/datasets"
    dataset_label: str = "mlplatform.io/dataset"
    source_annotation: str = SOURCE
    description_annotation: str = DESCRIPTION

    @functools.cached_property
    def kind_by_type(self) -> dict[str, str]:
        return {secret_type: kind for kind, secret_type in self.credential_types.items()}


def credential_from_secret(secret: dict, settings: MountSettings) -> Credential | None:
    kind = settings.kind_by_type.get(secret.get("type", ""))
    if kind is None:
        return None
    meta = secret["metadata"]
    keys = set((secret.get("data") or {}) | (secret.get("stringData") or {}))
    description = (meta.get("annotations") or {}).get(settings.description_annotation, "")
    return credential_of_kind(meta["name"], kind, settings, "config" in keys, description)


def credential_of_kind(name: str, kind: str, settings: MountSettings, has_config: bool = True,
                       description: str = "") -> Credential:
    """The credential `name` of `kind` (``gcp-credential`` | ``aws-credential``), where
    `credential_from_secret` puts it; `has_config`: an AWS credential has a config file. For a
    caller that read only the Secret's metadata (the pod webhook), the default names the config
    file whether it exists or not (the AWS SDKs read a missing config file as an empty one)."""
    base = f"{settings.credentials_root}/{name}"
    if kind == GCP:
        return Credential(name, GCP, f"{base}/key.json", None, description)
    if kind == AWS:
        return Credential(name, AWS, f"{base}/credentials", f"{base}/config" if has_config else None, description)
    raise ValueError(f"unknown credential kind {kind!r}")


def dataset_state(pvc: dict, source_annotation: str = SOURCE) -> tuple[str, str]:
    """(state, message) of a dataset PVC: see the module docstring."""
    annotations = (pvc.get("metadata") or {}).get("annotations") or {}
    for cond in (pvc.get("status") or {}).get("conditions") or []:
        if cond.get("type") == LOADED:
            if cond.get("status") == "True":
                if LOADED_LOAD in annotations and annotations[LOADED_LOAD] != annotations.get(LOAD_ID):
                    return "loading", "a new load is starting"
                return "ready", ""
            state = "failed" if cond.get("reason") == "Failed" else "loading"
            return state, cond.get("message") or ""
    if annotations.get(source_annotation):
        return "loading", "waiting for the loader to start"
    return "ready", ""


def snapshot_suffix(load_id: str) -> str:
    """How the name of a load's snapshot ends (`hub_ext.operator.snapshots.snapshot_name`)."""
    return f"-snap-{load_id}"


def dataset_snapshot(pvc: dict) -> str:
    """The VolumeSnapshot copies of this dataset are made from: the one the operator named once
    ready, if it is of the load the ``Loaded`` condition describes ("" otherwise)."""
    annotations = (pvc.get("metadata") or {}).get("annotations") or {}
    snapshot, load_id = annotations.get(SNAPSHOT, ""), annotations.get(LOAD_ID, "")
    return snapshot if snapshot and load_id and snapshot.endswith(snapshot_suffix(load_id)) else ""


def dataset_from_pvc(pvc: dict, settings: MountSettings) -> Dataset:
    meta = pvc["metadata"]
    annotations = meta.get("annotations") or {}
    size = ((pvc.get("status") or {}).get("capacity") or {}).get("storage") or \
        (((pvc.get("spec") or {}).get("resources") or {}).get("requests") or {}).get("storage", "")
    state, message = dataset_state(pvc, settings.source_annotation)
    return Dataset(meta["name"], f"{settings.datasets_root}/{meta['name']}", state, message,
                   annotations.get(settings.source_annotation, ""),
                   annotations.get(settings.description_annotation, ""), size,
                   dataset_snapshot(pvc) if state == "ready" else "")


def volumes(credentials: Iterable[Credential], datasets: Iterable[Dataset], settings: MountSettings,
            run_as_root: bool = False, fs_group: bool = True) -> tuple[list[dict], list[dict]]:
    """(pod volumes, container volumeMounts) for the chosen credentials and datasets; `fs_group`:
    whether the pod has an fsGroup (without one a credential is 0444: its user, whoever the image
    makes it, must read it; the node's pod directory is the kubelet's alone)."""
    vols, mounts = [], []
    mode = 0o400 if run_as_root else 0o440 if fs_group else 0o444
    for c in credentials:
        vol = f"credential-{safe_slug(c.name, max_length=50)}"
        vols.append({"name": vol, "secret": {"secretName": c.name, "defaultMode": mode}})
        # the directory its paths name (`credential_from_secret` puts them under the root), so a path
        # that came from elsewhere (a hub with another root, through the platform API) is where it says
        mounts.append({"name": vol, "mountPath": posixpath.dirname(c.path), "readOnly": True})
    for d in datasets:  # a writable copy (`Dataset.copy`) is its own claim, at the dataset's path
        vol = f"dataset-{safe_slug(d.name, max_length=52)}"
        vols.append({"name": vol, "persistentVolumeClaim": {"claimName": d.claim or d.name, "readOnly": not d.copy}})
        mounts.append({"name": vol, "mountPath": d.path, "readOnly": not d.copy})
    return vols, mounts
