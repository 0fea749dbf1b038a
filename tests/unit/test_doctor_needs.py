"""What `mlplatform doctor` checks (hub_ext.manifests.needs) is what the shipped manifests install, and
its argument errors exit 2 naming the flag. Its checks against a cluster: tests/kube/test_doctor.py."""

from __future__ import annotations

import argparse
import io
import pathlib

import pytest
import yaml

from hub_ext.cli import doctor
from hub_ext.core.catalog import parse_accelerators
from hub_ext.manifests.needs import (
    CLUSTER_OBJECTS, HUB_CLUSTER_RULES, OPERATOR_CLUSTER_RULES, TRAINER_RUNTIMES, Access, access_checks,
    nodes_offering, service_account_user)
from server_ext.jobs.kube.trainjob import RUNTIME

pytestmark = pytest.mark.unit
ROOT = pathlib.Path(__file__).resolve().parents[2]


def _docs(path: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((ROOT / path).read_text()) if d]


def _role(path: str, name: str) -> list[dict]:
    return next(d for d in _docs(path) if d["kind"] == "ClusterRole" and d["metadata"]["name"] == name)["rules"]


def test_the_rights_checked_are_the_cluster_roles_the_manifests_grant():
    assert access_checks(HUB_CLUSTER_RULES) == access_checks(_role("helm-values/hub-rbac.yaml", "mlplatform-hub"))
    assert access_checks(OPERATOR_CLUSTER_RULES) == access_checks(
        _role("helm-values/operator.yaml", "mlplatform-operator"))


def test_the_cluster_objects_checked_are_every_cluster_scoped_object_of_the_manifests():
    namespaced = {"ServiceAccount", "Role", "RoleBinding", "Service", "Deployment", "Namespace"}
    for path, objects in CLUSTER_OBJECTS.items():
        shipped = {(d["kind"], d["metadata"]["name"]) for d in _docs(path) if d["kind"] not in namespaced}
        assert set(objects) == shipped, path


def test_the_trainer_runtimes_checked_are_those_shipped_and_the_one_jobs_name():
    shipped = tuple(d["metadata"]["name"] for d in _docs("helm-values/trainer-runtimes.yaml")
                    if d["kind"] == "ClusterTrainingRuntime")
    assert TRAINER_RUNTIMES == shipped
    assert RUNTIME in TRAINER_RUNTIMES


def test_access_checks_expand_each_rule_into_single_questions():
    rules = [{"apiGroups": ["", "batch"], "resources": ["pods/log", "jobs"], "verbs": ["get"]},
             {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["bind"],
              "resourceNames": ["a", "b"]}]
    checks = access_checks(rules)
    assert len(checks) == 6
    assert checks[0] == Access("get", "", "pods", "log")
    assert checks[0].attributes() == {"verb": "get", "group": "", "resource": "pods", "subresource": "log"}
    assert str(checks[-1]) == "bind clusterroles b (rbac.authorization.k8s.io)"


def test_a_service_account_as_the_api_server_names_it():
    assert service_account_user("jhub/hub") == (
        "system:serviceaccount:jhub:hub",
        ["system:serviceaccounts", "system:serviceaccounts:jhub", "system:authenticated"])


def _node(name, labels, allocatable):
    return {"metadata": {"name": name, "labels": labels}, "status": {"allocatable": allocatable}}


def test_nodes_offering_an_accelerator_carry_its_labels_and_a_nonzero_count():
    accs = parse_accelerators({"a100": {"type": "gpu", "product": "NVIDIA-A100-SXM4-40GB"},
                               "1g": {"type": "mig", "profile": "1g.5gb"}})
    nodes = [_node("dgx-1", {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}, {"nvidia.com/gpu": "8"}),
             _node("dgx-2", {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, {"nvidia.com/gpu": "8"}),
             _node("mig-1", {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"},
                   {"nvidia.com/gpu": "0", "nvidia.com/mig-1g.5gb": "14"}),
             _node("cpu-1", {}, {"cpu": "64"})]
    assert nodes_offering(accs["a100"], nodes) == {"dgx-1": 8}
    assert nodes_offering(accs["1g"], nodes) == {"mig-1": 14}


def _args(**kw) -> argparse.Namespace:
    base = dict(kubeconfig=None, context=None, config=[], hub_account=None, operator_namespace="mlplatform-system",
                json=False)
    return argparse.Namespace(**{**base, **kw})


@pytest.mark.parametrize("kw, message", [
    ({"hub_account": "hub"}, "--hub-account: must be NAMESPACE/NAME, not 'hub'"),
    ({"hub_account": "jhub/"}, "--hub-account: must be NAMESPACE/NAME"),
    ({"config": [pathlib.Path("/nonexistent/jupyterhub_config.py")]}, "--config: /nonexistent/jupyterhub_config.py: "
                                                                      "no such file"),
    ({"kubeconfig": pathlib.Path("/nonexistent/kubeconfig")}, "--kubeconfig: /nonexistent/kubeconfig: no such file"),
])
def test_bad_arguments_exit_2_naming_the_flag(kw, message):
    err = io.StringIO()
    assert doctor.run(_args(**kw), io.StringIO(), err) == 2
    assert message in err.getvalue()
    assert "Traceback" not in err.getvalue()


def test_a_config_with_problems_exits_2_with_each_problem(tmp_path):
    config = tmp_path / "jupyterhub_config.py"
    config.write_text("c.PlatformSpawner.accelerators = {'x': {'type': 'tpu'}}\n"
                      "c.PlatformSpawner.profile_list = [{'display_name': 'a', 'slug': 'a'}]\n")
    err = io.StringIO()
    assert doctor.run(_args(config=[config]), io.StringIO(), err) == 2
    assert "accelerators['x'].type" in err.getvalue()


@pytest.mark.parametrize("name, text", [
    ("jupyterhub_config.py", "c.PlatformSpawner.hub_namespace = 'ml'\n"
                             "c.PlatformConfig.profiles = {'cpu': {'display_name': 'CPU', 'default': True}}\n"
                             "c.PlatformConfig.everyone = {'profiles': ['cpu']}\n"),
    ("values.yaml", "hub:\n  config:\n    PlatformSpawner: {hub_namespace: ml}\n    PlatformConfig:\n"
                    "      profiles: {cpu: {display_name: CPU, default: true}}\n      everyone: {profiles: [cpu]}\n"),
])
def test_the_hub_account_is_the_configs_hub_namespaces_unless_given(tmp_path, name, text):
    config = tmp_path / name
    config.write_text(text)
    assert doctor._settings(_args(config=[config])).hub_account == "ml/hub"
    assert doctor._settings(_args(config=[config], hub_account="jhub/hub")).hub_account == "jhub/hub"
    assert doctor._settings(_args()).hub_account == "jhub/hub"
