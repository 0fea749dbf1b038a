"""Projects, entitlements and the reservation ledger, as tables with whole-object equality."""

import pytest

from hub_ext.core.catalog import parse_accelerators
from hub_ext.core.entitlements import (
    Entitlements,
    Grant,
    Ledger,
    Project,
    TeamProject,
    choose,
    parse_entitlements,
    personal_project_name,
    projects_for,
)
from hub_ext.core.errors import ConfigError, UserInputError
from hub_ext.core.profiles import parse_profiles

pytestmark = pytest.mark.unit

ACC = parse_accelerators({"1g.5gb": {"type": "mig", "profile": "1g.5gb"}, "a100": {"type": "gpu"}})
PROFILES = parse_profiles({"cpu": {}, "mig": {"accelerator": "1g.5gb"}, "gpu": {"accelerator": "a100"}}, ACC)
BY_SLUG = {p.slug: p for p in PROFILES}
GROUPS = {
    "vision": {"project": "vision", "display_name": "Vision team", "profiles": ["cpu", "mig"],
               "limits": {"1g.5gb": 2}},
    "research": {"profiles": ["gpu"], "limits": {"a100": 1, "1g.5gb": 1}},
}
ENT = parse_entitlements({"profiles": ["cpu"]}, GROUPS, PROFILES, ACC)


def test_parse_whole_object():
    assert ENT == Entitlements(
        everyone=Grant(frozenset({"cpu"}), {}),
        groups={"vision": Grant(frozenset({"cpu", "mig"}), {"1g.5gb": 2}),
                "research": Grant(frozenset({"gpu"}), {"a100": 1, "1g.5gb": 1})},
        teams={"vision": TeamProject("vision", "Vision team", "vision",
                                     Grant(frozenset({"cpu", "mig"}), {"1g.5gb": 2}))},
    )


ALL = frozenset({"cpu", "mig", "gpu"})


@pytest.mark.parametrize("user, groups, admin, expected", [
    ("carol", [], False, [("Personal", True, frozenset({"cpu"}), {})]),
    ("alice@example.com", ["vision", "research"], False, [
        ("Personal", True, ALL, {"1g.5gb": 2, "a100": 1}),
        ("Vision team", False, frozenset({"cpu", "mig"}), {"1g.5gb": 2})]),
    # an admin uses every team project within the team's grant (provisioning it must not lift its quota)
    ("root", [], True, [("Personal", True, ALL, None), ("Vision team", False, frozenset({"cpu", "mig"}),
                                                        {"1g.5gb": 2})]),
])
def test_projects_for(user, groups, admin, expected):
    names = [personal_project_name(user)] + (["vision"] if len(expected) > 1 else [])
    owners = [f"user:{user}", "group:vision"]
    assert projects_for(ENT, user, groups, admin) == [Project(n, *e, owner=o)
                                                      for n, e, o in zip(names, expected, owners)]


def test_personal_project_names_are_dns_labels_without_collisions():
    names = {personal_project_name(u) for u in ("alice@example.com", "alice.example.com", "Alice", "x" * 200)}
    assert len(names) == 4 and all(len(n) <= 63 and n == n.lower() for n in names)


@pytest.mark.parametrize("everyone, groups, problems", [
    ({"profiles": ["nope"]}, {}, ["everyone.profiles[0]: unknown profile 'nope' (known: cpu, mig, gpu)"]),
    (None, {"g": {"limits": {"h100": 1}}}, ["groups['g'].limits.h100: unknown accelerator (known: 1g.5gb, a100)"]),
    (None, {"g": {"limits": {"a100": -1}}}, ["groups['g'].limits.a100: must be a whole number >= 0, not -1"]),
    (None, {"g": {"project": "Team_A"}}, ["groups['g'].project: must be a DNS label (lower-case letters, digits "
                                          "and '-') not starting with 'user-'"]),
    (None, {"g": {"project": "t"}, "h": {"project": "t"}}, ["groups['h'].project: is already the project of "
                                                            "group 'g'"]),
    (None, {"g": {"quota": 1}}, ["groups['g'].quota: unknown key"]),
])
def test_entitlement_errors(everyone, groups, problems):
    with pytest.raises(ConfigError) as e:
        parse_entitlements(everyone, groups, PROFILES, ACC)
    assert [str(p) for p in e.value.problems] == problems


def test_choose_validates_project_and_profile():
    projects = projects_for(ENT, "alice", ["vision"])
    assert choose(projects, BY_SLUG, None, None) == (projects[0], BY_SLUG["cpu"])
    assert choose(projects, BY_SLUG, "vision", "mig") == (projects[1], BY_SLUG["mig"])
    for project, profile, field, status in (("other-team", None, "project", 403), ("vision", "gpu", "profile", 403),
                                            (None, "nope", "profile", 400)):
        with pytest.raises(UserInputError) as e:
            choose(projects, BY_SLUG, project, profile)
        assert (e.value.field, e.value.status) == (field, status)


def test_ledger_counts_across_servers_and_refuses_the_last_slice_twice():
    (team,) = [p for p in projects_for(ENT, "alice", ["vision"]) if p.name == "vision"]
    ledger = Ledger()
    ledger.reserve(team, "alice/", "1g.5gb", 1)
    ledger.reserve(team, "bob/", "1g.5gb", 1)
    with pytest.raises(UserInputError) as e:
        ledger.reserve(team, "alice/second", "1g.5gb", 1)
    assert e.value.status == 403 and "may use 2 1g.5gb at once and 2 are in use" in e.value.message
    ledger.reserve(team, "alice/", "1g.5gb", 1)  # re-reserving one's own holding is not double-counted
    ledger.release("vision", "bob/")
    ledger.reserve(team, "alice/second", "1g.5gb", 1)
    assert ledger.holdings("vision") == {"alice/": ("1g.5gb", 1), "alice/second": ("1g.5gb", 1)}


def test_unlimited_for_admins_and_zero_when_not_granted():
    admin_personal = projects_for(ENT, "root", [], admin=True)[0]
    ledger = Ledger()
    for i in range(10):
        ledger.reserve(admin_personal, f"root/{i}", "a100", 1)
    plain = projects_for(ENT, "carol", [])[0]
    with pytest.raises(UserInputError):
        ledger.reserve(plain, "carol/", "a100", 1)
