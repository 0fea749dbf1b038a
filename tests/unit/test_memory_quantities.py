"""A profile's memory has one meaning, the one KubeSpawner gives it, and reaches the trait usable.

KubeSpawner's ``mem_limit`` is JupyterHub's ByteSpecification: ``4G`` is 4·2³⁰ bytes there, and
Kubernetes' ``8Gi`` is refused by it. The platform reads both spellings (``hub_ext.core.quantities``),
compares guarantees with limits by that meaning, hands the trait what it reads (``8Gi`` as its
bytes) and refuses at hub start, naming the path, a size neither reads. The spawners are the real
ones, their traits set as a spawn sets them (as in ``test_z2jh_merge``)."""

import copy

import pytest
from kubespawner import KubeSpawner

from hub_ext.core.errors import ConfigError
from hub_ext.core.profiles import read_profile_list, read_profiles, resolve
from hub_ext.core.quantities import cpu_hint, for_trait, memory_bytes
from hub_ext.spawners.kube import PlatformSpawner
from hub_ext.spawners.local import LocalPlatformSpawner
from hub_ext.spawners.runtime import Runtime, kubespawner_traits
from tests.kube.platform_env import PLATFORM, make_user
from tests.unit.test_z2jh_followups import kubeconfig  # noqa: F401 (fixture)

pytestmark = pytest.mark.unit

GiB = 2**30


@pytest.mark.parametrize("value, size", [
    ("8Gi", 8 * GiB), ("1.5Gi", 1536 * 2**20), ("512Mi", 512 * 2**20), ("64Ki", 64 * 1024), ("2Ti", 2 * 2**40),
    ("4G", 4 * GiB), ("500M", 500 * 2**20), ("2K", 2048), ("1.5G", 1536 * 2**20), ("1T", 2**40),  # KubeSpawner's
    ("100k", 100_000), ("1073741824", GiB), ("1e9", 10**9), (GiB, GiB), (0, 0),
])
def test_one_meaning(value, size):
    assert memory_bytes(value) == size


@pytest.mark.parametrize("value", ["4G", "500M", "2K", "1.5G", "1T", 3 * GiB])
async def test_kubespawners_suffixes_mean_what_kubespawner_sets(kubeconfig, value):  # noqa: F811
    assert memory_bytes(value) == KubeSpawner(_mock=True, mem_limit=value).mem_limit


@pytest.mark.parametrize("value, message", [
    ("8 GB", "8 GB is not a valid memory specification. Must be an int or a string with suffix K, M, G, T"),
    ("8Gb", "8Gb is not a valid memory specification"),
    ("500m", "500m is not a valid memory specification"),  # a thousandth of a byte to Kubernetes
    ("1P", "1P is not a valid memory specification"),  # a third meaning: 10¹⁵ to Kubernetes, unknown to the trait
    ("-1Gi", "-1Gi is negative"), ("-1G", "-1G is negative"),
    ("8ki", "8ki is not a Kubernetes quantity"), ("Gi", "Gi is not a Kubernetes quantity"),
    (True, "True is not a size"), ("infG", "infG is not a valid memory specification"),
])
def test_unusable_sizes_say_what_is_wrong(value, message):
    with pytest.raises(ValueError) as e:
        memory_bytes(value)
    assert message in str(e.value)


def test_the_trait_gets_what_it_reads():
    assert for_trait("4G") == "4G" and for_trait(GiB) == GiB and for_trait(None) is None
    assert for_trait("8Gi") == 8 * GiB and for_trait("1073741824") == GiB and for_trait("100k") == 100_000


def profile(**override):
    return {"display_name": "Box", "slug": "box", "kubespawner_override": override}


def settings(profiles):
    return {"accelerators": PLATFORM["accelerators"], "everyone": {"profiles": "*", "limits": {}},
            "profile_list": profiles}


@pytest.mark.parametrize("mem", [{"mem_limit": "8Gi", "mem_guarantee": "2Gi"},
                                 {"mem_limit": "8G", "mem_guarantee": "2G"},
                                 {"mem_limit": 8 * GiB, "mem_guarantee": "2048Mi"}])
async def test_a_kubespawner_gets_the_bytes_meant(kubeconfig, mem):  # noqa: F811
    spawner = PlatformSpawner(user=make_user("alice"), _mock=True, **settings([profile(cpu_limit=2, **mem)]))
    spawner.configured.restore()
    spawner._apply(spawner.user_plan({"profile": "box"}))
    assert (spawner.mem_limit, spawner.mem_guarantee) == (8 * GiB, 2 * GiB)


