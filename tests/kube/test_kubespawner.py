"""KubeSpawner (the released 7.x) on the real control plane, acting as the hub's ServiceAccount of
`helm-values/hub-rbac.yaml` (not as admin; bound to its per-project ClusterRole in the test's
namespace): in-process, in a separate process using the written
kubeconfig, and inside a real JupyterHub whose user server really starts through the
process-mode kubelet and answers through configurable-http-proxy. Each test spawns into its own
namespace (`kube_target`); the pods are bound by the real scheduler to the test kubelet's node."""

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import time
import types

import pytest
import requests

from tests.cluster.identities import HUB_USER
from tests.kube.platform_env import hub_identity, whoami

pytestmark = pytest.mark.kube


def make_user(name: str, uid: int = 1):
    return types.SimpleNamespace(name=name, id=uid, url=f"/user/{name}/", settings={}, groups=[])


@pytest.fixture
async def hub(kube_cluster, kube_target, tmp_path, monkeypatch):
    """KubeSpawner acts as the hub's ServiceAccount; yields (the hub's kubeconfig, the namespace)."""
    from kubespawner import KubeSpawner

    kubeconfig = hub_identity(kube_cluster, tmp_path / "hub.kubeconfig", monkeypatch)
    bind_hub(kube_cluster, kube_target.namespace)
    yield kubeconfig, kube_target.namespace
    await KubeSpawner._stop_all_reflectors()


def bind_hub(cluster, namespace: str) -> None:
    """The hub holds no cluster-wide pod or Secret rights: in a namespace of its own (as z2jh's Role
    gives it the release namespace) an admin binds the rights it has in a project."""
    cluster.create("rbac.authorization.k8s.io", "v1", "rolebindings", namespace, {
        "metadata": {"name": "hub"}, "subjects": [{"kind": "ServiceAccount", "name": "hub", "namespace": "jhub"}],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "mlplatform-hub-project"}})


def _spawner(namespace, name, **traits):
    from jupyterhub.objects import Hub
    from kubespawner import KubeSpawner

    hub = Hub(ip="127.0.0.1", port=8081, base_url="/hub/")
    return KubeSpawner(user=make_user(name), hub=hub, namespace=namespace, api_token="t0k3n",
                       oauth_client_id=f"jupyterhub-user-{name}", start_timeout=30, http_timeout=10, **traits)


def server_pods(cluster, namespace):
    return [p for p in cluster.items("", "v1", "pods", namespace)
            if (p["metadata"].get("labels") or {}).get("component") == "singleuser-server"]


@pytest.mark.parametrize("name", ["alice@example.com", "x" * 70])
async def test_start_poll_stop_in_process(kube_cluster, hub, name):
    _, ns = hub
    kube_cluster.kubelet()
    spawner = _spawner(ns, name)
    assert await whoami(spawner.api.api_client) == HUB_USER
    url = await spawner.start()
    (pod,) = server_pods(kube_cluster, ns)
    assert url == f"http://{pod['status']['podIP']}:8888" and pod["status"]["podIP"].startswith(kube_cluster.network.prefix)
    assert await spawner.poll() is None
    assert len(pod["metadata"]["name"]) <= 63
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    assert env["JUPYTERHUB_USER"] == name
    await spawner.stop()
    assert await spawner.poll() == 1
    assert kube_cluster.get("", "v1", "pods", ns, pod["metadata"]["name"]) is None


async def test_reflector_survives_cut_watches_and_api_errors(kube_cluster, hub):
    _, ns = hub
    kube_cluster.kubelet()
    first = _spawner(ns, "bob")
    await first.start()
    assert kube_cluster.cut_watches() >= 2  # the pod and event reflectors' watches
    kube_cluster.inject_fault("GET", f"/api/v1/namespaces/{ns}/pods", status=500, count=1)
    second = _spawner(ns, "carol")
    await second.start()  # the pod reflector restarted its watch and still sees new pods
    assert await second.poll() is None and await first.poll() is None
    await first.stop()
    await second.stop()


DRIVER = textwrap.dedent("""
    import asyncio, json, os, types
    from jupyterhub.objects import Hub
    from kubespawner import KubeSpawner

    async def main():
        user = types.SimpleNamespace(name="dave", id=4, url="/user/dave/", settings={}, groups=[])
        hub = Hub(ip="127.0.0.1", port=8081, base_url="/hub/")
        sp = KubeSpawner(user=user, hub=hub, namespace=os.environ["SPAWN_NAMESPACE"], api_token="x",
                         oauth_client_id="c", start_timeout=30, http_timeout=10)
        url = await sp.start()
        polled = await sp.poll()
        await sp.stop()
        after = await sp.poll()
        await KubeSpawner._stop_all_reflectors()
        print(json.dumps({"url": url, "poll": polled, "after": after}))

    asyncio.run(main())
""")


async def test_spawner_in_a_separate_process_uses_the_written_kubeconfig(kube_cluster, hub):
    kubeconfig, ns = hub
    kube_cluster.kubelet()
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "SPAWN_NAMESPACE": ns}
    proc = await asyncio.to_thread(subprocess.run, [sys.executable, "-c", DRIVER], env=env, capture_output=True,
                                   text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["url"].startswith(f"http://{kube_cluster.network.prefix}") and result["poll"] is None and result["after"] == 1
    assert kube_cluster.requests("POST", f"/api/v1/namespaces/{ns}/pods")
    assert kube_cluster.requests("DELETE", f"/api/v1/namespaces/{ns}/pods/")


def test_real_jupyterhub_spawns_a_real_server_through_kubespawner(kube_cluster, kube_target, hub_factory, tmp_path):
    from tests.cluster.identities import hub_kubeconfig

    ns = kube_target.namespace
    kubelet = kube_cluster.kubelet("process", workdir=tmp_path / "pods")
    kubeconfig = hub_kubeconfig(kube_cluster, tmp_path / "hub.kubeconfig")  # the hub process's identity
    bind_hub(kube_cluster, ns)
    args = ["--ServerApp.allow_root=True"] if os.geteuid() == 0 else []
    config = {
        "JupyterHub": {"spawner_class": "kubespawner.KubeSpawner", "authenticator_class": "dummy",
                       "cleanup_servers": True},
        "Authenticator": {"allow_all": True},
        "KubeSpawner": {"namespace": ns, "cmd": ["jupyterhub-singleuser"], "args": args, "start_timeout": 90,
                        "http_timeout": 60, "image": "quay.io/jupyterhub/k8s-singleuser-sample:4.0.0"},
    }
    hub = hub_factory(config, env={"KUBECONFIG": str(kubeconfig)})
    user = "erin@example.com"
    assert hub.api("POST", f"/users/{user}").status_code == 201
    r = hub.api("POST", f"/users/{user}/server")
    assert r.status_code in (201, 202), r.text
    hub.wait_for_server(user, timeout=120)
    status = requests.get(f"{hub.url}/user/{user}/api/status", headers={"Authorization": f"token {hub.token}"},
                          timeout=30)
    assert status.status_code == 200, status.text
    assert "started" in status.json()
    (pod,) = server_pods(kube_cluster, ns)
    assert pod["status"]["podIP"].startswith(kube_cluster.network.prefix)
    assert kubelet.processes(ns, pod["metadata"]["name"])  # a real process serves it
    assert hub.api("DELETE", f"/users/{user}/server").status_code in (202, 204)
    for _ in range(120):
        if not kube_cluster.items("", "v1", "pods", ns):
            break
        time.sleep(0.5)
    assert not kube_cluster.items("", "v1", "pods", ns)
    assert not kubelet.kubelet._procs
    hub.stop()
