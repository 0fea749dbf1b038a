"""The dataset controller's reads and writes on the API server: a dataset claim, its volumes, its
loader Jobs and their pods, and the Events it tells users (the decisions: `dataset_controller`;
what is written: `rules.datasets` and `rules.volumes`, pure).

What `DatasetApi` guarantees:

- the ``Loaded`` condition is written through the status subresource as a strategic merge patch
  (conditions merge by ``type``: another controller's conditions are kept), and before the
  annotations (a merge patch), so an ``mlplatform.io/load-id`` naming a load never vouches for a
  condition written for an older one; a running load's progress changes only the message (the
  condition's status and transition time stay);
- a credential Secret is read as metadata only (`credential_secret`): no value of a credential is
  ever read or logged;
- a loader Job is created under its deterministic name, or adopted when the Job of that name is the
  loader of the same load (`datasets.is_loader_of`), never another Job; the loader Jobs of a claim are
  those it owns, deleted in the foreground (their pods go first);
- the newest loader pod's log is read as its last `TAIL_LINES` lines only;
- `written` remembers the condition this leader last wrote on each claim (claim uid, load id,
  reason), so an event whose copy of the claim predates that write does not make it write the same
  again.

Every request goes through `hub_ext.kube.client` (its retries); what it raises is the caller's.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping

import aiohttp

from hub_ext.kube.client import (
    MERGE_PATCH,
    METADATA_ONLY,
    STRATEGIC_MERGE,
    Conflict,
    Forbidden,
    KubeError,
    NotFound,
    timestamp,
)
from hub_ext.manifests.mounts import LOADED_LOAD
from hub_ext.operator.context import OperatorContext
from hub_ext.operator.rules import datasets as ds
from hub_ext.operator.rules import volumes

log = logging.getLogger("mlplatform.operator.datasets")
TAIL_LINES = 3
RELOAD_RETRY_S = 30.0  # a new volume for a reload the quota refused (then less often, as any retry)
Key = tuple[str, str]


def key_of(pvc: Mapping) -> Key:
    return pvc["metadata"]["namespace"], pvc["metadata"]["name"]


class DatasetApi:
    def __init__(self, ctx: OperatorContext):
        self.ctx, self.settings, self.kube = ctx, ctx.settings, ctx.kube
        # (claim uid, load id, reason) of the condition this leader last wrote on each claim: an event
        # whose copy of the claim predates that write does not make it write the same again
        self.written: dict[Key, tuple[str, str | None, str]] = {}

    async def credential_secret(self, ns: str, name: str) -> dict | None:
        """The credential Secret `name` as metadata only (never its data); None if there is none."""
        try:
            return await self.kube.request("GET", f"/api/v1/namespaces/{ns}/secrets/{name}", accept=METADATA_ONLY)
        except NotFound:
            return None

    async def readers(self, ns: str, name: str) -> set[str]:
        """The claims the namespace's pods read (`volumes.in_use`)."""
        listing = await self.kube.list(f"/api/v1/namespaces/{ns}/pods",
                                       fieldSelector="status.phase!=Succeeded,status.phase!=Failed")
        return volumes.in_use(listing.get("items") or [], ds.LOADER_LABEL, name)

    async def volumes_of(self, ns: str, name: str) -> list[dict]:
        """The claims made as volumes of the dataset `name` (`volumes.VOLUME_OF_LABEL`)."""
        listing = await self.kube.list(f"/api/v1/namespaces/{ns}/persistentvolumeclaims",
                                       labelSelector=f"{volumes.VOLUME_OF_LABEL}={name}")
        return listing.get("items") or []

    async def annotate(self, pvc: dict, changes: dict) -> dict:
        return await self.kube.request("PATCH", self.claim_path(*key_of(pvc)), {"metadata": {"annotations": changes}},
                                       content_type=MERGE_PATCH)

    async def new_volume(self, pvc: dict, spec: ds.DatasetSpec) -> tuple[str, float | None]:
        """(a new volume claim for the load, one made for it before (a restart) or made now; None, or
        when to try again if the project cannot hold it now)."""
        ns, name = key_of(pvc)
        made = volumes.adoptable(await self.volumes_of(ns, name), pvc, spec.load_id)
        if made:
            return made, None
        claim = volumes.volume_claim(pvc, spec.load_id)
        try:
            await self.kube.request("POST", f"/api/v1/namespaces/{ns}/persistentvolumeclaims", claim)
            log.info("dataset %s/%s: made the volume %s for the load %s", ns, name, claim["metadata"]["name"],
                     spec.load_id)
            return claim["metadata"]["name"], None
        except (Forbidden, Conflict) as e:
            why = e.reason
        log.warning("dataset %s/%s: the load %s waits: its new volume was refused: %s", ns, name, spec.load_id, why)
        await self.tell(pvc, spec, f"Pods read this dataset's data, so its new load {spec.load_id} goes to a new "
                                   f"volume, which was refused ({why}); the pods keep the current data, and it is "
                                   "tried again")
        return "", RELOAD_RETRY_S

    async def tell(self, pvc: dict, spec: ds.DatasetSpec, message: str) -> None:
        """A Warning Event on the dataset claim (once per load)."""
        meta = pvc["metadata"]
        event = {"apiVersion": "v1", "kind": "Event",
                 "metadata": {"name": f"{meta['name']}.reload-{spec.load_id}", "namespace": meta["namespace"]},
                 "involvedObject": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": meta["namespace"],
                                    "name": meta["name"], "uid": meta["uid"]},
                 "type": "Warning", "reason": "ReloadWaiting", "message": message[:1024],
                 "source": {"component": "mlplatform-operator"}, "reportingComponent": "mlplatform-operator",
                 "firstTimestamp": timestamp(), "lastTimestamp": timestamp(), "count": 1}
        try:
            await self.kube.request("POST", f"/api/v1/namespaces/{meta['namespace']}/events", event)
        except Conflict:
            pass

    async def drop_stale_volumes(self, pvc: dict) -> None:
        """A load has ended: the dataset's volume claims other than the current one are deleted (each
        stays until no pod uses it: Kubernetes' pvc-protection)."""
        ns, name = key_of(pvc)
        for old in volumes.stale(await self.volumes_of(ns, name), pvc):
            try:
                await self.kube.delete(self.claim_path(ns, old))
                log.info("dataset %s/%s: deleted its older volume %s (kept while pods use it)", ns, name, old)
            except KubeError as e:  # the next load that ends deletes it
                log.warning("dataset %s/%s: could not delete its older volume %s: %s", ns, name, old, e.reason)

    async def create_job(self, spec: ds.DatasetSpec, credential: Any, volume: str) -> dict | None:
        """The loader Job of `spec` (writing `volume`), made now or found (adopted) under its name;
        None if a Job of that name is something else."""
        manifest = ds.loader_job(spec, credential, self.settings, volume)
        try:
            job = await self.kube.request("POST", self.jobs_path(spec.namespace), manifest)
        except Conflict:
            job = await self.kube.get(f"{self.jobs_path(spec.namespace)}/{spec.job_name}")
            if job is None or not ds.is_loader_of(job, spec):
                return None
            log.info("dataset %s/%s: adopted the loader Job %s", spec.namespace, spec.name, spec.job_name)
            return job
        self.ctx.metrics.inc("mlplatform_operator_dataset_loads_total", result="started")
        log.info("dataset %s/%s: load %s of %s started (Job %s)", spec.namespace, spec.name, spec.load_id,
                 spec.source.uri, spec.job_name)
        return job

    @staticmethod
    def claim_path(ns: str, name: str) -> str:
        return f"/api/v1/namespaces/{ns}/persistentvolumeclaims/{name}"

    @staticmethod
    def jobs_path(ns: str) -> str:
        return f"/apis/batch/v1/namespaces/{ns}/jobs"

    async def jobs(self, ns: str, name: str, uid: str) -> list[dict]:
        """The claim's loader Jobs (owned by it: a Job with the label made by anyone else is not)."""
        listing = await self.kube.list(self.jobs_path(ns), labelSelector=f"{ds.LOADER_LABEL}={name}")
        return [j for j in listing.get("items") or [] if ds.owned_by(j, uid)]

    async def delete_jobs(self, jobs: list[dict], why: str) -> None:
        for job in jobs:
            if job["metadata"].get("deletionTimestamp"):
                continue
            meta = job["metadata"]
            try:
                await self.kube.request("DELETE", f"{self.jobs_path(meta['namespace'])}/{meta['name']}",
                                        {"propagationPolicy": "Foreground"})
                log.info("dataset %s/%s: deleted the loader Job %s: %s", meta["namespace"],
                         (meta.get("labels") or {}).get(ds.LOADER_LABEL), meta["name"], why)
            except NotFound:
                pass

    async def in_project(self, ns: str) -> bool:
        return await self.ctx.projects.contains(ns)

    async def last_words(self, spec: ds.DatasetSpec) -> tuple[dict | None, dict | None]:
        """(the newest loader pod of the load, its last progress line or None)."""
        selector = ",".join(f"{k}={v}" for k, v in ds.loader_labels(spec).items())
        listing = await self.kube.list(f"/api/v1/namespaces/{spec.namespace}/pods", labelSelector=selector)
        pods = sorted(listing.get("items") or [], key=lambda p: (p["metadata"].get("creationTimestamp") or "",
                                                                 p["metadata"]["name"]))
        if not pods:
            return None, None
        pod = pods[-1]
        if (pod.get("status") or {}).get("phase") not in ("Running", "Succeeded", "Failed"):
            return pod, None
        path = f"/api/v1/namespaces/{spec.namespace}/pods/{pod['metadata']['name']}/log"
        lines: list[str] = []
        try:
            async for raw in self.kube.stream(path, [("container", ds.CONTAINER), ("tailLines", str(TAIL_LINES))],
                                              "*/*", aiohttp.ClientTimeout(total=10)):
                lines.append(raw.decode(errors="replace"))
        except KubeError as e:  # a pod whose log is gone (its node, its container): say what Kubernetes says
            log.debug("dataset %s/%s: no log from %s: %s", spec.namespace, spec.name, pod["metadata"]["name"],
                      e.reason)
        return pod, ds.parse_progress(lines)

    async def set_condition(self, pvc: dict, load_id: str | None, status: bool, reason: str, message: str,
                            progress: Mapping | None) -> bool:
        """The `Loaded` condition (if it changes), then the load id and progress annotations (if
        they change); whether the condition changed."""
        ns, name = key_of(pvc)
        previous = ds.condition_of(pvc)
        cond = ds.loaded_condition(status, reason, message, timestamp(), previous)
        changed = not ds.same_condition(previous, cond)
        if changed:
            await self.kube.request("PATCH", f"{self.claim_path(ns, name)}/status",
                                    {"status": {"conditions": [cond]}}, content_type=STRATEGIC_MERGE)
        annotations = pvc["metadata"].get("annotations") or {}
        changes = {}
        if load_id is not None and annotations.get(ds.LOAD_ID_ANNOTATION) != load_id:
            changes[ds.LOAD_ID_ANNOTATION] = load_id
        if status and load_id is not None and annotations.get(LOADED_LOAD) != load_id:
            changes[LOADED_LOAD] = load_id  # after the condition: until then the load reads as under way
        if progress is not None and annotations.get(ds.PROGRESS_ANNOTATION) != ds.progress_annotation(progress):
            changes[ds.PROGRESS_ANNOTATION] = ds.progress_annotation(progress)
        if changes:
            await self.kube.request("PATCH", self.claim_path(ns, name), {"metadata": {"annotations": changes}},
                                    content_type=MERGE_PATCH)
        self.written[(ns, name)] = (pvc["metadata"]["uid"], load_id, reason)
        return changed

    async def write_progress(self, spec: ds.DatasetSpec, message: str, progress: Mapping | None) -> None:
        """A running load's message and progress (the condition's status and transition time stay:
        the strategic merge keeps the fields not named)."""
        path = self.claim_path(spec.namespace, spec.name)
        cond = {"type": ds.LOADED, "status": "False", "reason": ds.LOADING, "message": message}
        await self.kube.request("PATCH", f"{path}/status", {"status": {"conditions": [cond]}}, content_type=STRATEGIC_MERGE)
        if progress is not None:
            await self.kube.request("PATCH", path, {"metadata": {"annotations": {
                ds.PROGRESS_ANNOTATION: ds.progress_annotation(progress)}}}, content_type=MERGE_PATCH)
