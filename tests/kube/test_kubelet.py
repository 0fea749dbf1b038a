"""The emulated kubelet and scheduler (stand-in only): status mode, scheduling of GPU/MIG pods,
and process mode running real processes on pod IPs of their own."""

import asyncio
import base64
import json
import textwrap
import urllib.request

import pytest

from tests.kube.client import Failure

pytestmark = [pytest.mark.kube, pytest.mark.standin_only]


async def wait_for(k, name, pred, tries=200):
    pod = None
    for _ in range(tries):
        try:
            pod = await k.call("CoreV1Api", "read_namespaced_pod", name, k.ns)
        except Failure as e:
            if e.status != 404:
                raise
            pod = None
        if pred(pod):
            return pod
        await asyncio.sleep(0.05)
    raise AssertionError(f"pod {name} never reached the state; last: {json.dumps((pod or {}).get('status'))}")


def simple_pod(name, resources=None, **spec):
    return {"metadata": {"name": name}, "spec": {"containers": [
        {"name": "main", "image": "busybox", "resources": resources or {}}], **spec}}


def phase(value):
    return lambda p: p is not None and p["status"].get("phase") == value


async def test_status_mode_runs_pods_with_ip_conditions_and_events(k, standin):
    standin.kubelet()
    await k.call("CoreV1Api", "create_namespaced_pod", k.ns, simple_pod("p"))
    pod = await wait_for(k, "p", phase("Running"))
    assert pod["spec"]["nodeName"] == "standin-node" and pod["status"]["podIP"].startswith("127.")
    conds = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
    assert conds["Ready"] == "True" and conds["PodScheduled"] == "True"
    (cs,) = pod["status"]["containerStatuses"]
    assert cs["ready"] and "running" in cs["state"]
    events = await k.call("CoreV1Api", "list_namespaced_event", k.ns,
                          field_selector="involvedObject.kind=Pod,involvedObject.name=p")
    assert {"Scheduled", "Pulled", "Created", "Started"} <= {e["reason"] for e in events["items"]}


async def test_status_mode_on_command_and_exit_codes(k, standin):
    kubelet = standin.kubelet(auto_run=False)
    await k.call("CoreV1Api", "create_namespaced_pod", k.ns, simple_pod("p"))
    pod = await wait_for(k, "p", lambda p: p and p["spec"].get("nodeName"))
    assert pod["status"]["phase"] == "Pending"
    assert pod["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "ContainerCreating"
    kubelet.run(k.ns, "p")
    await wait_for(k, "p", phase("Running"))
    kubelet.finish(k.ns, "p", exit_code=3)
    pod = await wait_for(k, "p", phase("Failed"))
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 3


async def test_deleting_a_running_pod_is_graceful(k, standin):
    standin.kubelet()
    await k.call("CoreV1Api", "create_namespaced_pod", k.ns, simple_pod("p"))
    await wait_for(k, "p", phase("Running"))
    await k.call("CoreV1Api", "delete_namespaced_pod", "p", k.ns, grace_period_seconds=5)
    await wait_for(k, "p", lambda p: p is None)


async def test_scheduler_places_mig_slices_and_reports_insufficient_capacity(k, standin):
    standin.kubelet(nodes=[
        {"name": "cpu-1", "allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"}},
        {"name": "dgx-1", "allocatable": {"cpu": "128", "memory": "1Ti", "pods": "110", "nvidia.com/mig-1g.5gb": "1"},
         "labels": {"nvidia.com/gpu.product": "A100-SXM4-40GB-MIG-1g.5gb"},
         "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
    ])
    slice_ = {"limits": {"nvidia.com/mig-1g.5gb": "1"}}
    tol = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    await k.call("CoreV1Api", "create_namespaced_pod", k.ns, simple_pod("a", slice_, tolerations=tol))
    pod = await wait_for(k, "a", phase("Running"))
    assert pod["spec"]["nodeName"] == "dgx-1"
    await k.call("CoreV1Api", "create_namespaced_pod", k.ns, simple_pod("b", slice_, tolerations=tol))
    pod = await wait_for(k, "b", lambda p: any(c.get("reason") == "Unschedulable"
                                                for c in p["status"].get("conditions") or []))
    assert pod["status"]["phase"] == "Pending"
    events = await k.call("CoreV1Api", "list_namespaced_event", k.ns, field_selector="involvedObject.name=b,"
                                                                                      "reason=FailedScheduling")
    msg = events["items"][0]["message"]
    assert msg.startswith("0/2 nodes are available:") and "2 Insufficient nvidia.com/mig-1g.5gb" in msg
    assert "untolerated taint" not in msg
    # no toleration: the tainted node is out, the CPU node has no slices
    await k.call("CoreV1Api", "create_namespaced_pod", k.ns, simple_pod("c", slice_))
    await wait_for(k, "c", lambda p: any(c.get("reason") == "Unschedulable" for c in p["status"].get("conditions") or []))
    # freeing the slice lets the waiting pod in
    await k.call("CoreV1Api", "delete_namespaced_pod", "a", k.ns, grace_period_seconds=0)
    pod = await wait_for(k, "b", phase("Running"))
    assert pod["spec"]["nodeName"] == "dgx-1"


async def test_node_selector_must_match(k, standin):
    standin.kubelet(nodes=[{"name": "n1", "allocatable": {"cpu": "4"}, "labels": {"pool": "a"}}])
    await k.call("CoreV1Api", "create_namespaced_pod", k.ns, simple_pod("p", nodeSelector={"pool": "b"}))
    pod = await wait_for(k, "p", lambda p: any(c.get("reason") == "Unschedulable"
                                                for c in p["status"].get("conditions") or []))
    assert "didn't match Pod's node affinity/selector" in pod["status"]["conditions"][0]["message"]


SERVER = textwrap.dedent("""
    import http.server, os, sys
    secret = open(os.environ["KEY_FILE"]).read()
    print("starting on", os.environ["BIND"], "as", os.environ["POD_NAME"], flush=True)
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = ("%s|%s|%s" % (os.environ["GREETING"], secret, oct(os.stat(os.environ["KEY_FILE"]).st_mode & 0o777))).encode()
            self.send_response(200); self.end_headers(); self.wfile.write(body)
        def log_message(self, *a): pass
    http.server.HTTPServer((os.environ["BIND"], 8080), H).serve_forever()
""")


async def test_process_mode_runs_the_container_command_on_its_own_ip(k, standin, tmp_path):
    standin.kubelet("process", workdir=tmp_path)
    await k.call("CoreV1Api", "create_namespaced_secret", k.ns, {
        "metadata": {"name": "cred"}, "data": {"key.json": base64.b64encode(b"s3cr3t").decode()}})
    await k.call("CoreV1Api", "create_namespaced_config_map", k.ns, {"metadata": {"name": "cfg"},
                                                                      "data": {"greeting": "hello"}})
    pod = {"metadata": {"name": "web"}, "spec": {
        "volumes": [{"name": "cred", "secret": {"secretName": "cred", "defaultMode": 0o400}}],
        "containers": [{"name": "main", "image": "python", "command": ["python3", "-c", SERVER],
                        "env": [{"name": "BIND", "value": "0.0.0.0"},
                                {"name": "KEY_FILE", "value": "/var/secrets/gcp/key.json"},
                                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                                {"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": "cfg",
                                                                                      "key": "greeting"}}}],
                        "volumeMounts": [{"name": "cred", "mountPath": "/var/secrets/gcp", "readOnly": True}]}]}}
    await k.call("CoreV1Api", "create_namespaced_pod", k.ns, pod)
    pod = await wait_for(k, "web", phase("Running"))
    ip = pod["status"]["podIP"]
    body = None
    for _ in range(100):
        try:
            body = await asyncio.to_thread(lambda: urllib.request.urlopen(f"http://{ip}:8080/", timeout=2).read())
            break
        except OSError:
            await asyncio.sleep(0.1)
    assert body == b"hello|s3cr3t|0o400"
    log = await k.call("CoreV1Api", "read_namespaced_pod_log", "web", k.ns)
    assert f"starting on {ip} as web" in log
    await k.call("CoreV1Api", "delete_namespaced_pod", "web", k.ns, grace_period_seconds=2)
    await wait_for(k, "web", lambda p: p is None)
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://{ip}:8080/", timeout=1)


