"""Who owns what in a project, on the real control plane, the hub acting as the ServiceAccount of
`helm-values/hub-rbac.yaml` (`tests.kube.platform_env`):

- the hub never adopts a namespace it did not make for that project and owner: a hub user named
  mallory whose personal project's namespace ``user-mallory`` exists already (made by an admin
  without the platform's labels, or labelled for another owner or project) gets a refusal in
  words, a warning names the namespace and the owner found, and nothing in the namespace changes
  (no write request reaches it); a namespace the hub made before owners were recorded is adopted
  and gets the owner annotation, others' labels and annotations kept;
- a credential in a team project is deleted only by its creator or a hub admin, through the
  credentials face and `ProjectResources.delete_credential`: another member gets 403 naming
  ``name`` and the Secret stays; one made outside the hub only an admin may delete.
"""

from __future__ import annotations

import logging
import time

import pytest
from tornado import web

from hub_ext.core.credentials import files_from_fields
from hub_ext.core.errors import UserInputError
from hub_ext.web import credentials_page
from tests.kube.platform_env import GCP_KEY, create, make_spawner, make_user, platform_cluster, secret_body, until

pytestmark = pytest.mark.kube

NS = "user-mallory"
MANAGED = {"app.kubernetes.io/managed-by": "jupyterhub-mlplatform"}
OWNER = "mlplatform.io/owner"


@pytest.fixture
async def cluster(kube_cluster, tmp_path, monkeypatch):
    async with platform_cluster(kube_cluster, tmp_path, monkeypatch) as c:
        yield c
        if c.get("", "v1", "namespaces", None, NS):  # an admin's namespace is not the platform's to clean up
            c.delete("", "v1", "namespaces", None, NS)
            for _ in range(300):
                if c.get("", "v1", "namespaces", None, NS) is None:
                    break
                time.sleep(0.2)


def admins_namespace(cluster, labels: dict, annotations: dict) -> dict:
    create(cluster, {"apiVersion": "v1", "kind": "Namespace",
                     "metadata": {"name": NS, "labels": labels, "annotations": annotations}})
    cluster.create("", "v1", "configmaps", NS, {"metadata": {"name": "admins-notes"}, "data": {"k": "v"}})
    return cluster.get("", "v1", "namespaces", None, NS)


def contents(cluster) -> dict:
    out = {}
    for plural, group in (("configmaps", ""), ("serviceaccounts", ""), ("secrets", ""), ("resourcequotas", ""),
                          ("roles", "rbac.authorization.k8s.io"), ("rolebindings", "rbac.authorization.k8s.io")):
        version = "v1"
        out[plural] = sorted((o["metadata"]["name"], o["metadata"]["resourceVersion"])
                             for o in cluster.items(group, version, plural, NS)
                             if o["metadata"]["name"] not in ("default", "kube-root-ca.crt"))
    return out


@pytest.mark.parametrize("labels, annotations, found", [
    ({}, {}, "none recorded (no platform labels)"),
    ({**MANAGED, "mlplatform.io/project": NS}, {OWNER: "user:alice"}, "'user:alice'"),
    ({**MANAGED, "mlplatform.io/project": "vision"}, {OWNER: "group:vision"}, "'group:vision'"),
    ({**MANAGED, "mlplatform.io/project": "vision"}, {}, "mlplatform.io/project='vision'"),
], ids=["made-by-an-admin", "another-owner", "another-project", "another-project-legacy"])
async def test_a_namespace_not_made_for_the_owner_is_refused_and_left_alone(cluster, caplog, labels, annotations,
                                                                               found):
    before = admins_namespace(cluster, labels, annotations)
    inside = contents(cluster)
    since = len(cluster.requests())
    sp = make_spawner(make_user("mallory"), {"profile": "cpu"})
    with caplog.at_level(logging.WARNING, "mlplatform.provision"), pytest.raises(web.HTTPError) as e:
        await sp.start()
    assert e.value.status_code == 409, e.value.log_message
    assert e.value.log_message == (
        f"could not prepare the project {NS!r}: its namespace {NS!r} exists and was not made by the platform for "
        "this project's owner; nothing in it was changed: ask an administrator")
    (warning,) = [r for r in caplog.records if r.name == "mlplatform.provision"]
    assert warning.levelno == logging.WARNING and NS in warning.getMessage() and found in warning.getMessage()
    assert "user:mallory" in warning.getMessage()
    after = cluster.get("", "v1", "namespaces", None, NS)
    assert after["metadata"] == before["metadata"] and contents(cluster) == inside
    writes = [(r.method, r.path) for r in cluster.requests()[since:] if r.method in ("POST", "PUT", "PATCH", "DELETE")]
    assert [w for w in writes if NS in w[1]] == []
    # asked again, the same answer (a refusal is not remembered as done)
    with pytest.raises(web.HTTPError) as again:
        await sp.start()
    assert again.value.status_code == 409


