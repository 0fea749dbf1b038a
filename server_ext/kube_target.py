"""Which cluster and project a notebook server or `kubectl ai-platform` talks to (the context
itself is chosen by `server_ext.config.context_for_region`), and the catalogue it plans jobs with.

- `connect(context)`: a `hub_ext.kube.Kube` for a kubeconfig context (``None``: the current one),
  or the pod's own ServiceAccount when running in a cluster without a kubeconfig. Returns the
  context's (or the pod's) namespace too, the default project.
- `catalog(kube, project)`: the accelerators the hub published in the project's
  ``mlplatform-catalog`` ConfigMap; the built-in catalogue when it is absent or unreadable (the
  second value says which, for a note to the user).
"""

from __future__ import annotations

import json
import logging
import os
import pathlib
from typing import Mapping

from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

from hub_ext.catalog import Accelerator
from hub_ext.errors import UserInputError
from hub_ext.kube import Kube, path_of
from hub_ext.publish import accelerator_from_json
from hub_ext.tenancy import CATALOG_CONFIGMAP

from .jobs.defaults import DEFAULT_ACCELERATORS

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


async def catalog(kube: Kube, project: str) -> tuple[dict[str, Accelerator], bool]:
    """(accelerators, published?)."""
    try:
        cm = await kube.get(path_of("ConfigMap", project, CATALOG_CONFIGMAP))
    except (ApiException, OSError) as e:
        log.info("catalogue of project %s unreadable (%s); using the built-in one", project, type(e).__name__)
        cm = None
    if not cm:
        return dict(DEFAULT_ACCELERATORS), False
    try:
        doc = json.loads((cm.get("data") or {})["catalog.json"])
        return {a["name"]: accelerator_from_json(a) for a in doc["accelerators"]}, True
    except (KeyError, TypeError, ValueError):
        log.warning("catalogue ConfigMap of project %s is malformed; using the built-in one", project)
        return dict(DEFAULT_ACCELERATORS), False
