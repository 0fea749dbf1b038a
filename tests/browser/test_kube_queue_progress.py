"""Chromium through a real JupyterHub running PlatformSpawner on the real control plane with the
real Kueue v0.17.0 (`tests/controllers/kueue_system.py`, helm-values/kueue.yaml's configuration):
the hub finds Kueue and makes alice's projects' queues. A job pod of the team project `vision`
holds both of the cluster's MIG 1g.5gb slices (no borrowing: `queue_borrowing_limit = 0`). alice's
spawn form keeps the slice profile selectable and says her server would wait in the queue; she
starts it, and the hub's progress page tells her, live, where it stands in the queue and why. When
the job pod ends, Kueue admits her server and she lands in JupyterLab, within the start's wait."""

import re

import pytest

from tests.browser.kube_hub import kube_hub_at_spawn_form
from tests.harness.browser import screenshot
from tests.kube.platform_env import delete_projects

pytestmark = pytest.mark.browser

HOLDER = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "train-worker-0", "namespace": "vision"},
          "spec": {"serviceAccountName": "mlplatform-runner", "restartPolicy": "Never",
                   "terminationGracePeriodSeconds": 0,
                   "containers": [{"name": "w", "image": "pytorch", "command": ["sleep", "600"],
                                   "resources": {"limits": {"nvidia.com/mig-1g.5gb": "2"}}}],
                   "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}}


@pytest.fixture
def queued_cluster(kube_cluster, tmp_path):
    """Kueue on the test cluster, set up before the hub (so torn down after it, with the kubelets and
    the projects)."""
    from tests.controllers.kueue_system import Kueue

    kueue = Kueue(kube_cluster, tmp_path / "kueue").start()
    yield kube_cluster
    for kubelet in list(kube_cluster.kubelets):
        kubelet.stop()
    delete_projects(kube_cluster)
    kueue.stop()


def _running(cluster, ns: str, name: str) -> bool:
    pod = cluster.get("", "v1", "pods", ns, name)
    return bool(pod and not pod["spec"].get("schedulingGates") and pod["status"].get("phase") == "Running")


def test_a_queued_spawn_shows_its_place_in_the_queue_and_starts_when_the_slices_free(
        queued_cluster, hub_factory, browser_page, tmp_path):
    cluster, page = queued_cluster, browser_page
    hub, _ = kube_hub_at_spawn_form(cluster, hub_factory, page, tmp_path, queue_borrowing_limit=0)
    # the form made the project's queues; a job pod (no queue name: Kueue queues it all the same)
    # takes both slices
    assert cluster.get("kueue.x-k8s.io", "v1beta2", "localqueues", "vision", "default") is not None
    cluster.create("", "v1", "pods", "vision", HOLDER)
    for _ in range(600):
        if _running(cluster, "vision", "train-worker-0"):
            break
        page.wait_for_timeout(100)
    assert _running(cluster, "vision", "train-worker-0"), cluster.get("", "v1", "pods", "vision", "train-worker-0")

    page.goto(f"{hub.url}/hub/spawn")
    capacity = page.locator("#profile-mig-1g-details .mlplatform-capacity").inner_text()
    assert "0 of 2 free" in capacity and "your server would wait in the project's queue" in capacity, capacity
    page.get_by_label("Small GPU slice").check()
    page.get_by_label("Vision team").check()
    screenshot(page, "kube-queue-spawn-form")
    page.click("input[type=submit], button[type=submit]")
    page.wait_for_url(re.compile(r"/spawn-pending/"), timeout=60_000)
    page.wait_for_selector("#progress-message:has-text('queued:')", timeout=60_000)
    message = page.inner_text("#progress-message")
    assert "in the project 'vision'" in message and "is in use (1 more needed)" in message, message
    screenshot(page, "kube-queue-progress")

    cluster.delete("", "v1", "pods", "vision", "train-worker-0")  # the job ends: its slices go back
    page.wait_for_url(re.compile(r"/user/alice/"), timeout=180_000)
    page.wait_for_selector("#jp-main-dock-panel", timeout=120_000)
    server = hub.api("GET", "/users/alice").json()["servers"][""]
    assert server["ready"] and server["user_options"] == {"project": "vision", "profile": "mig-1g"}
