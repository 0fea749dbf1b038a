"""What the operator's two admission webhooks decide. Pure: no I/O, no kopf (`webhooks` serves them).

Credential Secrets (`check_secret`, the validating webhook ``credential-secrets``): a Secret whose
``type`` is one of the configured credential types (`MountSettings.credential_types`) must

- have a credential name (`hub_ext.core.credentials.check_name`; on CREATE not a reserved one; an
  UPDATE keeps the name it has);
- carry the kind label ``mlplatform.io/credential`` equal to its kind (the hub writes it; the pod
  webhook learns a credential's kind from its metadata alone, by this label);
- hold files the hub page's own validator accepts (`hub_ext.core.credentials.validate_files` on the
  decoded ``data`` and ``stringData``), each at most 64 KiB.

A refusal is a `UserInputError` naming the field (``metadata.name``,
``metadata.labels[mlplatform.io/credential]``, ``data.key.json.private_key``, …) with a message
that never contains any part of a value. An UPDATE that changes neither the data nor the kind
label is allowed as it is (the webhook checks what a request changes: a Secret stored before the
webhook can still be annotated or have its finalizers removed; the pod webhook will not mount it
until it is labelled). Secrets of other types are never looked at.

Pods (`requested`, `mount_ops`, the mutating webhook ``credential-mounts``): a pod asks for
credentials by the annotation ``mlplatform.io/credentials: a,b`` (`OperatorSettings.
credentials_annotation`), on itself or on its ServiceAccount. The opt-out annotation
``mlplatform.io/inject-credentials: "false"`` on the pod skips its ServiceAccount's credentials;
the pod's own annotation is still honoured (both are written by the pod's author, and the explicit
list is the more specific wish). Each credential is mounted as the spawner mounts it
(`hub_ext.manifests.mounts.volumes`: read-only, at ``<credentials_root>/<name>/``) into every
container and init container, with the environment the spawner computes for it
(`hub_ext.core.mounts.select`: ``GOOGLE_APPLICATION_CREDENTIALS``, ``AWS_SHARED_CREDENTIALS_FILE``,
``AWS_CONFIG_FILE``; paths only). Because the webhook reads a Secret's metadata and never its
data, ``AWS_CONFIG_FILE`` names the config file of every AWS credential, whether it has one or
not (`kube_mounts.credential_of_kind`).

`mount_ops` is idempotent, so reinvocation and pods the spawner or the job translation already
gave credentials get nothing twice: a Secret some volume already holds (``secret.secretName`` or a
projected source) is not given a second volume, a container that already has a mount at the
credential's directory gets no other, and a variable a container sets already is left as it is
(its own value wins). Refused (a `UserInputError` naming the annotation and the credential): a
name that is not a credential name or is reserved (`credentials.check_name`), a credential that
does not exist, a Secret that is not a credential (no kind label of a configured kind), two
credentials of one kind (one variable each), and a volume name the pod already uses otherwise.

The webhook is not a privilege boundary: it mounts only Secrets of the pod's own namespace, which
the pod's author could mount by hand; the project policies (helm-values/project-policies.yaml)
still judge the mutated pod.

Datasets (`claims`, `loader_claim`, `read_only_ops`, the same mutating webhook): a dataset PVC is
written only by its loader, so every other pod that mounts one gets it read-only, whatever its
author wrote: ``persistentVolumeClaim.readOnly`` on the volume and ``readOnly`` on each container's
mount of it. The loader's own pod keeps its mount writable; it is known by its owner, not by a
label anyone could copy: its controller is a Job (`loader_claim`: the Job's name, the claim its
label names) that carries ``mlplatform.io/dataset-loader: <claim>`` and the claim's current load
id, and is owned by that claim (the webhook reads the Job; the ValidatingAdmissionPolicy
``mlplatform-dataset-loaders`` lets only the operator make Jobs with that label), and the pod was
made by the Job controller (`OperatorSettings.job_controller_users`: anyone may write an
ownerReference naming the Job on a pod of their own).
A dataset's data may live on another claim than the dataset's own (a reload while pods read it:
`volumes`); every mount of any of its volumes is pointed at the current one (`volumes.rewrite_ops`)
and made read-only the same way.

Private copies of a dataset (`refuse_foreign_copies`): a claim labelled
``mlplatform.io/dataset-copy-of`` is one job's or one notebook server's own writable copy, and only
that job's or server's pods mount it: a job's copy is owned by the job object (an ownerReference the
jobs service writes; members cannot change claims), so the pod's controller must be that object
(the Job or training-job controller sets a pod's ownerReference, members make no pods themselves);
a server's copy has no owner and is named for its pod (`dataset_copies.claim_name`), so only the pod
of that name mounts it. A teammate's Job naming another's copy gets no pod, and neither does a pod
naming a claim ``…-copy`` that does not exist yet (it could not be told from one waiting for a copy
still to be made for someone else; a job's own pod is made again by its controller once it exists).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Iterable, Mapping

from hub_ext.core.credentials import KIND_LABEL, MAX_BYTES, check_name, validate_files
from hub_ext.core.errors import UserInputError
from hub_ext.core.mounts import Available, select
from hub_ext.manifests.dataset_copies import COPY_OF_LABEL, claim_name
from hub_ext.manifests.mounts import MountSettings, credential_of_kind, volumes
from hub_ext.operator.rules.settings import OperatorSettings

LABEL_FIELD = f"metadata.labels[{KIND_LABEL}]"


# ---- credential Secrets ----------------------------------------------------------------------------

def check_secret(secret: Mapping, old: Mapping | None, mounts: MountSettings) -> str | None:
    """The credential kind of `secret` (None: not of a credential type, nothing checked), once it
    is valid; `old`: the stored Secret on UPDATE (None on CREATE). Raises `UserInputError`."""
    kind = mounts.kind_by_type.get(secret.get("type") or "")
    if kind is None:
        return None
    meta = secret.get("metadata") or {}
    if old is not None and _credential_part(old) == _credential_part(secret):
        return kind
    check_name(meta.get("name"), "metadata.name", new=old is None)
    label = (meta.get("labels") or {}).get(KIND_LABEL)
    if label != kind:
        raise UserInputError(LABEL_FIELD, f"must be {kind!r} on a Secret of type {secret['type']!r} (the hub sets "
                                          f"it; made another way, add the label {KIND_LABEL}: {kind} to its "
                                          "metadata.labels)")
    files = secret_files(secret)
    try:
        validate_files(kind, files)
    except UserInputError as e:
        field = e.field if e.field.startswith("data.") else f"data.{e.field}"
        raise UserInputError(field, e.message, e.status) from None
    return kind


def _credential_part(secret: Mapping) -> tuple:
    labels = (secret.get("metadata") or {}).get("labels") or {}
    return (secret.get("type"), dict(secret.get("data") or {}), dict(secret.get("stringData") or {}),
            labels.get(KIND_LABEL))


def secret_files(secret: Mapping) -> dict[str, str]:
    """A Secret's files as text: ``data`` decoded, then ``stringData`` over it (as the API server
    merges them). Raises `UserInputError` on ``data.<key>`` for what is not base64 or UTF-8 text,
    or larger than `MAX_BYTES`."""
    files: dict[str, str] = {}
    for key, value in (secret.get("data") or {}).items():
        try:
            raw = base64.b64decode(value if isinstance(value, str) else "?", validate=True)
        except (binascii.Error, ValueError):
            raise UserInputError(f"data.{key}", "is not base64") from None
        files[key] = _text(key, raw)
    for key, value in (secret.get("stringData") or {}).items():
        if not isinstance(value, str):
            raise UserInputError(f"stringData.{key}", "must be text")
        files[key] = _text(key, value.encode())
    return files


def _text(key: str, raw: bytes) -> str:
    if len(raw) > MAX_BYTES:
        raise UserInputError(f"data.{key}", f"is larger than {MAX_BYTES // 1024} KiB")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise UserInputError(f"data.{key}", "is not UTF-8 text") from None


# ---- pods ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Asked:
    """A credential a pod asks for, and where it asked (the field a refusal names)."""
    name: str
    source: str


def service_account(pod: Mapping) -> str:
    spec = pod.get("spec") or {}
    return spec.get("serviceAccountName") or spec.get("serviceAccount") or "default"


def pod_field(settings: OperatorSettings) -> str:
    return f"metadata.annotations[{settings.credentials_annotation}]"


def account_field(pod: Mapping, settings: OperatorSettings) -> str:
    return f"the ServiceAccount {service_account(pod)}'s metadata.annotations[{settings.credentials_annotation}]"


def uses_account(pod: Mapping, settings: OperatorSettings) -> bool:
    """Whether the pod's ServiceAccount's credentials apply (the pod has not opted out)."""
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(settings.inject_annotation, "")
    return value.strip().lower() != "false"


def requested(pod: Mapping, account_annotations: Mapping[str, str] | None,
              settings: OperatorSettings) -> tuple[Asked, ...]:
    """The credentials the pod asks for: its own annotation's, then its ServiceAccount's (given as
    `account_annotations`, ignored when the pod opts out), each name once. Raises `UserInputError`
    on the annotation for a name that is not a credential's or is reserved."""
    asked: dict[str, Asked] = {}
    own = ((pod.get("metadata") or {}).get("annotations") or {}).get(settings.credentials_annotation)
    sources = [(own, pod_field(settings))]
    if uses_account(pod, settings):
        sources.append(((account_annotations or {}).get(settings.credentials_annotation), account_field(pod, settings)))
    for value, source in sources:
        for name in _names(value, source):
            asked.setdefault(name, Asked(name, source))
    return tuple(asked.values())


