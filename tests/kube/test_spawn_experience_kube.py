"""What a newcomer sees of spawns on Kubernetes (issue 20.6), PlatformSpawner on the real control
plane and scheduler: the progress says what the pod was given and where, and a refusal for want
of a slice names the user's own servers that hold the slices."""

from __future__ import annotations

import asyncio
import types

import pytest
from tornado import web

from hub_ext.core.entitlements import personal_project_name
from tests.kube.platform_env import make_spawner, make_user, platform_cluster, until, watch_progress

pytestmark = pytest.mark.kube


@pytest.fixture
async def cluster(kube_cluster, tmp_path, monkeypatch):
    async with platform_cluster(kube_cluster, tmp_path, monkeypatch) as c:
        yield c


def named(user, name, options):
    """A spawner of `user`'s named server `name` (the hub gives it its database row)."""
    row = types.SimpleNamespace(name=name, server=None, started=None, last_activity=None, state=None,
                                user_options=options)
    return make_spawner(user, options, orm_spawner=row)


async def test_progress_names_the_slice_and_node_and_refusals_name_the_users_own_holders(cluster):
    alice = make_user("alice", ["vision"])
    servers = []
    for name in ("one", "gpu2"):
        sp = named(alice, name, {"profile": "mig-1g"})
        sp.start()
        messages, collector = watch_progress(sp)
        await asyncio.wait_for(sp._start_future, 60)
        await asyncio.wait_for(collector, 10)
        assert "assigned MIG slice 1g.5gb on node dgx-mig" in messages, messages
        assert messages.index("assigned to node dgx-mig") < messages.index("assigned MIG slice 1g.5gb on node dgx-mig")
        servers.append(sp)
    await until(lambda: _usage_is(servers[0], personal_project_name("alice"), 2), "the hub saw both pods")
    # the personal project's limit (2 at once): both held by alice's own servers
    with pytest.raises(web.HTTPError) as e:
        await named(alice, "three", {"profile": "mig-1g"}).start()
    assert e.value.status_code == 403
    assert e.value.log_message == (
        f"profile: the project {personal_project_name('alice')!r} may use 2 1g.5gb at once and 2 are in use; "
        "your servers 'gpu2' and 'one' hold all 2: stop one of them or pick another profile")
    # the team project has room, the machine has no free slice: alice's servers hold them
    with pytest.raises(web.HTTPError) as e:
        await named(alice, "four", {"project": "vision", "profile": "mig-1g"}).start()
    assert e.value.status_code == 409
    assert e.value.log_message == ("profile: no MIG 1g.5gb slice is free now (0 of 2 free); your servers 'gpu2' and "
                                   "'one' hold all 2: stop one of them or pick another profile")
    for sp in servers:
        await sp.stop()


async def _usage_is(spawner, ns, n):
    return ((await spawner.usage(ns)) or {}).get("1g.5gb") == n


async def test_a_quota_refusal_from_kubernetes_names_the_users_own_server(cluster):
    carol = make_user("carol", ["vision"])
    one = named(carol, "one", {"project": "vision", "profile": "mig-1g"})
    await one.start()
    await until(lambda: _usage_is(one, "vision", 1), "the hub saw the pod")
    # another hub (or a race) lowered what the quota admits after this hub's caches last looked
    cluster.patch("", "v1", "resourcequotas", "vision", "mlplatform-accelerators",
                  {"spec": {"hard": {"requests.nvidia.com/mig-1g.5gb": "1"}}})

    async def enforced():
        quota = cluster.get("", "v1", "resourcequotas", "vision", "mlplatform-accelerators")
        return (quota.get("status") or {}).get("hard", {}).get("requests.nvidia.com/mig-1g.5gb") == "1"
    await until(enforced, "the quota controller took the new limit")
    with pytest.raises(web.HTTPError) as e:
        await named(carol, "two", {"project": "vision", "profile": "mig-1g"}).start()
    assert e.value.status_code == 403
    assert e.value.log_message == ("the project 'vision' has no accelerator quota left for this profile (its jobs "
                                   "and servers use it all); your server 'one' holds the only one: stop it or pick "
                                   "another profile")
    await one.stop()
