"""Leaving a team takes effect, on the real control plane: a real JupyterHub with PlatformSpawner
(acting as the hub's ServiceAccount) and member identities (``oidc:{username}``) reconciles the
team project's member RoleBindings and ServiceAccounts with its groups every 2 seconds. alice, bob
and carol are in the group vision; bob runs one server in the team project and one in his personal
project. bob is removed from the group and carol is deleted through the hub's API: within the
interval their RoleBindings and ServiceAccounts are gone from the vision namespace (read as admin),
bob's server there is stopped (its pod gone) and his personal server keeps running; alice keeps
hers. The hub is then restarted with alice blocked by the authenticator and a one-hour interval:
the round at hub start removes her binding."""

from __future__ import annotations

import time

import pytest
import requests

from hub_ext.local.demo import DemoSecrets
from hub_ext.manifests.tenancy import member_binding_name
from tests.cluster.identities import hub_kubeconfig
from tests.hub.test_hub_harness import form_login
from tests.kube.platform_env import NODES, delete_projects, kube_hub_config

pytestmark = pytest.mark.hub
RBAC = "rbac.authorization.k8s.io"


@pytest.fixture
def hub(kube_cluster, hub_factory, tmp_path, request):
    """A hub reconciling every 2 s; member identities ``oidc:{username}`` unless the test is
    parametrized indirectly with another template ("": none)."""
    template = getattr(request, "param", "oidc:{username}")
    delete_projects(kube_cluster)
    kubelet = kube_cluster.kubelet("process", nodes=NODES, workdir=tmp_path / "kubelet")
    secrets = DemoSecrets.generate()
    source = kube_hub_config(tmp_path / "state", secrets, member_identity_template=template,
                             member_reconcile_interval=2)
    source += '\nc.JupyterHub.load_groups = {"vision": {"users": ["alice", "bob", "carol"]}}\n'
    hub = hub_factory(source, env={"KUBECONFIG": str(hub_kubeconfig(kube_cluster, tmp_path / "hub.kubeconfig"))})
    hub.user_password = secrets.user_password
    yield hub
    try:
        hub.stop()
    finally:
        kubelet.stop()
        delete_projects(kube_cluster)


def member_bindings(cluster, ns: str) -> set[str]:
    return {b["metadata"]["name"] for b in cluster.items(RBAC, "v1", "rolebindings", ns,
                                                         labelSelector="mlplatform.io/member")}


def member_accounts(cluster, ns: str) -> set[str]:
    """The members' own ServiceAccounts (their pods run as them; their tokens die with them)."""
    return {a["metadata"]["name"] for a in cluster.items("", "v1", "serviceaccounts", ns,
                                                         labelSelector="mlplatform.io/member")}


def servers(hub, user: str) -> dict:
    return hub.api("GET", f"/users/{user}").json()["servers"]


def until(check, what: str, hub, timeout: float = 60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"never: {what}\n{hub.log_tail(80)}")


def open_spawn_form(hub, user: str) -> None:
    """What a member does in the browser: the spawn form provisions their projects (and bindings)."""
    session, r = form_login(hub.url, user, hub.user_password)
    assert r.status_code == 302, r.text
    page = session.get(f"{hub.url}/hub/spawn/{user}", timeout=60)
    assert page.status_code == 200 and 'value="vision"' in page.text, page.text[:2000]


def spawn(hub, user: str, name: str, options: dict) -> None:
    r = hub.api("POST", f"/users/{user}/servers/{name}", json=options, timeout=60)
    assert r.status_code in (201, 202), r.text
    until(lambda: (servers(hub, user).get(name) or {}).get("ready"), f"{user}/{name} ready", hub, 120)


def notebook_pods(cluster, ns: str) -> list[str]:
    return [p["metadata"]["name"] for p in cluster.items("", "v1", "pods", ns, labelSelector="component=singleuser-server")
            if not p["metadata"].get("deletionTimestamp")]


