"""A callable (async) ``profile_list`` with PlatformSpawner on the real control plane: the function
runs for each user's form and spawn, a MIG slice asked for as KubeSpawner's own example asks
(``extra_resource_guarantees`` only) is counted and gets the limit Kubernetes needs, and a result
with a problem refuses the spawn naming the path, before any pod is made."""

import pytest

from hub_ext.local.demo import CONFIGURE, DemoSecrets
from tests.cluster.identities import hub_kubeconfig
from tests.hub.test_hub_harness import form_login
from tests.hub.test_kube_platform import wait_ready
from tests.kube.platform_env import NODES, delete_projects, kube_hub_config

pytestmark = pytest.mark.hub

PER_USER = '''
import asyncio


async def per_user(spawner):
    await asyncio.sleep(0)
    name = spawner.user.name
    cpu = {"display_name": "CPU only", "slug": "cpu", "description": f"Made for {name}",
           "kubespawner_override": {"cpu_limit": 1, "mem_limit": "1G"}}
    if name == "mallory":
        cpu["kubespawner_override"] = {"mem_limit": "a lot"}
    slice_ = {"display_name": "Small GPU slice", "slug": "mig-1g",
              "kubespawner_override": {"extra_resource_guarantees": {"nvidia.com/mig-1g.5gb": "1"},
                                       "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists",
                                                        "effect": "NoSchedule"}]}}
    return [cpu, slice_] if name == "alice" else [cpu]


c.PlatformSpawner.profiles = {}
c.PlatformSpawner.profile_list = per_user
c.PlatformSpawner.everyone = {"profiles": "*", "limits": {}}
'''


@pytest.fixture
def kube_hub(kube_cluster, hub_factory, tmp_path):
    kubelet = kube_cluster.kubelet("process", nodes=NODES, workdir=tmp_path / "kubelet")
    secrets = DemoSecrets.generate()
    config = kube_hub_config(tmp_path / "state", secrets)
    assert config.endswith(CONFIGURE)
    hub = hub_factory(config[:-len(CONFIGURE)] + PER_USER + CONFIGURE,
                      env={"KUBECONFIG": str(hub_kubeconfig(kube_cluster, tmp_path / "hub.kubeconfig"))})
    yield hub, secrets
    try:
        hub.stop()
    finally:
        kubelet.stop()
        delete_projects(kube_cluster)


def test_callable_profile_list_on_kubernetes(kube_hub, kube_cluster):
    hub, secrets = kube_hub
    session, r = form_login(hub.url, "alice", secrets.user_password)
    assert r.status_code == 302
    page = session.get(f"{hub.url}/hub/spawn", timeout=60)
    assert page.status_code == 200, page.text
    assert "Made for alice" in page.text and "Small GPU slice" in page.text

    r = hub.api("POST", "/users/alice/server", json={"project": "vision", "profile": "mig-1g"}, timeout=60)
    assert r.status_code in (201, 202), r.text
    wait_ready(hub, "alice")
    (pod,) = [p for p in kube_cluster.items("", "v1", "pods", "vision")
              if p["metadata"]["labels"].get("component") == "singleuser-server"]
    resources = pod["spec"]["containers"][0]["resources"]
    assert resources["limits"]["nvidia.com/mig-1g.5gb"] == "1" == resources["requests"]["nvidia.com/mig-1g.5gb"]
    assert pod["metadata"]["labels"]["mlplatform.io/profile"] == "mig-1g" and pod["spec"]["nodeName"] == "dgx-mig"

    assert hub.api("POST", "/users/mallory").status_code == 201
    r = hub.api("POST", "/users/mallory/server", json={"profile": "cpu"}, timeout=60)
    assert r.status_code == 500
    assert "profile_list(spawner)[0].kubespawner_override.mem_limit: a lot is not a valid memory specification" \
        in r.json()["message"]
    assert not any(p["metadata"]["labels"].get("hub.jupyter.org/username") == "mallory"
                   for ns in ("user-mallory",) for p in kube_cluster.items("", "v1", "pods", ns))
