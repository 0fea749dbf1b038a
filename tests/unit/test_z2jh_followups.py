"""PlatformSpawner applies a profile's ``kubespawner_override`` as KubeSpawner does: every
dict-valued setting (``environment``, ``extra_pod_config``, ``extra_container_config``, ...) is
merged recursively into the configured value, a None removing a key; other values replace it.
Checked against KubeSpawner's own `_apply_overrides` on the same configuration (no cluster: the
spawners are only constructed, with a kubeconfig naming an address nothing listens on)."""

import copy

import pytest
from kubespawner import KubeSpawner

from hub_ext.spawners.kube import PlatformSpawner
from tests.kube.platform_env import PLATFORM, make_user, use_kubeconfig

pytestmark = pytest.mark.unit

KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: none, cluster: {server: "https://127.0.0.1:9"}}]
users: [{name: none, user: {token: unused}}]
contexts: [{name: none, context: {cluster: none, user: none}}]
current-context: none
"""

CONFIGURED = {
    "environment": {"TZ": "UTC", "PIP_INDEX_URL": "https://pypi.internal/simple", "OLD": "1"},
    "extra_pod_config": {"dnsConfig": {"options": [{"name": "ndots", "value": "2"}]},
                         "hostAliases": [{"ip": "10.0.0.1", "hostnames": ["pypi.internal"]}],
                         "priorityClassName": "notebooks"},
    "extra_container_config": {"securityContext": {"readOnlyRootFilesystem": False}},
    "node_selector": {"pool": "notebooks"},
    "extra_annotations": {"team": "ml"},
}

# a production-style profile: per-profile variables, DNS and priority, a choice adding its own
PROFILE = {
    "display_name": "Data science", "slug": "ds", "description": "Python with the team's mirrors",
    "kubespawner_override": {
        "environment": {"PIP_INDEX_URL": "https://mirror.example/simple", "OLD": None, "MPLBACKEND": "Agg"},
        "extra_pod_config": {"dnsConfig": {"nameservers": ["10.0.0.53"]}, "priorityClassName": None},
        "node_selector": {"disk": "ssd"},
        "image": "quay.io/jupyter/scipy-notebook:2024-05-27",
    },
    "profile_options": {"ui": {"display_name": "Interface", "choices": {
        "lab": {"display_name": "JupyterLab", "default": True,
                "kubespawner_override": {"default_url": "/lab",
                                         "extra_container_config": {"securityContext": {"runAsGroup": 100}}}},
        "classic": {"display_name": "Classic", "kubespawner_override": {"default_url": "/tree"}}}}},
}


@pytest.fixture
def kubeconfig(tmp_path, monkeypatch):
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    use_kubeconfig(path, monkeypatch)


def platform_spawner(profile_list):
    settings = {"accelerators": PLATFORM["accelerators"], "everyone": {"profiles": "*", "limits": {}}}
    return PlatformSpawner(user=make_user("alice"), _mock=True, profile_list=profile_list, **settings,
                           **copy.deepcopy(CONFIGURED))


def kubespawners_own(overrides):
    """What KubeSpawner makes of the configured values with these overrides applied in its order."""
    spawner = KubeSpawner(_mock=True, **copy.deepcopy(CONFIGURED))
    for override in overrides:
        spawner._apply_overrides(copy.deepcopy(override))
    return spawner


@pytest.mark.parametrize("choice", ["lab", "classic"])
async def test_dict_valued_overrides_merge_as_kubespawner_merges_them(kubeconfig, choice):
    spawner = platform_spawner([PROFILE])
    spawner.configured.restore()
    spawner._apply(spawner.user_plan({"profile": "ds", "ui": choice}))
    choice_override = PROFILE["profile_options"]["ui"]["choices"][choice]["kubespawner_override"]
    expected = kubespawners_own([PROFILE["kubespawner_override"], choice_override])
    for trait in ("environment", "extra_pod_config", "extra_container_config", "image", "default_url"):
        assert getattr(spawner, trait) == getattr(expected, trait), trait
    assert spawner.environment == {"TZ": "UTC", "PIP_INDEX_URL": "https://mirror.example/simple", "MPLBACKEND": "Agg"}
    assert spawner.extra_pod_config == {
        "dnsConfig": {"options": [{"name": "ndots", "value": "2"}], "nameservers": ["10.0.0.53"]},
        "hostAliases": [{"ip": "10.0.0.1", "hostnames": ["pypi.internal"]}]}
    assert spawner.node_selector == {"pool": "notebooks", "disk": "ssd"}  # as before: merged
    assert spawner.extra_annotations == {"team": "ml"}  # not overridden: untouched


async def test_the_configured_values_come_back_for_the_next_spawn(kubeconfig):
    plain = {"display_name": "Plain", "slug": "plain"}
    spawner = platform_spawner([PROFILE, plain])
    spawner.configured.restore()
    spawner._apply(spawner.user_plan({"profile": "ds"}))
    assert PROFILE["kubespawner_override"]["environment"]["OLD"] is None  # the profile is not changed
    spawner.configured.restore()  # as the next spawn's load_user_options does
    spawner._apply(spawner.user_plan({"profile": "plain"}))
    for trait, value in CONFIGURED.items():
        assert getattr(spawner, trait) == value, trait
