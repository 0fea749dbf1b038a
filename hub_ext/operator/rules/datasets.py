"""Datasets as the loader controller sees them: a dataset PVC read, its loader Job, and what the
controller writes back on the PVC. Pure: no I/O, no kopf (`dataset_controller` does the I/O).

A dataset is a PVC in a project namespace carrying the dataset label
(`MountSettings.dataset_label`) and these annotations (`read_dataset`):

- the source (`MountSettings.source_annotation`, ``mlplatform.io/source``): ``s3://bucket/prefix``
  or ``gs://bucket/prefix`` (`parse_source`); the prefix names a folder (``s3://b/images`` loads
  ``images/…``, never ``images-old/…``), an empty one the whole bucket. A PVC with the label and
  no source is a dataset an admin filled: `read_dataset` answers None and the controller leaves it
  alone;
- ``mlplatform.io/credential`` (`CREDENTIAL_ANNOTATION`, optional): the name of a credential
  Secret of the project, of the kind the scheme needs (an aws-credential for ``s3://``, a
  gcp-credential for ``gs://``; `credential_for`); without it the bucket is read anonymously
  (public buckets);
- ``mlplatform.io/refresh`` (`REFRESH_ANNOTATION`, optional): any token; changing it loads again.

A bad annotation is a `UserInputError` whose field is the annotation's name (the controller
writes it as a Failed condition; the message never quotes more than a bounded part of a value).

A load is identified by `DatasetSpec.load_id`, a hash of the PVC's uid, the source, the
credential and the refresh token: a changed source, credential or refresh is a new load (a new
Job), and a PVC deleted and made again under the same name never meets the old one's Job. Its
loader Job (`loader_job`) is named `DatasetSpec.job_name`, deterministic, so a restarted operator
finds the Job it made instead of making a second one. The Job is owned by the PVC (garbage
collected with it), labelled ``mlplatform.io/dataset-loader: <pvc>`` (`LOADER_LABEL`, on its pods
too: what exempts them from dataset gating) and ``mlplatform.io/dataset-load: <load id>``
(`LOAD_LABEL`), and its pods opt out of the credential webhook (the loader mounts its one
credential itself, as the spawner does: `hub_ext.manifests.mounts.volumes`). The Job retries a failed
pod with the Job controller's backoff (`BACKOFF_LIMIT`), except that the loader's exit code
`EXIT_PERMANENT` (a wrong credential, a missing bucket: retrying cannot help) fails the Job at
once (`podFailurePolicy`).

What the controller writes on the PVC:

- ``.status.conditions[type=Loaded]`` (`loaded_condition`, through the status subresource):
  False/``Loading`` with a progress message ("12 of 1000 objects, 1.2 MB of 100 MB"),
  True/``Loaded``, or False/``Failed`` with the loader's reason; ``lastTransitionTime`` moves only
  when the status does (the API conventions). `hub_ext.manifests.mounts.dataset_state` reads it;
- ``mlplatform.io/load-id`` (`LOAD_ID_ANNOTATION`): which load the condition describes. A PVC
  condition has no ``observedGeneration`` (the API server drops the unknown field of this core
  type) and a PVC's generation does not move with its annotations anyway, so this annotation
  plays its part;
- ``mlplatform.io/progress`` (`PROGRESS_ANNOTATION`): the loader's last progress line as JSON
  (`parse_progress`: ``phase``, ``objects_done``, ``objects_total``, ``bytes_done``,
  ``bytes_total``; ``reason`` and ``error`` after a failure), for the hub's pages.

The loader's output (`server_ext.datasets.load`, which imports the names it shares from here):
one JSON object a line on stdout, the last one the state; exit 0 done, `EXIT_PERMANENT` for a
failure the user must fix, 1 for one a retry may cure.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Iterable, Mapping

from hub_ext.core.credentials import KIND_LABEL, check_name
from hub_ext.core.errors import UserInputError, bounded
from hub_ext.core.mounts import Available, Credential, select
from hub_ext.manifests.dataset_source import (  # noqa: F401  (the operator reads a PVC by these names too)
    CREDENTIAL_ANNOTATION, PROGRESS_ANNOTATION, SCHEMES, Source, parse_source)
from hub_ext.manifests.mounts import LOAD_ID, LOADED, LOADED_LOAD, MountSettings, credential_of_kind, volumes
from hub_ext.operator.rules.settings import OperatorSettings

REFRESH_ANNOTATION = "mlplatform.io/refresh"
LOAD_ID_ANNOTATION = LOAD_ID
LOADER_LABEL = "mlplatform.io/dataset-loader"
LOAD_LABEL = "mlplatform.io/dataset-load"
CONTAINER = "loader"
DEST = "/mnt/dataset"  # where the loader's container mounts the PVC (read-write)
BACKOFF_LIMIT = 4
EXIT_PERMANENT = 2
LOADER_MODULE = "server_ext.datasets.load"
# what one loader may use (a project's quota counts it); memory is bounded by the threads' buffers
LOADER_RESOURCES = {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}}
LOADER_USER, LOADER_GROUP = 1000, 100  # the notebook user's ids: files it writes are theirs to read

LOADING, LOADED_REASON, FAILED = "Loading", "Loaded", "Failed"
MAX_NAME = 63  # the PVC's name is a label value (LOADER_LABEL)


# -- the dataset PVC --------------------------------------------------------------------------------

@dataclass(frozen=True)
class DatasetSpec:
    namespace: str
    name: str
    uid: str
    source: Source
    credential: str | None
    refresh: str = ""

    @property
    def load_id(self) -> str:
        what = json.dumps([self.uid, self.source.uri, self.credential or "", self.refresh])
        return hashlib.sha256(what.encode()).hexdigest()[:10]

    @property
    def job_name(self) -> str:
        """``<pvc>-load-<load id>``, the PVC's name cut so the whole stays a valid label value."""
        base = self.name.replace(".", "-")[:MAX_NAME - len("-load-") - 10].rstrip("-")
        return f"{base}-load-{self.load_id}"


