"""What a project is on Kubernetes: the objects the hub keeps in its namespace. Pure.

`project_objects` returns, for one project (as one user sees it), every object the hub manages
there, in the order they must exist:

1. the Namespace (named after the project), labelled as the platform's (the admission policies of
   ``helm-values/project-policies.yaml`` select project namespaces by that label), with Katib's
   ``katib.kubeflow.org/metrics-collector-injection: enabled`` and Pod Security admission labels
   (enforce ``baseline`` by default, warn and audit at ``restricted``; `TenancySettings`). Its
   annotations record the owner (``mlplatform.io/owner``: ``user:<name>`` or ``group:<group>``,
   so the hub never adopts a namespace it did not make for that owner) and the accelerators the
   project is entitled to, which the pod policy reads (members cannot edit namespaces):
   ``accelerators.mlplatform.io/<name>: <resource>;<node selector k=v,...>`` per accelerator it
   may use, ``mlplatform.io/accelerator-resources`` listing every accelerator resource of the
   catalogue, and ``mlplatform.io/accelerators: all`` for an admin's personal project (no limits; a team
   project keeps the team's grant whoever provisions it);
2. the RoleBinding ``mlplatform-hub`` giving the hub's ServiceAccount the ClusterRole
   ``mlplatform-hub-project`` *in this namespace only* (the hub holds no cluster-wide right to
   Secrets or to create pods; see ``helm-values/hub-rbac.yaml``);
3. the RoleBinding ``mlplatform-operator`` giving the platform's operator (``mlplatform operator``,
   helm-values/operator.yaml) the ClusterRole ``mlplatform-operator-project`` in this namespace
   only: what its pod webhook and dataset loader do in a project (read a credential's metadata
   and a ServiceAccount, patch dataset PVCs, run loader Jobs and read their pods' logs). Outside
   projects the operator holds no right to Secrets or to create Jobs;
4. the ServiceAccount ``mlplatform-runner`` that a personal project's notebook and job pods run as
   (and the operator's dataset loaders everywhere);
5. the Role ``mlplatform-project``: manage training jobs, sweeps (Katib Experiments), batch Jobs
   and ConfigMaps (packages); read trials and suggestions (Katib's controller writes them); read
   and delete pods, read their logs and events; read datasets (PVCs), the quotas and Kueue's
   LocalQueues and Workloads (where the project's work stands in its queue). Never
   Secrets (credentials are created and deleted only through the hub), and never pod creation;
6. the RoleBinding ``mlplatform-project`` giving the Role to the ServiceAccount;
7. per member (`members`: the user provisioning, with their Kubernetes identity when a member
   identity template such as ``oidc:{username}`` is set), the RoleBinding ``mlplatform-member-<slug>``
   of the project Role: in a team project to the member's own ServiceAccount of the same name (made
   here, annotated with the hub user and the identity: their notebook and job pods run as it, so
   their tokens die with their membership) and to their identity; in a personal project to the
   identity only (pods there run as ``mlplatform-runner``);
8. the ResourceQuota ``mlplatform-accelerators``: ``requests.<resource>`` per accelerator
   resource from the project's limits (accelerators that share a resource add up; accelerators
   the project may not use get 0); without limits (admins' projects) no accelerator is capped;
   where Kueue holds the accelerators (`TenancySettings.kueue`) it counts none (empty);
9. the ResourceQuota ``mlplatform-resources`` (CPU, memory, pods and object counts) and the
   LimitRange ``mlplatform-defaults`` (default requests, so every pod counts);
10. NetworkPolicies: no ingress by default; notebook pods reachable from the hub and the proxy;
   job pods from the project's job pods; Katib suggestion pods from Katib's namespace; egress
   anywhere but the cloud metadata addresses;
11. the ConfigMap ``mlplatform-catalog`` with the catalogue (`hub_ext.core.publish.catalog_json`);
12. where Kueue holds the accelerators: the ResourceFlavors, the project's ClusterQueue and its
    LocalQueue ``default`` (`hub_ext.manifests.queues`).

`member_binding_name` names a member's binding, so the membership reconciler (`hub_ext.web.reconcile`,
at hub start and every interval) and a login can remove the binding of a user who left a team. Every object carries ``app.kubernetes.io/managed-by: jupyterhub-mlplatform``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, fields
from typing import Any, Iterable, Mapping

from hub_ext.core.catalog import Accelerator
from hub_ext.core.credentials import MANAGED_BY
from hub_ext.core.entitlements import Project
from hub_ext.core.errors import ConfigError, Problem
from hub_ext.core.profiles import Profile
from hub_ext.core.publish import catalog_json
from hub_ext.core.slugs import safe_slug
from hub_ext.manifests.queues import QueueSettings, queue_objects

SERVICE_ACCOUNT = "mlplatform-runner"
NAMESPACE_LABELS = {"katib.kubeflow.org/metrics-collector-injection": "enabled"}
ROLE = "mlplatform-project"
HUB_BINDING = "mlplatform-hub"
HUB_PROJECT_ROLE = "mlplatform-hub-project"  # a ClusterRole of helm-values/hub-rbac.yaml
OPERATOR_BINDING = "mlplatform-operator"
OPERATOR_PROJECT_ROLE = "mlplatform-operator-project"  # a ClusterRole of helm-values/operator.yaml
QUOTA = "mlplatform-accelerators"
RESOURCE_QUOTA = "mlplatform-resources"
LIMIT_RANGE = "mlplatform-defaults"
CATALOG_CONFIGMAP = "mlplatform-catalog"
PROJECT_LABEL = "mlplatform.io/project"
MEMBER_LABEL = "mlplatform.io/member"
# on a team member's ServiceAccount: the hub user it stands for, and their own Kubernetes identity
# ("" without member_identity_template), by which the operator finds the account of a request
MEMBER_ANNOTATION = "mlplatform.io/member"
IDENTITY_ANNOTATION = "mlplatform.io/identity"
OWNER_ANNOTATION = "mlplatform.io/owner"
ENTITLED_PREFIX = "accelerators.mlplatform.io/"
ACCELERATOR_RESOURCES = "mlplatform.io/accelerator-resources"
ALL_ACCELERATORS = "mlplatform.io/accelerators"
POD_SECURITY_LEVELS = ("privileged", "baseline", "restricted")
QUEUEING = ("auto", "kueue", "off")
PRIORITY_CLASSES = "mlplatform.io/priority-classes"  # the pod policy's list of the classes pods may use
NOTEBOOK_SELECTOR = {"component": "singleuser-server"}  # KubeSpawner's label on notebook pods
JOB_SELECTOR = {"matchExpressions": [{"key": "mlplatform.io/job", "operator": "Exists"}]}
SUGGESTION_SELECTOR = {"matchExpressions": [{"key": "katib.kubeflow.org/suggestion", "operator": "Exists"}]}

_MANAGE = ["get", "list", "watch", "create", "update", "patch", "delete"]
_READ = ["get", "list", "watch"]
ROLE_RULES = [
    {"apiGroups": ["kubeflow.org"], "resources": ["pytorchjobs", "tfjobs", "experiments"], "verbs": _MANAGE},
    {"apiGroups": ["kubeflow.org"], "resources": ["trials", "suggestions"], "verbs": _READ},
    {"apiGroups": ["kubeflow.org"], "resources": ["pytorchjobs/status", "tfjobs/status", "experiments/status",
                                                  "trials/status"], "verbs": ["get"]},
    # a sweep's cancel ends its Experiment and running Trials through their status
    # (server_ext.runtimes.kube.sweeps), and only that: the ValidatingAdmissionPolicy mlplatform-sweep-cancel
    {"apiGroups": ["kubeflow.org"], "resources": ["experiments/status", "trials/status"], "verbs": ["patch"]},
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": _MANAGE},
    # Kubeflow Trainer v2 (server_ext.jobs.kube.trainjob): TrainJobs only; runtimes are the platform's
    {"apiGroups": ["trainer.kubeflow.org"], "resources": ["trainjobs"], "verbs": _MANAGE},
    {"apiGroups": [""], "resources": ["configmaps"], "verbs": _MANAGE},
    {"apiGroups": [""], "resources": ["pods"], "verbs": _READ + ["delete"]},
    {"apiGroups": [""], "resources": ["pods/log", "events", "persistentvolumeclaims", "resourcequotas"],
     "verbs": _READ},
    # a job's private copies of datasets (server_ext.runtimes.kube.dataset_copies), only as copies: the
    # ValidatingAdmissionPolicy mlplatform-dataset-copies; no delete (they go with their jobs)
    {"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": ["create"]},
    # where Kueue holds the accelerators: where one's workloads stand in the queue, never the queues' making
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["localqueues", "workloads"], "verbs": _READ},
]

DEFAULT_QUOTA = {
    "requests.cpu": "64", "requests.memory": "256Gi", "pods": "100",
    "count/configmaps": "500", "count/secrets": "100", "count/persistentvolumeclaims": "50",
    "count/services": "20", "count/jobs.batch": "200", "count/pytorchjobs.kubeflow.org": "100",
    "count/tfjobs.kubeflow.org": "100", "count/experiments.kubeflow.org": "50",
    # every claim counts, those Kubernetes makes from a pod's generic ephemeral volume too
    "requests.storage": "10Ti",
}
DEFAULT_REQUESTS = {"cpu": "100m", "memory": "256Mi"}
METADATA_ADDRESSES = ("169.254.169.254/32", "fd00:ec2::254/128")


@dataclass(frozen=True)
class TenancySettings:
    """How strictly project namespaces are held (PlatformSpawner traits of the same names)."""
    pod_security_enforce: str = "baseline"
    pod_security_warn: str = "restricted"  # warn and audit
    project_quota: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_QUOTA))
    default_requests: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_REQUESTS))
    hub_namespace: str = field(default_factory=lambda: os.environ.get("POD_NAMESPACE") or "jhub")
    hub_service_account: str = "hub"
    operator_namespace: str = "mlplatform-system"
    operator_service_account: str = "mlplatform-operator"
    katib_namespace: str = "kubeflow"
    blocked_egress: tuple[str, ...] = METADATA_ADDRESSES
    # the PriorityClasses the project's pods may name (the pod policy reads them from the namespace's
    # PRIORITY_CLASSES annotation); none by default: a pod uses the cluster's default priority
    priority_classes: tuple[str, ...] = ()
    # accelerators held by Kueue's queues (`hub_ext.manifests.queues`): "auto" where the hub finds
    # Kueue installed, "kueue" always (a spawn fails while it is missing), "off" never
    queueing: str = "auto"
    queue_cohort: str = "mlplatform"
    queue_borrowing_limit: int | None = None
    kueue: bool = False  # not configured: whether this hub found Kueue (set by the spawner)

    @classmethod
    def from_config(cls, section: Mapping[str, Any]) -> "TenancySettings":
        """From a config section's trait values (missing or empty ones keep their defaults)."""
        values = {f.name: section[f.name] for f in fields(cls)
                  if f.name != "kueue" and section.get(f.name) not in (None, "")}
        for name in ("blocked_egress", "priority_classes"):
            if name in values:
                values[name] = tuple(values[name])
        settings = cls(**values)
        problems = [Problem(name, f"must be one of {', '.join(POD_SECURITY_LEVELS)}, not {value!r}")
                    for name, value in (("pod_security_enforce", settings.pod_security_enforce),
                                        ("pod_security_warn", settings.pod_security_warn))
                    if value not in POD_SECURITY_LEVELS]
        if settings.queueing not in QUEUEING:
            problems.append(Problem("queueing", f"must be one of {', '.join(QUEUEING)}, not {settings.queueing!r}"))
        if settings.queue_borrowing_limit is not None and settings.queue_borrowing_limit < 0:
            problems.append(Problem("queue_borrowing_limit", "must be 0 or more (None: whatever is idle)"))
        if problems:
            raise ConfigError(problems)
        return settings

    @property
    def queues(self) -> QueueSettings | None:
        """How the project's queues are made, where Kueue holds the accelerators; None where not."""
        if not self.kueue:
            return None
        return QueueSettings(cohort=self.queue_cohort, borrowing_limit=self.queue_borrowing_limit)

    @property
    def hub_user(self) -> str:
        return f"system:serviceaccount:{self.hub_namespace}:{self.hub_service_account}"