def test_a_member_removed_from_the_group_or_deleted_loses_the_team_project(hub, kube_cluster):
    alice, bob, carol = (member_binding_name(u) for u in ("alice", "bob", "carol"))
    # a round on request: admins (admin:users) and the reconciler's service may ask, a user may not
    assert hub.api("POST", "/mlplatform/reconcile").json() == {"removed_bindings": [], "removed_accounts": [],
                                                               "stopped_servers": [], "errors": []}
    token = hub.api("POST", "/users/alice/tokens", json={"note": "membership test"}).json()["token"]
    r = requests.post(f"{hub.api_url}/mlplatform/reconcile", headers={"Authorization": f"token {token}"}, timeout=30)
    assert r.status_code == 403 and "custom:mlplatform:reconcile" in r.json()["message"], r.text
    for user in ("alice", "carol"):
        open_spawn_form(hub, user)
    spawn(hub, "bob", "team", {"project": "vision", "profile": "cpu"})
    spawn(hub, "bob", "", {"profile": "cpu"})  # his personal project
    assert member_bindings(kube_cluster, "vision") == member_accounts(kube_cluster, "vision") == {alice, bob, carol}
    assert len(notebook_pods(kube_cluster, "vision")) == 1 and len(notebook_pods(kube_cluster, "user-bob")) == 1

    r = hub.api("DELETE", "/groups/vision/users", json={"users": ["bob"]})
    assert r.status_code == 200, r.text
    assert hub.api("DELETE", "/users/carol").status_code == 204
    removed_at = time.monotonic()
    until(lambda: member_bindings(kube_cluster, "vision") == member_accounts(kube_cluster, "vision") == {alice}
          and "team" not in servers(hub, "bob"),
          "bob's and carol's bindings and accounts removed, bob's team server stopped", hub, 30)
    took = time.monotonic() - removed_at
    until(lambda: not notebook_pods(kube_cluster, "vision"), "bob's pod in vision deleted", hub, 30)
    assert servers(hub, "bob")[""]["ready"] and len(notebook_pods(kube_cluster, "user-bob")) == 1
    log = hub.log_text()
    assert "bob is no longer a member of the group 'vision'" in log and "no such hub user (deleted)" in log
    assert "their jobs there keep running, with no right left (their ServiceAccount is gone)" in log
    print(f"\nbob's and carol's access to vision removed {took:.1f}s after they left (interval 2s)")

    # at hub start: alice blocked by the authenticator, the next interval an hour away
    hub.config_source += "\nc.Authenticator.blocked_users = {'alice'}\nc.PlatformSpawner.member_reconcile_interval = 3600\n"
    hub.restart()
    until(lambda: member_bindings(kube_cluster, "vision") == set(), "alice's binding removed at hub start", hub, 30)
    assert "alice is blocked by the authenticator" in hub.log_text()


@pytest.mark.parametrize("hub", [""], indirect=True)
def test_without_member_identities_a_leaver_still_loses_their_account_and_servers(hub, kube_cluster):
    """No member_identity_template: each member's binding names only their own ServiceAccount; a
    leaver's binding and account go and their server in the team project is stopped."""
    spawn(hub, "bob", "team", {"project": "vision", "profile": "cpu"})
    spawn(hub, "alice", "", {"project": "vision", "profile": "cpu"})
    alice, bob = member_binding_name("alice"), member_binding_name("bob")
    assert member_bindings(kube_cluster, "vision") == member_accounts(kube_cluster, "vision") == {alice, bob}
    binding = kube_cluster.get(RBAC, "v1", "rolebindings", "vision", bob)
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": bob, "namespace": "vision"}]
    assert hub.api("DELETE", "/groups/vision/users", json={"users": ["bob"]}).status_code == 200
    until(lambda: "team" not in servers(hub, "bob"), "bob's team server stopped", hub, 30)
    until(lambda: member_accounts(kube_cluster, "vision") == member_bindings(kube_cluster, "vision") == {alice},
          "bob's account and binding removed", hub, 30)
    until(lambda: len(notebook_pods(kube_cluster, "vision")) == 1, "only alice's pod left in vision", hub, 30)
    assert servers(hub, "alice")[""]["ready"]
    assert "bob is no longer a member of the group 'vision'" in hub.log_text()
