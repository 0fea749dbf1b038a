"""`DryRun`: a `JobBackend` that creates nothing; its `submit` answers what it would create, so that
``kubectl ai-platform jobs submit training --dry-run`` runs the very steps of a submit (the jobs
service's checks, planning and package build) against it.

`submit(plan)` answers ``{"runtime", "manifests", "package"}``:

- Kubernetes (`DryRun(kube_settings)`): the objects of `server_ext.jobs.kube.kubeflow.job_manifest` (a
  sweep: `server_ext.jobs.kube.katib.experiment_manifest`; with ``training_api`` ``v2`` or ``auto``,
  the TrainJob of `server_ext.jobs.kube.trainjob` for a job one can run: asking no cluster, ``auto``
  shows what a cluster serving Trainer v2 gets), followed by the package's ConfigMap when it
  ships in one (its ownerReference without the ``uid`` the created object gives it);
  `submit_experiment` answers a user's Katib Experiment as `native_experiment` makes it.
- The local runtime (`DryRun(None, state_dir)`): the ``ml.v1`` Job as it would be recorded (no
  Kubernetes objects); no `submit_experiment`, so the jobs service refuses a Katib Experiment as
  the local backend does.
- ``package``: where a built package would go (``{"filename", "size", "where"}``), else None: the
  staging URI, the ConfigMap's ``configmap://`` URI, or on the local runtime the copy kept in the
  job's own directory under `state_dir`.

Nothing is stored: `get`, `cancel`, `trial_metrics` and `logs` know no job, `list` is empty.
"""

from __future__ import annotations

import pathlib
from dataclasses import replace
from typing import Any, AsyncIterator

from server_ext.errors import JobNotFound
from server_ext.jobs.backend import LogLine
from server_ext.jobs.package_delivery import package_configmap
from server_ext.jobs.plan import JobPlan


class DryRun:
    def __init__(self, kube_settings: Any = None, state_dir: pathlib.Path | None = None):
        self.kube_settings = kube_settings  # None: the local runtime
        self.state_dir = state_dir
        if kube_settings is None:
            self.submit_experiment = None  # the local runtime runs no Katib Experiment

    @property
    def runtime(self) -> str:
        return "local" if self.kube_settings is None else "kubernetes"

    async def submit(self, plan: JobPlan) -> dict:
        if self.kube_settings is None:
            docs = [plan.job.to_json()]
        else:
            from server_ext.jobs.kube.kubeflow import job_manifest
            from server_ext.jobs.kube.trainjob import on_trainer_v2, trainjob_manifest

            if on_trainer_v2(plan, self.kube_settings.training_api, served=True):  # asks no cluster
                plan = replace(plan, trainer_v2=True)
            if plan.sweep is not None:
                from server_ext.jobs.kube.katib import experiment_manifest

                manifest: Any = experiment_manifest(plan, self.kube_settings)
            elif plan.trainer_v2:
                manifest = trainjob_manifest(plan, self.kube_settings)
            else:
                manifest = job_manifest(plan, self.kube_settings)
            docs = list(manifest) if isinstance(manifest, list) else [manifest]
            if plan.package is not None and plan.package.delivery == "configmap":
                docs.append(_package_configmap(plan, docs[0]))
        return {"runtime": self.runtime, "manifests": docs, "package": self._package(plan)}

    async def submit_experiment(self, project: str, owner: str, doc: dict) -> dict:  # Kubernetes only
        from server_ext.jobs.kube.native_experiment import native_experiment

        return {"runtime": self.runtime, "manifests": [native_experiment(doc, project, owner)], "package": None}

    def _package(self, plan: JobPlan) -> dict | None:
        shipped = plan.package
        if shipped is None:
            return None
        if shipped.delivery == "bucket":
            where = f"would be staged to {shipped.uri}"
        elif self.kube_settings is None and self.state_dir is not None:
            from server_ext.runtimes.local.package import SHIPPED_DIR

            copy = self.state_dir / "jobs" / plan.project / plan.job.job_id / SHIPPED_DIR / shipped.filename
            where = (f"would be kept as a copy in the job's directory, {copy} (the job's packageUris names it "
                     f"{shipped.uri}, as on Kubernetes)")
        else:
            where = f"would ship as {shipped.uri}"
        return {"filename": shipped.filename, "size": shipped.size, "where": where}

    async def get(self, project: str, job_id: str) -> dict:
        raise JobNotFound(project, job_id)

    async def list(self, project: str) -> list[dict]:
        return []

    async def cancel(self, project: str, job_id: str) -> dict:
        raise JobNotFound(project, job_id)

    def logs(self, project: str, job_id: str, task: str = "master-replica-0", *, follow: bool = False,
             after: int = 0) -> AsyncIterator[LogLine]:
        raise JobNotFound(project, job_id)

    async def trial_metrics(self, project: str, job_id: str, trial_id: str) -> list[dict]:
        raise JobNotFound(project, job_id)

    async def close(self) -> None:
        pass


def _package_configmap(plan: JobPlan, obj: dict) -> dict:
    """The ConfigMap that carries `plan`'s package, owned by `obj` (the manifest to be created)."""
    shipped = plan.package
    assert shipped is not None
    owner = {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": obj["metadata"]["name"],
             "uid": "assigned-on-create"}
    manifest = package_configmap(plan.name, plan.project, shipped.path.read_bytes(), shipped.filename, owner)
    for ref in manifest["metadata"]["ownerReferences"]:
        ref.pop("uid")
    return manifest
