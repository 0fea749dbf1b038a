"""The projects' NetworkPolicies hold traffic, not only as objects: pods of two projects the hub
provisioned (the team project `vision` and bob's personal one) run as processes of the tests'
kubelet, and what each may reach is tried over TCP with the policies enforced
(`tests/cluster/netpol.py`, a debt standing in for a network policy engine).

A listener that the test process (standing in for the hub and the proxy) reaches, and a pod of
the same kind reaches where a policy allows it, proves that a refused connection is the policy's and
not a listener that is not there yet.
"""

from __future__ import annotations

import json
import socket
import subprocess
import textwrap
import threading

import pytest

from tests.cluster import pod_cgroups
from tests.kube.platform_env import make_spawner, make_user, platform_cluster, until

pytestmark = [pytest.mark.kube,
              pytest.mark.skipif(pod_cgroups.available() is not None,
                                 reason=f"NetworkPolicies cannot be enforced here: {pod_cgroups.available()}")]

RUNNER = "mlplatform-runner"
METADATA = "169.254.169.254"
PORT = 8000

SERVE = "import http.server as h; h.HTTPServer(('0.0.0.0', 8000), h.SimpleHTTPRequestHandler).serve_forever()"
TRY = textwrap.dedent("""
    import json, socket, sys
    out = {}
    for target in json.loads(sys.argv[1]):
        host, port = target.rsplit(":", 1)
        try:
            socket.create_connection((host, int(port)), 3).close()
            out[target] = "open"
        except ConnectionRefusedError:
            out[target] = "refused"
        except OSError as e:
            out[target] = type(e).__name__
    print("RESULT " + json.dumps(out), flush=True)
""")


def pod(name: str, labels: dict, command: list[str], restart: str = "Always") -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels},
            "spec": {"restartPolicy": restart, "serviceAccountName": RUNNER,
                     "containers": [{"name": "c", "image": "python:3.11-slim", "command": command}]}}


def server(name: str, labels: dict) -> dict:
    return pod(name, labels, ["python", "-c", SERVE])


def client(name: str, labels: dict, targets: list[str]) -> dict:
    return pod(name, labels, ["python", "-c", TRY, json.dumps(targets)], restart="Never")


@pytest.fixture
async def projects(kube_cluster, tmp_path, monkeypatch):
    async with platform_cluster(kube_cluster, tmp_path, monkeypatch, mode="process"):
        await make_spawner(make_user("bob", ["vision"], uid=2)).provision()
        yield kube_cluster


async def running_ip(cluster, ns: str, name: str) -> str:
    async def ip():
        p = cluster.get("", "v1", "pods", ns, name) or {}
        return p.get("status", {}).get("phase") == "Running" and p["status"].get("podIP")
    return await until(ip, f"{ns}/{name} running")


async def reachable_from_the_host(ip: str, port: int = PORT) -> None:
    def tcp():
        try:
            socket.create_connection((ip, port), 0.5).close()
            return True
        except OSError:
            return False

    async def check():
        return tcp()
    await until(check, f"{ip}:{port} listening")


async def results(cluster, ns: str, name: str) -> dict:
    async def done():
        p = cluster.get("", "v1", "pods", ns, name) or {}
        return p.get("status", {}).get("phase") in ("Succeeded", "Failed")
    await until(done, f"{ns}/{name} finished", timeout=60)
    log = cluster.get("", "v1", "pods", ns, f"{name}/log")["message"]
    line = next(ln for ln in log.splitlines() if ln.startswith("RESULT "))
    return json.loads(line.removeprefix("RESULT "))


@pytest.fixture
def metadata_address():
    """The cloud metadata address on this machine, with a listener, for the test's length."""
    added = subprocess.run(["ip", "addr", "add", f"{METADATA}/32", "dev", "lo"], capture_output=True, text=True)
    if added.returncode != 0 and "exists" not in added.stderr:
        pytest.fail(f"cannot add {METADATA}: {added.stderr}")
    listener = socket.create_server((METADATA, 0))
    stop = threading.Event()

    def accept():
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                listener.accept()[0].close()
            except OSError:
                pass
    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        listener.close()
        if added.returncode == 0:
            subprocess.run(["ip", "addr", "del", f"{METADATA}/32", "dev", "lo"], capture_output=True)


async def test_projects_pods_reach_only_what_their_policies_allow(projects, metadata_address):
    cluster = projects
    job = {"mlplatform.io/job": "train"}
    for ns, body in (("vision", server("notebook", {"component": "singleuser-server"})),
                     ("vision", server("job-a", job)),
                     ("user-bob", server("job-b", job))):
        cluster.create("", "v1", "pods", ns, body)
    ips = {name: await running_ip(cluster, ns, name)
           for ns, name in (("vision", "notebook"), ("vision", "job-a"), ("user-bob", "job-b"))}
    for ip in ips.values():  # the host (standing in for the hub and the proxy) reaches every listener
        await reachable_from_the_host(ip)
    host = cluster.network.block + ".1"  # an address of the node, not the metadata one
    with socket.create_server((host, 0)) as node_listener:
        node = f"{host}:{node_listener.getsockname()[1]}"
        targets = {"notebook": f"{ips['notebook']}:{PORT}", "job-a": f"{ips['job-a']}:{PORT}",
                   "job-b": f"{ips['job-b']}:{PORT}", "metadata": f"{METADATA}:{metadata_address}", "node": node}
        cluster.create("", "v1", "pods", "vision", client("from-vision-job", {"mlplatform.io/job": "tune"},
                                                          list(targets.values())))
        cluster.create("", "v1", "pods", "vision", client("from-vision-plain", {}, [targets["job-a"]]))
        cluster.create("", "v1", "pods", "user-bob", client("from-bob-job", job,
                                                            [targets["job-a"], targets["notebook"], targets["job-b"]]))
        seen = {name: await results(cluster, ns, name) for ns, name in
                (("vision", "from-vision-job"), ("vision", "from-vision-plain"), ("user-bob", "from-bob-job"))}
    by_name = {v: k for k, v in targets.items()}
    got = {client_name: {by_name[t]: r for t, r in answers.items()} for client_name, answers in seen.items()}
    assert got == {
        # a job pod reaches its project's job pods and the node, never a notebook server (only the hub
        # and the proxy may), another project's pods or the cloud metadata address
        "from-vision-job": {"job-a": "open", "node": "open", "notebook": "refused", "job-b": "refused",
                            "metadata": "refused"},
        # a pod that is not a job's reaches no job pod
        "from-vision-plain": {"job-a": "refused"},
        # another project's pods reach nothing of vision; their own project's job pods, yes
        "from-bob-job": {"job-a": "refused", "notebook": "refused", "job-b": "open"},
    }, got
    print(f"\nnetwork policies: {sum(r == 'refused' for a in got.values() for r in a.values())} reaches refused, "
          f"{sum(r == 'open' for a in got.values() for r in a.values())} allowed")
