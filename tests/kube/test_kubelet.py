"""The test kubelet (tests/cluster/kubelet.py) on the real control plane: Node registration with
GPU/MIG capacity and product labels, Leases it renews, pods the real scheduler binds (and
FailedScheduling when nothing fits), status mode (run/finish/log on command) and process mode
(local processes on pod IPs of their own, the exit code deciding the phase, `$(VAR)` expansion,
Secrets/ConfigMaps/downward API, CreateContainerConfigError, a projected ServiceAccount token that
authenticates the process as its ServiceAccount under RBAC, graceful deletion, a PVC bound by the
provisioner and shared between pods). Every test talks to the API server through one async
client; what a pod does is observed through the API (status, events, pods/log).
"""

import asyncio
import json
import textwrap
import time
import urllib.request

import pytest

from tests.kube.client import Failure, Kube

pytestmark = pytest.mark.kube

TOLERATE_GPU = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
GPU_NODE = {"name": "dgx-1", "allocatable": {"cpu": "128", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": "8"},
            "labels": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB", "nvidia.com/gpu.count": "8"},
            "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]}
MIG_NODE = {"name": "dgx-2", "allocatable": {"cpu": "128", "memory": "1Ti", "pods": "110",
                                            "nvidia.com/mig-1g.5gb": "1"},
            "labels": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
                       "nvidia.com/mig.strategy": "mixed"},
            "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]}
CPU_NODE = {"name": "cpu-1", "allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"}}


@pytest.fixture
async def api(kube_target):
    import kubernetes_asyncio

    client = await kubernetes_asyncio.config.new_client_from_config(config_file=kube_target.kubeconfig)
    k = Kube("async", client)
    k.ns = kube_target.namespace
    yield k
    await k.close()


async def wait_for(api, name, pred, timeout=30.0):
    pod = None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            pod = await api.call("CoreV1Api", "read_namespaced_pod", name, api.ns)
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


def process_pod(name, script, **container):
    return {"metadata": {"name": name}, "spec": {"restartPolicy": "Never", "containers": [
        {"name": "main", "image": "python", "command": ["python3", "-c", textwrap.dedent(script)], **container}]}}


def phase(value):
    return lambda p: p is not None and p["status"].get("phase") == value


def unschedulable(p):
    return p is not None and any(c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"
                                 for c in p["status"].get("conditions") or [])


def gone(p):
    return p is None


async def raw_log(api, name) -> str:
    """pods/log as sent (the generated clients parse a log that is one JSON document and hand back
    its Python repr)."""
    resp = await api.api("CoreV1Api").read_namespaced_pod_log(name, api.ns, _preload_content=False)
    try:
        assert resp.status == 200, await resp.text()
        return (await resp.read()).decode()
    finally:
        resp.release()


async def events_of(api, name, reason=None, timeout=10.0):
    """The pod's events (of `reason`), once there is one: event recorders write asynchronously."""
    selector = f"involvedObject.kind=Pod,involvedObject.name={name}" + (f",reason={reason}" if reason else "")
    deadline = time.monotonic() + timeout
    while True:
        items = (await api.call("CoreV1Api", "list_namespaced_event", api.ns, field_selector=selector))["items"]
        if items or time.monotonic() > deadline:
            return items
        await asyncio.sleep(0.05)


def scheduled_message(pod) -> str:
    return next(c.get("message", "") for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")


# ---- nodes and scheduling -----------------------------------------------------------------------

async def test_nodes_register_with_gpu_and_mig_capacity_labels_and_renewed_leases(api, kube_cluster):
    kubelet = kube_cluster.kubelet(nodes=[GPU_NODE, MIG_NODE])
    nodes = {n["metadata"]["name"]: n for n in (await api.call("CoreV1Api", "list_node"))["items"]}
    assert set(nodes) == {"dgx-1", "dgx-2"}
    gpu, mig = nodes["dgx-1"], nodes["dgx-2"]
    assert gpu["status"]["allocatable"]["nvidia.com/gpu"] == "8" and gpu["status"]["capacity"]["nvidia.com/gpu"] == "8"
    assert mig["status"]["allocatable"]["nvidia.com/mig-1g.5gb"] == "1"
    assert gpu["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-40GB"
    assert mig["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"
    assert gpu["spec"]["taints"] == GPU_NODE["taints"]
    ready = {c["type"]: c["status"] for c in gpu["status"]["conditions"]}
    assert ready["Ready"] == "True" and ready["MemoryPressure"] == "False"
    assert gpu["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"] == kubelet.kubelet.port

    async def lease():
        return await api.call("CoordinationV1Api", "read_namespaced_lease", "dgx-1", "kube-node-lease")

    first = await lease()
    assert first["spec"]["holderIdentity"] == "dgx-1" and first["spec"]["leaseDurationSeconds"] > 0
    deadline = time.monotonic() + 15
    while (await lease())["spec"]["renewTime"] == first["spec"]["renewTime"]:  # renewed every few seconds
        assert time.monotonic() < deadline, "the lease was not renewed"
        await asyncio.sleep(0.25)
    await asyncio.to_thread(kubelet.stop)  # a stopped kubelet takes its nodes away
    assert (await api.call("CoreV1Api", "list_node"))["items"] == []


async def test_the_scheduler_binds_mig_slices_and_reports_what_does_not_fit(api, kube_cluster):
    kube_cluster.kubelet(nodes=[CPU_NODE, MIG_NODE])
    slice_ = {"limits": {"nvidia.com/mig-1g.5gb": "1"}}
    await api.call("CoreV1Api", "create_namespaced_pod", api.ns, simple_pod("a", slice_, tolerations=TOLERATE_GPU))
    pod = await wait_for(api, "a", phase("Running"))
    assert pod["spec"]["nodeName"] == "dgx-2"
    (scheduled,) = await events_of(api, "a", "Scheduled")
    assert scheduled["reportingComponent"] == "default-scheduler" and "dgx-2" in scheduled["message"]

    await api.call("CoreV1Api", "create_namespaced_pod", api.ns, simple_pod("b", slice_, tolerations=TOLERATE_GPU))
    pod = await wait_for(api, "b", unschedulable)
    assert pod["status"]["phase"] == "Pending" and not pod["spec"].get("nodeName")
    failed = await events_of(api, "b", "FailedScheduling")
    message = failed[0]["message"]
    assert message.startswith("0/2 nodes are available:") and "2 Insufficient nvidia.com/mig-1g.5gb" in message
    assert failed[0]["type"] == "Warning"

    await api.call("CoreV1Api", "create_namespaced_pod", api.ns, simple_pod("c", slice_))  # no toleration
    pod = await wait_for(api, "c", unschedulable)
    assert "untolerated taint" in scheduled_message(pod)

    await api.call("CoreV1Api", "delete_namespaced_pod", "a", api.ns, grace_period_seconds=0)
    pod = await wait_for(api, "b", phase("Running"))  # the freed slice goes to the waiting pod
    assert pod["spec"]["nodeName"] == "dgx-2"


async def test_node_selector_must_match(api, kube_cluster):
    kube_cluster.kubelet(nodes=[{"name": "n1", "allocatable": {"cpu": "4"}, "labels": {"pool": "a"}}])
    await api.call("CoreV1Api", "create_namespaced_pod", api.ns, simple_pod("p", nodeSelector={"pool": "b"}))
    pod = await wait_for(api, "p", unschedulable)
    assert scheduled_message(pod).startswith("0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector.")


# ---- status mode --------------------------------------------------------------------------------

async def test_status_mode_runs_pods_with_ip_conditions_and_events(api, kube_cluster):
    kube_cluster.kubelet()
    await api.call("CoreV1Api", "create_namespaced_pod", api.ns, simple_pod("p"))
    pod = await wait_for(api, "p", phase("Running"))
    assert pod["spec"]["nodeName"] == "test-node" and pod["status"]["podIP"].startswith(kube_cluster.network.prefix)
    conds = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
    assert conds["Ready"] == "True" and conds["PodScheduled"] == "True"
    (cs,) = pod["status"]["containerStatuses"]
    assert cs["ready"] and "running" in cs["state"]
    for reason in ("Scheduled", "Pulled", "Created", "Started"):
        assert await events_of(api, "p", reason), reason

    await api.call("CoreV1Api", "delete_namespaced_pod", "p", api.ns, grace_period_seconds=5)
    await wait_for(api, "p", gone, timeout=10)  # no process to stop: deleted at once


async def test_status_mode_on_command_exit_codes_and_logs(api, kube_cluster):
    kubelet = kube_cluster.kubelet(auto_run=False)
    await api.call("CoreV1Api", "create_namespaced_pod", api.ns, simple_pod("p"))
    pod = await wait_for(api, "p", lambda p: p and p["status"].get("containerStatuses"))
    assert pod["status"]["phase"] == "Pending"
    assert pod["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "ContainerCreating"
    await asyncio.to_thread(kubelet.run, api.ns, "p")
    await wait_for(api, "p", phase("Running"))
    await asyncio.to_thread(kubelet.log, api.ns, "p", "epoch 1\nepoch 2")
    assert await api.call("CoreV1Api", "read_namespaced_pod_log", "p", api.ns) == "epoch 1\nepoch 2\n"
    await asyncio.to_thread(kubelet.finish, api.ns, "p", 3)
    pod = await wait_for(api, "p", phase("Failed"))
    terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert terminated["exitCode"] == 3 and terminated["reason"] == "Error"


# ---- process mode -------------------------------------------------------------------------------

SERVER = """
    import http.server, os, sys
    secret = open(os.environ["KEY_FILE"]).read()
    print("starting on", os.environ["BIND"], "as", os.environ["POD_NAME"], flush=True)
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            mode = oct(os.stat(os.environ["KEY_FILE"]).st_mode & 0o777)
            body = ("%s|%s|%s" % (os.environ["GREETING"], secret, mode)).encode()
            self.send_response(200); self.end_headers(); self.wfile.write(body)
        def log_message(self, *a): pass
    http.server.HTTPServer((os.environ["BIND"], 8080), H).serve_forever()
"""


async def test_process_mode_runs_the_container_command_on_its_own_ip(api, kube_cluster, tmp_path):
    kube_cluster.kubelet("process", workdir=tmp_path)
    await api.call("CoreV1Api", "create_namespaced_secret", api.ns, {
        "metadata": {"name": "cred"}, "stringData": {"key.json": "s3cr3t"}})
    await api.call("CoreV1Api", "create_namespaced_config_map", api.ns, {"metadata": {"name": "cfg"},
                                                                          "data": {"greeting": "hello"}})
    pod = process_pod("web", SERVER, env=[
        {"name": "BIND", "value": "0.0.0.0"},
        {"name": "KEY_FILE", "value": "/var/secrets/gcp/key.json"},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "greeting"}}}],
        volumeMounts=[{"name": "cred", "mountPath": "/var/secrets/gcp", "readOnly": True}])
    pod["spec"]["volumes"] = [{"name": "cred", "secret": {"secretName": "cred", "defaultMode": 0o400}}]
    await api.call("CoreV1Api", "create_namespaced_pod", api.ns, pod)
    pod = await wait_for(api, "web", phase("Running"))
    ip = pod["status"]["podIP"]
    assert ip.startswith(kube_cluster.network.prefix) and ip != "127.0.0.1"
    body = None
    for _ in range(100):
        try:
            body = await asyncio.to_thread(lambda: urllib.request.urlopen(f"http://{ip}:8080/", timeout=2).read())
            break
        except OSError:
            await asyncio.sleep(0.1)
    assert body == b"hello|s3cr3t|0o400"
    assert f"starting on {ip} as web" in await api.call("CoreV1Api", "read_namespaced_pod_log", "web", api.ns)
    await api.call("CoreV1Api", "delete_namespaced_pod", "web", api.ns, grace_period_seconds=2)
    await wait_for(api, "web", gone)
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://{ip}:8080/", timeout=1)


async def test_process_mode_exit_code_decides_the_phase_and_logs_follow(api, kube_cluster, tmp_path):
    kube_cluster.kubelet("process", workdir=tmp_path)
    for name, code in (("ok", 0), ("bad", 4)):
        await api.call("CoreV1Api", "create_namespaced_pod", api.ns, process_pod(name, f"""
            import time
            for i in range(3):
                print("line", i, flush=True)
                time.sleep(0.2)
            raise SystemExit({code})"""))
    await wait_for(api, "ok", lambda p: p and p["spec"].get("nodeName"))
    resp = await api.api("CoreV1Api").read_namespaced_pod_log("ok", api.ns, follow=True, _preload_content=False)
    for _ in range(100):  # until the container started (before that: 400 waiting to start)
        if resp.status == 200:
            break
        resp.release()
        await asyncio.sleep(0.05)
        resp = await api.api("CoreV1Api").read_namespaced_pod_log("ok", api.ns, follow=True, _preload_content=False)
    followed = (await resp.read()).decode()  # ends when the process exits
    resp.release()
    assert followed == "line 0\nline 1\nline 2\n"
    ok = await wait_for(api, "ok", phase("Succeeded"))
    bad = await wait_for(api, "bad", phase("Failed"))
    assert ok["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    assert bad["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 4
    assert await api.call("CoreV1Api", "read_namespaced_pod_log", "bad", api.ns, tail_lines=1) == "line 2\n"


async def test_process_mode_expands_command_words_as_kubernetes_does(api, kube_cluster, tmp_path):
    """`$(VAR)` of a defined variable is its value, an undefined one is kept, and `$$` is `$` (so
    `$$(VAR)` stays literal): a shell script in a container's args sees what it would in a cluster."""
    kube_cluster.kubelet("process", workdir=tmp_path)
    pod = process_pod("words", "import sys; print(sys.argv[1:])",
                      args=["$(GREETING)", "$(UNDEFINED)", "$$(GREETING)", "cost: $$5", "$HOME"],
                      env=[{"name": "GREETING", "value": "hello"}])
    await api.call("CoreV1Api", "create_namespaced_pod", api.ns, pod)
    await wait_for(api, "words", phase("Succeeded"))
    log = await api.call("CoreV1Api", "read_namespaced_pod_log", "words", api.ns)
    assert log == "['hello', '$(UNDEFINED)', '$(GREETING)', 'cost: $5', '$HOME']\n"


async def test_process_mode_downward_api_env(api, kube_cluster, tmp_path):
    kube_cluster.kubelet("process", workdir=tmp_path)
    names = {"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace", "POD_IP": "status.podIP",
             "NODE_NAME": "spec.nodeName", "SA": "spec.serviceAccountName", "TEAM": "metadata.labels['team']"}
    pod = process_pod("env", "import json, os; print(json.dumps({k: os.environ[k] for k in %r}))" % sorted(names),
                      env=[{"name": k, "valueFrom": {"fieldRef": {"fieldPath": v}}} for k, v in names.items()])
    pod["metadata"]["labels"] = {"team": "vision"}
    await api.call("CoreV1Api", "create_namespaced_pod", api.ns, pod)
    pod = await wait_for(api, "env", phase("Succeeded"))
    seen = json.loads(await raw_log(api, "env"))
    assert seen == {"POD_NAME": "env", "POD_NAMESPACE": api.ns, "POD_IP": pod["status"]["podIP"],
                    "NODE_NAME": "test-node", "SA": "default", "TEAM": "vision"}


@pytest.mark.parametrize("via", ["volume", "env"])
async def test_process_mode_missing_secret_is_a_config_error(api, kube_cluster, tmp_path, via):
    kube_cluster.kubelet("process", workdir=tmp_path)
    pod = process_pod("p", "pass")
    container = pod["spec"]["containers"][0]
    if via == "volume":
        pod["spec"]["volumes"] = [{"name": "s", "secret": {"secretName": "missing"}}]
        container["volumeMounts"] = [{"name": "s", "mountPath": "/s"}]
    else:
        container["env"] = [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "missing", "key": "k"}}}]
    await api.call("CoreV1Api", "create_namespaced_pod", api.ns, pod)
    pod = await wait_for(api, "p", lambda p: (p["status"].get("containerStatuses") or [{}])[0]
                         .get("state", {}).get("waiting", {}).get("reason") == "CreateContainerConfigError")
    assert pod["status"]["phase"] == "Pending"
    failed = [e for e in await events_of(api, "p", "Failed") if e["type"] == "Warning"]
    assert failed and all('"missing" not found' in e["message"] for e in failed), failed
    await asyncio.sleep(1.5)  # retried, with the same outcome
    pod = await api.call("CoreV1Api", "read_namespaced_pod", "p", api.ns)
    assert pod["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "CreateContainerConfigError"
    await api.call("CoreV1Api", "create_namespaced_secret", api.ns, {"metadata": {"name": "missing"},
                                                                     "stringData": {"k": "v"}})
    await wait_for(api, "p", phase("Succeeded"))  # the next retry finds it


IN_CLUSTER = """
    import json, os
    import kubernetes
    kubernetes.config.load_kube_config()  # $HOME/.kube/config: the projected token and the cluster CA
    api = kubernetes.client.ApiClient()
    review = kubernetes.client.AuthenticationV1Api(api).create_self_subject_review(
        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    core = kubernetes.client.CoreV1Api(api)
    out = {"user": review.status.user_info.username, "extra": review.status.user_info.extra or {},
           "configmaps": sorted(c.metadata.name for c in core.list_namespaced_config_map(os.environ["NS"]).items)}
    try:
        core.list_namespaced_secret(os.environ["NS"])
        out["secrets"] = 200
    except kubernetes.client.ApiException as e:
        out["secrets"] = e.status
    print(json.dumps(out), flush=True)
"""


async def test_process_mode_projected_token_is_the_service_account_under_rbac(api, kube_cluster, tmp_path):
    """The ServiceAccount admission plugin adds the projected token volume; the kubelet obtains the
    token by TokenRequest (bound to the pod) and the process calls the API as
    system:serviceaccount:<ns>:<sa>, allowed what its Role allows and refused the rest."""
    kube_cluster.kubelet("process", workdir=tmp_path)
    await api.call("CoreV1Api", "create_namespaced_service_account", api.ns, {"metadata": {"name": "runner"}})
    await api.call("RbacAuthorizationV1Api", "create_namespaced_role", api.ns, {
        "metadata": {"name": "read-configmaps"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]})
    await api.call("RbacAuthorizationV1Api", "create_namespaced_role_binding", api.ns, {
        "metadata": {"name": "runner"}, "subjects": [{"kind": "ServiceAccount", "name": "runner", "namespace": api.ns}],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read-configmaps"}})
    pod = process_pod("client", IN_CLUSTER, env=[{"name": "NS", "valueFrom": {"fieldRef": {
        "fieldPath": "metadata.namespace"}}}])
    pod["spec"]["serviceAccountName"] = "runner"
    created = await api.call("CoreV1Api", "create_namespaced_pod", api.ns, pod)
    assert any("projected" in v for v in created["spec"]["volumes"])  # added by admission
    pod = await wait_for(api, "client", lambda p: p and p["status"].get("phase") in ("Succeeded", "Failed"))
    log = await raw_log(api, "client")
    assert pod["status"]["phase"] == "Succeeded", log
    out = json.loads(log.splitlines()[-1])
    assert out["user"] == f"system:serviceaccount:{api.ns}:runner"
    assert out["extra"]["authentication.kubernetes.io/pod-name"] == ["client"]  # a token bound to the pod
    assert "kube-root-ca.crt" in out["configmaps"]
    assert out["secrets"] == 403


async def test_process_mode_graceful_deletion_sends_sigterm_first(api, kube_cluster, tmp_path):
    kube_cluster.kubelet("process", workdir=tmp_path)
    marker = tmp_path / "marker"
    await api.call("CoreV1Api", "create_namespaced_pod", api.ns, process_pod("p", f"""
        import signal, sys, time
        def term(*_):
            open({str(marker)!r}, "w").write("SIGTERM")
            sys.exit(0)
        signal.signal(signal.SIGTERM, term)
        print("ready", flush=True)
        while True:
            time.sleep(0.1)"""))
    await wait_for(api, "p", phase("Running"))
    for _ in range(100):
        if await api.call("CoreV1Api", "read_namespaced_pod_log", "p", api.ns) == "ready\n":
            break
        await asyncio.sleep(0.05)
    # the DELETE's answer (a read after it may already see the kubelet's final grace-0 delete: the
    # process exits at once on SIGTERM)
    pod = await api.call("CoreV1Api", "delete_namespaced_pod", "p", api.ns, grace_period_seconds=10)
    assert pod["metadata"]["deletionTimestamp"] and pod["metadata"]["deletionGracePeriodSeconds"] == 10
    await wait_for(api, "p", gone, timeout=15)
    assert marker.read_text() == "SIGTERM"


async def test_process_mode_pvc_is_a_directory_shared_between_pods(api, kube_cluster, tmp_path):
    kube_cluster.kubelet("process", workdir=tmp_path)
    await api.call("CoreV1Api", "create_namespaced_persistent_volume_claim", api.ns, {
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}}})
    for _ in range(600):  # the default StorageClass's provisioner makes a PV, the PV controller binds
        pvc = await api.call("CoreV1Api", "read_namespaced_persistent_volume_claim", "data", api.ns)
        if pvc["status"].get("phase") == "Bound":
            break
        await asyncio.sleep(0.05)
    assert pvc["status"]["phase"] == "Bound" and pvc["spec"]["storageClassName"] == "standard"

    def with_claim(pod):
        pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
        pod["spec"]["containers"][0].update(env=[{"name": "DATA", "value": "/data"}],
                                            volumeMounts=[{"name": "data", "mountPath": "/data"}])
        return pod

    await api.call("CoreV1Api", "create_namespaced_pod", api.ns, with_claim(process_pod(
        "writer", "import os; open(os.path.join(os.environ['DATA'], 'shared.txt'), 'w').write('from writer')")))
    await wait_for(api, "writer", phase("Succeeded"))
    await api.call("CoreV1Api", "create_namespaced_pod", api.ns, with_claim(process_pod(
        "reader", "import os; print(open(os.path.join(os.environ['DATA'], 'shared.txt')).read())")))
    await wait_for(api, "reader", phase("Succeeded"))
    assert await api.call("CoreV1Api", "read_namespaced_pod_log", "reader", api.ns) == "from writer\n"


async def test_process_mode_a_login_shell_keeps_the_containers_path(api, kube_cluster, tmp_path):
    """JupyterLab's terminal is ``sh -l``; this host's /etc/profile resets root's PATH. As an image's
    ENV PATH survives a login shell in a real container, the container's PATH (the platform's venv:
    ``kubectl-ai_platform``) is still there."""
    kube_cluster.kubelet("process", workdir=tmp_path)
    await api.call("CoreV1Api", "create_namespaced_pod", api.ns, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "terminal"},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "python:3.11-slim",
                                                           "command": ["sh", "-l", "-c", "command -v kubectl-ai_platform"]}]}})
    pod = await wait_for(api, "terminal", lambda p: p and p["status"].get("phase") in ("Succeeded", "Failed"))
    log = await raw_log(api, "terminal")
    assert pod["status"]["phase"] == "Succeeded" and log.strip().endswith("/kubectl-ai_platform"), log