def _names(value: str | None, source: str) -> list[str]:
    names = []
    for word in (value or "").split(","):
        name = word.strip()
        if not name:
            continue
        try:
            check_name(name, source, new=True)
        except UserInputError as e:
            raise UserInputError(source, f"{name!r}: {e.message}") from None
        names.append(name)
    return names


def mount_ops(pod: Mapping, asked: Iterable[Asked], kinds: Mapping[str, str | None],
              settings: OperatorSettings) -> list[dict]:
    """The JSON Patch (RFC 6902) operations that mount the `asked` credentials into `pod`; [] when
    nothing is missing. `kinds`: each asked name → its Secret's kind label ("" without one; None:
    no such Secret). Raises `UserInputError` naming where the credential was asked for."""
    asked = tuple(asked)
    if not asked:
        return []
    namespace = (pod.get("metadata") or {}).get("namespace") or ""
    creds = []
    for a in asked:
        kind = kinds.get(a.name)
        if kind is None:
            raise UserInputError(a.source, f"the credential {a.name!r} does not exist in the namespace {namespace!r}")
        if kind not in settings.mounts.credential_types:
            known = " or ".join(sorted(settings.mounts.credential_types))
            detail = f"its label {KIND_LABEL} is {kind!r}" if kind else f"it has no label {KIND_LABEL}"
            raise UserInputError(a.source, f"the Secret {a.name!r} is not a credential ({detail}; a credential is "
                                           f"a Secret labelled {known})")
        creds.append(credential_of_kind(a.name, kind, settings.mounts))
    try:
        env = select(Available(credentials=tuple(creds)), [c.name for c in creds], None, namespace)
    except UserInputError as e:  # field ``credentials[i]``: two of one kind
        index = int(e.field.partition("[")[2].rstrip("]") or 0)
        raise UserInputError(asked[index].source, e.message) from None
    spec = pod.get("spec") or {}
    pod_sc = spec.get("securityContext") or {}
    run_as_root = pod_sc.get("runAsUser") == 0
    vols, mounts = volumes(creds, (), settings.mounts, run_as_root, fs_group=pod_sc.get("fsGroup") is not None)
    ops: list[dict] = []
    held = _volumes_by_secret(spec.get("volumes") or [])
    partly = _held_in_part(spec.get("volumes") or [])
    names = {v.get("name") for v in spec.get("volumes") or []}
    new_vols, wanted = [], []
    for a, cred, vol, mount in zip(asked, creds, vols, mounts):
        if cred.name not in held and cred.name in partly:
            raise UserInputError(a.source, f"the pod already mounts the credential {cred.name!r} in part (volume "
                                           f"{partly[cred.name]!r}, through items); mount all its keys or do not ask "
                                           "for it")
        if cred.name in held:
            mount = {**mount, "name": held[cred.name]}
        elif vol["name"] in names:
            raise UserInputError("spec.volumes", f"the pod has a volume named {vol['name']!r} already, which is the "
                                                 f"name the credential {cred.name!r} is mounted by; rename it")
        else:
            new_vols.append(vol)
            names.add(vol["name"])
        wanted.append(mount)
    ops += _appended("/spec/volumes", spec.get("volumes"), new_vols)
    env_items = [{"name": k, "value": v} for k, v in sorted(env.items())]
    for group in ("initContainers", "containers"):
        for i, container in enumerate(spec.get(group) or []):
            at = {(m.get("mountPath") or "").rstrip("/") for m in container.get("volumeMounts") or []}
            set_vars = {e.get("name") for e in container.get("env") or []}
            ops += _appended(f"/spec/{group}/{i}/volumeMounts", container.get("volumeMounts"),
                             [m for m in wanted if m["mountPath"].rstrip("/") not in at])
            ops += _appended(f"/spec/{group}/{i}/env", container.get("env"),
                             [e for e in env_items if e["name"] not in set_vars])
    return ops


