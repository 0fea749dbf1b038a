"""A job's shipped package (``--package-path``, `plan.ShippedPackage`) delivered on Kubernetes, for
`kube_backend.KubeBackend.submit`: all or nothing.

- ``bucket``: `stage` uploads the sdist to its staging URI (``<bucket>/<jobId>/packages/<sha256>/<file>``)
  with the credentials named in the submitter's env, *before* the job object is created, so a
  failed upload leaves nothing. If creating the job object then fails, the staged object is left
  where it is, on purpose: it is not a cluster object, its key is content-addressed (a retry of
  the same jobId writes the same key with the same bytes), deleting it could race a concurrent
  submission of the same package, and gcloud never removed staged packages either — the
  bucket's lifecycle rules own it.
- ``configmap``: the job object is created first, then `ship_in_configmap` creates the ConfigMap
  (`package_delivery.package_configmap`) owned by it (ownerReference with the created object's uid), so
  deleting the job garbage-collects it; the pods wait for it (the volume is not optional). If
  creating it fails (API error, quota, a cancelled submit), the just-created job object is deleted
  (propagation Background, precondition on its uid) and the error is raised: nothing is left. Should
  that delete fail too, the error raised says so and names the object.

Errors: a 403 (RBAC or a ConfigMap quota) is `UserInputError("package.path", …, 403)`; any other
API failure `UpstreamError` with the API's reason; an sdist changed since it was described is
`UserInputError("package.path")`. Bodies are never logged (a ConfigMap carries the whole sdist).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from typing import Mapping

from hub_ext.core.errors import UpstreamError, UserInputError
from hub_ext.kube.client import Forbidden, Kube, KubeError, NotFound, reason
from server_ext.jobs.kube.kubeflow import owner_reference, resource_path
from server_ext.jobs.package_delivery import BUCKET_FIELD, FIELD, package_configmap
from server_ext.jobs.plan import JobPlan, ShippedPackage
from server_ext.runtimes.fetch import put_object

log = logging.getLogger("mlplatform.jobs.kube")


async def _read(pkg: ShippedPackage) -> bytes:
    try:
        data = await asyncio.to_thread(pkg.path.read_bytes)
    except OSError as e:
        raise UserInputError(FIELD, f"the built package {pkg.path} cannot be read ({e.strerror})") from None
    if hashlib.sha256(data).hexdigest() != pkg.sha256:
        raise UserInputError(FIELD, f"the built package {pkg.path} changed after it was built; submit again")
    return data


async def stage(plan: JobPlan, env: Mapping[str, str]) -> None:
    """Upload a ``bucket`` package to its URI (errors name ``package.stagingBucket``)."""
    pkg = plan.package
    assert pkg is not None and pkg.delivery == "bucket"
    data = await _read(pkg)
    await put_object(pkg.uri, data, env, BUCKET_FIELD, job=plan.job.job_id)
    log.info("job %s in %s: staged %s (%s bytes) for %s", plan.job.job_id, plan.project, pkg.uri, len(data),
             plan.owner)


async def ship_in_configmap(kube: Kube, plan: JobPlan, obj: dict) -> dict:
    """Create the package ConfigMap owned by `obj` (the created job object); on any failure delete
    `obj` and raise. The created ConfigMap."""
    pkg = plan.package
    assert pkg is not None and pkg.configmap is not None
    job_id, project = plan.job.job_id, plan.project
    try:
        data = await _read(pkg)
        manifest = package_configmap(plan.name, project, data, pkg.filename, owner_reference(plan.kind, obj))
        try:
            created = await kube.request("POST", f"/api/v1/namespaces/{project}/configmaps", manifest)
        except KubeError as e:
            why = reason(e)
            log.warning("job %s in %s: creating the package ConfigMap failed: %s", job_id, project, why)
            if isinstance(e, Forbidden):
                what = "the quota of" if "quota" in why else "the permissions in"
                raise UserInputError(FIELD, f"{what} project {project} do not allow the package ConfigMap "
                                            f"({why})", 403) from None
            raise UpstreamError(f"create the package ConfigMap of job {job_id}", why) from None
    except BaseException as e:  # CancelledError included: the job object must not outlive its package
        left = await remove_job(kube, plan, obj)
        if left is not None and isinstance(e, UpstreamError):
            raise UpstreamError(e.action, f"{e.reason}; and the {plan.kind} {obj['metadata']['name']} it was "
                                          f"for could not be removed ({left}): delete it") from None
        if left is not None and isinstance(e, UserInputError):
            raise UserInputError(e.field, f"{e.message}; and the {plan.kind} {obj['metadata']['name']} could "
                                          f"not be removed ({left}): delete it", e.status) from None
        raise
    log.info("job %s in %s: created ConfigMap %s (%s bytes) for %s", job_id, project, pkg.configmap, len(data),
             plan.owner)
    return created


async def remove_job(kube: Kube, plan: JobPlan, obj: dict) -> str | None:
    """Delete the job object `obj` (this very one: uid precondition); None when it is gone, else why not."""
    meta = obj["metadata"]
    body = {"propagationPolicy": "Background", "preconditions": {"uid": meta["uid"]}}
    try:
        await asyncio.shield(kube.request("DELETE", resource_path(plan.kind, plan.project, meta["name"]), body))
    except NotFound:
        return None
    except KubeError as e:
        why = reason(e)
    else:
        log.info("job %s in %s: removed %s %s (what it needs could not be made)", plan.job.job_id, plan.project,
                 plan.kind, meta["name"])
        return None
    log.error("job %s in %s: %s %s is left without what it needs: %s", plan.job.job_id, plan.project, plan.kind,
              meta["name"], why)
    return why
