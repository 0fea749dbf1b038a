"""Datasets added through the hub on the real control plane, the hub acting as the ServiceAccount of
`helm-values/hub-rbac.yaml` (`tests.kube.platform_env`: a right the hub's ClusterRole lacks fails
the test), through the datasets page's faces (`hub_ext.web.datasets_page`: what its page and REST
handlers call) and the user's PlatformSpawner:

- a member adds a dataset to their team project: the PVC is made as the hub makes it, bound by
  the real PV controller, and reads as loading ("waiting for the loader to start") until the
  loader reports, so it is never offered as ready before it is filled;
- a bad source, size or credential is a 400 naming the field, and no write reaches the API; a
  project the user may not use is a 403 on ``project``;
- another member may not delete it (403 on ``name``; it stays), its creator may;
- the loader's condition and progress annotation (written here as admin: the loader is the
  operator's, not started here) show on the list the page renders, on the spawn form, and in a
  waiting spawn's progress (message and percentage).
"""

from __future__ import annotations

import asyncio
import json

import pytest

from hub_ext.core.errors import UserInputError, UserInputErrors
from hub_ext.web import credentials_page, datasets_page
from tests.cluster.identities import HUB_USER
from tests.kube.platform_env import (
    GCP_KEY,
    make_spawner,
    make_user,
    platform_cluster,
    set_loaded,
    until,
    wait_bound,
    whoami,
)

pytestmark = pytest.mark.kube

GOOD = {"name": "imagenet", "source": "gs://vision-data/imagenet", "credential": "gcs-reader", "size": "1Gi",
        "description": "train split"}
PLURAL = "persistentvolumeclaims"
KUBERNETES_ANNOTATIONS = ("pv.kubernetes.io/", "volume.kubernetes.io/", "volume.beta.kubernetes.io/")


@pytest.fixture
async def cluster(kube_cluster, tmp_path, monkeypatch):
    async with platform_cluster(kube_cluster, tmp_path, monkeypatch) as c:
        yield c


async def team(cluster):
    """alice and bob of the vision team, each with a provisioned spawner, and alice's GCS credential."""
    alice, bob = make_user("alice", ["vision"]), make_user("bob", ["vision"], uid=2)
    sp_alice, sp_bob = make_spawner(alice), make_spawner(bob)
    await sp_alice.provision()
    await sp_bob.provision()
    await credentials_page.add(sp_alice, alice, "vision", {"name": "gcs-reader", "type": "gcp-credential",
                                                           "key_json": GCP_KEY})
    return (alice, sp_alice), (bob, sp_bob)


def writes(cluster, since: int) -> list[tuple[str, str]]:
    return [(r.method, r.path) for r in cluster.requests()[since:] if r.method in ("POST", "PUT", "PATCH", "DELETE")]


async def test_a_member_adds_a_dataset_and_a_bad_one_is_refused_with_nothing_made(cluster):
    (alice, sp), (bob, _) = await team(cluster)
    assert await whoami(sp.shared.kube.api_client) == HUB_USER  # not admin: hub-rbac.yaml's ServiceAccount

    since = len(cluster.requests())
    for changes, field in [({"source": "gs://vision data/x"}, "source"), ({"source": "https://x.org/d"}, "source"),
                           ({"size": "10GB"}, "size"), ({"size": "2Ti"}, "size"),
                           ({"credential": "nope"}, "credential"), ({"source": "s3://raw/x"}, "credential"),
                           ({"name": "claim-alice"}, "name")]:
        with pytest.raises(UserInputError) as e:
            await datasets_page.add(sp, alice, "vision", {**GOOD, **changes})
        assert (e.value.field, e.value.status) == (field, 400), changes
    with pytest.raises(UserInputErrors) as e:
        await datasets_page.add(sp, alice, "vision", {**GOOD, "source": "ftp://x", "size": "lots"})
    assert [f for f, _ in e.value.violations] == ["source", "size"]
    with pytest.raises(UserInputError) as e:  # bob's personal project is not alice's to use
        await datasets_page.add(sp, alice, "user-bob", GOOD)
    assert (e.value.field, e.value.status) == ("project", 403)
    assert writes(cluster, since) == [] and cluster.items("", "v1", PLURAL, "vision") == []

    out = await datasets_page.add(sp, alice, "vision", GOOD)
    assert out == {"project": "vision", "name": "imagenet", "source": "gs://vision-data/imagenet",
                   "credential": "gcs-reader", "size": "1Gi", "description": "train split", "created_by": "alice",
                   "state": "loading", "message": "waiting for the loader to start", "progress": None,
                   "percent": None}
    pvc = wait_bound(cluster, "vision", "imagenet")  # the real PV controller binds it (the test provisioner's PV)
    meta = pvc["metadata"]
    assert meta["labels"] == {"app.kubernetes.io/managed-by": "jupyterhub-mlplatform", "mlplatform.io/dataset": "true"}
    ours = {k: v for k, v in meta["annotations"].items() if not k.startswith(KUBERNETES_ANNOTATIONS)}
    assert ours == {"mlplatform.io/source": "gs://vision-data/imagenet", "mlplatform.io/credential": "gcs-reader",
                    "mlplatform.io/description": "train split", "mlplatform.io/created-by": "alice"}
    assert pvc["spec"]["accessModes"] == ["ReadWriteOnce"] and pvc["spec"]["resources"] == {
        "requests": {"storage": "1Gi"}}
    assert not [c for c in pvc["status"].get("conditions") or [] if c["type"] == "Loaded"]  # the loader's to write
    files = await sp.project_files("vision")
    assert [(d.name, d.state, d.message) for d in files.datasets] == [
        ("imagenet", "loading", "waiting for the loader to start")]  # not offered as ready

    with pytest.raises(UserInputError) as e:  # the name is taken
        await datasets_page.add(sp, alice, "vision", GOOD)
    assert (e.value.field, e.value.status) == ("name", 409)