def claims(pod: Mapping) -> set[str]:
    """The PVCs the pod mounts (``persistentVolumeClaim.claimName`` of its volumes)."""
    return {(v.get("persistentVolumeClaim") or {}).get("claimName") for v in (pod.get("spec") or {}).get("volumes") or []
            if (v.get("persistentVolumeClaim") or {}).get("claimName")}


def refuse_foreign_copies(pod: Mapping, found: Mapping[str, Mapping | None]) -> None:
    """`UserInputError` (403) when the pod mounts a claim of `found` (claim name → the claim as read)
    that is another job's or server's private copy of a dataset."""
    meta = pod.get("metadata") or {}
    owners = {r.get("uid") for r in meta.get("ownerReferences") or [] if r.get("controller") and r.get("uid")}
    for name, claim in sorted(found.items()):
        if claim is None and name.endswith("-copy"):  # named as a copy, not made yet: whose it is is unknown
            raise UserInputError("spec.volumes", f"the claim {name} does not exist yet (a dataset's copy is made "
                                 "right after its job: the job's controller tries again)", 403)
        cmeta = (claim or {}).get("metadata") or {}
        dataset = (cmeta.get("labels") or {}).get(COPY_OF_LABEL)
        if not dataset:
            continue
        claim_owners = {r.get("uid") for r in cmeta.get("ownerReferences") or [] if r.get("uid")}
        ours = bool(owners & claim_owners) if claim_owners else \
            bool(meta.get("name")) and claim_name(meta["name"], dataset) == name
        if not ours:
            raise UserInputError("spec.volumes", f"the claim {name} is another job's or notebook server's private "
                                 f"copy of the dataset {dataset}: ask for your own copy ({dataset}:copy)", 403)


