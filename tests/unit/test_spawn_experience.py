"""What a newcomer sees of a spawn (issue 20.6), the pure parts: what a spawn was assigned, who
holds the accelerator a refused spawn wanted, and ticks of another project's files."""

import pytest

from hub_ext.core.catalog import parse_accelerators
from hub_ext.core.errors import UserInputError
from hub_ext.core.mounts import refuse_other_projects
from hub_ext.manifests.capacity import own_servers_note, servers_holding
from hub_ext.manifests.progress_text import assigned, places_from_nvidia_smi, scheduled_node

pytestmark = pytest.mark.unit

ACCS = parse_accelerators({
    "a100": {"type": "gpu", "product": "NVIDIA-A100-SXM4-40GB", "display_name": "NVIDIA A100 40GB"},
    "1g.5gb": {"type": "mig", "profile": "1g.5gb"},
    "3g.20gb": {"type": "mig", "profile": "3g.20gb"},
})

# `nvidia-smi -L` of a machine with one whole GPU and one split into MIG devices (made-up UUIDs)
NVIDIA_SMI = """\
GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-0b7a1c3e-0000-0000-0000-000000000000)
GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-5d2e9f41-0000-0000-0000-000000000001)
  MIG 3g.20gb     Device  0: (UUID: MIG-9a1b2c3d-0000-5000-8000-000000000010)
  MIG 1g.5gb      Device  1: (UUID: MIG-9a1b2c3d-0000-5000-8000-000000000011)
  MIG 1g.5gb      Device  2: (UUID: MIG-9a1b2c3d-0000-5000-8000-000000000012)
"""


def test_where_each_device_is_from_nvidia_smi():
    assert places_from_nvidia_smi(NVIDIA_SMI) == {
        "GPU-0b7a1c3e-0000-0000-0000-000000000000": "GPU 0",
        "GPU-5d2e9f41-0000-0000-0000-000000000001": "GPU 1",
        "MIG-9a1b2c3d-0000-5000-8000-000000000010": "GPU 1, slice 0",
        "MIG-9a1b2c3d-0000-5000-8000-000000000011": "GPU 1, slice 1",
        "MIG-9a1b2c3d-0000-5000-8000-000000000012": "GPU 1, slice 2",
    }
    assert places_from_nvidia_smi("") == {}


@pytest.mark.parametrize("acc, count, places, node, text", [
    ("1g.5gb", 1, ["GPU 0, slice 2"], None, "assigned MIG slice 1g.5gb (GPU 0, slice 2)"),
    ("1g.5gb", 1, ["device MIG-demo-1g5gb-0"], None, "assigned MIG slice 1g.5gb (device MIG-demo-1g5gb-0)"),
    ("1g.5gb", 2, ["GPU 1, slice 1", "GPU 1, slice 2"], None,
     "assigned 2 × MIG 1g.5gb slices (GPU 1, slice 1; GPU 1, slice 2)"),
    ("a100", 1, ["GPU 0"], None, "assigned NVIDIA A100 40GB (GPU 0)"),
    ("a100", 2, [], "dgx-03", "assigned 2 × NVIDIA A100 40GB on node dgx-03"),
    ("1g.5gb", 1, [], "dgx-mig", "assigned MIG slice 1g.5gb on node dgx-mig"),
])
def test_what_a_spawn_was_assigned(acc, count, places, node, text):
    assert assigned(ACCS[acc], count, places, node) == text


def test_the_node_of_a_scheduled_event():
    assert scheduled_node({"reason": "Scheduled", "message": "Successfully assigned vision/jupyter-alice to dgx-03"}) \
        == "dgx-03"
    assert scheduled_node({"reason": "Pulled", "message": "assigned to x"}) is None
    assert scheduled_node({"reason": "Scheduled"}) is None


