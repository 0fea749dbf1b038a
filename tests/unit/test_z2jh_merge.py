"""A profile's override and its choices' overrides, merged into one plan, do to the configured
traits what KubeSpawner does when it applies them one after another (`_apply_overrides`, its
``recursive_update``): a None removes a key even when a later choice adds to the same dict, a dict
after a None starts afresh. Checked against KubeSpawner's own on the same configuration, for both
platform spawners (PlatformSpawner's `_apply`, LocalPlatformSpawner's `apply_settings`, which also
gives every trait its configured value back before the next spawn). With a callable profile_list,
a ``"*"`` grant names only the profiles the user's result has."""

import copy

import pytest
from kubespawner import KubeSpawner

from hub_ext.core.profiles.resolve import apply_override, merge_override
from hub_ext.spawners.kube import PlatformSpawner
from hub_ext.spawners.local import LocalPlatformSpawner
from hub_ext.spawners.runtime import Runtime, kubespawner_traits
from tests.kube.platform_env import PLATFORM, make_user
from tests.unit.test_z2jh_followups import kubeconfig  # noqa: F401 (fixture)

pytestmark = pytest.mark.unit

CONFIGURED = {
    "environment": {"TZ": "UTC", "LEGACY_PROXY": "http://proxy:3128", "CONDA_DIR": "/opt/conda"},
    "extra_pod_config": {"dnsConfig": {"options": [{"name": "ndots", "value": "2"}]}, "priorityClassName": "nb"},
}

# production-style: the profile removes a hub-wide variable, its choices add their own
PROFILE = {
    "display_name": "PyTorch", "slug": "torch",
    "kubespawner_override": {"environment": {"LEGACY_PROXY": None, "OMP_NUM_THREADS": "4"},
                             "extra_pod_config": {"dnsConfig": None}},
    "profile_options": {"version": {"display_name": "Version", "choices": {
        "new": {"display_name": "2.3", "default": True,
                "kubespawner_override": {"environment": {"TORCH_VERSION": "2.3"},
                                         "extra_pod_config": {"dnsConfig": {"nameservers": ["10.0.0.53"]}}}},
        "old": {"display_name": "1.13", "description": "for old checkpoints",
                "kubespawner_override": {"environment": {"TORCH_VERSION": "1.13", "OMP_NUM_THREADS": None,
                                                         "CONDA_DIR": None}}}}}},
}
PLAIN = {"display_name": "Plain", "slug": "plain", "kubespawner_override": {"environment": {"PLAIN": "1"}}}


def kubespawners_own(choice: str) -> KubeSpawner:
    spawner = KubeSpawner(_mock=True, **copy.deepcopy(CONFIGURED))
    choices = PROFILE["profile_options"]["version"]["choices"]
    for override in (PROFILE["kubespawner_override"], choices[choice]["kubespawner_override"]):
        spawner._apply_overrides(copy.deepcopy(override))
    return spawner


def settings(profiles):
    return {"accelerators": PLATFORM["accelerators"], "everyone": {"profiles": "*", "limits": {}},
            "profile_list": profiles}


def test_a_none_is_kept_when_a_choice_adds_to_the_same_dict():
    merged = merge_override({"environment": {"A": None, "B": "1"}}, {"environment": {"D": "5"}})
    assert merged == {"environment": {"A": None, "B": "1", "D": "5"}}
    assert apply_override({"A": "x", "C": "y"}, merged["environment"]) == {"B": "1", "C": "y", "D": "5"}


@pytest.mark.parametrize("overrides", [
    [{"k": {"a": None}}, {"k": {"b": 1}}],
    [{"k": None}, {"k": {"b": 1}}],  # removed, then made anew: the configured keys are gone
    [{"k": {"a": 2}}, {"k": None}],
    [{"k": None}, {"k": {"b": {"c": None, "d": 1}}}, {"k": {"e": 3}}],
    [{"k": {"a": {"x": None}}}, {"k": {"a": {"y": 1}}}],
    [{"k": "text"}, {"k": None}],
])
def test_merged_overrides_applied_once_equal_kubespawners_in_turn(overrides):
    from kubespawner.utils import recursive_update

    expected = {"k": {"a": {"x": 1, "z": 2}, "b": 0, "keep": True}, "other": 1}
    configured = copy.deepcopy(expected)
    for override in overrides:
        recursive_update(expected, copy.deepcopy(override))
    merged: dict = {}
    for override in overrides:
        merged = merge_override(merged, override)
    assert apply_override(configured, merged) == expected
    assert configured == {"k": {"a": {"x": 1, "z": 2}, "b": 0, "keep": True}, "other": 1}  # not changed


