"""What the platform needs of a cluster, as data: what `mlplatform doctor` checks. Pure.

- `APIS`: the API groups the platform uses, each with the resources it needs, whether the platform
  works without it (and what is then missing), and the fix.
- `HUB_CLUSTER_RULES` / `OPERATOR_CLUSTER_RULES`: the cluster-wide rights of the hub's and the
  operator's ServiceAccounts, exactly the rules of the ClusterRoles ``mlplatform-hub``
  (helm-values/hub-rbac.yaml) and ``mlplatform-operator`` (helm-values/operator.yaml); a unit test
  keeps the files and these lists equal. `access_checks` expands rules into the single
  (verb, group, resource, subresource, name) questions a SubjectAccessReview asks.
- `CLUSTER_OBJECTS`: the cluster-scoped objects the manifests install, by kind, so a missing one
  is named with the file that makes it (a unit test keeps them in step with the files);
  `TRAINER_RUNTIMES`, those of helm-values/trainer-runtimes.yaml, needed where Trainer v2 is served.
- `nodes_offering`: the nodes that can run an accelerator of the catalogue (its node selector and a
  non-zero allocatable of its resource); `strategy_hint`: where none can, whether the nodes use the
  other MIG strategy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from hub_ext.core.catalog import PRODUCT_LABEL, Accelerator

MIN_KUBERNETES = (1, 30)  # ValidatingAdmissionPolicy and webhook matchConditions are GA from 1.30
HUB_ACCOUNT = "jhub/hub"  # z2jh's hub ServiceAccount in the namespace the manifests name
OPERATOR_NAMESPACE, OPERATOR_ACCOUNT = "mlplatform-system", "mlplatform-operator"
OPERATOR_DEPLOYMENT = "mlplatform-operator"
WEBHOOK_CONFIGURATIONS = {
    "ValidatingWebhookConfiguration": ("mlplatform-credential-secrets",),
    "MutatingWebhookConfiguration": ("mlplatform-credential-mounts", "mlplatform-member-accounts"),
}
# the ClusterTrainingRuntimes of helm-values/trainer-runtimes.yaml, which TrainJobs name (where Trainer v2 is
# served, the jobs' default training_api "auto" runs them as TrainJobs)
TRAINER_API = "trainer.kubeflow.org/v1alpha1"
TRAINER_RUNTIMES = ("mlplatform-torch",)
# the operator's webhook that a server-side dry run of a credential Secret reaches
CREDENTIAL_WEBHOOK = "credential-secrets.operator.mlplatform.io"
# the Service of the NVIDIA DCGM exporter (its Helm chart's and the GPU Operator's labels)
DCGM_SELECTORS = ("app.kubernetes.io/name=dcgm-exporter", "app=nvidia-dcgm-exporter")


@dataclass(frozen=True)
class Api:
    name: str  # what it is, in words
    choices: tuple[tuple[str, frozenset[str]], ...]  # (group/version, resources): any one will do
    used_for: str
    without: str | None  # what the platform does without it; None: it cannot work without it
    fix: str


APIS = (
    Api("training jobs", ((TRAINER_API, frozenset({"trainjobs", "clustertrainingruntimes"})),
                          ("kubeflow.org/v1", frozenset({"pytorchjobs", "tfjobs"}))),
        "ml.v1 training jobs (Kubeflow Trainer v2 TrainJobs, or Training Operator v1 PyTorchJobs/TFJobs)", None,
        "install Kubeflow Trainer v2.3 (and kubectl apply -f helm-values/trainer-runtimes.yaml), or the "
        "Kubeflow Training Operator v1.9"),
    Api("sweeps", (("kubeflow.org/v1beta1", frozenset({"experiments", "trials", "suggestions"})),),
        "hyperparameter sweeps (Katib Experiments)", "sweeps are refused, saying Katib is not installed",
        "install Katib v0.19 (its controller, its DB manager and the suggestion services' images)"),
    Api("queueing", (("kueue.x-k8s.io/v1beta2", frozenset({"resourceflavors", "clusterqueues", "cohorts",
                                                            "localqueues", "workloads"})),),
        "accelerators shared by queueing (Kueue)",
        "accelerators are held by each project's ResourceQuota: what does not fit is refused, not queued",
        "install Kueue v0.17 with helm-values/kueue.yaml's configuration"),
    Api("volume snapshots", (("snapshot.storage.k8s.io/v1", frozenset({"volumesnapshots",
                                                                       "volumesnapshotclasses"})),),
        "writable copies of datasets made from a snapshot",
        "a writable dataset copy is loaded again from the source instead of restored from a snapshot",
        "install the external-snapshotter's CRDs and snapshot-controller, and a CSI driver with snapshots"),
)

_MANAGE = ["get", "list", "watch", "create", "update", "patch", "delete"]
_READ = ["get", "list", "watch"]
HUB_CLUSTER_RULES = [
    {"apiGroups": [""], "resources": ["nodes"], "verbs": _READ},
    {"apiGroups": [""], "resources": ["pods", "events", "persistentvolumeclaims"], "verbs": _READ},
    {"apiGroups": [""], "resources": ["namespaces"], "verbs": _MANAGE},
    {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["rolebindings"], "verbs": ["get", "create"]},
    {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["bind"],
     "resourceNames": ["mlplatform-hub-project", "mlplatform-operator-project"]},
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["resourceflavors", "cohorts", "clusterqueues"],
     "verbs": ["get", "list", "watch", "create", "update", "delete"]},
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads", "localqueues"], "verbs": _READ},
]
OPERATOR_CLUSTER_RULES = [
    {"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": _READ},
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": _READ},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]},
    {"apiGroups": ["storage.k8s.io"], "resources": ["storageclasses"], "verbs": ["get"]},
    {"apiGroups": ["snapshot.storage.k8s.io"], "resources": ["volumesnapshotclasses"], "verbs": ["list"]},
    {"apiGroups": ["kubeflow.org"], "resources": ["trials"], "verbs": _READ},
    {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "verbs": ["list", "watch"]},
    {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list", "watch"]},
    {"apiGroups": ["admissionregistration.k8s.io"],
     "resources": ["validatingwebhookconfigurations", "mutatingwebhookconfigurations"],
     "resourceNames": ["mlplatform-credential-secrets", "mlplatform-credential-mounts", "mlplatform-member-accounts"],
     "verbs": ["get", "patch"]},
]

# (kind, name) of the cluster-scoped objects each manifest installs, as its file names them
CLUSTER_OBJECTS = {
    "helm-values/hub-rbac.yaml": (("ClusterRole", "mlplatform-hub"), ("ClusterRoleBinding", "mlplatform-hub"),
                                  ("ClusterRole", "mlplatform-hub-project")),
    "helm-values/operator.yaml": (
        ("ClusterRole", "mlplatform-operator"), ("ClusterRoleBinding", "mlplatform-operator"),
        ("ClusterRole", "mlplatform-operator-project"),
        *(("ValidatingAdmissionPolicy", n) for n in ("mlplatform-dataset-loaders", "mlplatform-operator-claims")),
        *(("ValidatingAdmissionPolicyBinding", n) for n in ("mlplatform-dataset-loaders", "mlplatform-operator-claims")),
        *((kind, name) for kind, names in WEBHOOK_CONFIGURATIONS.items() for name in names)),
    "helm-values/project-policies.yaml": tuple(
        (kind, name) for name in ("mlplatform-project-pods", "mlplatform-reserved-objects", "mlplatform-hub-guard",
                                  "mlplatform-dataset-copies", "mlplatform-sweep-cancel",
                                  "mlplatform-controller-references", "mlplatform-trainjobs",
                                  "mlplatform-notebook-servers")
        for kind in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")),
}


@dataclass(frozen=True)
class Access:
    verb: str
    group: str
    resource: str
    subresource: str = ""
    name: str = ""

    def attributes(self) -> dict[str, str]:
        """A SubjectAccessReview's ``resourceAttributes``."""
        out = {"verb": self.verb, "group": self.group, "resource": self.resource}
        if self.subresource:
            out["subresource"] = self.subresource
        if self.name:
            out["name"] = self.name
        return out

    def __str__(self) -> str:
        what = self.resource + (f"/{self.subresource}" if self.subresource else "")
        group = f" ({self.group})" if self.group else ""
        return f"{self.verb} {what}{f' {self.name}' if self.name else ''}{group}"


