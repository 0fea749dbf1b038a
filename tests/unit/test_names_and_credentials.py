"""Names that never collide (personal projects, credentials against the platform's own names), who
may delete a credential, and the provisioner's pure decisions about an existing namespace
(adopt, refuse, merge metadata), as tables."""

import pytest
from kubespawner import KubeSpawner
from kubespawner.slugs import is_valid_object_name, safe_slug

from hub_ext.core.credentials import RESERVED_PREFIXES, RESERVED_SUFFIXES, check_may_delete, check_name, is_reserved
from hub_ext.core.entitlements import personal_project_name
from hub_ext.core.errors import UserInputError
from hub_ext.kube.provision import OWNER_ANNOTATION, _updated, _wanted_differs, foreign_owner
from hub_ext.manifests import tenancy
from server_ext.jobs.package_delivery import configmap_name

pytestmark = pytest.mark.unit

LONG = "a" * 58  # two usernames sharing their first 58 characters shared one namespace before


def old_name(username: str) -> str:
    """How personal projects were named before (cut at 63 characters)."""
    return f"user-{safe_slug(username)}"[:63].rstrip("-")


@pytest.mark.parametrize("username", [
    "alice", "alice@example.com", "Alice", "bob.smith", LONG,  # LONG: the longest slug that fits stays
    "An Invalid Name Much Longer Than Sixty-Three Characters, Hashed To 32 By KubeSpawner",
])
def test_personal_project_names_that_fit_keep_their_names(username):
    assert personal_project_name(username) == old_name(username)
    assert personal_project_name("alice") == "user-alice"


def test_long_usernames_that_collided_get_their_own_projects():
    one, two = LONG + "-one", LONG + "-two"
    old = [old_name(name) for name in (one, two)]
    assert old[0] == old[1]  # what happened before: one namespace for both
    names = [personal_project_name(n) for n in (one, two)]
    assert names[0] != names[1]
    assert all(len(n) <= 63 and is_valid_object_name(n) for n in names)
    assert names[0].startswith("user-" + "a" * 47 + "---") and names[0] != old[0]
    # no shortened name is ever another user's short one: short slugs never hold '--'
    assert personal_project_name(names[0][len("user-"):]) != names[0]


@pytest.mark.parametrize("name, message", [
    ("mlplatform-runner", "may not start with 'mlplatform-'"),
    ("mlplatform-catalog", "may not start with 'mlplatform-'"),
    ("jupyter-alice", "may not start with 'jupyter-'"),
    ("jupyter-alice-hub-token", "may not start with 'jupyter-'"),
    ("anything-hub-token", "may not end with '-hub-token'"),
    ("train-1-package", "may not end with '-package'"),
])
def test_reserved_credential_names_are_refused_on_name(name, message):
    with pytest.raises(UserInputError) as e:
        check_name(name)
    assert e.value.field == "name" and message in e.value.message and e.value.status == 400
    assert is_reserved(name)
    assert check_name(name, new=False) == name  # an existing one can still be named to delete it


@pytest.mark.parametrize("name", ["training-sa", "mlplatform", "jupyter", "hub-token", "package", "my-packages",
                                  "s3-reader", "x-mlplatform-y"])
def test_ordinary_credential_names_are_accepted(name):
    assert check_name(name) == name and not is_reserved(name)


def test_every_name_the_platform_makes_in_a_project_is_reserved():
    pod = KubeSpawner.pod_name_template.default_value.format(user_server="alice", username="alice")
    made = [tenancy.SERVICE_ACCOUNT, tenancy.ROLE, tenancy.QUOTA, tenancy.CATALOG_CONFIGMAP,
            tenancy.member_binding_name("bob"), pod, f"{pod}-hub-token", configmap_name("train-1")]
    made += [getattr(tenancy, name) for name in ("HUB_BINDING", "OPERATOR_BINDING", "RESOURCE_QUOTA", "LIMIT_RANGE")
             if hasattr(tenancy, name)]
    assert [n for n in made if not is_reserved(n)] == []
    assert RESERVED_PREFIXES == ("mlplatform-", "jupyter-") and RESERVED_SUFFIXES == ("-hub-token", "-package")