@pytest.mark.parametrize("choice", ["new", "old"])
async def test_platform_spawner_matches_kubespawner(kubeconfig, choice):  # noqa: F811
    spawner = PlatformSpawner(user=make_user("alice"), _mock=True, **settings([PROFILE]), **copy.deepcopy(CONFIGURED))
    spawner.configured.restore()
    spawner._apply(spawner.user_plan({"profile": "torch", "version": choice}))
    expected = kubespawners_own(choice)
    assert spawner.environment == expected.environment
    assert "LEGACY_PROXY" not in spawner.environment
    # a dict the profile removed and a choice gives again starts afresh, as in KubeSpawner
    assert spawner.extra_pod_config == expected.extra_pod_config


def local_spawner(profiles, tmp_path):
    return LocalPlatformSpawner(user=make_user("alice"), state_dir=str(tmp_path), inventory={},
                                environment=copy.deepcopy(CONFIGURED["environment"]), **settings(profiles))


@pytest.mark.parametrize("choice", ["new", "old"])
async def test_local_spawner_merges_dict_traits_as_kubespawner(kubeconfig, tmp_path, choice):  # noqa: F811
    spawner = local_spawner([PROFILE, PLAIN], tmp_path)
    spawner.apply_settings(spawner.user_plan({"profile": "torch", "version": choice}))
    assert spawner.environment == kubespawners_own(choice).environment
    assert spawner.environment["TZ"] == "UTC" and "LEGACY_PROXY" not in spawner.environment


def test_local_spawner_gives_the_configured_values_back_for_the_next_spawn(tmp_path):
    spawner = local_spawner([PROFILE, PLAIN], tmp_path)
    spawner.apply_settings(spawner.user_plan({"profile": "torch", "version": "old"}))
    spawner.apply_settings(spawner.user_plan({"profile": "plain"}))
    assert spawner.environment == {**CONFIGURED["environment"], "PLAIN": "1"}
    assert PROFILE["kubespawner_override"]["environment"]["LEGACY_PROXY"] is None  # the profile is unchanged


def test_a_star_grant_names_only_the_profiles_the_users_result_has():
    base = Runtime.parse({**settings(lambda spawner: []),
                          "groups": {"vision": {"project": "vision", "profiles": ["plain", "big-gpu"]}}},
                         kubespawner_traits())
    alice = base.for_profile_list([PLAIN])
    personal, vision = alice.projects("alice", ["vision"], False)
    assert personal.profiles == {"plain"} and vision.profiles == {"plain"}
    assert {p.name: p.profiles for p in alice.projects("root", [], True)} == {"user-root": {"plain"},
                                                                              "vision": {"plain"}}


CALLABLE = {"display_name": "Per user", "slug": "per-user",
            "kubespawner_override": {"image": lambda spawner: f"registry.example/{spawner.user.name}/lab:1",
                                     "environment": lambda spawner: {"OWNER": spawner.user.name}}}


async def test_a_callable_override_is_called_with_the_spawner_as_kubespawner_does(kubeconfig, tmp_path):  # noqa: F811
    """KubeSpawner documents callable ``kubespawner_override`` values (``f(spawner)``, at each spawn);
    both platform spawners call them the same way (the traits the platform counts take values only)."""
    kube = PlatformSpawner(user=make_user("alice"), _mock=True, **settings([CALLABLE]), **copy.deepcopy(CONFIGURED))
    kube.configured.restore()
    kube._apply(kube.user_plan({"profile": "per-user"}))
    own = KubeSpawner(_mock=True, user=make_user("alice"), **copy.deepcopy(CONFIGURED))
    own._apply_overrides(CALLABLE["kubespawner_override"])
    assert kube.image == own.image == "registry.example/alice/lab:1"
    assert kube.environment == own.environment
    local = local_spawner([CALLABLE], tmp_path)
    local.apply_settings(local.user_plan({"profile": "per-user"}))
    assert local.environment["OWNER"] == "alice" and local.environment["TZ"] == "UTC"
