"""helm-values/: valid for the z2jh chart (4.4.0) schema, accepted by `mlplatform check-config`, and
the hub's ClusterRole covers the project Role it grants and the calls the hub makes."""

import copy
import io
import pathlib

import jsonschema
import pytest
import yaml

from hub_ext.cli import check_config
from hub_ext.tenancy import ROLE_RULES

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


def test_the_hub_holds_every_permission_it_grants():
    """What the hub *uses* is proven by the kube and hub tiers, where the hub acts as this
    ClusterRole's ServiceAccount on the real API server (tests/cluster/identities.py); Kubernetes
    also refuses a project Role granting more than the hub holds (tests/kube/test_project_role.py)."""
    docs = list(yaml.safe_load_all((ROOT / "helm-values" / "hub-rbac.yaml").read_text()))
    (role,) = [d for d in docs if d["kind"] == "ClusterRole"]
    (binding,) = [d for d in docs if d["kind"] == "ClusterRoleBinding"]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert _granted(ROLE_RULES) <= _granted(role["rules"])


def test_the_token_policy_covers_every_way_a_pod_refers_to_a_secret():
    docs = list(yaml.safe_load_all((ROOT / "helm-values" / "hub-token-policy.yaml").read_text()))
    policy, binding = docs
    assert (policy["kind"], binding["kind"]) == ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
    assert binding["spec"]["policyName"] == policy["metadata"]["name"] and binding["spec"]["validationActions"] == ["Deny"]
    assert policy["spec"]["matchConstraints"]["namespaceSelector"]["matchLabels"] == {
        "app.kubernetes.io/managed-by": "jupyterhub-mlplatform"}
    text = " ".join(v["expression"] for v in policy["spec"]["variables"])
    for reference in ("v.secret.secretName", "s.secret.name", "e.valueFrom.secretKeyRef.name", "f.secretRef.name",
                      "initContainers", "ephemeralContainers"):
        assert reference in text
    # (the CEL itself is evaluated by the real API server: tests/kube/test_hub_token_policy.py)
