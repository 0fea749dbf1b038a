"""KubeSpawner (the released 7.x) against the stand-in: in-process, in a separate process using the
written kubeconfig, and inside a real JupyterHub whose user server really starts through the
process-mode kubelet and answers through configurable-http-proxy."""

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import types

import pytest
import requests

pytestmark = [pytest.mark.kube, pytest.mark.standin_only]


def make_user(name: str, uid: int = 1):
    return types.SimpleNamespace(name=name, id=uid, url=f"/user/{name}/", settings={}, groups=[])


@pytest.fixture
async def kubespawner_cleanup():
    from kubespawner import KubeSpawner

    yield KubeSpawner
    await KubeSpawner._stop_all_reflectors()


async def _spawner(KubeSpawner, standin, name, **traits):
    from jupyterhub.objects import Hub

    hub = Hub(ip="127.0.0.1", port=8081, base_url="/hub/")
    return KubeSpawner(user=make_user(name), hub=hub, k8s_api_host=standin.url, namespace="default",
                       api_token="t0k3n", oauth_client_id=f"jupyterhub-user-{name}", start_timeout=30,
                       http_timeout=10, **traits)


@pytest.mark.parametrize("name", ["alice@example.com", "x" * 70])
async def test_start_poll_stop_in_process(standin, kubespawner_cleanup, name):
    KubeSpawner = kubespawner_cleanup
    standin.kubelet()
    spawner = await _spawner(KubeSpawner, standin, name)
    url = await spawner.start()
    assert url.startswith("http://127.77.") and url.endswith(":8888")
    assert await spawner.poll() is None
    pods = standin.call(lambda: standin.store.items(standin.store.rt("", "v1", "pods"), "default"))
    (pod,) = [p for p in pods if p["metadata"]["labels"].get("component") == "singleuser-server"]
    assert len(pod["metadata"]["name"]) <= 63
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    assert env["JUPYTERHUB_USER"] == name
    await spawner.stop()
    assert await spawner.poll() == 1
    assert standin.get("", "v1", "pods", "default", pod["metadata"]["name"]) is None


async def test_reflector_survives_cut_watches_and_api_errors(standin, kubespawner_cleanup):
    KubeSpawner = kubespawner_cleanup
    standin.kubelet()
    first = await _spawner(KubeSpawner, standin, "bob")
    await first.start()
    standin.cut_watches()
    standin.inject_fault("GET", "/api/v1/namespaces/default/pods", status=500, count=1)
    second = await _spawner(KubeSpawner, standin, "carol")
    await second.start()  # the pod reflector restarted its watch and still sees new pods
    assert await second.poll() is None and await first.poll() is None
    await first.stop()
    await second.stop()


DRIVER = textwrap.dedent("""
    import asyncio, json, types
    from jupyterhub.objects import Hub
    from kubespawner import KubeSpawner

    async def main():
        user = types.SimpleNamespace(name="dave", id=4, url="/user/dave/", settings={}, groups=[])
        hub = Hub(ip="127.0.0.1", port=8081, base_url="/hub/")
        sp = KubeSpawner(user=user, hub=hub, namespace="default", api_token="x", oauth_client_id="c",
                         start_timeout=30, http_timeout=10)
        url = await sp.start()
        polled = await sp.poll()
        await sp.stop()
        after = await sp.poll()
        await KubeSpawner._stop_all_reflectors()
        print(json.dumps({"url": url, "poll": polled, "after": after}))

    asyncio.run(main())
""")


async def test_spawner_in_a_separate_process_uses_the_written_kubeconfig(standin, tmp_path):
    standin.kubelet()
    kubeconfig = standin.write_kubeconfig(tmp_path / "kubeconfig")
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    proc = await asyncio.to_thread(subprocess.run, [sys.executable, "-c", DRIVER], env=env, capture_output=True,
                                   text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["url"].startswith("http://127.77.") and result["poll"] is None and result["after"] == 1
    assert standin.requests("POST", "/api/v1/namespaces/default/pods")
    assert standin.requests("DELETE", "/api/v1/namespaces/default/pods/")


def test_real_jupyterhub_spawns_a_real_server_through_kubespawner(standin, hub_factory, tmp_path):
    kubelet = standin.kubelet("process", workdir=tmp_path / "pods")
    kubeconfig = standin.write_kubeconfig(tmp_path / "kubeconfig")
    args = ["--ServerApp.allow_root=True"] if os.geteuid() == 0 else []
    config = {
        "JupyterHub": {"spawner_class": "kubespawner.KubeSpawner", "authenticator_class": "dummy",
                       "cleanup_servers": True},
        "Authenticator": {"allow_all": True},
        "KubeSpawner": {"namespace": "default", "cmd": ["jupyterhub-singleuser"], "args": args, "start_timeout": 90, "http_timeout": 60,
                        "image": "quay.io/jupyterhub/k8s-singleuser-sample:4.0.0"},
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
    pods = standin.call(lambda: standin.store.items(standin.store.rt("", "v1", "pods"), "default"))
    (pod,) = pods
    assert pod["status"]["podIP"].startswith("127.77.")
    assert kubelet.kubelet._procs  # a real process serves it
    assert hub.api("DELETE", f"/users/{user}/server").status_code in (202, 204)
    for _ in range(120):
        if not standin.call(lambda: standin.store.items(standin.store.rt("", "v1", "pods"), "default")):
            break
        import time
        time.sleep(0.5)
    assert not kubelet.kubelet._procs
    hub.stop()