def read_dataset(pvc: Mapping, mounts: MountSettings) -> DatasetSpec | None:
    """The dataset a labelled PVC describes; None when it has no source (an admin filled it).
    A bad annotation or name: `UserInputError` whose field is the annotation (or metadata.name)."""
    meta = pvc.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    uri = annotations.get(mounts.source_annotation)
    if uri is None:
        return None
    if len(meta.get("name") or "") > MAX_NAME:
        raise UserInputError("metadata.name", f"a dataset loaded from a source has a name of at most {MAX_NAME} "
                                              "characters")
    try:
        source = parse_source(uri)
    except ValueError as e:
        raise UserInputError(mounts.source_annotation, str(e)) from None
    credential = annotations.get(CREDENTIAL_ANNOTATION) or None
    if credential is not None:
        check_name(credential, CREDENTIAL_ANNOTATION, new=False)
    refresh = annotations.get(REFRESH_ANNOTATION) or ""
    if len(refresh) > 253:
        raise UserInputError(REFRESH_ANNOTATION, "must be at most 253 characters")
    return DatasetSpec(meta["namespace"], meta["name"], meta["uid"], source, credential, refresh)


def credential_for(spec: DatasetSpec, secret_meta: Mapping | None, mounts: MountSettings) -> Credential | None:
    """The credential to mount, from the metadata of the Secret the PVC names (None: no such
    Secret); `UserInputError` on `CREDENTIAL_ANNOTATION` when it is missing or of the wrong kind."""
    if spec.credential is None:
        return None
    where = f"the project {spec.namespace!r}"
    if secret_meta is None:
        raise UserInputError(CREDENTIAL_ANNOTATION, f"there is no credential {spec.credential!r} in {where}; add it "
                                                    "(the load starts once it exists)")
    kind = ((secret_meta.get("metadata") or {}).get("labels") or {}).get(KIND_LABEL)
    if kind not in mounts.credential_types:
        raise UserInputError(CREDENTIAL_ANNOTATION, f"the Secret {spec.credential!r} is not a credential (it has no "
                                                    f"label {KIND_LABEL} of a credential kind)")
    if kind != spec.source.kind:
        raise UserInputError(CREDENTIAL_ANNOTATION, f"the credential {spec.credential!r} is a {kind}; an "
                                                    f"{spec.source.scheme}:// source needs a {spec.source.kind}")
    return credential_of_kind(spec.credential, kind, mounts)


# -- the loader Job ---------------------------------------------------------------------------------

def loader_labels(spec: DatasetSpec) -> dict[str, str]:
    return {LOADER_LABEL: spec.name, LOAD_LABEL: spec.load_id}