def test_the_local_spawner_gets_the_bytes_meant(tmp_path):
    spawner = LocalPlatformSpawner(user=make_user("alice"), state_dir=str(tmp_path), inventory={},
                                   **settings([profile(mem_limit="1.5Gi")]))
    spawner.apply_settings(spawner.user_plan({"profile": "box"}))
    assert spawner.mem_limit == 1536 * 2**20


def test_the_platforms_spelling_and_choices_alike():
    native = read_profiles({"box": {"memory": {"guarantee": "1Gi", "limit": "8Gi"}}}, {}, kubespawner_traits())
    (p,) = native.checked()
    assert (p.mem_guarantee, p.mem_limit) == ("1Gi", "8Gi")  # as written, for the form and the catalogue
    assert resolve(p, {})["mem_limit"] == 8 * GiB and resolve(p, {})["mem_guarantee"] == GiB
    z2jh = read_profile_list([{"display_name": "Box", "kubespawner_override": {"mem_limit": "4G"},
                               "profile_options": {"size": {"display_name": "Size", "choices": {
                                   "small": {"display_name": "Small", "default": True},
                                   "big": {"display_name": "Big", "kubespawner_override": {"mem_limit": "16Gi"}}}}}}],
                             {}, kubespawner_traits())
    (p,) = z2jh.checked()
    assert resolve(p, {})["mem_limit"] == "4G" and resolve(p, {"size": "big"})["mem_limit"] == 16 * GiB


def test_guarantee_and_limit_are_compared_as_kubespawner_sets_them():
    """4G is 4·2³⁰ to KubeSpawner, more than 4000Mi: Kubernetes would refuse the pod."""
    parsed = read_profile_list([profile(mem_guarantee="4G", mem_limit="4000Mi")], {}, kubespawner_traits())
    assert [str(p) for p in parsed.problems] == [
        "profile_list[0].kubespawner_override.mem_guarantee: 4G is more than mem_limit 4000Mi"]
    assert read_profile_list([profile(mem_guarantee="4G", mem_limit="4Gi")], {}, kubespawner_traits()).problems == ()
    native = read_profiles({"p": {"memory": {"guarantee": "4G", "limit": "4000Mi"}}}, {}, kubespawner_traits())
    assert [str(p) for p in native.problems] == ["profiles['p'].memory.guarantee: 4G is more than the limit 4000Mi"]


@pytest.mark.parametrize("value", ["8 GB", "-1Gi", "8Gb"])
def test_an_unusable_size_stops_the_hub_naming_its_path(value):
    profiles = [profile(), {"display_name": "B"}, profile(mem_limit=value) | {"slug": "c"}]
    with pytest.raises(ConfigError) as e:
        Runtime.parse(settings(profiles), kubespawner_traits())
    (problem,) = [p for p in e.value.problems if p.path.startswith("profile_list")]
    assert problem.path == "profile_list[2].kubespawner_override.mem_limit" and value in problem.message
    choice = [{"display_name": "A", "profile_options": {"m": {"display_name": "M", "choices": {
        "x": {"display_name": "X", "kubespawner_override": {"mem_guarantee": value}}}}}}]
    with pytest.raises(ConfigError) as e:
        Runtime.parse(settings(choice), kubespawner_traits())
    assert [p.path for p in e.value.problems] == ["profile_list[0].profile_options.m.choices.x.kubespawner_override."
                                                  "mem_guarantee"]
    native = read_profiles({"p": {"memory": {"limit": value}}}, {}, kubespawner_traits())
    assert [str(p) for p in native.problems] == [
        f"profiles['p'].memory.limit: must be a size such as '512M', '4G' or '8Gi', not {value!r}"]


def test_a_kubernetes_cpu_quantity_is_refused_with_the_number_to_write():
    parsed = read_profile_list([profile(cpu_limit="500m")], {}, kubespawner_traits())
    assert [str(p) for p in parsed.problems] == [
        "profile_list[0].kubespawner_override.cpu_limit: The 'cpu_limit' trait expected a float, not the str "
        "'500m'. KubeSpawner's CPU settings take a number of CPUs: write 0.5, not the text '500m'."]
    assert cpu_hint("eight") == "" and cpu_hint(2) == ""


def test_the_settings_are_not_changed_for_the_next_user():
    raw = [profile(mem_limit="8Gi")]
    kept = copy.deepcopy(raw)
    (p,) = read_profile_list(raw, {}, kubespawner_traits()).checked()
    resolve(p, {})
    assert raw == kept and p.override["mem_limit"] == "8Gi"
