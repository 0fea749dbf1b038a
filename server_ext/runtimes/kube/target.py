"""Which cluster and project a notebook server or `kubectl ai-platform` talks to (the context
itself is chosen by `server_ext.service.config.context_for_region`), and the catalogue it plans jobs with.

- `connect(context)`: a `hub_ext.kube.client.Kube` for a kubeconfig context (``None``: the current one),
  or the pod's own ServiceAccount when running in a cluster without a kubeconfig. Returns the
  context's (or the pod's) namespace too, the default project.
- `published(kube, project)`: what the hub published in the project's ``mlplatform-catalog``
  ConfigMap (`hub_ext.core.publish.catalog_json`): its accelerators and the project's accelerator
  ``limits`` (name → at most this many at once; ``None``: no limit, an admin's project), as a
  `Published`. The ConfigMap is written by the hub alone (an admission policy keeps members from
  changing it), so jobs planned outside a hub take their limits from it. Absent or unreachable:
  the built-in catalogue and no limits (a cluster without the platform's hub; the cluster's own
  admission still decides). Refused (403: every member may read it, so the identity is not a
  member): `UserInputError` on ``project``, 403. Present but malformed: `UpstreamError` naming it,
  never a silent catalogue without limits.
"""

from __future__ import annotations

import json
import logging
import os
import pathlib
from dataclasses import dataclass, field
from typing import Mapping

from kubernetes_asyncio import client, config

from hub_ext.core.catalog import Accelerator
from hub_ext.core.errors import UpstreamError, UserInputError
from hub_ext.core.publish import accelerator_from_json
from hub_ext.kube.client import Forbidden, Kube, KubeError, path_of, reason
from hub_ext.manifests.tenancy import CATALOG_CONFIGMAP
from server_ext.jobs.defaults import DEFAULT_ACCELERATORS

log = logging.getLogger("mlplatform.kube_target")
SA_NAMESPACE = pathlib.Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


async def connect(context: str | None = None, env: Mapping[str, str] = os.environ) -> tuple[Kube, str | None]:
    """(Kube, default namespace). In a pod with no kubeconfig and no context asked for: in-cluster."""
    configuration = client.Configuration()
    kubeconfig = env.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
    if context is None and env.get("KUBERNETES_SERVICE_HOST") and not os.path.exists(kubeconfig.split(":")[0]):
        config.load_incluster_config(client_configuration=configuration)
        namespace = SA_NAMESPACE.read_text().strip() if SA_NAMESPACE.exists() else None
    else:
        try:
            await config.load_kube_config(context=context, client_configuration=configuration)
            contexts, active = config.list_kube_config_contexts()
        except (config.ConfigException, OSError) as e:
            field = "--context" if context else "KUBECONFIG"
            raise UserInputError(field, f"no usable kubeconfig context: {e}") from None
        chosen = next((c for c in contexts if c["name"] == context), active) if context else active
        namespace = (chosen.get("context") or {}).get("namespace")
    return Kube(client.ApiClient(configuration)), namespace


@dataclass(frozen=True)
class Published:
    accelerators: dict[str, Accelerator] = field(default_factory=lambda: dict(DEFAULT_ACCELERATORS))
    limits: Mapping[str, int] | None = None  # None: no limit
    published: bool = False  # False: the built-in catalogue (no ConfigMap)


def published_of(cm: dict | None, project: str) -> Published:
    """Pure: `Published` from the project's catalogue ConfigMap (None: absent)."""
    if not cm:
        return Published()
    try:
        doc = json.loads((cm.get("data") or {})["catalog.json"])
        accelerators = {a["name"]: accelerator_from_json(a) for a in doc["accelerators"]}
        entry = doc.get("project")
        limits = None if entry is None or entry.get("limits") is None else {
            str(k): _count(v) for k, v in entry["limits"].items()}
        if entry is not None and entry.get("name") not in (None, project):
            raise ValueError("the catalogue is another project's")
    except (KeyError, TypeError, ValueError, AttributeError):
        raise UpstreamError(f"read the catalogue of project {project}",
                            f"its {CATALOG_CONFIGMAP} ConfigMap is malformed; ask an administrator") from None
    return Published(accelerators, limits, True)


def _count(value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError("a limit is a whole number")
    return value


async def published(kube: Kube, project: str) -> Published:
    """What the hub published for `project` (see the module docstring)."""
    try:
        cm = await kube.get(path_of("ConfigMap", project, CATALOG_CONFIGMAP))
    except Forbidden as e:  # every member may read it: this identity is not one
        raise UserInputError("project", f"your Kubernetes identity may not use the project {project!r} "
                                        f"({reason(e)})", 403) from None
    except KubeError as e:
        log.info("catalogue of project %s unreadable (%s); using the built-in one", project, type(e).__name__)
        cm = None
    return published_of(cm, project)