def labels(project: Project) -> dict[str, str]:
    return {**MANAGED_BY, PROJECT_LABEL: project.name}


def member_binding_name(username: str) -> str:
    """A member's RoleBinding and, in a team project, their ServiceAccount (one name for both)."""
    return f"mlplatform-member-{safe_slug(username, max_length=44)}"


def pod_account(project: Project, username: str) -> str:
    """The ServiceAccount `username`'s pods run as in `project`: their own in a team project."""
    return SERVICE_ACCOUNT if project.personal else member_binding_name(username)


def quota_hard(project: Project, accelerators: Mapping[str, Accelerator]) -> dict[str, str]:
    if project.limits is None:
        return {}
    per_resource: dict[str, int] = {}
    for name, acc in accelerators.items():
        per_resource[acc.resource] = per_resource.get(acc.resource, 0) + project.limits.get(name, 0)
    return {f"requests.{resource}": str(n) for resource, n in sorted(per_resource.items())}


def entitlement_annotations(project: Project, accelerators: Mapping[str, Accelerator]) -> dict[str, str]:
    """What the pod admission policy reads: which accelerator (resource and node selector) the
    project's pods may ask for. Selector values cannot hold ',' or '=' (label syntax)."""
    out = {ACCELERATOR_RESOURCES: ",".join(sorted({a.resource for a in accelerators.values()}))}
    if project.limits is None:
        out[ALL_ACCELERATORS] = "all"
        return out
    for name, acc in sorted(accelerators.items()):
        if project.limits.get(name, 0) > 0:
            selector = ",".join(f"{k}={v}" for k, v in sorted(acc.node_selector))
            out[f"{ENTITLED_PREFIX}{name}"] = f"{acc.resource};{selector}"
    return out


