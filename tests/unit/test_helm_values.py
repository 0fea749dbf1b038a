"""helm-values/: valid for the z2jh chart (4.4.0) schema, accepted by `mlplatform check-config`, and
the hub's ClusterRole covers the project Role it grants and the calls the hub makes."""

import copy
import io
import pathlib
import re

import jsonschema
import pytest
import yaml

from hub_ext.cli.main import check_config
from hub_ext.core.entitlements import Project
from hub_ext.manifests.tenancy import (
    ACCELERATOR_RESOURCES,
    ENTITLED_PREFIX,
    HUB_PROJECT_ROLE,
    OPERATOR_BINDING,
    OPERATOR_PROJECT_ROLE,
    PRIORITY_CLASSES,
    ROLE_RULES,
    project_objects,
)

pytestmark = pytest.mark.unit

ROOT = pathlib.Path(__file__).resolve().parents[2]
REF = ROOT / "tests" / "reference" / "z2jh"
VALUES = ROOT / "helm-values" / "values.yaml"


def merged(defaults, override):
    out = copy.deepcopy(defaults)
    for key, value in (override or {}).items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = value
    return out


def chart_values(values):
    return merged(yaml.safe_load((REF / "values.yaml").read_text()), values)


def validator():
    schema = yaml.safe_load((REF / "values.schema.yaml").read_text())
    return jsonschema.Draft7Validator(schema)


def test_values_validate_against_the_charts_schema():
    errors = sorted(validator().iter_errors(chart_values(yaml.safe_load(VALUES.read_text()))), key=str)
    assert errors == []


def test_the_schema_check_can_fail():
    values = yaml.safe_load(VALUES.read_text())
    values["singleuser"]["fsGid"] = "one hundred"
    values["hub"]["extraConfgi"] = {}
    assert len(list(validator().iter_errors(chart_values(values)))) == 2


def test_check_config_accepts_the_values():
    out, err = io.StringIO(), io.StringIO()
    assert check_config(VALUES, out, err) == 0, err.getvalue()
    assert "3 accelerator(s), 4 profile(s)" in out.getvalue()
    assert "nvidia.com/mig-1g.5gb=1" in out.getvalue()


def test_values_choose_the_platform_spawner_and_call_configure():
    hub = yaml.safe_load(VALUES.read_text())["hub"]
    assert hub["config"]["JupyterHub"]["spawner_class"] == "platform"
    assert "configure(c)" in hub["extraConfig"]["mlplatform"]


def _granted(rules):
    out = set()
    for rule in rules:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    out.add((group, resource, verb))
    return out


def _rbac(name: str) -> dict:
    docs = [d for d in yaml.safe_load_all((ROOT / "helm-values" / name).read_text()) if d]
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def test_the_hub_holds_every_permission_it_grants_only_in_projects():
    """What the hub *uses* is proven by the kube and hub tiers, where the hub acts as this
    ClusterRole's ServiceAccount on the real API server (tests/cluster/identities.py); Kubernetes
    also refuses a project Role granting more than the hub holds (tests/kube/test_project_role.py)."""
    docs = _rbac("hub-rbac.yaml")
    cluster_wide = docs[("ClusterRole", "mlplatform-hub")]
    in_project = docs[("ClusterRole", HUB_PROJECT_ROLE)]
    assert docs[("ClusterRoleBinding", "mlplatform-hub")]["roleRef"]["name"] == "mlplatform-hub"
    assert _granted(ROLE_RULES) <= _granted(in_project["rules"])
    # least privilege: no cluster-wide Secret access or pod creation; binding only its project role
    granted = _granted(cluster_wide["rules"])
    assert not {g for g in granted if g[1] == "secrets"} and ("", "pods", "create") not in granted
    (bind,) = [r for r in cluster_wide["rules"] if "bind" in r["verbs"]]
    assert bind["resourceNames"] == [HUB_PROJECT_ROLE, OPERATOR_PROJECT_ROLE] and bind["resources"] == ["clusterroles"]


