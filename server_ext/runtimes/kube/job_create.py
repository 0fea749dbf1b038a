"""Creating a job's object on the Kubernetes API, all or nothing, with the API's refusals said in
the platform's errors (`KubeBackend.submit` decides what to create; this module creates it).

Guarantees of `create` (one POST):

- a 409 is `JobExists`;
- a create that got no answer in time is looked for by name a few times (`made_meanwhile`: a slow
  server may have made it; ours only when its annotations, the jobId and the submitted spec, match);
- a 403 is `UserInputError(…, 403)` naming the quota, or the cluster's admission control (a
  webhook's or policy's denial; a webhook's 400 too), or the project;
- any other failure is `UpstreamError` with the API's reason. Request and response bodies are
  never logged.

`create_shipped` creates the object with the plan's package as `kube_package` says: staged before the
create, or in a ConfigMap owned by the object right after it; if shipping fails the caller's `undo`
deletes the object again and the error is raised, so both exist or neither.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Awaitable, Callable, Mapping

from hub_ext.core.errors import UpstreamError, UserInputError
from hub_ext.kube.client import Conflict, Forbidden, Kube, KubeError, Unavailable, reason
from server_ext.errors import JobExists
from server_ext.jobs.plan import JobPlan
from server_ext.runtimes.kube import package as kube_package

log = logging.getLogger("mlplatform.jobs.kube")


async def create_shipped(kube: Kube, plan: JobPlan, path: str, manifest: dict,
                         undo: Callable[[dict], Awaitable[None]], staging_env: Mapping[str, str] | None) -> dict:
    """`create` with the plan's package, as `kube_package` says: staged before, or shipped in a
    ConfigMap after (on any failure there, `undo(obj)` and raise)."""
    pkg = plan.package
    if pkg is not None and pkg.delivery == "bucket":
        await kube_package.stage(plan, os.environ if staging_env is None else staging_env)
    obj = await create(kube, path, manifest, plan.project, plan.job.job_id)
    if pkg is not None and pkg.configmap is not None:
        try:
            await kube_package.ship_in_configmap(kube, plan, obj)
        except BaseException:
            await undo(obj)
            raise
    return obj


async def create(kube: Kube, path: str, manifest: dict, project: str, job_id: str) -> dict:
    """POST one object; the API's refusals as the module docstring says."""
    try:
        return await kube.request("POST", path, manifest)
    except Conflict:
        raise JobExists(project, job_id) from None
    except Unavailable as e:
        if e.code == 0:  # no answer in time: the server may have made it all the same
            made = await made_meanwhile(kube, path, manifest)
            if made is not None:
                return made
        log.warning("job %s in %s: create failed: %s", job_id, project, reason(e))
        raise UpstreamError(f"create job {job_id}", reason(e)) from None
    except KubeError as e:
        why = reason(e)
        if isinstance(e, Forbidden) and "quota" in why:
            raise UserInputError("trainingInput", f"the quota of project {project} does not allow this "
                                                  f"job ({why})", 403) from None
        # a webhook's or an admission policy's denial (Katib's Experiment validator answers 400)
        if e.code in (400, 403) and ("denied the request" in why or "denied request" in why):
            raise UserInputError("trainingInput", f"the cluster's admission control refused this job ({why})",
                                 e.code) from None
        if isinstance(e, Forbidden):
            raise UserInputError("project", f"jobs may not be created in project {project} ({why})", 403) from None
        log.warning("job %s in %s: create failed: %s", job_id, project, why)
        raise UpstreamError(f"create job {job_id}", why) from None


async def made_meanwhile(kube: Kube, path: str, manifest: dict, tries: int = 6, pause: float = 0.5) -> dict | None:
    """After a create that got no answer: the object, if the server made it (ours: same name and
    the same annotations, which hold the jobId and the submitted spec; submits of one jobId run
    one at a time here), read back a few times while a slow server may still be making it."""
    name, wanted = manifest["metadata"]["name"], manifest["metadata"].get("annotations") or {}
    for attempt in range(tries):
        try:
            found = await kube.get(f"{path}/{name}")
        except KubeError:
            found = None
        if found is not None:
            have = (found.get("metadata") or {}).get("annotations") or {}
            return found if all(have.get(k) == v for k, v in wanted.items()) else None
        if attempt < tries - 1:
            await asyncio.sleep(pause)
    return None
