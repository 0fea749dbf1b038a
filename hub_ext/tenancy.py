"""What a project is on Kubernetes: the objects the hub keeps in its namespace. Pure.

`project_objects` returns, for one project (as one user sees it), every object the hub manages
there, in the order they must exist:

1. the Namespace (named after the project), labelled as the platform's and with Katib's
   ``katib.kubeflow.org/metrics-collector-injection: enabled`` (sweeps' metrics are collected);
2. the ServiceAccount ``mlplatform-runner`` that notebook and job pods run as;
3. the Role ``mlplatform-project``: manage training jobs, sweeps (Katib), batch Jobs and
   ConfigMaps (packages); read and delete pods, read their logs and events; read datasets
   (PVCs) and the quota. Never Secrets (credentials are created and deleted only through the
   hub), and never pod creation (a pod can mount any Secret of its namespace);
4. the RoleBinding ``mlplatform-project`` giving the Role to the ServiceAccount;
5. with a member identity template (``oidc:{username}``), one RoleBinding per member,
   ``mlplatform-member-<slug>``, for the members' own Kubernetes identities;
6. the ResourceQuota ``mlplatform-accelerators``: ``requests.<resource>`` per accelerator
   resource from the project's limits (accelerators that share a resource add up; accelerators
   the project may not use get 0, so jobs are held to the same entitlement as notebooks);
   without limits (admins' projects) no accelerator is capped;
7. the ConfigMap ``mlplatform-catalog`` with the catalogue (`hub_ext.publish.catalog_json`).

`member_binding_name` names a member's binding, so a login can remove the binding of a user
who left a team. Every object carries ``app.kubernetes.io/managed-by: jupyterhub-mlplatform``.
"""

from __future__ import annotations

import json
from typing import Iterable, Mapping

from .slugs import safe_slug

from .catalog import Accelerator
from .credentials import MANAGED_BY
from .entitlements import Project
from .profiles import Profile
from .publish import catalog_json

SERVICE_ACCOUNT = "mlplatform-runner"
NAMESPACE_LABELS = {"katib.kubeflow.org/metrics-collector-injection": "enabled"}
ROLE = "mlplatform-project"
QUOTA = "mlplatform-accelerators"
CATALOG_CONFIGMAP = "mlplatform-catalog"
PROJECT_LABEL = "mlplatform.io/project"
MEMBER_LABEL = "mlplatform.io/member"

_MANAGE = ["get", "list", "watch", "create", "update", "patch", "delete"]
_READ = ["get", "list", "watch"]
ROLE_RULES = [
    {"apiGroups": ["kubeflow.org"], "resources": ["pytorchjobs", "tfjobs", "experiments", "trials", "suggestions"],
     "verbs": _MANAGE},
    {"apiGroups": ["kubeflow.org"], "resources": ["pytorchjobs/status", "tfjobs/status", "experiments/status",
                                                  "trials/status"], "verbs": ["get"]},
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": _MANAGE},
    {"apiGroups": [""], "resources": ["configmaps"], "verbs": _MANAGE},
    {"apiGroups": [""], "resources": ["pods"], "verbs": _READ + ["delete"]},
    {"apiGroups": [""], "resources": ["pods/log", "events", "persistentvolumeclaims", "resourcequotas"],
     "verbs": _READ},
]


def labels(project: Project) -> dict[str, str]:
    return {**MANAGED_BY, PROJECT_LABEL: project.name}


def member_binding_name(username: str) -> str:
    return f"mlplatform-member-{safe_slug(username, max_length=44)}"


def quota_hard(project: Project, accelerators: Mapping[str, Accelerator]) -> dict[str, str]:
    if project.limits is None:
        return {}
    per_resource: dict[str, int] = {}
    for name, acc in accelerators.items():
        per_resource[acc.resource] = per_resource.get(acc.resource, 0) + project.limits.get(name, 0)
    return {f"requests.{resource}": str(n) for resource, n in sorted(per_resource.items())}


def project_objects(project: Project, accelerators: Mapping[str, Accelerator], profiles: Iterable[Profile],
                    members: Iterable[tuple[str, str]] = ()) -> list[dict]:
    """The objects of `project`'s namespace. `members`: (hub username, Kubernetes user name)."""
    ns = project.name
    lab = labels(project)

    def meta(name: str, **extra) -> dict:
        return {"name": name, "namespace": ns, "labels": {**lab, **extra}}

    objects = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": {**lab, **NAMESPACE_LABELS}}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(SERVICE_ACCOUNT)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta(ROLE), "rules": ROLE_RULES},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta(ROLE),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ROLE},
         "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": ns}]},
    ]
    for username, identity in sorted(members):
        objects.append({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": meta(member_binding_name(username), **{MEMBER_LABEL: safe_slug(username, max_length=63)}),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ROLE},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": identity}]})
    objects.append({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": meta(QUOTA),
                    "spec": {"hard": quota_hard(project, accelerators)}})
    catalog = catalog_json(accelerators.values(), profiles, project)
    objects.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(CATALOG_CONFIGMAP),
                    "data": {"catalog.json": json.dumps(catalog, sort_keys=True, indent=1)}})
    return objects