def _pod_security(settings: TenancySettings) -> dict[str, str]:
    out = {"pod-security.kubernetes.io/enforce": settings.pod_security_enforce,
           "pod-security.kubernetes.io/enforce-version": "latest"}
    for mode in ("warn", "audit"):
        out[f"pod-security.kubernetes.io/{mode}"] = settings.pod_security_warn
        out[f"pod-security.kubernetes.io/{mode}-version"] = "latest"
    return out


def _network_policies(meta, settings: TenancySettings) -> list[dict]:
    def policy(name: str, selector: dict, **spec) -> dict:
        return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": meta(name),
                "spec": {"podSelector": selector, **spec}}

    from_ns = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": settings.hub_namespace}},
               "podSelector": {"matchExpressions": [{"key": "component", "operator": "In",
                                                     "values": ["hub", "proxy"]}]}}
    katib = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": settings.katib_namespace}}}
    v4 = [c for c in settings.blocked_egress if ":" not in c]
    v6 = [c for c in settings.blocked_egress if ":" in c]
    egress = [{"ipBlock": {"cidr": "0.0.0.0/0", **({"except": v4} if v4 else {})}},
              {"ipBlock": {"cidr": "::/0", **({"except": v6} if v6 else {})}},
              {"namespaceSelector": {}}]
    return [
        policy("mlplatform-default-deny", {}, policyTypes=["Ingress"]),
        policy("mlplatform-notebooks", {"matchLabels": dict(NOTEBOOK_SELECTOR)}, policyTypes=["Ingress"],
               ingress=[{"from": [from_ns]}]),
        policy("mlplatform-jobs", JOB_SELECTOR, policyTypes=["Ingress"], ingress=[{"from": [{"podSelector": JOB_SELECTOR}]}]),
        policy("mlplatform-suggestions", SUGGESTION_SELECTOR, policyTypes=["Ingress"],
               ingress=[{"from": [katib]}]),
        policy("mlplatform-egress", {}, policyTypes=["Egress"], egress=[{"to": egress}]),
    ]


