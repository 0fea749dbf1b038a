"""What a job is waiting for, in words: ``statusMessage``, the platform's field beside ``ml.v1``'s. Pure.

The platform's pod webhook holds a pod that mounts a dataset not yet loaded (`hub_ext.operator.rules.gates`:
scheduling gate, label ``mlplatform.io/dataset-gated``, annotation naming the datasets), so a job
submitted with a dataset still loading is accepted and simply starts later. Its state alone
(QUEUED/PREPARING) would not say why; `status_message` says it from the job's held pods and the
project's dataset PVCs:

- loading: ``waiting for the dataset 'frames' to finish loading (42%)`` (the loader's progress,
  `hub_ext.manifests.datasets.percent`; its condition's message when there is no percentage yet);
- failed: ``waiting for the dataset 'frames', whose load failed: <the loader's reason>`` (the pod
  stays held until a later load succeeds: the operator's rule);
- gone: ``waiting for the dataset 'frames', which no longer exists``;
- loaded, the gate not yet lifted: ``waiting for the dataset 'frames' (loaded; starting)``.

Several datasets are told in name order, joined by ``; ``. A job that has ended, or has no held
pod, has no message. `held_by_job` indexes held pods by the job's object name (the
``mlplatform.io/job`` label every job pod carries); `messages` gives every held job's words and
`with_message` adds them to a job's (shared) view; `slim_pod` is what the backend's watch keeps of
a held pod.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from hub_ext.manifests.datasets import percent, progress_of
from hub_ext.manifests.mounts import SOURCE, dataset_state
from hub_ext.operator.rules.gates import WAITING_ANNOTATION, is_held
from server_ext.jobs.kube.kubeflow import JOB_LABEL
from server_ext.jobs.kube.status import FINAL

FIELD = "statusMessage"


def held_by_job(pods: Iterable[Mapping]) -> dict[str, list[Mapping]]:
    """Job object name → its pods that are held for datasets."""
    out: dict[str, list[Mapping]] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        job = (meta.get("labels") or {}).get(JOB_LABEL)
        if job and is_held(pod):
            out.setdefault(job, []).append(pod)
    return out


def waited_for(pods: Iterable[Mapping]) -> list[str]:
    """The datasets the held `pods` wait for (their annotation), sorted, each once."""
    names: set[str] = set()
    for pod in pods:
        text = ((pod.get("metadata") or {}).get("annotations") or {}).get(WAITING_ANNOTATION) or ""
        names.update(n.strip() for n in text.split(",") if n.strip())
    return sorted(names)


def dataset_words(name: str, pvc: Mapping | None, source_annotation: str = SOURCE) -> str:
    """One dataset's part of the message (see the module docstring)."""
    if pvc is None or (pvc.get("metadata") or {}).get("deletionTimestamp"):
        return f"waiting for the dataset {name!r}, which no longer exists"
    state, message = dataset_state(dict(pvc), source_annotation)
    if state == "failed":
        return f"waiting for the dataset {name!r}, whose load failed" + (f": {message}" if message else "")
    if state == "ready":
        return f"waiting for the dataset {name!r} (loaded; starting)"
    pct = percent(progress_of(pvc))
    detail = f"{pct}%" if pct is not None else message
    return f"waiting for the dataset {name!r} to finish loading" + (f" ({detail})" if detail else "")


def status_message(held: Iterable[Mapping], pvcs: Mapping[str, Mapping],
                   source_annotation: str = SOURCE) -> str | None:
    """The words for a job whose held pods are `held`; `pvcs`: the project's dataset PVCs by name."""
    names = waited_for(held)
    if not names:
        return None
    return "; ".join(dataset_words(n, pvcs.get(n), source_annotation) for n in names)


def messages(held: Iterable[Mapping], pvcs: Iterable[Mapping], source_annotation: str = SOURCE) -> dict[str, str]:
    """Job object name → its `status_message`, for the jobs among the `held` pods; `pvcs`: the
    project's dataset PVCs."""
    by_job = held_by_job(held)
    if not by_job:
        return {}
    by_name = {d["metadata"]["name"]: d for d in pvcs}
    found = {job: status_message(pods, by_name, source_annotation) for job, pods in by_job.items()}
    return {job: words for job, words in found.items() if words}


def with_message(view: dict, obj: Mapping, found: Mapping[str, str]) -> dict:
    """`view` (the job JSON of `obj`), copied with its `FIELD` when `found` (`messages`) has words for
    `obj` and it has not ended; views are shared and stay unchanged."""
    words = found.get(obj["metadata"]["name"])
    if not words or view.get("state") in FINAL:
        return view
    return {**view, FIELD: words}


def slim_pod(pod: dict) -> dict:
    """What this module reads of a held pod (its metadata and scheduling gates), not its spec."""
    meta = pod.get("metadata") or {}
    return {"metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "labels", "annotations")
                         if k in meta},
            "spec": {"schedulingGates": (pod.get("spec") or {}).get("schedulingGates") or []}}