def test_the_operator_reads_secrets_and_runs_loaders_only_in_projects():
    """Cluster-wide the operator watches and reads what holds no secret; credentials' metadata,
    loader Jobs and dataset writes it may do only where the hub binds its project role (each
    project namespace, hub_ext.manifests.tenancy). Its use of these rights is proven on the real API server
    by the kube tier (tests/kube/test_operator*.py, as its own ServiceAccount)."""
    docs = _rbac("operator.yaml")
    cluster_wide = _granted(docs[("ClusterRole", "mlplatform-operator")]["rules"])
    assert not {g for g in cluster_wide if g[1] in ("secrets", "pods/log", "serviceaccounts")}
    assert {g for g in cluster_wide if g[1] == "pods"} == {("", "pods", "list"), ("", "pods", "watch")}  # held pods
    assert not {g for g in cluster_wide if g[2] in ("create", "update", "delete", "deletecollection")}
    assert {g for g in cluster_wide if g[2] == "patch"} == {
        ("admissionregistration.k8s.io", r, "patch") for r in ("validatingwebhookconfigurations",
                                                               "mutatingwebhookconfigurations")}
    in_project = _granted(docs[("ClusterRole", OPERATOR_PROJECT_ROLE)]["rules"])
    assert {("", "secrets", "get"), ("batch", "jobs", "create"), ("", "pods/log", "get")} <= in_project
    account = docs[("ServiceAccount", "mlplatform-operator")]["metadata"]
    objects = project_objects(Project("p", "p", False, frozenset(), {}), {}, [])
    (binding,) = [o for o in objects if o["kind"] == "RoleBinding" and o["metadata"]["name"] == OPERATOR_BINDING]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                  "name": OPERATOR_PROJECT_ROLE}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account["name"],
                                    "namespace": account["namespace"]}]


def test_the_project_policies_cover_every_way_a_pod_refers_to_a_secret():
    docs = list(yaml.safe_load_all((ROOT / "helm-values" / "project-policies.yaml").read_text()))
    policies = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ValidatingAdmissionPolicy"}
    bindings = {d["spec"]["policyName"]: d for d in docs if d["kind"] == "ValidatingAdmissionPolicyBinding"}
    assert set(policies) == set(bindings) == {"mlplatform-project-pods", "mlplatform-reserved-objects",
                                              "mlplatform-hub-guard", "mlplatform-dataset-copies",
                                              "mlplatform-sweep-cancel", "mlplatform-controller-references",
                                              "mlplatform-notebook-servers", "mlplatform-trainjobs"}
    assert all(b["spec"]["validationActions"] == ["Deny"] for b in bindings.values())
    pods = policies["mlplatform-project-pods"]
    assert pods["spec"]["matchConstraints"]["namespaceSelector"]["matchLabels"] == {
        "app.kubernetes.io/managed-by": "jupyterhub-mlplatform"}
    text = " ".join(v["expression"] for v in pods["spec"]["variables"])
    for reference in ("v.secret.secretName", "s.secret.name", "e.valueFrom.secretKeyRef.name", "f.secretRef.name",
                      "v.csi.nodePublishSecretRef.name", "v.cephfs.secretRef.name", "v.rbd.secretRef.name",
                      "v.iscsi.secretRef.name", "v.flexVolume.secretRef.name", "v.scaleIO.secretRef.name",
                      "v.storageos.secretRef.name", "v.azureFile.secretName", "object.spec.imagePullSecrets",
                      "initContainers", ENTITLED_PREFIX, ACCELERATOR_RESOURCES, PRIORITY_CLASSES):
        assert reference in text
    # the hub's identity is the same everywhere (an operator edits every occurrence); the others named
    # are Kubernetes' own controllers (kube-controller-manager's, the same in every cluster)
    text = (ROOT / "helm-values" / "project-policies.yaml").read_text()
    assert {a for a in re.findall(r"system:serviceaccount:[a-z0-9-]+:[a-z0-9-]+", text)
            if not a.startswith("system:serviceaccount:kube-system:")} == {"system:serviceaccount:jhub:hub"}
    # (the CEL itself is evaluated by the real API server: tests/kube/test_project_policies.py)


def test_the_pod_policy_reserves_the_secret_names_credentials_may_not_take():
    from hub_ext.core.credentials import RESERVED_PREFIXES, RESERVED_SUFFIXES

    text = (ROOT / "helm-values" / "project-policies.yaml").read_text()
    for ref in ("n", "s.secret.name", "e.valueFrom.secretKeyRef.name", "f.secretRef.name"):  # n: secretNames
        for prefix in RESERVED_PREFIXES:
            assert f"{ref}.startsWith('{prefix}')" in text
        for suffix in set(RESERVED_SUFFIXES) - {"-package"}:  # <job>-package names ConfigMaps, not Secrets
            assert f"{ref}.endsWith('{suffix}')" in text
