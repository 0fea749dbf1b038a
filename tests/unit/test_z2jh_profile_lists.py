"""Production-shaped z2jh profile lists (written for these tests, in the shapes hubs use): each is
accepted (valid against the chart's values schema, checked by ``mlplatform check-config``, its
choices resolving to the settings KubeSpawner would apply), or refused / warned about with a
message naming the field and what to do."""

import asyncio
import inspect
import io
import pathlib
import textwrap

import jsonschema
import pytest
import yaml

from hub_ext.cli.main import check_config
from hub_ext.core.errors import ConfigError
from hub_ext.core.profiles import read_profile_list, resolve
from hub_ext.spawners.kube import PlatformSpawner
from hub_ext.spawners.local import LocalPlatformSpawner
from hub_ext.spawners.platform import PlatformConfig
from hub_ext.spawners.profile_source import WHERE, call, refusal
from hub_ext.spawners.runtime import Runtime, kubespawner_traits

pytestmark = pytest.mark.unit

REF = pathlib.Path(__file__).resolve().parents[2] / "tests" / "reference" / "z2jh"

GPU_TIERS = """
singleuser:
  profileList:
    - display_name: "Small: 2 CPU, 8 GB"
      description: "Notebooks and light data work on a shared node."
      default: true
      kubespawner_override:
        cpu_guarantee: 0.5
        cpu_limit: 2
        mem_guarantee: 2G
        mem_limit: 8G
    - display_name: "T4 GPU: 8 CPU, 30 GB"
      slug: t4
      description: "One NVIDIA T4 on a dedicated GKE node."
      kubespawner_override:
        image: quay.io/jupyter/pytorch-notebook:cuda12-2024-11-04
        cpu_guarantee: 7
        cpu_limit: 8
        mem_guarantee: 26G
        mem_limit: 30G
        extra_resource_limits: {nvidia.com/gpu: "1"}
        node_selector: {cloud.google.com/gke-accelerator: nvidia-tesla-t4}
        tolerations:
          - {key: nvidia.com/gpu, operator: Equal, value: present, effect: NoSchedule}
          - {key: hub.jupyter.org/dedicated, operator: Equal, value: user, effect: NoSchedule}
    - display_name: "A100 MIG 1g.10gb"
      slug: mig-small
      kubespawner_override:
        extra_resource_limits: {nvidia.com/mig-1g.10gb: 1}
        mem_limit: 16G
"""

IMAGE_PICKER = """
singleuser:
  profileList:
    - display_name: "Choose your environment"
      description: "4 CPU, 16 GB; pick an image or bring your own."
      slug: workbench
      kubespawner_override: {cpu_limit: 4, mem_limit: 16G, default_url: /lab}
      profile_options:
        image:
          display_name: Image
          choices:
            scipy:
              display_name: Scientific Python
              description: "NumPy, SciPy, pandas, scikit-learn"
              slug: scipy
              default: true
              kubespawner_override: {image: "quay.io/jupyter/scipy-notebook:2024-11-04"}
            r:
              display_name: R
              description: "R 4.4 with the tidyverse"
              slug: r
              kubespawner_override: {image: "quay.io/jupyter/r-notebook:2024-11-04"}
          unlisted_choice:
            enabled: true
            display_name: "Custom image"
            display_name_in_choices: "Specify an image"
            validation_regex: '^[a-z0-9.-]+(/[a-z0-9._-]+)+:[A-Za-z0-9._-]+$'
            validation_message: "an image reference with a tag, such as quay.io/org/image:tag"
            kubespawner_override:
              image: "{value}"
              extra_labels: {hub.example.org/custom-image: "true"}
"""

