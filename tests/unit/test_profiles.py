"""Profiles in both spellings (platform and z2jh), their errors, and resolving a user's choices."""

import pytest

from hub_ext.core.catalog import parse_accelerators
from hub_ext.core.errors import ConfigError, Problem, UserInputError
from hub_ext.core.profiles import (
    Choice,
    Option,
    ParsedProfiles,
    Profile,
    Unlisted,
    adhoc_accelerator,
    parse_profile_list,
    parse_profiles,
    read_profile_list,
    read_profiles,
    resolve,
)

pytestmark = pytest.mark.unit

ACC = parse_accelerators({"1g.5gb": {"type": "mig", "profile": "1g.5gb"},
                          "a100": {"type": "gpu", "product": "NVIDIA-A100-SXM4-40GB"}})
TRAITS = frozenset({"image", "cpu_limit", "cpu_guarantee", "mem_limit", "mem_guarantee", "extra_resource_limits",
                    "node_selector", "tolerations", "default_url", "extra_labels", "volumes", "volume_mounts"})


def test_native_profiles_whole_objects():
    profiles = parse_profiles({
        "cpu": {"display_name": "CPU only", "cpu": {"guarantee": 1, "limit": 2},
                "memory": {"guarantee": "2G", "limit": "4G"},
                "images": {"scipy": {"image": "quay.io/jupyter/scipy-notebook:2024.10", "display_name": "SciPy"}}},
        "mig": {"display_name": "MIG 1g.5gb", "accelerator": "1g.5gb", "default": True},
    }, ACC, TRAITS)
    assert profiles == (
        Profile("cpu", "CPU only", cpu_guarantee=1.0, cpu_limit=2.0, mem_guarantee="2G", mem_limit="4G",
                options=(Option("image", "Image", (Choice("scipy", "SciPy",
                                                          {"image": "quay.io/jupyter/scipy-notebook:2024.10"}),)),)),
        Profile("mig", "MIG 1g.5gb", default=True, accelerator=ACC["1g.5gb"], accelerator_count=1),
    )


def test_first_profile_is_default_when_none_is_marked():
    profiles = parse_profiles({"a": {}, "b": {}}, ACC)
    assert [p.default for p in profiles] == [True, False]


def test_read_profiles_keeps_what_parsed_and_names_what_did_not():
    """What later sections are checked against: the profiles without problems of their own, the
    slugs of those with; an accelerator in `unchecked` (it failed itself) is not unknown again."""
    parsed = read_profiles({"cpu": {"display_name": "CPU"}, "big": {"cpu": {"limit": -1}},
                            "h100": {"accelerator": "h100"}, "odd": "not a mapping"}, ACC, TRAITS,
                           unchecked=frozenset({"h100"}))
    assert parsed == ParsedProfiles(
        (Profile("cpu", "CPU", default=True), Profile("h100", "h100")), frozenset({"big", "odd"}),
        (Problem("profiles['big'].cpu.limit", "must be a positive number of CPUs, not -1"),
         Problem("profiles['odd']", "must be a mapping")))
    z2jh = read_profile_list([{"display_name": "Small"}, {"display_name": "Wrong", "kubespawner_override": 1}],
                             ACC, TRAITS)
    assert [p.slug for p in z2jh.profiles] == ["small"] and z2jh.broken == {"wrong"}