async def test_only_the_creator_deletes_and_the_list_shows_the_loaders_state_and_progress(cluster):
    (alice, sp_alice), (bob, sp_bob) = await team(cluster)
    await datasets_page.add(sp_alice, alice, "vision", GOOD)
    await datasets_page.add(sp_alice, alice, "vision", {**GOOD, "name": "coco", "credential": ""})

    # the loader reports (as the operator would: the condition, then the progress annotation)
    set_loaded(cluster, "vision", "imagenet", "False", "Loading", "12 of 1000 objects, 1.2 MB of 100 MB")
    cluster.patch("", "v1", PLURAL, "vision", "imagenet", {"metadata": {"annotations": {
        "mlplatform.io/progress": json.dumps({"phase": "copying", "objects_done": 12, "objects_total": 1000,
                                              "bytes_done": 1_200_000, "bytes_total": 100_000_000})}}})
    set_loaded(cluster, "vision", "coco", "False", "Failed", "AccessDenied: anonymous may not list gs://vision-data")

    async def reported():
        rows = {r["name"]: r for _, rs in await datasets_page.listing(sp_bob, bob) for r in rs}
        return rows.get("imagenet", {}).get("percent") == 1 and rows.get("coco", {}).get("state") == "failed"
    await until(reported, "bob's list shows the loader's progress and the failure")
    listed = dict((p.name, rows) for p, rows in await datasets_page.listing(sp_bob, bob))
    coco, imagenet = listed["vision"]  # by name
    assert (coco["state"], coco["message"], coco["percent"]) == (
        "failed", "AccessDenied: anonymous may not list gs://vision-data", None)
    assert (imagenet["state"], imagenet["message"], imagenet["progress"]) == (
        "loading", "12 of 1000 objects, 1.2 MB of 100 MB",
        {"objects_done": 12, "objects_total": 1000, "bytes_done": 1_200_000, "bytes_total": 100_000_000})
    form = await sp_bob.get_options_form()
    assert "loading: 12 of 1000 objects, 1.2 MB of 100 MB" in form
    assert "failed: AccessDenied: anonymous may not list gs://vision-data" in form

    # a spawn that waits for it reports the load as it goes, and starts once it is loaded
    waiting = make_spawner(bob, {"project": "vision", "profile": "cpu", "datasets": ["imagenet"]},
                           when_dataset_loading="wait")
    waiting.start()
    events = []

    async def collect():
        async for event in waiting.progress():
            events.append(event)
    collector = asyncio.ensure_future(collect())
    await until(lambda: _said(events, "(12 of 1000 objects, 1.2 MB of 100 MB)"), "the wait shows the progress")
    cluster.patch("", "v1", PLURAL, "vision", "imagenet", {"metadata": {"annotations": {
        "mlplatform.io/progress": json.dumps({"objects_done": 600, "objects_total": 1000, "bytes_done": 60_000_000,
                                              "bytes_total": 100_000_000})}}})
    set_loaded(cluster, "vision", "imagenet", "False", "Loading", "600 of 1000 objects, 60 MB of 100 MB")
    await until(lambda: _said(events, "(600 of 1000 objects, 60 MB of 100 MB)"), "the wait follows the load")
    set_loaded(cluster, "vision", "imagenet", "True", "Loaded", "1000 objects, 100 MB")
    await asyncio.wait_for(waiting._start_future, 30)
    await asyncio.wait_for(collector, 10)
    shown = {ev["message"]: ev["progress"] for ev in events}
    assert shown["waiting for the dataset 'imagenet' to finish loading (12 of 1000 objects, 1.2 MB of 100 MB)"] == 20
    assert shown["waiting for the dataset 'imagenet' to finish loading (600 of 1000 objects, 60 MB of 100 MB)"] == 38
    await waiting.stop()

    # bob, a member of the team, mounts it but may not delete it; alice, who added it, may
    with pytest.raises(UserInputError) as e:
        await datasets_page.delete(sp_bob, bob, "vision", "imagenet")
    assert (e.value.field, e.value.status) == ("name", 403) and "only its creator alice" in e.value.message
    assert cluster.get("", "v1", PLURAL, "vision", "imagenet")["metadata"].get("deletionTimestamp") is None
    with pytest.raises(UserInputError) as e:
        await datasets_page.delete(sp_bob, bob, "vision", "gcs-reader")  # a Secret, not a dataset
    assert (e.value.field, e.value.status) == ("name", 404)
    await datasets_page.delete(sp_alice, alice, "vision", "imagenet")
    await until(lambda: _gone(cluster, "imagenet"), "the claim is deleted")
    await until(lambda: _listed(sp_alice, alice, ["coco"]), "alice's list no longer has it")


async def _listed(spawner, user, names) -> bool:
    return [r["name"] for p, rows in await datasets_page.listing(spawner, user) if p.name == "vision"
            for r in rows] == names


async def _said(events, text: str) -> bool:
    return any(text in e["message"] for e in events)


async def _gone(cluster, name: str) -> bool:
    return cluster.get("", "v1", PLURAL, "vision", name) is None