async def test_process_mode_exit_code_decides_the_phase(k, standin, tmp_path):
    standin.kubelet("process", workdir=tmp_path)
    for name, code in (("ok", 0), ("bad", 4)):
        await k.call("CoreV1Api", "create_namespaced_pod", k.ns, {"metadata": {"name": name}, "spec": {
            "restartPolicy": "Never", "containers": [{"name": "main", "image": "python", "command": ["python3"],
                                                      "args": ["-c", f"print('bye'); raise SystemExit({code})"]}]}})
    ok = await wait_for(k, "ok", phase("Succeeded"))
    bad = await wait_for(k, "bad", phase("Failed"))
    assert bad["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 4
    assert ok["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    assert await k.call("CoreV1Api", "read_namespaced_pod_log", "bad", k.ns) == "bye\n"


async def test_process_mode_expands_command_words_as_kubernetes_does(k, standin, tmp_path):
    """`$(VAR)` of a defined variable is its value, an undefined one is kept, and `$$` is `$` (so
    `$$(VAR)` stays literal): a shell script in a container's args sees what it would in a cluster."""
    standin.kubelet("process", workdir=tmp_path)
    await k.call("CoreV1Api", "create_namespaced_pod", k.ns, {"metadata": {"name": "words"}, "spec": {
        "restartPolicy": "Never", "containers": [{
            "name": "main", "image": "python", "command": ["python3", "-c", "import sys; print(sys.argv[1:])"],
            "args": ["$(GREETING)", "$(UNDEFINED)", "$$(GREETING)", "cost: $$5", "$HOME"],
            "env": [{"name": "GREETING", "value": "hello"}]}]}})
    await wait_for(k, "words", phase("Succeeded"))
    log = await k.call("CoreV1Api", "read_namespaced_pod_log", "words", k.ns)
    assert log == "['hello', '$(UNDEFINED)', '$(GREETING)', 'cost: $5', '$HOME']\n"


@pytest.mark.parametrize("via", ["volume", "env"])
async def test_process_mode_missing_secret_is_a_config_error(k, standin, tmp_path, via):
    standin.kubelet("process", workdir=tmp_path)
    container = {"name": "main", "image": "python", "command": ["python3", "-c", "pass"]}
    spec = {"containers": [container]}
    if via == "volume":
        spec["volumes"] = [{"name": "s", "secret": {"secretName": "missing"}}]
        container["volumeMounts"] = [{"name": "s", "mountPath": "/s"}]
    else:
        container["env"] = [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "missing", "key": "k"}}}]
    await k.call("CoreV1Api", "create_namespaced_pod", k.ns, {"metadata": {"name": "p"}, "spec": spec})
    pod = await wait_for(k, "p", lambda p: (p["status"].get("containerStatuses") or [{}])[0]
                         .get("state", {}).get("waiting", {}).get("reason") == "CreateContainerConfigError")
    assert pod["status"]["phase"] == "Pending"
