"""hub_ext.spawners.metrics: how a platform server is labelled on the hub's /metrics (its project,
profile slug, catalogue accelerator and the accelerators it holds), its options planned again as its
spawner plans them; one that no longer plans keeps its options' words. Scraped from a real hub in
tests/hub/test_local_platform.py."""

from __future__ import annotations

import types

import pytest
from prometheus_client.registry import CollectorRegistry

from hub_ext.spawners.local import LocalPlatformSpawner
from hub_ext.spawners.metrics import register, server_labels

pytestmark = pytest.mark.unit

ACCELERATORS = {"1g.5gb": {"type": "mig", "profile": "1g.5gb"}}
PROFILES = {"cpu": {"display_name": "CPU only"},
            "mig-1g": {"display_name": "Small GPU slice", "accelerator": "1g.5gb", "accelerator_count": 2}}


def spawner(options: dict, everyone: dict) -> LocalPlatformSpawner:
    user = types.SimpleNamespace(name="alice", id=1, url="/user/alice/", settings={}, admin=False, groups=[])
    s = LocalPlatformSpawner(user=user, inventory={}, accelerators=ACCELERATORS, profiles=PROFILES, everyone=everyone)
    s.user_options = options
    return s


GRANTED = {"profiles": ["cpu", "mig-1g"], "limits": {"1g.5gb": 4}}


def test_a_server_is_labelled_by_its_plan():
    got = server_labels(spawner({"profile": "mig-1g", "datasets": ["d"], "credentials": ["k"]}, GRANTED))
    assert got == (("user-alice", "mig-1g", "1g.5gb"), 2)
    assert server_labels(spawner({"profile": "cpu"}, GRANTED)) == (("user-alice", "cpu", ""), 0)


def test_a_server_whose_options_no_longer_plan_keeps_its_options_words():
    cut = {"profiles": ["cpu"], "limits": {}}  # the grant was narrowed after the server started
    assert server_labels(spawner({"project": "user-alice", "profile": "mig-1g"}, cut)) == \
        (("user-alice", "mig-1g", "1g.5gb"), 2)
    assert server_labels(spawner({"profile": "gone"}, cut)) == (("", "gone", ""), 0)


def test_registering_twice_in_one_process_keeps_one_collector():
    registry = CollectorRegistry()
    register(registry)
    register(registry)
    assert [m.name for m in registry.collect()] == ["mlplatform_servers_running", "mlplatform_accelerators_allocated"]
    assert all(not m.samples for m in registry.collect())  # outside a hub: no users, no servers


def test_a_servers_labels_are_kept_until_its_options_or_the_configuration_change():
    s = spawner({"profile": "mig-1g"}, GRANTED)
    assert server_labels(s) == (("user-alice", "mig-1g", "1g.5gb"), 2)
    s.user_options = {"profile": "cpu"}
    assert server_labels(s) == (("user-alice", "cpu", ""), 0)
    s.user_options = {"profile": "mig-1g"}
    s.everyone, s._runtime = {"profiles": ["cpu"], "limits": {}}, None  # a new configuration
    assert server_labels(s) == (("", "mig-1g", "1g.5gb"), 2)  # no longer plans: the options' words
