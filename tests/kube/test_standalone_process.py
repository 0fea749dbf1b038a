"""The stand-in as its own process (the README's command), used by the sync `kubernetes` client
through the kubeconfig it writes, with its HTTP test controls."""

import json
import subprocess
import sys
import time
import urllib.request

import pytest

pytestmark = [pytest.mark.kube, pytest.mark.standin_only]


@pytest.fixture
def standalone(tmp_path, request):
    if request.config.getoption("--kube-context"):
        pytest.skip("starts the stand-in itself")
    kubeconfig = tmp_path / "standin.kubeconfig"
    proc = subprocess.Popen([sys.executable, "-m", "tests.kubeapi", "--port", "0", "--kubeconfig", str(kubeconfig),
                             "--kubelet", "status"], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert "serving on http://127.0.0.1:" in line, line
    url = line.split("serving on ")[1].split(";")[0].strip()
    yield url, kubeconfig
    proc.terminate()
    assert proc.wait(15) == 0


def test_sync_client_through_the_written_kubeconfig(standalone):
    import kubernetes

    url, kubeconfig = standalone
    api = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))
    core = kubernetes.client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": "team-a"}})
    core.create_namespaced_pod("team-a", {"metadata": {"name": "p"}, "spec": {
        "containers": [{"name": "c", "image": "busybox"}]}})
    for _ in range(100):
        if core.read_namespaced_pod("p", "team-a").status.phase == "Running":
            break
        time.sleep(0.05)
    assert core.read_namespaced_pod("p", "team-a").status.phase == "Running"
    nodes = core.list_node().items
    assert [n.metadata.name for n in nodes] == ["standin-node"]
    jobs = kubernetes.client.CustomObjectsApi(api).list_namespaced_custom_object(
        "kubeflow.org", "v1", "team-a", "pytorchjobs")
    assert jobs["items"] == []
    # HTTP test controls: a fault, and the request log
    req = urllib.request.Request(f"{url}/_standin/faults", method="POST", data=json.dumps(
        {"method": "GET", "path": "/namespaces/team-a/pods/p$", "status": 503}).encode())
    urllib.request.urlopen(req).read()
    with pytest.raises(kubernetes.client.ApiException) as e:
        core.read_namespaced_pod("p", "team-a")
    assert e.value.status == 503
    log = json.loads(urllib.request.urlopen(f"{url}/_standin/requests").read())
    assert sum(1 for r in log if r["method"] == "POST" and r["path"] == "/api/v1/namespaces/team-a/pods") == 1
    api.close()
