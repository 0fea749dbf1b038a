"""A notebook server's private writable copies of datasets (``frames:copy`` on the spawn form or in
``user_options["datasets"]``), part `ServerCopies` of `PlatformSpawner`.

Guarantees: each copy is a claim ``<pod>-<dataset>-copy`` (`with_claims` names them in the plan
before its volumes are made) made by the hub from the dataset load's snapshot
(`hub_ext.manifests.dataset_copies`), labelled with the server's pod (``mlplatform.io/server-pod``),
made before the pod (a claim left by a server that did not stop cleanly is used again), mounted
writable at the dataset's usual directory, and deleted when the server stops or its start fails
(`delete`: every claim with the pod's label in the server's namespace). Only where the dataset has a
snapshot (`Dataset.snapshot`); the project's quota counts them. A dataset gone is a 409, a copy the
project may not have a 403 (`UserInputError` naming ``datasets``); a failure to delete is logged.
"""

from __future__ import annotations

import dataclasses
import logging

from hub_ext.core.errors import UpstreamError, UserInputError
from hub_ext.kube.client import Conflict, Forbidden, Kube, KubeError, NotFound, path_of, reason
from hub_ext.manifests.dataset_copies import copy_manifest, with_claims

SERVER_LABEL = "mlplatform.io/server-pod"


class ServerCopies:
    """The writable copies of one server where it is now: `namespace`, its pod `pod_name`."""

    def __init__(self, kube: Kube, namespace: str, pod_name: str, log: logging.Logger | logging.LoggerAdapter,
                 log_name: str):
        self.kube, self.namespace, self.pod_name = kube, namespace, pod_name
        self.log, self.log_name = log, log_name

    def with_claims(self, plan):
        """`plan` with its copies' claim names (before its volumes are made)."""
        datasets = with_claims(plan.mounts.datasets, self.pod_name)
        return dataclasses.replace(plan, mounts=dataclasses.replace(plan.mounts, datasets=datasets))

    async def make(self, plan) -> None:
        ns = plan.project.name
        for d in (d for d in plan.mounts.datasets if d.copy):
            try:
                source = await self.kube.request("GET", path_of("PersistentVolumeClaim", ns, d.name))
                await self.kube.create(copy_manifest(d.claim, ns, d.name, d.snapshot, source,
                                                     labels={SERVER_LABEL: self.pod_name}))
                self.log.info("%s: writable copy %s of the dataset %s made from %s", self.log_name, d.claim,
                              d.name, d.snapshot)
            except Conflict:
                pass  # left by this server's last run, which did not stop cleanly: its files are the user's
            except NotFound:  # the copies made so far go with the failed start's stop
                raise UserInputError("datasets", f"the dataset {d.name!r} is gone from the project {ns}", 409) from None
            except KubeError as e:
                if isinstance(e, Forbidden):
                    raise UserInputError("datasets", f"the project {ns!r} may not have another copy of the dataset "
                                                     f"{d.name!r} ({reason(e)})", 403) from None
                raise UpstreamError(f"copy the dataset {d.name}", reason(e)) from None

    async def delete(self) -> None:
        try:
            found = await self.kube.list(f"/api/v1/namespaces/{self.namespace}/persistentvolumeclaims",
                                         labelSelector=f"{SERVER_LABEL}={self.pod_name}")
            for claim in found["items"]:
                await self.kube.delete(path_of("PersistentVolumeClaim", self.namespace, claim["metadata"]["name"]))
        except KubeError as e:
            self.log.warning("could not delete the dataset copies of %s: %s", self.log_name, reason(e))
