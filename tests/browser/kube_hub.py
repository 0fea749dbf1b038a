"""A real JupyterHub running PlatformSpawner on the test cluster, alice logged in at its spawn form:
the start of the browser tests that spawn on Kubernetes (`test_kube_spawn`, `test_kube_queue_progress`)."""

import re

from hub_ext.local.demo import DemoSecrets
from tests.cluster.identities import hub_kubeconfig
from tests.kube.platform_env import NODES, kube_hub_config


def kube_hub_at_spawn_form(cluster, hub_factory, page, tmp_path, **platform):
    """The process-mode kubelet with `NODES`, the hub (acting as hub-rbac.yaml's ServiceAccount; extra
    PlatformSpawner traits in `platform`) and alice logged in, her form shown (it provisioned her
    projects). Returns (hub, the kubelet's work directory)."""
    workdir = tmp_path / "kubelet"
    cluster.kubelet("process", nodes=NODES, workdir=workdir)
    secrets = DemoSecrets.generate()
    hub = hub_factory(kube_hub_config(tmp_path / "state", secrets, **platform),
                      env={"KUBECONFIG": str(hub_kubeconfig(cluster, tmp_path / "hub.kubeconfig"))})
    page.goto(f"{hub.url}/hub/login")
    page.fill("#username_input", "alice")
    page.fill("#password_input", secrets.user_password)
    page.click("#login_submit")
    page.wait_for_url(re.compile(r"/hub/spawn"), timeout=60_000)
    page.wait_for_selector("text=Small GPU slice")
    return hub, workdir