async def test_a_namespace_the_hub_made_before_owners_were_recorded_is_adopted(cluster, caplog):
    admins_namespace(cluster, {**MANAGED, "mlplatform.io/project": NS, "example.com/team": "ml"},
                     {"example.com/cost-centre": "42"})
    sp = make_spawner(make_user("mallory"))
    with caplog.at_level(logging.INFO, "mlplatform.provision"):
        await sp.provision()
    meta = cluster.get("", "v1", "namespaces", None, NS)["metadata"]
    assert meta["annotations"][OWNER] == "user:mallory"
    assert meta["annotations"]["example.com/cost-centre"] == "42" and meta["labels"]["example.com/team"] == "ml"
    assert cluster.get("", "v1", "serviceaccounts", NS, "mlplatform-runner")
    assert cluster.get("", "v1", "configmaps", NS, "admins-notes")
    assert any("adopting the namespace user-mallory" in r.getMessage() for r in caplog.records)
    # from now on it is mallory's: provisioned again, nothing is written; alice may not choose it
    sp.shared.provisioner.forget()
    await sp.provision()
    assert cluster.get("", "v1", "namespaces", None, NS)["metadata"]["resourceVersion"] == meta["resourceVersion"]
    with pytest.raises(web.HTTPError) as e:
        await make_spawner(make_user("alice", uid=2), {"project": NS}).start()
    assert e.value.status_code == 403 and "project" in e.value.log_message


async def test_a_team_credential_is_deleted_only_by_its_creator_or_an_admin(cluster):
    alice, bob, root = make_user("alice", ["vision"]), make_user("bob", ["vision"], uid=2), \
        make_user("root", [], admin=True, uid=3)
    sp_alice, sp_bob, sp_root = make_spawner(alice), make_spawner(bob), make_spawner(root)
    await sp_alice.provision()
    await sp_bob.provision()
    await sp_root.provision()
    creds = files_from_fields("gcp-credential", {"key_json": GCP_KEY})
    await credentials_page.add(sp_alice, alice, "vision", {"name": "training-sa", "type": "gcp-credential",
                                                           "key_json": GCP_KEY})
    await credentials_page.add(sp_alice, alice, "vision", {"name": "eval-sa", "type": "gcp-credential",
                                                           "key_json": GCP_KEY})
    assert cluster.get("", "v1", "secrets", "vision", "training-sa")["metadata"]["annotations"][
        "mlplatform.io/created-by"] == "alice"

    # bob, a member of the same team, may mount it (it is listed for him) but not delete it
    await until(lambda: _listed(sp_bob, "training-sa"), "bob sees alice's credential")
    with pytest.raises(UserInputError) as e:
        await credentials_page.delete(sp_bob, bob, "vision", "training-sa")
    assert (e.value.field, e.value.status) == ("name", 403)
    assert "only its creator alice or an administrator may delete it" in e.value.message
    assert cluster.get("", "v1", "secrets", "vision", "training-sa")
    with pytest.raises(UserInputError) as e:
        await sp_bob.shared.resources.delete_credential("vision", "training-sa", deleted_by="bob", admin=False)
    assert e.value.status == 403 and cluster.get("", "v1", "secrets", "vision", "training-sa")

    # its creator may, and so may an admin
    await credentials_page.delete(sp_alice, alice, "vision", "training-sa")
    assert cluster.get("", "v1", "secrets", "vision", "training-sa") is None
    await credentials_page.delete(sp_root, root, "vision", "eval-sa")
    assert cluster.get("", "v1", "secrets", "vision", "eval-sa") is None

    # one made outside the hub (no created-by): only an admin
    create(cluster, secret_body("vision", "outside", "gcp-credential", {"key.json": GCP_KEY}))
    with pytest.raises(UserInputError) as e:
        await credentials_page.delete(sp_alice, alice, "vision", "outside")
    assert e.value.status == 403 and "only an administrator may delete it" in e.value.message
    await credentials_page.delete(sp_root, root, "vision", "outside")
    assert cluster.get("", "v1", "secrets", "vision", "outside") is None

    # a reserved name is refused before anything is asked of the cluster
    with pytest.raises(UserInputError) as e:
        await credentials_page.add(sp_alice, alice, "vision", {"name": "jupyter-bob-hub-token",
                                                               "type": "gcp-credential", "key_json": GCP_KEY})
    assert e.value.field == "name" and "may not start with 'jupyter-'" in e.value.message
    with pytest.raises(UserInputError):
        await sp_alice.shared.resources.add_credential("vision", "mlplatform-x", creds, "", "alice")
    assert cluster.get("", "v1", "secrets", "vision", "mlplatform-x") is None


async def _listed(spawner, name: str) -> bool:
    return name in {c.name for c in (await spawner.project_files("vision")).credentials}


async def test_the_hubs_new_rights_in_a_new_project_are_waited_for(cluster):
    # the authorizer may refuse the hub a moment after it bound its rights in a namespace it made
    cluster.inject_fault("GET", f"/namespaces/{NS}/serviceaccounts/mlplatform-runner", status=403, count=3)
    since = len(cluster.requests())
    sp = make_spawner(make_user("mallory"))
    await sp.provision()
    assert cluster.get("", "v1", "serviceaccounts", NS, "mlplatform-runner")
    meta = cluster.get("", "v1", "namespaces", None, NS)["metadata"]
    assert meta["annotations"][OWNER] == "user:mallory"
    asked = [r for r in cluster.requests()[since:]
             if r.method == "GET" and r.path.endswith(f"/namespaces/{NS}/serviceaccounts/mlplatform-runner")]
    assert len(asked) == 4  # three refusals, then the answer
