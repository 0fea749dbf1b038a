"""The process kubelet's stop paths leave no process behind (issue 15, step 4).

After fresh-clone runs of the kube tier with real Katib, a `goptuna-suggestion-listen -listen
10.244.x.y:6789` was left on the machine, its parent gone; the same runs failed
test_katib_real's cancel test on "a process still there". Two paths of `tests/cluster/kubelet*.py`
let a pod's process outlive the pod:

- a pod being stopped when the kubelet shut down: `_terminate` had taken the pod's processes and
  was awaiting its "Killing" Event, before any signal, when `shutdown()` cancelled it; nothing killed
  them (Katib deletes a finished Experiment's suggestion Deployment just as a test ends, and the
  test's kubelet is stopped right after);
- a pod deleted while it was being started (an init container running, or its containers being
  started one by one): its processes were not yet registered, so `_terminate` found none and the
  rest of the start went on for a pod that was gone.

Pod IPs are reused within a session's cluster, so a leaked goptuna keeps a later test's pod IP
busy (its goptuna cannot bind; or Katib's controller reaches the old study), and every later
"no goptuna process on this cluster's prefix" check fails. Plain `sleep` pods show the paths here.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.kube.job_env import NODES, until
from tests.kube.test_katib_real import processes

pytestmark = pytest.mark.kube


def pod(name: str, command: list[str], init: list[str] | None = None) -> dict:
    spec = {"restartPolicy": "Never", "terminationGracePeriodSeconds": 30, "automountServiceAccountToken": False,
            "containers": [{"name": "main", "image": "python:3.11-slim", "command": command}]}
    if init:
        spec["initContainers"] = [{"name": "init", "image": "python:3.11-slim", "command": init}]
    return {"metadata": {"name": name}, "spec": spec}


async def _namespace_ready(kube_cluster, ns):
    await until(lambda: kube_cluster.get("", "v1", "serviceaccounts", ns, "default"), what="the default SA")


async def test_a_pod_stopping_when_the_kubelet_shuts_down_leaves_no_process(kube, kube_cluster, kube_target):
    ns = kube_target.namespace
    await _namespace_ready(kube_cluster, ns)
    kubelet = kube_cluster.kubelet(mode="process", nodes=NODES)
    # ignores SIGTERM, so the kubelet is still inside its grace period when it is stopped
    await kube.request("POST", f"/api/v1/namespaces/{ns}/pods",
                       pod("stubborn", ["sh", "-c", "trap '' TERM; exec sleep 987.61"]))
    await until(lambda: (kube_cluster.get("", "v1", "pods", ns, "stubborn") or {}).get("status", {}).get("phase")
                == "Running" and processes("sleep 987.61"), timeout=60, what="the pod running")
    await kube.request("DELETE", f"/api/v1/namespaces/{ns}/pods/stubborn")
    await until(lambda: kubelet.kubelet._stopping, timeout=30, what="the kubelet stopping the pod")
    kubelet.stop()
    await until(lambda: not processes("sleep 987.61"), timeout=10, what="the pod's process gone with the kubelet")


async def test_a_pod_deleted_while_it_starts_leaves_no_process(kube, kube_cluster, kube_target):
    ns = kube_target.namespace
    await _namespace_ready(kube_cluster, ns)
    kube_cluster.kubelet(mode="process", nodes=NODES)
    await kube.request("POST", f"/api/v1/namespaces/{ns}/pods",
                       pod("starting", ["sleep", "987.63"], init=["sleep", "987.62"]))
    await until(lambda: processes("sleep 987.62"), timeout=60, what="the init container running")
    await kube.request("DELETE", f"/api/v1/namespaces/{ns}/pods/starting")
    await until(lambda: kube_cluster.get("", "v1", "pods", ns, "starting") is None, timeout=30, what="the pod gone")
    # neither the init container nor, after it, the main container runs for a pod that is gone
    await until(lambda: not processes("sleep 987.62") and not processes("sleep 987.63"), timeout=10,
                what="no process of the deleted pod")
    for _ in range(20):  # and none starts afterwards
        assert not processes("sleep 987.63")
        await asyncio.sleep(0.1)


async def test_every_container_of_a_pod_sandbox_sees_the_pods_own_proc(kube, kube_cluster, kube_target):
    """A pod with ``shareProcessNamespace`` (Katib's trial pods) runs in a PID namespace whose /proc
    its containers must see: Katib's collector finds the trial's process there (ppid 0). A container
    that entered the sandbox before unshare's child had mounted that /proc kept the host's, where
    the collector took kthreadd (host pid 2, ppid 0) for the trial and waited for ever: a trial that
    never ended (test_katib_real under load in CI; found here with a benchmark's sweep). Eight pods
    at once, two containers each: every container's pid 1 is the sandbox's pause process."""
    ns = kube_target.namespace
    await _namespace_ready(kube_cluster, ns)
    kubelet = kube_cluster.kubelet(mode="process", nodes=NODES)
    show = ["sh", "-c", "tr '\\0' ' ' < /proc/1/cmdline; echo; sleep 0.3"]
    for i in range(8):
        body = pod(f"sandboxed-{i}", show)
        body["spec"]["shareProcessNamespace"] = True
        body["spec"]["containers"].append({"name": "second", "image": "python:3.11-slim", "command": show})
        await kube.request("POST", f"/api/v1/namespaces/{ns}/pods", body)

    def done():
        phases = [(kube_cluster.get("", "v1", "pods", ns, f"sandboxed-{i}") or {}).get("status", {}).get("phase")
                  for i in range(8)]
        return all(p in ("Succeeded", "Failed") for p in phases) and phases
    assert set(await until(done, timeout=90, what="the eight pods to end")) == {"Succeeded"}
    for i in range(8):
        for container in ("main", "second"):
            lines = [text.strip() for _, text in kubelet.kubelet.logs.container(ns, f"sandboxed-{i}", container).lines]
            assert lines == ["sleep infinity"], (i, container, lines)