FANCY = """
jupyterhub:
  singleuser:
    profileList:
      - display_name: "Medium"
        description: "~4 CPU, ~16 GB"
        profile_options:
          image:
            display_name: Image
            dynamic_image_building: {enabled: true}
            unlisted_choice:
              enabled: true
              display_name: "Custom image"
              display_name_in_choices: "Other image"
              description_in_choices: "Any image from a public registry"
              validation_regex: "^.+:.+$"
              validation_message: "Must be a publicly available docker image, of form <image-name>:<tag>"
              kubespawner_override: {image: "{value}"}
            choices:
              pangeo:
                display_name: Pangeo notebook
                description: "Geoscience stack: xarray, dask, zarr"
                slug: pangeo
                kubespawner_override: {image: "quay.io/pangeo/pangeo-notebook:2024.11.11"}
              base:
                display_name: Base notebook
                description: "Python and JupyterLab only"
                slug: base
                default: true
                kubespawner_override: {image: "quay.io/jupyter/base-notebook:2024-11-04"}
          requests:
            display_name: Resource allocation
            choices:
              mem_4:
                display_name: "4 GB RAM, ~1 CPU"
                description: "For exploration"
                default: true
                kubespawner_override: {mem_guarantee: 3.9G, mem_limit: 4G, cpu_guarantee: 0.5, cpu_limit: 1}
              mem_16:
                display_name: "16 GB RAM, ~4 CPU"
                kubespawner_override: {mem_guarantee: 15G, mem_limit: 16G, cpu_guarantee: 3.5, cpu_limit: 4}
"""

POD_SETTINGS = """
singleuser:
  profileList:
    - display_name: "RStudio"
      description: "RStudio Server in the browser"
      kubespawner_override:
        image: quay.io/example/rstudio:4.4
        default_url: /rstudio
        cmd: [jupyterhub-singleuser]
        image_pull_policy: IfNotPresent
        start_timeout: 600
        environment: {R_LIBS_USER: /home/jovyan/R}
        extra_labels: {hub.example.org/flavour: rstudio}
        lifecycle_hooks:
          postStart: {exec: {command: [sh, -c, "mkdir -p /home/jovyan/R"]}}
        init_containers:
          - {name: fix-perms, image: busybox:1.36, command: [sh, -c, "true"]}
        volumes: [{name: shared, persistentVolumeClaim: {claimName: shared-data}}]
        volume_mounts: [{name: shared, mountPath: /home/jovyan/shared, readOnly: true}]
        extra_pod_config: {priorityClassName: user-high}
"""

TYPOS = """
singleuser:
  profileList:
    - display_name: "GPU"
      descripton: "one GPU"
      kubespawner_override: {extra_resource_limits: {nvidia.com/gpu: 1}}
      profile_options:
        image:
          display-name: Image
          choices:
            torch: {display_name: PyTorch, defualt: true, kubespawner_override: {image: "pytorch:2"}}
            tf: {display_name: TensorFlow, slug: tensorflow, kubespawner_override: {image: "tf:2", mem_limt: 4G}}
            jax: {display_name: JAX, default: true, kubespawner_override: {image: "jax:0.4"}}
            flax: {display_name: Flax, default: true, kubespawner_override: {image: "flax:0.8"}}
"""

DICT_FORM = """
singleuser:
  profileList: []
hub:
  config:
    KubeSpawner:
      profile_list:
        cpu: {display_name: "CPU", default: true}
        gpu:
          display_name: "GPU"
          kubespawner_override: {extra_resource_limits: {nvidia.com/gpu: "2"}}
          profile_options:
            tag:
              display_name: "Image tag"
              unlisted_choice: {enabled: true, display_name: Tag, validation_regex: "[0-9.]+",
                                kubespawner_override: {image: "quay.io/jupyter/pytorch-notebook:cuda12-{value}"}}
"""

ACCEPTED = {"gpu tiers": GPU_TIERS, "image picker": IMAGE_PICKER, "fancy-profiles": FANCY,
            "pod settings": POD_SETTINGS, "typos KubeSpawner ignores": TYPOS, "dict form in hub.config": DICT_FORM}