def project_objects(project: Project, accelerators: Mapping[str, Accelerator], profiles: Iterable[Profile],
                    members: Iterable[tuple[str, str]] = (),
                    settings: TenancySettings | None = None) -> list[dict]:
    """The objects of `project`'s namespace. `members`: (hub username, Kubernetes user name)."""
    settings = settings or TenancySettings()
    ns = project.name
    lab = labels(project)

    def meta(name: str, **extra) -> dict:
        return {"name": name, "namespace": ns, "labels": {**lab, **extra}}

    def binding(name: str, role_kind: str, role: str, *subjects: dict, **extra) -> dict:
        return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta(name, **extra),
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
                "subjects": list(subjects)}

    annotations = {**entitlement_annotations(project, accelerators),
                   PRIORITY_CLASSES: ",".join(settings.priority_classes)}
    if project.owner:
        annotations[OWNER_ANNOTATION] = project.owner
    objects = [
        {"apiVersion": "v1", "kind": "Namespace",
         "metadata": {"name": ns, "labels": {**lab, **NAMESPACE_LABELS, **_pod_security(settings)},
                      "annotations": annotations}},
        binding(HUB_BINDING, "ClusterRole", HUB_PROJECT_ROLE,
                {"kind": "ServiceAccount", "name": settings.hub_service_account, "namespace": settings.hub_namespace}),
        binding(OPERATOR_BINDING, "ClusterRole", OPERATOR_PROJECT_ROLE,
                {"kind": "ServiceAccount", "name": settings.operator_service_account,
                 "namespace": settings.operator_namespace}),
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(SERVICE_ACCOUNT)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta(ROLE), "rules": ROLE_RULES},
        binding(ROLE, "Role", ROLE, {"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": ns}),
    ]
    for username, identity in sorted(members):
        name, member = member_binding_name(username), {MEMBER_LABEL: safe_slug(username, max_length=63)}
        subjects = []
        if not project.personal:  # a team member's pods run as their own ServiceAccount, bound while they belong
            account = meta(name, **member)
            account["annotations"] = {MEMBER_ANNOTATION: username, IDENTITY_ANNOTATION: identity}
            objects.append({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": account})
            subjects.append({"kind": "ServiceAccount", "name": name, "namespace": ns})
        if identity:
            subjects.append({"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": identity})
        if subjects:
            objects.append(binding(name, "Role", ROLE, *subjects, **member))
    objects += [
        {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": meta(QUOTA),
         "spec": {"hard": {} if settings.queues else quota_hard(project, accelerators)}},
        {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": meta(RESOURCE_QUOTA),
         "spec": {"hard": dict(settings.project_quota)}},
        {"apiVersion": "v1", "kind": "LimitRange", "metadata": meta(LIMIT_RANGE),
         "spec": {"limits": [{"type": "Container", "defaultRequest": dict(settings.default_requests)}]}},
        *_network_policies(meta, settings),
    ]
    catalog = catalog_json(accelerators.values(), profiles, project)
    objects.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(CATALOG_CONFIGMAP),
                    "data": {"catalog.json": json.dumps(catalog, sort_keys=True, indent=1)}})
    if settings.queues:
        objects += queue_objects(project, accelerators, settings.queues, lab)
    return objects
