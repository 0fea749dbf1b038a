"""The operator's admission webhooks, as kopf handlers (what they decide: `admission`, pure).

- ``credential-secrets`` (validating; Secrets, CREATE and UPDATE): `admission.check_secret`; a
  refusal is answered as kopf's `AdmissionError` with the field and the validator's message (never
  a value) and its status (400, or 403 for a permission).
- ``credential-mounts`` (mutating; Pods, CREATE; the platform's pod webhook): reads what the pod
  asks for (`admission.requested`: its annotation, and its ServiceAccount's unless it opts out),
  each named Secret's metadata only (``PartialObjectMetadata``: its kind label, never its data),
  each PVC it mounts (which are datasets, and are they loaded) and, for a pod that says it is a
  dataset loader, its Job's metadata (all at once), refuses a pod that mounts another job's or
  server's private copy of a dataset (`admission.refuse_foreign_copies`), and adds `admission.read_only_ops` (dataset
  mounts read-only but the loader's own), `gates.gate_ops` (held before scheduling while a dataset
  it mounts is not loaded; `gate_keeper` lets it go) and `admission.mount_ops` to kopf's patch (as
  a transformation of the pod, from which kopf computes the JSON Patch it answers). The dataset
  PVCs and loader Jobs come from memory where the watches have delivered them (`watched`). Only
  pods of project namespaces are touched
  (`OperatorContext.projects`; the webhook configuration's namespaceSelector already sends no
  other, and a review posted to the endpoint by anyone else for another namespace is answered
  with no change, so it tells nothing of that namespace's Secrets).

The handler ids are the URL paths the webhook configurations call (``/credential-secrets``,
``/credential-mounts``). Neither handler answers with a stack trace: an unexpected failure is
logged here and refused with a short message; a Kubernetes read that fails or does not answer
(each read once, no retries, within 1.5 s; all of one pod's within `REVIEW_BUDGET_S`, as the API
server waits 5 s for the whole review) refuses the pod with the reason. Every decision is logged with the namespace, the object and the
user, never a value; ``mlplatform_operator_webhook_reviews_total`` on ``/metrics`` counts them by webhook
and result (allowed/refused credential Secrets, mounted/refused pods).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Mapping

import jsonpatch
import kopf

from hub_ext.core.credentials import KIND_LABEL
from hub_ext.manifests.datasets import is_dataset
from hub_ext.core.errors import UserInputError
from hub_ext.kube.client import METADATA_ONLY, Kube, KubeError, NotFound, path_of
from hub_ext.manifests.mounts import dataset_state
from hub_ext.operator.context import OperatorContext
from hub_ext.operator.dataset_controller import dataset_label_filter
from hub_ext.operator.rules import admission, gates, volumes
from hub_ext.operator.rules import datasets as ds
from hub_ext.operator.watched import Watched

log = logging.getLogger("mlplatform.operator.webhooks")
READ_TIMEOUT_S = 1.5  # per GET, never retried: the API server gives the whole review 5 s
REVIEW_BUDGET_S = 3.5  # all of one pod's reads (its ServiceAccount, then its credentials at once)


def register(registry: kopf.OperatorRegistry, ctx: OperatorContext) -> None:
    settings = ctx.settings

    @kopf.on.validate("v1", "secrets", id="credential-secrets", operations=["CREATE", "UPDATE"], registry=registry)
    async def credential_secrets(body, old, operation, userinfo, **_):
        if operation not in ("CREATE", "UPDATE"):  # kopf does not filter served reviews by operation
            return
        secret, meta = _plain(body), body.get("metadata") or {}
        where = f"{meta.get('namespace')}/{meta.get('name')}"
        user = (userinfo or {}).get("username")
        try:
            kind = admission.check_secret(secret, _plain(old) if operation == "UPDATE" and old else None,
                                          settings.mounts)
        except UserInputError as e:
            log.info("refused %s of the credential Secret %s by %s: %s", operation, where, user, e.field)
            _count(ctx, "credential-secrets", "refused")
            raise kopf.AdmissionError(str(e), code=e.status) from None
        except Exception:
            log.exception("the credential Secret check failed on %s of %s by %s", operation, where, user)
            raise kopf.AdmissionError("the platform's credential check failed; try again or tell the platform's "
                                      "administrators", code=500) from None
        if kind:
            log.info("allowed %s of the %s Secret %s by %s", operation, kind, where, user)
            _count(ctx, "credential-secrets", "allowed")

    # what the webhook reads of datasets and their loaders, kept from the controller's own watches
    # on every replica (the leader's handlers of the same watches: dataset_controller)
    @kopf.on.event("v1", "persistentvolumeclaims", id="dataset-claims-seen", registry=registry,
                   labels=dataset_label_filter(settings.mounts.dataset_label))
    async def claims_seen(event: Mapping, **_: Any) -> None:
        ctx.claims.event(event.get("type"), event["object"])

    @kopf.on.event("v1", "persistentvolumeclaims", id="dataset-volumes-seen", registry=registry,
                   labels={volumes.VOLUME_OF_LABEL: kopf.PRESENT})
    async def volumes_seen(event: Mapping, **_: Any) -> None:
        ctx.claims.event(event.get("type"), event["object"])

    @kopf.on.event("batch", "v1", "jobs", id="dataset-loaders-seen", registry=registry,
                   labels={ds.LOADER_LABEL: kopf.PRESENT})
    async def loaders_seen(event: Mapping, **_: Any) -> None:
        ctx.loaders.event(event.get("type"), event["object"])

    @kopf.on.mutate("v1", "pods", id="credential-mounts", operations=["CREATE"], registry=registry)
    async def credential_mounts(body, patch, operation, userinfo, **_):
        if operation != "CREATE":
            return
        pod, meta = _plain(body), body.get("metadata") or {}
        namespace = meta.get("namespace") or ""
        where = f"{namespace}/{meta.get('name') or meta.get('generateName', '') + '*'}"
        if not namespace or namespace == settings.namespace:
            return
        user = (userinfo or {}).get("username") or ""
        try:
            # the webhook configuration sends only project namespaces; a review posted to the
            # endpoint by anyone else for another namespace learns nothing about its Secrets
            if not await asyncio.wait_for(ctx.projects.contains(namespace), REVIEW_BUDGET_S):
                return
            read_only, hold, mounts, datasets, waiting = await asyncio.wait_for(_pod_ops(ctx, pod, namespace, user),
                                                                                REVIEW_BUDGET_S)
        except UserInputError as e:
            log.info("refused the pod %s by %s: %s", where, (userinfo or {}).get("username"), e)
            _count(ctx, "credential-mounts", "refused")
            raise kopf.AdmissionError(str(e), code=e.status) from None
        except (KubeError, asyncio.TimeoutError) as e:
            why = e.reason if isinstance(e, KubeError) else "Kubernetes did not answer in time"
            log.warning("refused the pod %s: could not read its credentials: %s", where, why)
            raise kopf.AdmissionError(f"the platform could not look up the credentials this pod asks for: {why}",
                                      code=503) from None
        except Exception:
            log.exception("the credential mount of the pod %s failed", where)
            raise kopf.AdmissionError("the platform's credential webhook failed; try again or tell the platform's "
                                      "administrators", code=500) from None
        ops = read_only + hold + mounts  # read_only's indices are of the pod as sent: first
        if ops:
            patch.fns.append(lambda raw: jsonpatch.apply_patch(raw, ops, in_place=True))
        if read_only:
            log.info("the pod %s mounts the datasets %s read-only", where, ", ".join(datasets))
            _count(ctx, "credential-mounts", "datasets-read-only")
        if hold:
            log.info("the pod %s by %s is held until the datasets %s are loaded", where, user, ", ".join(waiting))
            _count(ctx, "credential-mounts", "held-for-datasets")
        if mounts:
            log.info("mounted credentials into the pod %s: %d changes", where, len(mounts))
            _count(ctx, "credential-mounts", "mounted")


async def _pod_ops(ctx: OperatorContext, pod: dict, namespace: str,
                   user: str) -> tuple[list[dict], list[dict], list[dict], list[str], list[str]]:
    """(the JSON Patch operations that point its dataset mounts at each dataset's current volume and
    make them read-only (the loader's own excepted: made by the Job controller (`user`) for the
    dataset's loader Job of its current load), those that hold it for datasets not loaded yet, those
    that mount its credentials; the datasets it mounts, those it waits for)."""
    settings = ctx.settings
    account = None
    if admission.uses_account(pod, settings):
        sa = await _get(ctx, path_of("ServiceAccount", namespace, admission.service_account(pod)))
        account = ((sa or {}).get("metadata") or {}).get("annotations") or {}
    asked = admission.requested(pod, account, settings)
    claimed = sorted(admission.claims(pod))
    loader = admission.loader_claim(pod, ds.LOADER_LABEL)
    reads = [_get(ctx, path_of("Secret", namespace, a.name), METADATA_ONLY) for a in asked] + \
        [_seen_or_get(ctx, ctx.claims, "PersistentVolumeClaim", namespace, c) for c in claimed] + \
        ([_seen_or_get(ctx, ctx.loaders, "Job", namespace, loader[0], METADATA_ONLY)] if loader else [])
    found = await asyncio.gather(*reads)
    secrets, claims, job = found[:len(asked)], found[len(asked):len(asked) + len(claimed)], found[-1] if loader else None
    kinds = {a.name: None if m is None else ((m.get("metadata") or {}).get("labels") or {}).get(KIND_LABEL, "")
             for a, m in zip(asked, secrets)}
    admission.refuse_foreign_copies(pod, dict(zip(claimed, claims)))
    of, datasets = await _datasets_of(ctx, namespace, dict(zip(claimed, claims)))
    if loader and loader[2] in datasets and user in settings.job_controller_users and \
            await _is_loader(ctx, job, loader, datasets[loader[2]]):
        of = {c: d for c, d in of.items() if d != loader[2]}  # the loader's own pod: as the operator made it
        del datasets[loader[2]]
    current = dict(zip(datasets, await asyncio.gather(*(_current_volume(ctx, pvc) for pvc in datasets.values()))))
    waiting = [d for d, pvc in datasets.items() if dataset_state(pvc, settings.mounts.source_annotation)[0] != "ready"]
    # a claim labelled as a dataset's volume is read-only even when its dataset is gone
    read_only = set(of) | {c for c, pvc in zip(claimed, claims) if pvc and volumes.dataset_of(pvc)}
    volume_ops = admission.read_only_ops(pod, read_only) + \
        volumes.rewrite_ops(pod, {c: current[d] for c, d in of.items()})
    return volume_ops, gates.gate_ops(pod, waiting), admission.mount_ops(pod, asked, kinds, settings), \
        sorted(datasets), sorted(waiting)


async def _datasets_of(ctx: OperatorContext, namespace: str,
                       claims: dict[str, dict | None]) -> tuple[dict[str, str], dict[str, dict]]:
    """(each claim that is a dataset or one of a dataset's volumes → the dataset's name; the
    datasets by name)."""
    label = ctx.settings.mounts.dataset_label
    datasets = {c: pvc for c, pvc in claims.items() if pvc and is_dataset(pvc, label)}
    of = {c: c for c in datasets}
    for c, pvc in claims.items():
        owner = volumes.dataset_of(pvc) if pvc and c not in of else None
        if owner:
            dataset = datasets.get(owner) or await _dataset(ctx, namespace, owner)
            if dataset and is_dataset(dataset, label) and volumes.is_volume_of(pvc, dataset):
                of[c], datasets[owner] = owner, dataset
    return of, datasets


async def _dataset(ctx: OperatorContext, namespace: str, name: str) -> dict | None:
    return await _seen_or_get(ctx, ctx.claims, "PersistentVolumeClaim", namespace, name)


async def _current_volume(ctx: OperatorContext, dataset: dict) -> str:
    """The claim new pods of `dataset` mount: the volume its annotation names if that really is one
    of its volumes (the operator makes them; members cannot), else the dataset claim itself."""
    name, target = dataset["metadata"]["name"], volumes.current(dataset)
    if target == name:
        return name
    if volumes.is_volume_of(await _dataset(ctx, dataset["metadata"]["namespace"], target), dataset):
        return target
    log.warning("the dataset %s/%s names %r as its volume, which is not one of its volumes; its own claim is "
                "mounted", dataset["metadata"]["namespace"], name, target)
    return name


async def _seen_or_get(ctx: OperatorContext, watched: Watched, kind: str, namespace: str, name: str,
                       accept: str = "application/json") -> dict | None:
    """What a watch delivered of the object, else the object read now."""
    found = watched.get(namespace, name)
    return found if found is not None else await _get(ctx, path_of(kind, namespace, name), accept)


async def _is_loader(ctx: OperatorContext, job: dict | None, loader: tuple[str, str, str], claim: dict) -> bool:
    """`_is_loader_job`, asking the API server for the claim when our copy may lag the operator's
    own start of the load (its new load id written a moment before the Job was made)."""
    if _is_loader_job(job, loader, claim):
        return True
    fresh = await _get(ctx, path_of("PersistentVolumeClaim", claim["metadata"]["namespace"], loader[2]))
    return bool(fresh) and _is_loader_job(job, loader, fresh)


def _is_loader_job(job: dict | None, loader: tuple[str, str, str], claim: dict) -> bool:
    """The Job the pod names as its controller is the operator's loader of `claim`'s current load
    (an ownerReference anyone may write; a finished load's Job does not vouch for a pod)."""
    meta = (job or {}).get("metadata") or {}
    labels = meta.get("labels") or {}
    load_id = ((claim.get("metadata") or {}).get("annotations") or {}).get(ds.LOAD_ID_ANNOTATION)
    return bool(job) and meta.get("uid") == loader[1] and labels.get(ds.LOADER_LABEL) == loader[2] and \
        labels.get(ds.LOAD_LABEL) == load_id and ds.owned_by(job, claim["metadata"]["uid"])


async def _get(ctx: OperatorContext, path: str, accept: str = "application/json") -> dict | None:
    try:
        return await Kube(ctx.kube.api_client, timeout=READ_TIMEOUT_S, retries=0).request("GET", path, accept=accept)
    except NotFound:
        return None


def _plain(body: Mapping[str, Any]) -> dict:
    """kopf's body view as a plain dict (its values are the review's own dicts; none is changed)."""
    return dict(body)


def _count(ctx: OperatorContext, webhook: str, result: str) -> None:
    ctx.metrics.inc("mlplatform_operator_webhook_reviews_total", webhook=webhook, result=result)
