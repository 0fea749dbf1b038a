"""The resource types the stand-in serves: built-in kinds plus any CustomResourceDefinition.

A `ResourceType` is everything routing, discovery and storage need to know about a kind. The
built-in table covers what the platform and KubeSpawner touch; CRDs are registered from
`apiextensions.k8s.io/v1` manifests (the files in `crds/`, or CRD objects created through the API),
carrying their `openAPIV3Schema` for validation and pruning.
"""

from __future__ import annotations

import pathlib
from dataclasses import dataclass, field

import yaml

CRD_DIR = pathlib.Path(__file__).parents[1] / "cluster" / "crds"
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    subresources: frozenset = frozenset()
    schema: dict | None = field(default=None, compare=False, hash=False, repr=False)
    short_names: tuple = ()
    label_name: bool = False  # names must be DNS-1123 labels (namespaces, services)
    field_labels: tuple = ()  # extra fieldSelector keys beyond metadata.name/namespace

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.group, self.version, self.plural)

    @property
    def is_custom(self) -> bool:
        return self.schema is not None


_POD_FIELDS = ("status.phase", "spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
               "spec.serviceAccountName", "status.podIP", "status.nominatedNodeName")
_EVENT_FIELDS = ("involvedObject.kind", "involvedObject.name", "involvedObject.namespace",
                 "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.fieldPath",
                 "involvedObject.resourceVersion", "reason", "type", "source", "reportingComponent")

BUILTIN = (
    ResourceType("", "v1", "pods", "Pod", subresources=frozenset({"status", "log"}), short_names=("po",),
                 field_labels=_POD_FIELDS),
    ResourceType("", "v1", "services", "Service", subresources=frozenset({"status"}), short_names=("svc",),
                 label_name=True),
    ResourceType("", "v1", "endpoints", "Endpoints", short_names=("ep",)),
    ResourceType("", "v1", "configmaps", "ConfigMap", short_names=("cm",)),
    ResourceType("", "v1", "secrets", "Secret", field_labels=("type",)),
    ResourceType("", "v1", "serviceaccounts", "ServiceAccount", short_names=("sa",)),
    ResourceType("", "v1", "events", "Event", short_names=("ev",), field_labels=_EVENT_FIELDS),
    ResourceType("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", subresources=frozenset({"status"}),
                 short_names=("pvc",)),
    ResourceType("", "v1", "resourcequotas", "ResourceQuota", subresources=frozenset({"status"}),
                 short_names=("quota",)),
    ResourceType("", "v1", "limitranges", "LimitRange", short_names=("limits",)),
    ResourceType("", "v1", "namespaces", "Namespace", namespaced=False, subresources=frozenset({"status"}),
                 short_names=("ns",), label_name=True, field_labels=("status.phase",)),
    ResourceType("", "v1", "nodes", "Node", namespaced=False, subresources=frozenset({"status"}),
                 short_names=("no",), field_labels=("spec.unschedulable",)),
    ResourceType("", "v1", "persistentvolumes", "PersistentVolume", namespaced=False,
                 subresources=frozenset({"status"}), short_names=("pv",)),
    ResourceType("apps", "v1", "deployments", "Deployment", subresources=frozenset({"status"}),
                 short_names=("deploy",)),
    ResourceType("apps", "v1", "statefulsets", "StatefulSet", subresources=frozenset({"status"}),
                 short_names=("sts",)),
    ResourceType("batch", "v1", "jobs", "Job", subresources=frozenset({"status"}), field_labels=("status.successful",)),
    ResourceType("rbac.authorization.k8s.io", "v1", "roles", "Role"),
    ResourceType("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding"),
    ResourceType("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False),
    ResourceType("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False),
    ResourceType("storage.k8s.io", "v1", "storageclasses", "StorageClass", namespaced=False, short_names=("sc",)),
    ResourceType("coordination.k8s.io", "v1", "leases", "Lease"),
    ResourceType("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations",
                 "ValidatingWebhookConfiguration", namespaced=False),
    ResourceType("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations",
                 "MutatingWebhookConfiguration", namespaced=False),
    ResourceType("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition",
                 namespaced=False, subresources=frozenset({"status"}), short_names=("crd",)),
)


def types_from_crd(crd: dict) -> list[ResourceType]:
    """One ResourceType per served version of a CRD manifest."""
    spec = crd["spec"]
    names = spec["names"]
    out = []
    for v in spec["versions"]:
        if not v.get("served", True):
            continue
        subs = frozenset(k for k in (v.get("subresources") or {}) if k in ("status", "scale"))
        schema = (v.get("schema") or {}).get("openAPIV3Schema") or {"type": "object",
                                                                    "x-kubernetes-preserve-unknown-fields": True}
        out.append(ResourceType(spec["group"], v["name"], names["plural"], names["kind"],
                                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                                subresources=subs, schema=schema,
                                short_names=tuple(names.get("shortNames") or ())))
    return out


def load_crd_files(directory: pathlib.Path = CRD_DIR) -> list[dict]:
    crds = []
    for path in sorted(directory.glob("*.yaml")):
        with path.open() as f:
            for doc in yaml.load_all(f, Loader=_Loader):
                if doc and doc.get("kind") == "CustomResourceDefinition":
                    crds.append(doc)
    return crds


class Registry:
    """Resource types by (group, version, plural) and by kind."""

    def __init__(self):
        self._types: dict[tuple[str, str, str], ResourceType] = {}
        for rt in BUILTIN:
            self.add(rt)

    def add(self, rt: ResourceType) -> None:
        self._types[rt.key] = rt

    def remove_group_plural(self, group: str, plural: str) -> None:
        for key in [k for k in self._types if k[0] == group and k[2] == plural]:
            del self._types[key]

    def get(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._types.get((group, version, plural))

    def all(self) -> list[ResourceType]:
        return list(self._types.values())

    def groups(self) -> dict[str, list[str]]:
        """group → versions (core group "" included)."""
        out: dict[str, list[str]] = {}
        for g, v, _ in self._types:
            out.setdefault(g, [])
            if v not in out[g]:
                out[g].append(v)
        return out

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        for rt in self._types.values():
            if rt.api_version == api_version and rt.kind == kind:
                return rt
        return None
