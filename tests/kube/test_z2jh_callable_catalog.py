"""A callable ``profile_list`` on the real control plane: what the hub publishes in a project's
catalogue ConfigMap (``mlplatform-catalog``, which the jobs API plans with) does not depend on
which member provisioned the project first. A team project's lists the accelerators and the
team's limits and no profiles (members' lists differ); a personal project's lists its owner's
own result, republished when the result changes (and only then: an unchanged result makes no
request)."""

from __future__ import annotations

import json

import pytest

from server_ext.runtimes.kube.target import published_of
from tests.kube.platform_env import make_spawner, make_user, platform_cluster

pytestmark = pytest.mark.kube

EXTRA: dict[str, list] = {"alice": []}  # profiles added to alice's result later in the test


def per_user(spawner):
    """Profiles per user, as production hubs make them (group-dependent, per-user descriptions)."""
    name = spawner.user.name
    profiles = [{"display_name": "CPU only", "slug": "cpu", "description": f"Made for {name}",
                 "kubespawner_override": {"cpu_limit": 2, "mem_limit": "4G"}}]
    if name == "alice":
        profiles.append({"display_name": "Small GPU slice", "slug": "mig-1g", "kubespawner_override": {
            "extra_resource_guarantees": {"nvidia.com/mig-1g.5gb": 1},
            "extra_resource_limits": {"nvidia.com/mig-1g.5gb": 1}}})
    if name == "bob":
        profiles.append({"display_name": "Bob's box", "slug": "bob-box", "kubespawner_override": {"cpu_limit": 8}})
    return profiles + EXTRA.get(name, [])


SETTINGS = {"profiles": {}, "profile_list": per_user, "everyone": {"profiles": "*", "limits": {}},
            "groups": {"vision": {"project": "vision", "display_name": "Vision team",
                                  "profiles": ["cpu", "mig-1g", "bob-box", "late"], "limits": {"1g.5gb": 2}}}}


@pytest.fixture
async def cluster(kube_cluster, tmp_path, monkeypatch):
    async with platform_cluster(kube_cluster, tmp_path, monkeypatch) as c:
        yield c


def catalog(cluster, ns: str) -> dict:
    return json.loads(cluster.get("", "v1", "configmaps", ns, "mlplatform-catalog")["data"]["catalog.json"])


async def provisioned(name: str):
    spawner = make_spawner(make_user(name, ["vision"]), **SETTINGS)
    await spawner.load_profiles()
    projects = await spawner.provision()
    return {p.name: p for p in projects}


async def test_published_catalogues_do_not_depend_on_who_provisioned_first(cluster):
    alice = await provisioned("alice")
    team = catalog(cluster, "vision")
    assert team["profiles"] == []
    assert team["project"] == {"name": "vision", "display_name": "Vision team", "personal": False,
                               "limits": {"1g.5gb": 2}}
    assert {a["name"] for a in team["accelerators"]} == {"a100", "1g.5gb", "3g.20gb"}
    cm = cluster.get("", "v1", "configmaps", "vision", "mlplatform-catalog")
    planned = published_of(cm, "vision")  # what the jobs API plans with
    assert planned.limits == {"1g.5gb": 2} and set(planned.accelerators) == {"a100", "1g.5gb", "3g.20gb"}

    bob = await provisioned("bob")
    assert catalog(cluster, "vision") == team  # bob's provisioning changes nothing there
    personal = {user: next(name for name, p in projects.items() if p.personal)
                for user, projects in (("alice", alice), ("bob", bob))}
    mine = {user: catalog(cluster, ns) for user, ns in personal.items()}
    assert [(p["slug"], p["description"]) for p in mine["alice"]["profiles"]] == [("cpu", "Made for alice"),
                                                                                  ("mig-1g", "")]
    assert [p["slug"] for p in mine["bob"]["profiles"]] == ["cpu", "bob-box"]

    # a spawner the function was not called for yet (the platform API's files, the credentials
    # page) calls it before provisioning: the personal catalogue stays its owner's
    await make_spawner(make_user("alice", ["vision"]), **SETTINGS).project_files(personal["alice"])
    assert catalog(cluster, personal["alice"]) == mine["alice"]

    # each call of the function makes a new result, but an unchanged one requests nothing again
    before = len(cluster.requests())
    await provisioned("alice")
    await provisioned("bob")
    assert cluster.requests()[before:] == []

    # alice's result changes: her personal catalogue follows it; the team's stays as it is
    EXTRA["alice"] = [{"display_name": "Late addition", "slug": "late", "kubespawner_override": {"cpu_limit": 1}}]
    try:
        await provisioned("alice")
    finally:
        EXTRA["alice"] = []
    assert [p["slug"] for p in catalog(cluster, personal["alice"])["profiles"]] == ["cpu", "mig-1g", "late"]
    assert catalog(cluster, "vision") == team