def loader_job(spec: DatasetSpec, credential: Credential | None, settings: OperatorSettings,
               volume: str | None = None) -> dict:
    """The batch/v1 Job that loads `spec` into its PVC, or into `volume`, the claim the load was given
    (`volumes`; see the module docstring)."""
    creds = (credential,) if credential else ()
    vols, mounts = volumes(creds, (), settings.mounts)
    env = select(Available(credentials=creds), [c.name for c in creds], None, spec.namespace)
    if settings.s3_endpoint:
        env["AWS_ENDPOINT_URL_S3"] = settings.s3_endpoint
    if settings.gcs_endpoint:
        env["STORAGE_EMULATOR_HOST"] = settings.gcs_endpoint
    labels = loader_labels(spec)
    container = {
        "name": CONTAINER, "image": settings.loader_image,
        "command": [*settings.loader_python, *loader_args(spec)],
        "env": [{"name": k, "value": v} for k, v in sorted(env.items())],
        "volumeMounts": [{"name": "dataset", "mountPath": DEST}, *mounts],
        "resources": LOADER_RESOURCES,
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                            "readOnlyRootFilesystem": True, "runAsNonRoot": True,
                            "seccompProfile": {"type": "RuntimeDefault"}},
    }
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": spec.job_name, "namespace": spec.namespace, "labels": labels,
                     "annotations": {settings.mounts.source_annotation: spec.source.uri},
                     "ownerReferences": [{"apiVersion": "v1", "kind": "PersistentVolumeClaim", "name": spec.name,
                                          "uid": spec.uid, "controller": True}]},
        "spec": {
            "backoffLimit": BACKOFF_LIMIT,
            "podFailurePolicy": {"rules": [
                {"action": "FailJob", "onExitCodes": {"containerName": CONTAINER, "operator": "In",
                                                      "values": [EXIT_PERMANENT]}},
                {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]},
            "template": {
                "metadata": {"labels": labels, "annotations": {settings.inject_annotation: "false"}},
                "spec": {
                    "restartPolicy": "Never",
                    "serviceAccountName": settings.loader_service_account,
                    "automountServiceAccountToken": False,
                    "securityContext": {"runAsNonRoot": True, "runAsUser": LOADER_USER, "runAsGroup": LOADER_GROUP,
                                        "fsGroup": LOADER_GROUP, "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [container],
                    "volumes": [{"name": "dataset", "persistentVolumeClaim": {"claimName": volume or spec.name}},
                                *vols],
                },
            },
        },
    }


def decided(pvc: Mapping, load_id: str, complete: bool) -> bool:
    """The claim already says how the load `load_id` ended (``Loaded`` True for a `complete` Job,
    ``Failed`` for a failed one), so there is nothing to write or count again."""
    cond = condition_of(pvc)
    annotations = (pvc.get("metadata") or {}).get("annotations") or {}
    if annotations.get(LOAD_ID_ANNOTATION) != load_id or not cond:
        return False
    if complete:  # and the annotation that makes it ready, written after the condition
        return cond.get("status") == "True" and annotations.get(LOADED_LOAD, load_id) == load_id
    return cond.get("reason") == FAILED


def owned_by(job: Mapping, uid: str) -> bool:
    """The Job's controller is the PVC of `uid` (a Job of that label made by anyone else is not ours)."""
    return any(ref.get("uid") == uid and ref.get("controller") for ref in
               (job.get("metadata") or {}).get("ownerReferences") or [])


def loader_args(spec: DatasetSpec) -> list[str]:
    """The loader's command after the Python interpreter."""
    return ["-m", LOADER_MODULE, "--source", spec.source.uri, "--dest", DEST]


def is_loader_of(job: Mapping, spec: DatasetSpec) -> bool:
    """`job` is a loader Job of `spec`'s load (its owner, load label and the loader's arguments;
    not the image or interpreter, so an operator upgraded mid-load adopts the running Job): one
    found under its name is adopted only then."""
    meta = job.get("metadata") or {}
    containers = (((job.get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers") or [{}]
    command = containers[0].get("command") or []
    return owned_by(job, spec.uid) and (meta.get("labels") or {}).get(LOAD_LABEL) == spec.load_id and \
        containers[0].get("name") == CONTAINER and command[-len(loader_args(spec)):] == loader_args(spec)


def job_state(job: Mapping) -> str:
    """"complete", "failed" or "running" (a Job's final conditions)."""
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("status") == "True" and cond.get("type") in ("Complete", "Failed"):
            return "complete" if cond["type"] == "Complete" else "failed"
    return "running"


# -- progress and conditions ------------------------------------------------------------------------

def parse_progress(lines: Iterable[str]) -> dict | None:
    """The last line that is a loader progress object (a JSON object with a ``phase``), or None."""
    for line in reversed(list(lines)):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict) and isinstance(doc.get("phase"), str):
            return doc
    return None


def size_text(n: object) -> str:
    """Bytes in decimal units, as storage consoles show them: 1.2 MB, 100 MB, 950 B."""
    if not isinstance(n, int) or n < 0:
        return "?"
    value, unit = float(n), "B"
    for unit in ("B", "kB", "MB", "GB", "TB", "PB"):
        if value < 1000 or unit == "PB":
            break
        value /= 1000
    if unit == "B":
        return f"{n} B"
    text = f"{value:.1f}"
    return f"{text[:-2] if text.endswith('.0') else text} {unit}"


def progress_message(progress: Mapping | None, source: str) -> str:
    """The Loading condition's message for the loader's last line."""
    if not progress:
        return "waiting for the loader to start"
    phase = progress.get("phase")
    if phase == "listing":
        return f"listing the objects of {source} ({progress.get('objects_listed', 0)} so far)"
    if phase == "failed":
        return f"the last attempt failed ({progress.get('reason', 'Error')}: {progress.get('error', '')}); retrying"
    return (f"{progress.get('objects_done', 0)} of {progress.get('objects_total', '?')} objects, "
            f"{size_text(progress.get('bytes_done'))} of {size_text(progress.get('bytes_total'))}")


def loaded_message(progress: Mapping | None, source: str) -> str:
    if progress and progress.get("phase") == "done":
        return f"{progress.get('objects_total', 0)} objects, {size_text(progress.get('bytes_total'))} from {source}"
    return f"loaded from {source}"


def failed_message(progress: Mapping | None, pod: Mapping | None, job: Mapping | None) -> str:
    """Why a load failed: the loader's own error line, else what Kubernetes says of its pod or Job."""
    if progress and progress.get("phase") == "failed" and progress.get("error"):
        return str(progress["error"])
    for st in ((pod or {}).get("status") or {}).get("containerStatuses") or []:
        term = (st.get("state") or {}).get("terminated") or {}
        if term.get("reason") == "OOMKilled":
            return "the loader ran out of memory (OOMKilled)"
        if term:
            name = (pod or {}).get("metadata", {}).get("name")
            return f"the loader exited with code {term.get('exitCode')} without saying why; see the log of the pod {name}"
    for cond in ((job or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Failed" and cond.get("status") == "True":
            return f"the loader Job failed: {cond.get('message') or cond.get('reason') or 'no reason given'}"
    return "the loader failed"


def waiting_message(pod: Mapping | None) -> str | None:
    """Why the loader's pod has not started, when Kubernetes says (a missing Secret, no node)."""
    status = (pod or {}).get("status") or {}
    for st in status.get("containerStatuses") or []:
        waiting = (st.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") and waiting["reason"] not in ("ContainerCreating", "PodInitializing"):
            return f"the loader is waiting: {waiting['reason']}" + (f": {waiting['message']}"
                                                                    if waiting.get("message") else "")
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False" and cond.get("message"):
            return f"the loader is waiting for a node: {cond['message']}"
    return None


def condition_of(pvc: Mapping) -> dict | None:
    for cond in (pvc.get("status") or {}).get("conditions") or []:
        if cond.get("type") == LOADED:
            return dict(cond)
    return None


def loaded_condition(status: bool, reason: str, message: str, now: str, previous: Mapping | None) -> dict:
    """The `Loaded` condition; ``lastTransitionTime`` kept from `previous` unless the status changes."""
    value = "True" if status else "False"
    since = previous.get("lastTransitionTime") if previous and previous.get("status") == value else None
    return {"type": LOADED, "status": value, "reason": reason, "message": bounded(message, 1000),
            "lastTransitionTime": since or now}


def same_condition(a: Mapping | None, b: Mapping | None) -> bool:
    keys = ("status", "reason", "message")
    return a is not None and b is not None and all(a.get(k) == b.get(k) for k in keys)


def progress_annotation(progress: Mapping | None) -> str:
    return json.dumps(dict(progress or {}), sort_keys=True, separators=(",", ":"))
