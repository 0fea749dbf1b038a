"""A job's private writable copies of datasets (``mounts.datasets: ["frames:copy"]``,
``--datasets frames:copy``) on Kubernetes.

A copy is a PersistentVolumeClaim made from the dataset load's VolumeSnapshot (`Dataset.snapshot`,
which the operator makes where the storage can snapshot: `hub_ext.operator.snapshots`), in the
dataset's StorageClass and at least its size, named ``<job>-<dataset>-copy``
(`hub_ext.manifests.dataset_copies`, shared with the spawner) and mounted writable at the dataset's usual
directory; no other job or server sees what the job writes.

- `with_copy_claims`: the plan's copies name their claims before the job's manifest is made;
- `make`: after the job object is created, each copy's claim is created owned by it (deleting the
  job garbage-collects its copies); the pods wait for their claims. If one cannot be made (the
  project's quota on claims or storage, the dataset gone), the job object is deleted again and the
  error raised naming ``mounts.datasets``: either the job and all its copies exist, or nothing.

The quota counts copies like any claim (``count/persistentvolumeclaims``, ``requests.storage``).
"""

from __future__ import annotations

import dataclasses
import logging

from hub_ext.core.errors import UpstreamError, UserInputError
from hub_ext.kube.client import Forbidden, Kube, KubeError, NotFound, reason
from hub_ext.manifests.dataset_copies import copy_manifest, with_claims
from server_ext.jobs.kube.kubeflow import owner_reference
from server_ext.jobs.plan import JobPlan
from server_ext.runtimes.kube.package import remove_job

log = logging.getLogger("mlplatform.jobs.kube")
FIELD = "mounts.datasets"


def with_copy_claims(plan: JobPlan) -> JobPlan:
    return dataclasses.replace(plan, datasets=with_claims(plan.datasets, plan.name))


async def make(kube: Kube, plan: JobPlan, obj: dict) -> None:
    """Create the copies of `plan` owned by `obj` (the created job object); on any failure delete
    `obj` and raise."""
    copies = [d for d in plan.datasets if d.copy]
    if not copies:
        return
    owner, project = owner_reference(plan.kind, obj), plan.project
    try:
        for d in copies:
            claims = f"/api/v1/namespaces/{project}/persistentvolumeclaims"
            try:
                source = await kube.request("GET", f"{claims}/{d.name}")
                await kube.request("POST", claims, copy_manifest(d.claim, project, d.name, d.snapshot, source,
                                                                 owner=owner))
            except NotFound:
                raise UserInputError(FIELD, f"the dataset {d.name!r} is gone from the project {project}", 409) from None
            except KubeError as e:
                why = reason(e)
                log.warning("job %s in %s: the copy of the dataset %s was refused: %s", plan.job.job_id, project,
                            d.name, why)
                if isinstance(e, Forbidden):
                    what = "the quota of" if "quota" in why else "the permissions in"
                    raise UserInputError(FIELD, f"{what} project {project} do not allow a copy of the dataset "
                                                f"{d.name!r} ({why})", 403) from None
                raise UpstreamError(f"copy the dataset {d.name} for job {plan.job.job_id}", why) from None
            log.info("job %s in %s: copy %s of the dataset %s made from %s", plan.job.job_id, project, d.claim,
                     d.name, d.snapshot)
    except BaseException:  # the job must not run without its copies (they go with it: owner references)
        await remove_job(kube, plan, obj)
        raise