async def test_process_mode_restarts_containers_in_their_pod_with_back_off(api, kube_cluster, tmp_path, monkeypatch):
    """As a kubelet does (issue 39.3): restartPolicy Always and OnFailure start an ended container
    again in the same pod after CrashLoopBackOff, counting restarts, instead of failing the pod (a
    crashing Deployment made a new pod, and a new address, every time); Never fails it. A pod that
    has ended gives its address back."""
    from tests.cluster import kubelet_process
    monkeypatch.setattr(kubelet_process, "RESTART_BACKOFF_SECONDS", (0.5, 1.0))  # 10 s, doubling to 5 min
    kube_cluster.kubelet("process", workdir=tmp_path)
    crash = "import sys; print('crash', flush=True); sys.exit(3)"
    once = ("import os, sys; f = os.path.join(os.environ['HOME'], 'ran'); ok = os.path.exists(f); "
            "open(f, 'w').close(); sys.exit(0 if ok else 1)")
    for name, script, policy in (("always", crash, "Always"), ("on-failure", once, "OnFailure"),
                                 ("never", crash, "Never")):
        body = process_pod(name, script)
        body["spec"]["restartPolicy"] = policy
        await api.call("CoreV1Api", "create_namespaced_pod", api.ns, body)
    always = await wait_for(api, "always", lambda p: p and (p["status"].get("containerStatuses") or [{}])[0]
                            .get("restartCount", 0) >= 3, timeout=60)
    st = always["status"]["containerStatuses"][0]
    assert always["status"]["phase"] == "Running"
    assert st["lastState"]["terminated"]["exitCode"] == 3
    assert st["state"].get("waiting", {}).get("reason") == "CrashLoopBackOff" or "running" in st["state"]
    backoffs = await events_of(api, "always", "BackOff")
    assert backoffs and "Back-off restarting failed container main in pod always_" in backoffs[0]["message"]
    on_failure = await wait_for(api, "on-failure", phase("Succeeded"))
    assert on_failure["status"]["containerStatuses"][0]["restartCount"] == 1
    never = await wait_for(api, "never", phase("Failed"))
    assert never["status"]["containerStatuses"][0]["restartCount"] == 0
    assert never["status"]["podIP"] in kube_cluster.network._free  # free for the next pod at once
    pods = (await api.call("CoreV1Api", "list_namespaced_pod", api.ns))["items"]
    assert sorted(p["metadata"]["name"] for p in pods) == ["always", "never", "on-failure"]


