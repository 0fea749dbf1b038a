"""Team membership (pure decisions of `hub_ext.manifests.membership`) and the reconciler's wiring in
`hub_ext.setup.configure`: who keeps a member RoleBinding in a team project, which servers a
leaver loses, and the hub-managed service that asks for a round every interval."""

import sys

import pytest
from traitlets.config import Config

from hub_ext.core.entitlements import Project
from hub_ext.core.errors import ConfigError
from hub_ext.manifests.membership import (
    HubUser,
    Removal,
    Server,
    server_project,
    servers_to_stop,
    stale_bindings,
    wanted_members,
)
from hub_ext.manifests.tenancy import member_binding_name, project_objects
from hub_ext.setup import configure
from tests.kube.platform_env import PLATFORM

pytestmark = pytest.mark.unit

TEAMS = {"vision": "vision", "nlp": "language"}  # project → group
USERS = [
    HubUser("alice", frozenset({"vision"})),
    HubUser("bob", frozenset()),  # left vision
    HubUser("root", admin=True),  # admins may use every project
    HubUser("eve", frozenset({"vision", "language"}), blocked=True),
    HubUser("dora", frozenset({"language"})),
]
VISION = Project("vision", "Vision", False, frozenset({"cpu"}), {}, "group:vision")


def bindings(*usernames: str) -> list[dict]:
    """The member RoleBindings the hub makes in the vision project for these users."""
    objects = project_objects(VISION, {}, (), [(u, f"oidc:{u}") for u in usernames])
    return [o for o in objects if o["kind"] == "RoleBinding" and "mlplatform.io/member" in o["metadata"]["labels"]]


def test_wanted_members_are_the_group_and_the_admins_never_the_blocked():
    assert wanted_members(TEAMS, USERS) == {"vision": {"alice", "root"}, "nlp": {"root", "dora"}}
    assert wanted_members({}, USERS) == {}


@pytest.mark.parametrize("found, wanted, removed", [
    (("alice", "bob", "root"), {"alice", "root"},
     [("bob", "bob is no longer a member of the group 'vision'")]),
    (("alice", "carol"), {"alice"}, [("carol", "no such hub user (deleted)")]),
    (("eve", "alice"), {"alice"}, [("eve", "eve is blocked by the authenticator")]),
    (("alice",), {"alice"}, []),
    ((), {"alice"}, []),
])
def test_stale_bindings_are_those_no_granted_user_has(found, wanted, removed):
    assert stale_bindings("vision", "vision", bindings(*found), wanted, USERS) == \
        [Removal("vision", member_binding_name(u), why) for u, why in removed]


def test_a_leavers_service_account_goes_with_their_binding_with_or_without_identities():
    """In a team project every member has a RoleBinding and a ServiceAccount of one name, whether or
    not a member identity template is set: a leaver's both go (their tokens die with the account)."""
    accounts = [o for o in project_objects(VISION, {}, (), [("alice", ""), ("bob", "")])
                if o["kind"] == "ServiceAccount" and o["metadata"]["name"].startswith("mlplatform-member-")]
    assert [a["metadata"]["name"] for a in accounts] == [member_binding_name("alice"), member_binding_name("bob")]
    assert [(r.binding, r.kind, r.why) for r in stale_bindings("vision", "vision", accounts, {"alice"}, USERS,
                                                               "ServiceAccount")] == [
        (member_binding_name("bob"), "ServiceAccount", "bob is no longer a member of the group 'vision'")]


def test_only_member_bindings_are_considered():
    others = [o for o in project_objects(VISION, {}, ()) if o["kind"] == "RoleBinding"]  # hub's and runner's
    assert stale_bindings("vision", "vision", others, set(), USERS) == []


def test_long_and_odd_usernames_keep_their_own_binding():
    long_a, long_b = "x" * 60 + "a", "x" * 60 + "b"
    users = [HubUser(long_a, frozenset({"vision"})), HubUser(long_b)]
    assert [r.binding for r in stale_bindings("vision", "vision", bindings(long_a, long_b), {long_a}, users)] == \
        [member_binding_name(long_b)]


@pytest.mark.parametrize("options, project", [
    ({"project": "vision", "profile": "cpu"}, "vision"),
    ({"profile": "cpu"}, None),  # the personal project
    ({"project": "user-bob"}, None),
    ({"project": "elsewhere"}, None),  # no such team project
    ({"project": ["vision"]}, None),
    (None, None),
])
def test_server_project(options, project):
    assert server_project(options, TEAMS) == project


def test_servers_to_stop_are_leavers_servers_in_that_project_only():
    servers = [Server("alice", "", {"project": "vision"}), Server("bob", "team", {"project": "vision"}),
               Server("bob", "", {"profile": "cpu"}), Server("root", "x", {"project": "nlp"}),
               Server("eve", "", {"project": "nlp"}), Server("dora", "", {"project": "vision"}),
               Server("gone", "", {"project": "vision"})]
    stops = servers_to_stop(servers, TEAMS, wanted_members(TEAMS, USERS), USERS)
    assert [(s.server.user, s.server.name, s.project, s.why) for s in stops] == [
        ("bob", "team", "vision", "bob is no longer a member of the group 'vision'"),
        ("dora", "", "vision", "dora is no longer a member of the group 'vision'"),
        ("eve", "", "nlp", "eve is blocked by the authenticator"),
        ("gone", "", "vision", "no such hub user (deleted)"),
    ]


def kube_config(**spawner) -> Config:
    c = Config()
    c.JupyterHub.spawner_class = "platform"
    c.PlatformSpawner = Config({**PLATFORM, **spawner})
    return c


def test_configure_adds_the_reconciler_service_on_kubernetes():
    c = kube_config(member_reconcile_interval=2)
    configure(c)
    assert c.JupyterHub.services == [{"name": "mlplatform-reconciler", "command": [
        sys.executable, "-m", "hub_ext.web.reconcile", "--interval", "2"]}]
    role = next(r for r in c.JupyterHub.load_roles if r["name"] == "mlplatform-reconciler")
    assert role["scopes"] == ["custom:mlplatform:reconcile"] and role["services"] == ["mlplatform-reconciler"]
    assert "custom:mlplatform:reconcile" in c.JupyterHub.custom_scopes
    assert "/api/mlplatform/reconcile" in [h[0] for h in c.JupyterHub.extra_handlers]


def test_configure_default_interval_and_zero_disables_the_service():
    c = kube_config()
    configure(c)
    assert c.JupyterHub.services[0]["command"][-1] == "300"
    c = kube_config(member_reconcile_interval=0)
    configure(c)
    assert "services" not in c.JupyterHub or c.JupyterHub.services == []
    assert "/api/mlplatform/reconcile" in [h[0] for h in c.JupyterHub.extra_handlers]  # admins may still ask


@pytest.mark.parametrize("value", [-1, "300", True, None])
def test_a_bad_interval_stops_the_hub_naming_the_field(value):
    with pytest.raises(ConfigError) as e:
        configure(kube_config(member_reconcile_interval=value))
    assert str(e.value.problems[0]).startswith("PlatformSpawner.member_reconcile_interval: must be a number")


def test_the_local_runtime_gets_no_reconciler():
    c = Config()
    c.PlatformConfig = Config(PLATFORM)
    configure(c)
    assert "services" not in c.JupyterHub
    assert "/api/mlplatform/reconcile" not in [h[0] for h in c.JupyterHub.extra_handlers]
    assert "custom:mlplatform:reconcile" not in c.JupyterHub.custom_scopes