def loader_claim(pod: Mapping, loader_label: str) -> tuple[str, str, str] | None:
    """(Job name, Job uid, dataset claim) when the pod says it is a dataset loader: labelled
    `loader_label` (the dataset's name; it mounts that claim or one of its volumes, `volumes`) and
    controlled by a batch/v1 Job; else None. Whether that Job is the dataset's loader is for the
    caller to read."""
    meta = pod.get("metadata") or {}
    claim = (meta.get("labels") or {}).get(loader_label)
    owner = next((r for r in meta.get("ownerReferences") or [] if r.get("controller")), None)
    if not claim or not owner or owner.get("kind") != "Job" or \
            owner.get("apiVersion") != "batch/v1":
        return None
    return owner.get("name", ""), owner.get("uid", ""), claim


def read_only_ops(pod: Mapping, datasets: Iterable[str]) -> list[dict]:
    """The JSON Patch operations that make every mount of the claims `datasets` read-only (indices
    of the pod as it is: apply them before any operation that appends)."""
    datasets = set(datasets)
    spec = pod.get("spec") or {}
    ops, volume_names = [], set()
    for i, v in enumerate(spec.get("volumes") or []):
        source = v.get("persistentVolumeClaim") or {}
        if source.get("claimName") in datasets:
            volume_names.add(v.get("name"))
            if source.get("readOnly") is not True:
                ops.append({"op": "add", "path": f"/spec/volumes/{i}/persistentVolumeClaim/readOnly", "value": True})
    for group in ("initContainers", "containers", "ephemeralContainers"):
        for c, container in enumerate(spec.get(group) or []):
            for m, mount in enumerate(container.get("volumeMounts") or []):
                if mount.get("name") in volume_names and mount.get("readOnly") is not True:
                    ops.append({"op": "add", "path": f"/spec/{group}/{c}/volumeMounts/{m}/readOnly", "value": True})
    return ops


def _volumes_by_secret(vols: list[dict]) -> dict[str, str]:
    """Secret name → the name of the first volume that holds all its keys under their own names (a
    secret volume, or a projected volume's secret source, without ``items``). A Secret a pod holds
    only through ``items`` (keys left out or renamed) could leave a path variable naming a file that
    is not there: `mount_ops` refuses such a pod (`_held_in_part`)."""
    held: dict[str, str] = {}
    for v, secret in _secret_sources(vols):
        if not secret.get("items"):
            held.setdefault(secret["name"], v.get("name"))
    return held


def _held_in_part(vols: list[dict]) -> dict[str, str]:
    """Secret name → a volume that holds it through ``items``."""
    return {secret["name"]: v.get("name") for v, secret in reversed(_secret_sources(vols)) if secret.get("items")}


def _secret_sources(vols: list[dict]) -> list[tuple[dict, dict]]:
    """(volume, {"name", "items"}) for each Secret a volume holds, in order."""
    found = []
    for v in vols:
        if (v.get("secret") or {}).get("secretName"):
            found.append((v, {"name": v["secret"]["secretName"], "items": v["secret"].get("items")}))
        for source in (v.get("projected") or {}).get("sources") or []:
            if (source.get("secret") or {}).get("name"):
                found.append((v, {"name": source["secret"]["name"], "items": source["secret"].get("items")}))
    return found


def _appended(path: str, current: list | None, items: list[dict]) -> list[dict]:
    if not items:
        return []
    if current is None:
        return [{"op": "add", "path": path, "value": list(items)}]
    return [{"op": "add", "path": f"{path}/-", "value": item} for item in items]