async def test_process_mode_logs_a_line_longer_than_the_pipe_buffer_in_parts(api, kube_cluster, tmp_path):
    """A 200 KiB line (no newline) once stopped the kubelet's log pump, and the container then
    blocked on a full pipe for ever; now it is logged in parts and the container runs on."""
    kube_cluster.kubelet("process", workdir=tmp_path)
    await api.call("CoreV1Api", "create_namespaced_pod", api.ns, process_pod("long", """
        import sys
        sys.stdout.write("x" * 200_000)
        sys.stdout.write("\\n" + "y" * 300_000 + "\\nend\\n")
        sys.stdout.flush()"""))
    await wait_for(api, "long", phase("Succeeded"))
    log = await raw_log(api, "long")
    assert log.count("x") == 200_000 and log.count("y") == 300_000 and log.endswith("end\n")


async def test_process_mode_runs_containers_as_their_users_and_refuses_root_for_run_as_non_root(
        api, kube_cluster, tmp_path):
    """Issue 39.9: a container runs as the uid its securityContext (or its image) names, never as
    root unless so; runAsNonRoot with a root user is refused before anything starts, as a kubelet
    refuses it; a pod's own directory is closed to other pods' users."""
    kube_cluster.kubelet("process", workdir=tmp_path)
    whoami = "import os; print(os.getuid(), os.getgid(), sorted(os.getgroups()), flush=True)"
    as_user = process_pod("as-user", whoami)
    as_user["spec"]["securityContext"] = {"runAsUser": 1234, "runAsGroup": 2345, "fsGroup": 3456,
                                          "runAsNonRoot": True}
    as_root = process_pod("as-root", whoami)
    refused = process_pod("non-root-as-root", whoami)
    refused["spec"]["securityContext"] = {"runAsNonRoot": True}
    notebook = process_pod("notebook", whoami)  # the Jupyter images' own user (jovyan, 1000:100)
    notebook["spec"]["containers"][0]["image"] = "quay.io/jupyterhub/k8s-singleuser-sample:4.0.0"
    for body in (as_user, as_root, refused, notebook):
        await api.call("CoreV1Api", "create_namespaced_pod", api.ns, body)
    for name in ("as-user", "as-root", "notebook"):
        await wait_for(api, name, phase("Succeeded"))
    assert await raw_log(api, "as-user") == "1234 2345 [3456]\n"
    assert (await raw_log(api, "as-root")).startswith("0 0 ")  # root: nothing asked otherwise
    assert (await raw_log(api, "notebook")).startswith("1000 100 ")
    waiting = await wait_for(api, "non-root-as-root", lambda p: p and any(
        (s.get("state", {}).get("waiting") or {}).get("reason") == "CreateContainerConfigError"
        for s in p["status"].get("containerStatuses") or []))
    message = waiting["status"]["containerStatuses"][0]["state"]["waiting"]["message"]
    assert message.startswith("container has runAsNonRoot and image will run as root"), message
    home = tmp_path / "pods" / api.ns / "as-user"
    assert home.stat().st_uid == 1234 and (home.stat().st_mode & 0o777) == 0o700