@pytest.mark.parametrize("created_by, user, admin, refusal", [
    ("alice", "alice", False, None),
    ("alice", "bob", True, None),
    (None, "root", True, None),
    ("alice", "bob", False, "only its creator alice or an administrator may delete it"),
    (None, "alice", False, "was not made through the hub; only an administrator may delete it"),
    ("", "alice", False, "was not made through the hub; only an administrator may delete it"),
])
def test_only_the_creator_or_an_admin_deletes_a_credential(created_by, user, admin, refusal):
    if refusal is None:
        check_may_delete("sa", created_by, user, admin)
        return
    with pytest.raises(UserInputError) as e:
        check_may_delete("sa", created_by, user, admin)
    assert (e.value.field, e.value.status) == ("name", 403) and "'sa'" in e.value.message
    assert refusal in e.value.message


MANAGED = {"app.kubernetes.io/managed-by": "jupyterhub-mlplatform"}


def namespace(labels=None, annotations=None, name="user-mallory"):
    meta = {"name": name, "labels": dict(labels or {})}
    if annotations is not None:
        meta["annotations"] = dict(annotations)
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


WANTED = namespace({**MANAGED, "mlplatform.io/project": "user-mallory"}, {OWNER_ANNOTATION: "user:mallory"})


@pytest.mark.parametrize("labels, annotations, found", [
    ({}, None, "none recorded (no platform labels)"),
    ({"team": "x"}, {"owner": "admin"}, "none recorded (no platform labels)"),
    ({**MANAGED, "mlplatform.io/project": "user-mallory"}, {OWNER_ANNOTATION: "user:alice"}, "'user:alice'"),
    ({**MANAGED, "mlplatform.io/project": "user-mallory"}, {OWNER_ANNOTATION: "group:vision"}, "'group:vision'"),
    ({**MANAGED, "mlplatform.io/project": "other"}, None,
     "none recorded (app.kubernetes.io/managed-by='jupyterhub-mlplatform', mlplatform.io/project='other')"),
    ({"mlplatform.io/project": "user-mallory"}, None, "none recorded (mlplatform.io/project='user-mallory')"),
    ({**MANAGED, "mlplatform.io/project": "user-mallory"}, None, None),  # legacy: adopted
    ({**MANAGED, "mlplatform.io/project": "user-mallory"}, {OWNER_ANNOTATION: "user:mallory"}, None),
])
def test_an_existing_namespace_is_adopted_only_when_the_platform_made_it_for_that_owner(labels, annotations, found):
    assert foreign_owner(namespace(labels, annotations), WANTED) == found


def test_annotations_are_merged_and_the_platform_keeps_exactly_its_own():
    current = namespace({**MANAGED, "mlplatform.io/project": "user-mallory", "team": "x"},
                        {"owner": "admin", "accelerators.mlplatform.io/a100": "nvidia.com/gpu;",
                         "mlplatform.io/stale": "1"})
    current["metadata"]["resourceVersion"] = "7"
    wanted = namespace({**MANAGED, "mlplatform.io/project": "user-mallory"},
                       {OWNER_ANNOTATION: "user:mallory", "accelerators.mlplatform.io/h100": "nvidia.com/gpu;"})
    assert _wanted_differs(current, wanted)
    updated = _updated(current, wanted)
    assert updated["metadata"] == {
        "name": "user-mallory", "resourceVersion": "7",
        "labels": {**MANAGED, "mlplatform.io/project": "user-mallory", "team": "x"},
        "annotations": {"owner": "admin", OWNER_ANNOTATION: "user:mallory",
                        "accelerators.mlplatform.io/h100": "nvidia.com/gpu;"}}
    assert not _wanted_differs(updated, wanted)
    legacy = namespace({**MANAGED, "mlplatform.io/project": "user-mallory"})
    assert _wanted_differs(legacy, wanted)  # a legacy namespace gets its owner annotation
    assert _updated(legacy, wanted)["metadata"]["annotations"] == wanted["metadata"]["annotations"]