Z2JH = [
    {"display_name": "Small CPU", "description": "2 CPUs", "kubespawner_override": {"cpu_limit": 2, "mem_limit": "4G"}},
    {"display_name": "A100 GPU", "slug": "gpu", "default": True,
     "kubespawner_override": {"extra_resource_limits": {"nvidia.com/gpu": "1"},
                              "node_selector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}},
     "profile_options": {"image": {"display_name": "Image", "choices": {
         "torch": {"display_name": "PyTorch", "default": True, "kubespawner_override": {"image": "pytorch:2"}},
         "tf": {"display_name": "TensorFlow", "kubespawner_override": {"image": "tf:2"}}},
         "unlisted_choice": {"enabled": True, "display_name": "Image", "validation_regex": "^quay.io/.+:.+$",
                             "validation_message": "an image from quay.io with a tag",
                             "kubespawner_override": {"image": "{value}", "extra_labels": {"custom": "{value}"}}}}}},
    {"display_name": "Two MIG slices", "kubespawner_override": {"extra_resource_limits": {"nvidia.com/mig-3g.20gb": 2}}},
]


def test_z2jh_profile_list_as_it_is():
    small, gpu, mig = parse_profile_list(Z2JH, ACC, TRAITS)
    assert small == Profile("small-cpu", "Small CPU", "2 CPUs", cpu_limit=2.0, mem_limit="4G",
                            override={"cpu_limit": 2, "mem_limit": "4G"})
    assert gpu.slug == "gpu" and gpu.default and gpu.accelerator == ACC["a100"] and gpu.accelerator_count == 1
    assert [c.slug for c in gpu.options[0].choices] == ["torch", "tf"]
    assert gpu.options[0].unlisted == Unlisted("Image", "Other...", "^quay.io/.+:.+$", "an image from quay.io with a tag",
                                               {"image": "{value}", "extra_labels": {"custom": "{value}"}})
    assert mig.accelerator == adhoc_accelerator("nvidia.com/mig-3g.20gb") and mig.accelerator_count == 2
    assert mig.accelerator.mig_profile == "3g.20gb"


def test_z2jh_dict_form_uses_keys_as_slugs():
    (p,) = parse_profile_list({"tiny": {"display_name": "Tiny"}}, ACC, TRAITS)
    assert p.slug == "tiny" and p.default


@pytest.mark.parametrize("raw, problems", [
    ({"p": {"accelerator": "h100"}}, ["profiles['p'].accelerator: unknown accelerator 'h100' (known: 1g.5gb, a100)"]),
    ({"p": {"accelerator": "a100", "accelerator_count": 0}},
     ["profiles['p'].accelerator_count: must be a positive whole number"]),
    ({"p": {"accelerator_count": 2}}, ["profiles['p'].accelerator_count: is set but no accelerator is"]),
    ({"p": {"cpu": {"guarantee": 4, "limit": 2}}}, ["profiles['p'].cpu.guarantee: 4 is more than the limit 2"]),
    ({"p": {"memory": {"guarantee": "8G", "limit": "4Gi"}}},
     ["profiles['p'].memory.guarantee: 8G is more than the limit 4Gi"]),
    ({"p": {"memory": {"limit": "lots"}}},
     ["profiles['p'].memory.limit: must be a size such as '512M', '4G' or '8Gi', not 'lots'"]),
    ({"p": {"kubespawner_override": {"cpu_limt": 2}}}, ["profiles['p'].kubespawner_override.cpu_limt: is not a "
                                                        "KubeSpawner trait; did you mean 'cpu_limit'?"]),
    ({"p": {"colour": "blue"}}, ["profiles['p'].colour: unknown key"]),
    ({"p": {"descripton": "x"}}, ["profiles['p'].descripton: unknown key; did you mean 'description'?"]),
    ({"p": {"images": {"x": {"display_name": "no image"}}}},
     ["profiles['p'].images.x.image: is required (an image reference such as "
      "'quay.io/jupyter/pytorch-notebook:2024.10')"]),
    ({"a": {"default": True}, "b": {"default": True}}, ["profiles: more than one profile is marked default: a, b"]),
    ({"p": {"accelerator": "a100", "kubespawner_override": {"extra_resource_limits": {"nvidia.com/gpu": 1}}}},
     ["profiles['p'].kubespawner_override.extra_resource_limits: requests an accelerator as well as 'accelerator': "
      "choose one"]),
])
def test_native_errors(raw, problems):
    with pytest.raises(ConfigError) as e:
        parse_profiles(raw, ACC, TRAITS)
    assert [str(p) for p in e.value.problems] == problems


@pytest.mark.parametrize("raw, problems", [
    ([{"slug": "x"}], ["profile_list[0].display_name: is required (KubeSpawner shows it, and makes the slug from it)"]),
    ([{"display_name": "A"}, {"display_name": "a"}], ["profile_list: more than one profile has the slug 'a'"]),
    ([{"display_name": "G", "kubespawner_override": {"extra_resource_limits": {"nvidia.com/gpu": 1,
                                                                               "amd.com/gpu": 1}}}],
     ["profile_list[0].kubespawner_override.extra_resource_limits: a container may request one accelerator resource "
      "type only, not ['amd.com/gpu', 'nvidia.com/gpu']"]),
    ([{"display_name": "G", "kubespawner_override": {"extra_resource_limits": {"nvidia.com/gpu": "half"}}}],
     ["profile_list[0].kubespawner_override.extra_resource_limits.nvidia.com/gpu: must be a positive whole number, "
      "not 'half'"]),
    ([{"display_name": "R", "profile_options": {"image": {"unlisted_choice": {"enabled": True,
                                                                              "validation_regex": "("}}}}],
     ["profile_list[0].profile_options.image.unlisted_choice.validation_regex: is not a valid regular expression: "
      "missing ), unterminated subpattern at position 0"]),
    ("nope", ["profile_list: must be a list (or a dict keyed by slug) of profiles, not str"]),
])
def test_z2jh_errors(raw, problems):
    with pytest.raises(ConfigError) as e:
        parse_profile_list(raw, ACC, TRAITS)
    assert [str(p) for p in e.value.problems] == problems


def gpu_profile():
    return parse_profile_list(Z2JH, ACC, TRAITS)[1]


def test_resolve_defaults_and_accelerator_settings():
    assert resolve(gpu_profile(), {}) == {
        "extra_resource_limits": {"nvidia.com/gpu": "1"},
        "node_selector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "image": "pytorch:2",
    }


def test_resolve_a_choice_and_an_unlisted_value():
    assert resolve(gpu_profile(), {"image": "tf"})["image"] == "tf:2"
    settings = resolve(gpu_profile(), {"image--unlisted-choice": "quay.io/me/img:1"})
    assert settings["image"] == "quay.io/me/img:1" and settings["extra_labels"] == {"custom": "quay.io/me/img:1"}


@pytest.mark.parametrize("options, field", [
    ({"image": "caffe"}, "profile_options.image"),
    ({"gpus": "8"}, "profile_options.gpus"),
    ({"image--unlisted-choice": "docker.io/evil:1"}, "profile_options.image--unlisted-choice"),
    ({"image--unlisted-choice": "quay.io/a:b\nextra"}, "profile_options.image--unlisted-choice"),  # newline
    ({"image--unlisted-choice": "quay.io/a:b junk$(x)"}, None),
])
def test_resolve_refuses_what_is_not_offered(options, field):
    if field is None:  # matches the (permissive) regex as a whole: allowed, substituted verbatim
        assert resolve(gpu_profile(), options)["image"] == options["image--unlisted-choice"]
        return
    with pytest.raises(UserInputError) as e:
        resolve(gpu_profile(), options)
    assert e.value.field == field


def test_resolve_does_not_touch_the_profile():
    p = gpu_profile()
    before = repr(p)
    resolve(p, {"image--unlisted-choice": "quay.io/x:y"})
    assert repr(p) == before


def test_validation_regex_must_match_the_whole_value():
    """KubeSpawner checks with re.match, which anchors only the start: 'abc123' passes '[a-z]+' there."""
    (p,) = parse_profile_list([{"display_name": "T", "profile_options": {"tag": {"unlisted_choice": {
        "enabled": True, "validation_regex": "[a-z]+", "kubespawner_override": {"image": "img:{value}"}}}}}], ACC, TRAITS)
    assert resolve(p, {"tag--unlisted-choice": "abc"})["image"] == "img:abc"
    with pytest.raises(UserInputError):
        resolve(p, {"tag--unlisted-choice": "abc123"})


def test_what_kubespawner_ignores_is_a_warning_not_a_problem():
    """Two default choices, two default profiles, unknown keys: KubeSpawner goes on (the first
    default counts), so the hub does too, with a warning naming the path."""
    parsed = read_profile_list([
        {"display_name": "A", "default": True, "colour": "red", "profile_options": {"image": {"choices": {
            "a": {"default": True}, "b": {"default": True}}}}},
        {"display_name": "B", "default": True}], ACC, TRAITS)
    assert parsed.problems == ()
    assert [str(w) for w in parsed.warnings] == [
        "profile_list[0].colour: unknown key, ignored by KubeSpawner",
        "profile_list[0].profile_options.image.choices: more than one choice is marked default (a, b): "
        "KubeSpawner uses the first, 'a'",
        "profile_list: more than one profile is marked default (a, b): KubeSpawner uses the first, 'a'",
    ]
    a, b = parsed.profiles
    assert a.default and not b.default and a.options[0].default_choice.slug == "a"
    assert [c.default for c in a.options[0].choices] == [True, False]


def test_choice_keys_of_production_lists():
    (p,) = parse_profile_list([{"display_name": "P", "profile_options": {"image": {"choices": {
        "torch": {"display_name": "PyTorch", "description": "CUDA 12", "slug": "torch"}}}}}], ACC, TRAITS)
    assert p.options[0].choices == (Choice("torch", "PyTorch", description="CUDA 12"),)
