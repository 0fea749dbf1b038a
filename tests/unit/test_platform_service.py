"""The hub's one `PlatformService` (hub_ext.spawners.service): made by `configure(c)` and kept in the tornado
settings; every spawner of that hub reaches it through its user's settings and shares its
parsed config (one reservation ledger), another hub shares nothing with it; a spawn plan carries
the chosen mounts and their environment."""

from __future__ import annotations

import copy
import types

import pytest
from tornado import web
from traitlets.config import Config

from hub_ext.setup import configure
from hub_ext.spawners.local import LocalPlatformSpawner
from hub_ext.spawners.service import KEY, PlatformService

pytestmark = pytest.mark.unit

PROFILES = {"cpu": {"display_name": "CPU only"}}


def hub_config(**spawner) -> Config:
    c = Config()
    c.PlatformConfig.profiles = PROFILES
    c.JupyterHub.tornado_settings = {"slow_spawn_timeout": 0}
    for key, value in spawner.items():
        c.JupyterHub[key] = value
    return c


def user(name: str, settings: dict):
    return types.SimpleNamespace(name=name, id=1, url=f"/user/{name}/", settings=settings, admin=False, groups=[])


def spawner(name: str, settings: dict, tmp_path) -> LocalPlatformSpawner:
    from jupyterhub.objects import Hub

    return LocalPlatformSpawner(user=user(name, settings), hub=Hub(ip="127.0.0.1", port=8081, base_url="/hub/"),
                                state_dir=str(tmp_path), inventory={}, profiles=PROFILES)


def test_configure_keeps_one_service_in_the_tornado_settings():
    c = hub_config()
    runtime = configure(c)
    settings = c.JupyterHub.tornado_settings
    service = settings[KEY]
    assert isinstance(service, PlatformService) and service.kind == "local"
    assert settings["slow_spawn_timeout"] == 0  # what the config set stays
    assert copy.deepcopy(c).JupyterHub.tornado_settings[KEY] is service  # traitlets' copy is the same service
    configured = LocalPlatformSpawner(config=c, user=user("alice", settings))
    assert configured.platform is service and configured.runtime is runtime  # the config as parsed at configuration


def test_the_kubernetes_runtime_gets_a_kubernetes_service_that_manages_credentials():
    c = hub_config(spawner_class="platform")
    configure(c)
    service = c.JupyterHub.tornado_settings[KEY]
    assert service.kind == "kubernetes"
    assert service.credentials_where(user("alice", {})) is None


def test_the_spawners_of_one_hub_share_its_service_and_ledger_and_another_hub_shares_nothing(tmp_path):
    c = hub_config()
    configure(c)
    hub = dict(c.JupyterHub.tornado_settings)
    alice, bob = spawner("alice", hub, tmp_path), spawner("bob", hub, tmp_path)
    assert alice.platform is bob.platform is hub[KEY]
    assert alice.runtime.ledger is bob.runtime.ledger
    assert alice.allocator is bob.allocator
    other = spawner("carol", {}, tmp_path)  # another hub (made without configure: its service is made on use)
    assert isinstance(other.platform, PlatformService) and other.platform is not hub[KEY]
    assert other.runtime.ledger is not alice.runtime.ledger
    assert other.allocator is not alice.allocator


async def test_a_spawn_plan_carries_the_chosen_mounts_and_their_environment(tmp_path):
    sp = spawner("alice", {}, tmp_path)
    creds = tmp_path / "projects" / "user-alice" / "credentials"
    creds.mkdir(parents=True)
    (creds / "trainer.json").write_text("{}")
    (tmp_path / "projects" / "user-alice" / "datasets" / "census").mkdir(parents=True)
    plan = await sp.spawn_plan({"profile": "cpu", "credentials": ["trainer"], "datasets": ["census"]})
    assert [c.name for c in plan.mounts.credentials] == ["trainer"]
    assert [d.name for d in plan.mounts.datasets] == ["census"]
    assert plan.mounts.env["GOOGLE_APPLICATION_CREDENTIALS"] == str(creds / "trainer.json")
    assert "census" in plan.mounts.env["MLPLATFORM_DATASETS"]
    sp._plan = plan
    assert sp.get_env()["GOOGLE_APPLICATION_CREDENTIALS"] == str(creds / "trainer.json")
    with pytest.raises(web.HTTPError) as refused:
        sp.user_options = {"profile": "cpu", "credentials": ["missing"]}
        await sp.make_plan()
    assert refused.value.status_code == 403 and "credentials[0]" in refused.value.log_message