# (name, profile list, path at fault, words of what to do)
REFUSED = [
    ("cpu as a string", [{"display_name": "X", "kubespawner_override": {"cpu_limit": "2"}}],
     "profile_list[0].kubespawner_override.cpu_limit", "expected a float, not the str '2'"),
    ("image not a string", [{"display_name": "X", "profile_options": {"i": {"choices": {
        "a": {"display_name": "A", "kubespawner_override": {"image": 3}}}}}}],
     "profile_list[0].profile_options.i.choices.a.kubespawner_override.image", "expected a unicode string"),
    ("no display_name", [{"slug": "x", "description": "no name"}], "profile_list[0].display_name", "is required"),
    ("GPU count not a number", [{"display_name": "X", "kubespawner_override": {
        "extra_resource_limits": {"nvidia.com/gpu": "two"}}}],
     "profile_list[0].kubespawner_override.extra_resource_limits.nvidia.com/gpu", "positive whole number"),
    ("two accelerator types", [{"display_name": "X", "kubespawner_override": {
        "extra_resource_limits": {"nvidia.com/gpu": 1, "nvidia.com/mig-1g.5gb": 1}}}],
     "profile_list[0].kubespawner_override.extra_resource_limits", "one accelerator resource type"),
    ("bad regex", [{"display_name": "X", "profile_options": {"i": {"unlisted_choice": {
        "enabled": True, "validation_regex": "[a-z"}}}}],
     "profile_list[0].profile_options.i.unlisted_choice.validation_regex", "not a valid regular expression"),
    ("option without choices", [{"display_name": "X", "profile_options": {"i": {"display_name": "I"}}}],
     "profile_list[0].profile_options.i.choices", "needs choices or an enabled unlisted_choice"),
    ("memory guarantee above limit", [{"display_name": "X", "kubespawner_override": {
        "mem_guarantee": "8G", "mem_limit": "4G"}}], "profile_list[0].kubespawner_override.mem_guarantee",
     "is more than mem_limit 4G"),
    ("GPU count as a choice", [{"display_name": "GPU", "profile_options": {"gpus": {"display_name": "GPUs", "choices": {
        "one": {"display_name": "1 GPU", "kubespawner_override": {"extra_resource_limits": {"nvidia.com/gpu": "1"}}}}}}}],
     "profile_list[0].profile_options.gpus.choices.one.kubespawner_override.extra_resource_limits",
     "make one profile per accelerator size or count instead"),
    ("callable counted override", [{"display_name": "X", "kubespawner_override": {"mem_limit": lambda spawner: "4G"}}],
     "profile_list[0].kubespawner_override.mem_limit", "the platform counts accelerators, CPU, memory"),
]


def check(tmp_path, text):
    path = tmp_path / "values.yaml"
    path.write_text(textwrap.dedent(text))
    out, err = io.StringIO(), io.StringIO()
    return check_config(path, out, err), out.getvalue(), err.getvalue()


@pytest.mark.parametrize("name", ACCEPTED)
def test_accepted_and_valid_against_the_chart_schema(tmp_path, name):
    values = yaml.safe_load(ACCEPTED[name])
    schema = yaml.safe_load((REF / "values.schema.yaml").read_text())
    root = values.get("jupyterhub", values)
    errors = [e.message for e in jsonschema.Draft7Validator(schema).iter_errors(root)
              if e.validator != "required"]  # the chart's own defaults fill the required keys
    assert errors == []
    code, out, err = check(tmp_path, ACCEPTED[name])
    assert code == 0, err
    assert "OK" in out