def server_pod(user, server, resource="nvidia.com/mig-1g.5gb", n=1, namespace="user-alice", phase="Running",
               name=None, selector=None):
    notes = {"hub.jupyter.org/username": user, **({"hub.jupyter.org/servername": server} if server else {})}
    return {"metadata": {"name": name or f"jupyter-{user}-{server}", "namespace": namespace, "annotations": notes},
            "spec": {"containers": [{"resources": {"limits": {resource: str(n)}}}], "nodeSelector": selector or {}},
            "status": {"phase": phase}}


def test_the_servers_of_a_user_that_hold_an_accelerator():
    pods = [server_pod("alice", "gpu2"), server_pod("alice", ""), server_pod("bob", "x"),
            server_pod("alice", "big", "nvidia.com/gpu", selector=ACCS["a100"].node_selector_dict()),
            server_pod("alice", "old", phase="Succeeded"),
            server_pod("alice", "team", namespace="vision"),
            {"metadata": {"name": "job-1", "namespace": "user-alice"},  # a job's pod: not a server
             "spec": {"containers": [{"resources": {"limits": {"nvidia.com/mig-1g.5gb": "1"}}}]}}]
    mig = ACCS["1g.5gb"]
    assert servers_holding(pods, ACCS, "alice", mig) == {"gpu2": 1, "": 1, "team": 1}
    assert servers_holding(pods, ACCS, "alice", mig, "user-alice") == {"gpu2": 1, "": 1}
    assert servers_holding(pods, ACCS, "alice", mig, but="jupyter-alice-gpu2") == {"": 1, "team": 1}
    assert servers_holding(pods, ACCS, "alice", ACCS["a100"]) == {"big": 1}
    assert servers_holding(pods, ACCS, "carol", mig) == {}


@pytest.mark.parametrize("held, of, text", [
    ({"gpu2": 1}, 1, "your server 'gpu2' holds the only one: stop it or pick another profile"),
    ({"": 1}, 1, "your default server holds the only one: stop it or pick another profile"),
    ({"gpu2": 1}, 2, "your server 'gpu2' holds 1 of the 2: stop it or pick another profile"),
    ({"one": 1, "gpu2": 1}, 2, "your servers 'gpu2' and 'one' hold all 2: stop one of them or pick another profile"),
    ({"a": 1, "b": 1, "": 1}, 4,
     "your servers the default one, 'a' and 'b' hold 3 of the 4: stop one of them or pick another profile"),
    ({"idle": 0}, 2, ""),
    ({}, 2, ""),
])
def test_a_refusal_names_the_users_own_servers_holding_the_accelerator(held, of, text):
    assert own_servers_note(held, of) == text


@pytest.mark.parametrize("formdata, project", [
    ({"project": ["vision"], "dataset--vision": ["imagenet"], "credential--vision": ["sa"]}, "vision"),
    ({"project": ["vision"], "dataset--user-alice": [""]}, "vision"),  # nothing ticked there
    ({"project": ["vision"], "profile-option-cpu--image": ["x"]}, "vision"),
])
def test_ticks_of_the_chosen_project_pass(formdata, project):
    refuse_other_projects(formdata, project)


@pytest.mark.parametrize("formdata, project, field, words", [
    ({"project": ["vision"], "dataset--user-alice": ["mnist"]}, "vision", "datasets",
     "the dataset 'mnist' of the project 'user-alice' is ticked, but the server starts in the project 'vision' and "
     "mounts only that project's datasets: untick it or choose the project 'user-alice'"),
    ({"project": ["user-alice"], "dataset--user-alice": ["mnist"], "credential--vision": ["sa"]}, "user-alice",
     "credentials", "the credential 'sa' of the project 'vision' is ticked"),
    ({"dataset--vision": ["imagenet"]}, None, "datasets", "the server starts in another project"),
])
def test_ticks_of_another_project_are_refused_not_dropped(formdata, project, field, words):
    with pytest.raises(UserInputError) as e:
        refuse_other_projects(formdata, project)
    assert e.value.field == field and words in e.value.message