def access_checks(rules: Iterable[Mapping]) -> list[Access]:
    """Every single access the rules grant, in their order."""
    out = []
    for rule in rules:
        for group in rule.get("apiGroups") or [""]:
            for resource in rule["resources"]:
                plural, _, sub = resource.partition("/")
                for verb in rule["verbs"]:
                    for name in rule.get("resourceNames") or [""]:
                        out.append(Access(verb, group, plural, sub, name))
    return out


def service_account_user(account: str) -> tuple[str, list[str]]:
    """``namespace/name`` as the API server names that ServiceAccount, and its groups."""
    namespace, _, name = account.partition("/")
    return (f"system:serviceaccount:{namespace}:{name}",
            ["system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"])


def nodes_offering(acc: Accelerator, nodes: Iterable[Mapping]) -> dict[str, int]:
    """Name → allocatable count of the nodes that match the accelerator's node selector and offer
    its resource."""
    wanted = acc.node_selector_dict()
    out = {}
    for node in nodes:
        labels = (node.get("metadata") or {}).get("labels") or {}
        if any(labels.get(k) != v for k, v in wanted.items()):
            continue
        count = _count((node.get("status") or {}).get("allocatable", {}).get(acc.resource))
        if count:
            out[node["metadata"]["name"]] = count
    return out


def strategy_hint(acc: Accelerator, nodes: list[dict]) -> str:
    """Why no node offers a MIG accelerator, where the nodes use the other MIG strategy ('' otherwise)."""
    if acc.type != "mig":
        return ""
    products = {(n["metadata"].get("labels") or {}).get(PRODUCT_LABEL, "") for n in nodes}
    if acc.strategy == "mixed" and any(p.endswith(f"-MIG-{acc.mig_profile}") for p in products):
        return f" (nodes labelled *-MIG-{acc.mig_profile} use the 'single' MIG strategy)"
    mixed = f"nvidia.com/mig-{acc.mig_profile}"
    if acc.strategy == "single" and any(mixed in ((n.get("status") or {}).get("allocatable") or {}) for n in nodes):
        return f" (nodes offer {mixed}: the 'mixed' MIG strategy)"
    return ""


def _count(value) -> int:
    try:
        return int(str(value or "0"))
    except ValueError:
        return 0