def test_gpu_tiers_resolve_to_what_kubespawner_would_set(tmp_path):
    profiles = read_profile_list(yaml.safe_load(GPU_TIERS)["singleuser"]["profileList"], {},
                                 kubespawner_traits()).checked()
    small, t4, mig = profiles
    assert small.default and small.description == "Notebooks and light data work on a shared node."
    assert t4.accelerator.resource == "nvidia.com/gpu" and t4.accelerator_count == 1
    settings = resolve(t4, {})
    assert settings["node_selector"] == {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"}
    assert len(settings["tolerations"]) == 2 and settings["mem_limit"] == "30G" and settings["cpu_limit"] == 8.0
    assert mig.accelerator.mig_profile == "1g.10gb"


def test_kubespawners_documented_gpu_example_is_counted_and_gets_its_limit():
    """KubeSpawner's own example asks for the GPU in extra_resource_guarantees only; Kubernetes needs
    the limit of an extended resource, so the platform sets it from the profile's accelerator."""
    (p,) = read_profile_list([{"display_name": "Demo 2", "slug": "demo-2", "kubespawner_override": {
        "extra_resource_guarantees": {"nvidia.com/gpu": "1"}}}], {}, kubespawner_traits()).checked()
    assert p.accelerator.resource == "nvidia.com/gpu" and p.accelerator_count == 1
    settings = resolve(p, {})
    assert settings["extra_resource_guarantees"] == {"nvidia.com/gpu": "1"}
    assert settings["extra_resource_limits"] == {"nvidia.com/gpu": "1"}
    parsed = read_profile_list([{"display_name": "X", "kubespawner_override": {
        "extra_resource_guarantees": {"nvidia.com/gpu": 1}, "extra_resource_limits": {"nvidia.com/gpu": 2}}}], {},
        kubespawner_traits())
    assert [str(x) for x in parsed.problems] == [
        "profile_list[0].kubespawner_override.extra_resource_guarantees.nvidia.com/gpu: must equal "
        "extra_resource_limits.nvidia.com/gpu (2): Kubernetes does not overcommit accelerators"]


def test_choice_descriptions_and_slugs_are_kept():
    (p,) = read_profile_list(yaml.safe_load(IMAGE_PICKER)["singleuser"]["profileList"], {},
                             kubespawner_traits()).checked()
    image = p.options[0]
    assert [(c.slug, c.description) for c in image.choices] == [
        ("scipy", "NumPy, SciPy, pandas, scikit-learn"), ("r", "R 4.4 with the tidyverse")]
    assert resolve(p, {"image": "r"})["image"] == "quay.io/jupyter/r-notebook:2024-11-04"
    custom = resolve(p, {"image--unlisted-choice": "ghcr.io/me/lab:1.0"})
    assert custom["image"] == "ghcr.io/me/lab:1.0" and custom["extra_labels"] == {"hub.example.org/custom-image": "true"}


def test_fancy_profiles_keys_are_accepted_without_warnings():
    parsed = read_profile_list(yaml.safe_load(FANCY)["jupyterhub"]["singleuser"]["profileList"], {},
                               kubespawner_traits())
    assert parsed.problems == () and parsed.warnings == ()
    (p,) = parsed.profiles
    assert p.options[0].unlisted.description_in_choices == "Any image from a public registry"
    assert p.options[0].default_choice.slug == "base"
    assert resolve(p, {"requests": "mem_16"})["mem_limit"] == "16G"


def test_keys_kubespawner_ignores_are_warned_with_their_path_and_a_guess(tmp_path):
    code, _, err = check(tmp_path, TYPOS)
    assert code == 0
    assert err.splitlines() == [
        "warning: singleuser.profileList[0].descripton: unknown key, ignored by KubeSpawner; "
        "did you mean 'description'?",
        "warning: singleuser.profileList[0].profile_options.image.display-name: unknown key, ignored by KubeSpawner; "
        "did you mean 'display_name'?",
        "warning: singleuser.profileList[0].profile_options.image.choices.torch.defualt: unknown key, ignored by "
        "KubeSpawner; did you mean 'default'?",
        "warning: singleuser.profileList[0].profile_options.image.choices.tf.slug: differs from the choice's key "
        "'tf', which is what names it in user_options (KubeSpawner ignores 'slug' here)",
        "warning: singleuser.profileList[0].profile_options.image.choices.tf.kubespawner_override.mem_limt: is not a "
        "KubeSpawner trait, so it has no effect; did you mean 'mem_limit'?",
        "warning: singleuser.profileList[0].profile_options.image.choices: more than one choice is marked default "
        "(jax, flax): KubeSpawner uses the first, 'jax'",
    ]
    (p,) = read_profile_list(yaml.safe_load(TYPOS)["singleuser"]["profileList"], {}, kubespawner_traits()).profiles
    assert p.options[0].default_choice.slug == "jax" and resolve(p, {})["image"] == "jax:0.4"


@pytest.mark.parametrize("name, raw, path, words", REFUSED, ids=[r[0] for r in REFUSED])
def test_what_would_break_a_spawn_is_refused_naming_the_field(name, raw, path, words):
    parsed = read_profile_list(raw, {}, kubespawner_traits())
    assert [p.path for p in parsed.problems] == [path]
    assert words in parsed.problems[0].message


def test_refused_in_a_values_file_under_the_files_own_path(tmp_path):
    code, out, err = check(tmp_path, GPU_TIERS.replace("cpu_limit: 8", "cpu_limit: eight"))
    assert code == 1 and out == ""
    assert err.splitlines()[0] == ("error: singleuser.profileList[1].kubespawner_override.cpu_limit: The 'cpu_limit' "
                                   "trait expected a float, not the str 'eight'.")


def test_dynamic_and_static_parse_give_the_same_profiles():
    raw = yaml.safe_load(IMAGE_PICKER)["singleuser"]["profileList"]
    static = Runtime.parse({"profile_list": raw}, kubespawner_traits())
    dynamic = Runtime.parse({"profile_list": lambda spawner: raw}, kubespawner_traits())
    assert dynamic.profiles == () and dynamic.for_profile_list(raw).profiles == static.profiles


# ---- a callable profile_list: called with the spawner, its result checked like a static list ----

def test_both_spawners_call_the_profile_list_before_the_form_and_the_start():
    for cls in (PlatformSpawner, LocalPlatformSpawner):
        assert cls.get_options_form is PlatformConfig.get_options_form
    assert LocalPlatformSpawner.run_pre_spawn_hook is PlatformConfig.run_pre_spawn_hook
    # PlatformSpawner's own hook (the queue's start timeout) runs PlatformConfig's first
    assert "await maybe_future(super().run_pre_spawn_hook())" in inspect.getsource(PlatformSpawner.run_pre_spawn_hook)


def test_call_awaits_an_async_result_and_names_what_the_function_raised(caplog):
    async def later(spawner):
        return [{"display_name": f"For {spawner}"}]

    def broken(spawner):
        raise RuntimeError("GET https://groups.internal/api?token=s3cr3t failed: 401")

    assert asyncio.run(call(later, "ann")) == [{"display_name": "For ann"}]
    assert asyncio.run(call(lambda s: [], "ann")) == []
    with pytest.raises(ConfigError) as e:
        asyncio.run(call(broken, "ann"))
    # the user sees the type only; the text (here a token) goes to the hub's log
    assert [str(p) for p in e.value.problems] == [f"{WHERE}: raised RuntimeError (the hub's log has the details)"]
    assert "s3cr3t" not in str(refusal(e.value, "ann"))
    assert "s3cr3t" in caplog.text


@pytest.mark.parametrize("result, problem", [
    ({"not": "a profile"}, f"{WHERE}['not']: must be a mapping"),
    ("cpu", f"{WHERE}: must be a list (or a dict keyed by slug) of profiles, not str"),
    ([], f"{WHERE}: gave no profiles"),
    (None, f"{WHERE}: gave no profiles"),
    ([{"display_name": "A", "kubespawner_override": {"image": None, "mem_limit": "lots"}}],
     f"{WHERE}[0].kubespawner_override.mem_limit: lots is not a valid memory specification. Must be an int or a "
     "string with suffix K, M, G, T"),
])
def test_a_bad_result_is_a_problem_naming_its_path(result, problem):
    base = Runtime.parse({"profile_list": lambda spawner: result}, kubespawner_traits())
    with pytest.raises(ConfigError) as e:
        base.for_profile_list(result)
    assert problem in [str(p) for p in e.value.problems]


def test_per_user_results_share_the_hubs_ledger_and_grants_name_profiles_a_user_lacks():
    base = Runtime.parse({"profile_list": lambda spawner: [], "everyone": {"profiles": ["cpu"]},
                          "groups": {"vision": {"project": "vision", "profiles": ["cpu", "gpu"]}}},
                         kubespawner_traits())
    alice = base.for_profile_list([{"display_name": "CPU", "slug": "cpu"}])
    assert alice.ledger is base.ledger and [p.slug for p in alice.profiles] == ["cpu"]
    assert alice.plan("alice", ["vision"], False, {"project": "vision", "profile": "cpu"}).profile.slug == "cpu"
    with pytest.raises(Exception) as e:
        alice.plan("alice", ["vision"], False, {"project": "vision", "profile": "gpu"})
    assert getattr(e.value, "field", None) == "profile"
