"""Where a dataset's data lives, and which volume a new pod gets. Pure (the dataset controller and
the pod webhook do the I/O).

A dataset claim holds its first load itself. A later load (a changed source, credential or
refresh) must not change the files under pods that are reading them, so each load is written to a
volume chosen when it begins (`choose`):

- the volume that holds the data now, in place, when no pod is reading it (`in_use`: a pod that has
  not ended, is not held by the dataset gate and is not the dataset's own loader). Pods held for the
  load under way are not readers: they wait for this load, on this volume. A dataset that was not
  ready (its first load, a load after one that failed) has no readers: every pod made for it was held;
- else the dataset claim itself, when it is not the current volume and nobody reads it any longer
  (the data of an older load, brought up to date: the loader copies only what changed);
- else a new claim ``<dataset>-vol-<load id>-<random>`` (`volume_claim`; None from `choose`): the
  dataset's storage class, access modes and size, owned by the dataset claim (it goes with it),
  labelled ``mlplatform.io/dataset-volume-of: <dataset>`` (`VOLUME_OF_LABEL`) and
  ``mlplatform.io/dataset-load: <load id>`` (an operator restarted before naming it finds it by
  them: `adoptable`). The random part keeps its name unknown until it exists: a pod made earlier
  naming it would otherwise get it writable, as no webhook could tell it was a dataset's. The
  project's quota counts it; members cannot make such a claim (the ValidatingAdmissionPolicy
  ``mlplatform-dataset-copies``).

The dataset claim's annotation ``mlplatform.io/volume`` (`VOLUME_ANNOTATION`; absent: the dataset
claim itself) names the chosen volume from the moment the load begins, written in the same request as
the new ``mlplatform.io/load-id`` and ``mlplatform.io/loaded`` (the load whose data is there), so a
pod admitted from then on mounts the new volume and is held until it is loaded, and a pod admitted
before keeps the volume it has. The pod webhook points every mount of any of the dataset's volumes
at the current one (`rewrite_ops`, read-only; the loader's own pod excepted). Once a load has ended,
the dataset's other volume claims are deleted (`stale`); Kubernetes' ``pvc-protection`` finalizer
keeps each until the last pod using it has ended. The dataset claim itself is never deleted (it is
the dataset), so after a reload in use it keeps an older load's data until a later load reuses it.

A pod admitted in the instant between a load's start and the webhook's copy of the claim catching
up (one watch event) can still get the volume being reloaded in place; the gate keeper also keeps
held a pod whose volume is no longer the current one (`gates`).
"""

from __future__ import annotations

import secrets
from typing import Iterable, Mapping

from hub_ext.operator.rules.admission import claims
from hub_ext.operator.rules.datasets import LOAD_LABEL
from hub_ext.operator.rules.gates import is_held

VOLUME_ANNOTATION = "mlplatform.io/volume"
VOLUME_OF_LABEL = "mlplatform.io/dataset-volume-of"
MAX_NAME = 63
ENDED = ("Succeeded", "Failed")


def current(dataset: Mapping) -> str:
    """The claim that holds (or is being loaded with) the dataset's data."""
    meta = dataset.get("metadata") or {}
    return (meta.get("annotations") or {}).get(VOLUME_ANNOTATION) or meta.get("name", "")


def volume_name(dataset: str, load_id: str, nonce: str) -> str:
    suffix = f"-vol-{load_id}-{nonce}"
    return dataset.replace(".", "-")[:MAX_NAME - len(suffix)].rstrip("-") + suffix


def volume_claim(dataset: Mapping, load_id: str, nonce: str | None = None) -> dict:
    """The claim a load of `dataset` is written to when its current volume is read by pods (`nonce`:
    the random part of its name, made here unless given)."""
    meta, spec = dataset["metadata"], dataset.get("spec") or {}
    nonce = nonce or secrets.token_hex(4)
    claim_spec = {"accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
                  "resources": {"requests": dict((spec.get("resources") or {}).get("requests") or {})}}
    for key in ("storageClassName", "volumeMode"):
        if spec.get(key):
            claim_spec[key] = spec[key]
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": volume_name(meta["name"], load_id, nonce), "namespace": meta["namespace"],
                         "labels": {VOLUME_OF_LABEL: meta["name"], LOAD_LABEL: load_id},
                         "ownerReferences": [{"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                              "name": meta["name"], "uid": meta["uid"], "controller": True}]},
            "spec": claim_spec}


def dataset_of(claim: Mapping) -> str | None:
    """The dataset a volume claim says it belongs to (its label), if any: check it with `is_volume_of`."""
    return ((claim.get("metadata") or {}).get("labels") or {}).get(VOLUME_OF_LABEL)


def is_volume_of(claim: Mapping | None, dataset: Mapping) -> bool:
    """`claim` is one of `dataset`'s volume claims: labelled so and controlled by the dataset claim."""
    if not claim:
        return False
    meta, owner = claim.get("metadata") or {}, dataset["metadata"]
    return dataset_of(claim) == owner["name"] and meta.get("namespace") == owner.get("namespace") and \
        any(r.get("uid") == owner["uid"] and r.get("controller") for r in meta.get("ownerReferences") or [])


def in_use(pods: Iterable[Mapping], loader_label: str, dataset: str) -> set[str]:
    """The claims read by `pods` (see the module docstring), `dataset`'s loader pods left out."""
    used: set[str] = set()
    for pod in pods:
        meta = pod.get("metadata") or {}
        if (pod.get("status") or {}).get("phase") in ENDED or is_held(pod) or \
                (meta.get("labels") or {}).get(loader_label) == dataset:
            continue
        used |= claims(pod)
    return used


def choose(dataset: str, now: str, used: set[str]) -> str | None:
    """The volume a new load of `dataset` is written to; `now`: its current volume; None: a new one."""
    if now not in used:
        return now
    if dataset != now and dataset not in used:
        return dataset
    return None


def adoptable(claims: Iterable[Mapping], dataset: Mapping, load_id: str) -> str | None:
    """A volume already made for the load `load_id` of `dataset` (and not being deleted), if any."""
    return next((c["metadata"]["name"] for c in sorted(claims, key=lambda c: c["metadata"]["name"])
                 if is_volume_of(c, dataset) and not c["metadata"].get("deletionTimestamp") and
                 (c["metadata"].get("labels") or {}).get(LOAD_LABEL) == load_id), None)


def stale(claims: Iterable[Mapping], dataset: Mapping) -> list[str]:
    """`dataset`'s volume claims other than its current one, not already being deleted."""
    keep = current(dataset)
    return sorted(c["metadata"]["name"] for c in claims if is_volume_of(c, dataset) and
                  c["metadata"]["name"] != keep and not c["metadata"].get("deletionTimestamp"))


def rewrite_ops(pod: Mapping, targets: Mapping[str, str]) -> list[dict]:
    """The JSON Patch operations that point each volume mounting a claim of `targets` (claim → the
    current volume of its dataset) at that volume (indices of the pod as it is)."""
    ops = []
    for i, v in enumerate((pod.get("spec") or {}).get("volumes") or []):
        claim = (v.get("persistentVolumeClaim") or {}).get("claimName")
        if claim in targets and targets[claim] != claim:
            ops.append({"op": "replace", "path": f"/spec/volumes/{i}/persistentVolumeClaim/claimName",
                        "value": targets[claim]})
    return ops
