"""`python -m tests.cluster` (the README's command) as its own process: it serves a real control
plane with a test kubelet behind the fault proxy, the sync `kubernetes` client works through the
kubeconfig it writes, and SIGTERM stops every process it started (exit 0, nothing left running)."""

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

from tests.cluster.controlplane import binaries_missing

pytestmark = pytest.mark.kube
ROOT = pathlib.Path(__file__).resolve().parents[2]


def processes_using(path: pathlib.Path) -> list[int]:
    """Pids of the processes whose command line names `path` (the control plane's files live there)."""
    pids = []
    for entry in pathlib.Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if str(path).encode() in cmdline:
                pids.append(int(entry.name))
    return pids


@pytest.fixture
def standalone(tmp_path, request):
    if request.config.getoption("--kube-context"):
        pytest.skip("starts a control plane of its own; not on --kube-context")
    if binaries_missing():
        pytest.fail(f"the control plane is not built ({', '.join(binaries_missing())} missing): run `make cluster`")
    kubeconfig, workdir = tmp_path / "cluster.kubeconfig", tmp_path / "workdir"
    nodes = tmp_path / "nodes.json"
    nodes.write_text(json.dumps([{"name": "gpu-1", "allocatable": {"cpu": "8", "memory": "32Gi",
                                                                    "nvidia.com/gpu": "2"},
                                  "labels": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}}]))
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    proc = subprocess.Popen([sys.executable, "-m", "tests.cluster", "--kubeconfig", str(kubeconfig),
                             "--kubelet", "status", "--nodes", str(nodes), "--workdir", str(workdir)],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("test cluster serving on https://127.0.0.1:"), line
        url, _, path = line.removeprefix("test cluster serving on ").strip().partition("; kubeconfig: ")
        assert pathlib.Path(path) == kubeconfig
        yield proc, url, kubeconfig, workdir
    finally:
        if proc.poll() is None:
            proc.kill()  # the test failed before stopping it
            proc.wait(10)
            for pid in processes_using(workdir):
                os.kill(pid, signal.SIGKILL)


def test_serves_the_cluster_and_stops_cleanly(standalone):
    import kubernetes

    proc, url, kubeconfig, workdir = standalone
    running = processes_using(workdir)
    assert len(running) >= 4  # etcd, kube-apiserver, kube-controller-manager, kube-scheduler
    api = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))
    assert api.configuration.host == url
    try:
        core = kubernetes.client.CoreV1Api(api)
        review = kubernetes.client.AuthenticationV1Api(api).create_self_subject_review(
            {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
        assert "system:masters" in review.status.user_info.groups
        nodes = core.list_node().items
        assert [(n.metadata.name, n.status.allocatable["nvidia.com/gpu"]) for n in nodes] == [("gpu-1", "2")]
        core.create_namespace({"metadata": {"name": "team-a"}})
        deadline = time.monotonic() + 30
        pod = {"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "c", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
        while True:  # refused until the ServiceAccount controller made the namespace's default account
            try:
                core.create_namespaced_pod("team-a", pod)
                break
            except kubernetes.client.ApiException as e:
                if e.status != 403 or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        while core.read_namespaced_pod("p", "team-a").status.phase != "Running":
            assert time.monotonic() < deadline, "the pod never ran"
            time.sleep(0.05)
        assert core.read_namespaced_pod("p", "team-a").spec.node_name == "gpu-1"
        jobs = kubernetes.client.CustomObjectsApi(api).list_namespaced_custom_object(
            "kubeflow.org", "v1", "team-a", "pytorchjobs")
        assert jobs["items"] == []
    finally:
        api.close()

    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0
    assert processes_using(workdir) == []
    assert all(not pathlib.Path(f"/proc/{pid}").exists() for pid in running)
