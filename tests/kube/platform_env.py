"""Shared set-up for PlatformSpawner tests on the session's real control plane (`tests.cluster`):
a GPU cluster for the test kubelet (one DGX-like node with MIG slices, one with whole A100s, one
CPU node), hub-like user objects and spawners, and the hub's real identity.

What it guarantees:

- `hub_identity(cluster, path, monkeypatch)` makes every KubeSpawner/PlatformSpawner created
  afterwards in this process act as the hub's ServiceAccount of `helm-values/hub-rbac.yaml`
  (``system:serviceaccount:jhub:hub``, through the fault proxy), not as admin: KubeSpawner loads
  its client configuration once per process from the default kubeconfig into the global default
  `Configuration`, so the default kubeconfig is pointed at the hub's and KubeSpawner's cached load
  starts afresh (all undone by `monkeypatch` after the test). Admin set-up goes through the
  `Cluster` API; only the code under test acts as the hub.
- `platform_cluster(...)` (an async context for a test's `cluster` fixture) adds the test
  kubelet's `NODES` and the hub identity, and afterwards stops the hub's `PlatformService`
  (`restart_hub`: its shared caches) and KubeSpawner's reflectors, every kubelet (their pods go at once) and deletes the projects.
- `kube_hub_config(...)` is the demo hub's config with PlatformSpawner; the hub process gets the
  hub's kubeconfig through ``KUBECONFIG`` (`hub_kubeconfig`).
- `delete_projects(cluster)` removes every namespace the platform labelled as its own and waits
  until they are gone (a namespace takes a moment to terminate), so the next test can make a
  project of the same name.
- `pvc_dir(cluster, ns, claim)` is the directory that backs a bound claim (its PV's hostPath),
  which the process-mode kubelet mounts into every pod that uses the claim.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import pathlib
import time
import types

from hub_ext.local.demo import DEMO_PLATFORM
from tests.cluster.identities import hub_kubeconfig

PLATFORM = {k: v for k, v in DEMO_PLATFORM.items() if k != "inventory"}
NVIDIA_TAINT = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
NODES = [
    {"name": "dgx-mig", "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/mig-1g.5gb": "2",
                                        "nvidia.com/mig-3g.20gb": "1"},
     "labels": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG"}, "taints": NVIDIA_TAINT},
    {"name": "dgx-full", "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "2"},
     "labels": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}, "taints": NVIDIA_TAINT},
    {"name": "cpu-1", "allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"}},
]
CANARY = "CANARY-5e3cret-value-never-shown"
GCP_KEY = json.dumps({"type": "service_account", "project_id": "vision-training", "private_key_id": "abc",
                      "private_key": f"-----BEGIN PRIVATE KEY-----\nMIIB{CANARY.replace('-', '')}==\n-----END PRIVATE KEY-----\n",
                      "client_email": "trainer@vision-training.iam.gserviceaccount.com"})
IMAGE = "quay.io/jupyterhub/k8s-singleuser-sample:4.0.0"
MANAGED = "app.kubernetes.io/managed-by=jupyterhub-mlplatform"
PLURALS = {"Secret": "secrets", "PersistentVolumeClaim": "persistentvolumeclaims", "Pod": "pods",
           "Namespace": "namespaces", "ResourceQuota": "resourcequotas"}


HUB_SETTINGS: dict = {}  # the tornado settings of "the hub" these users belong to (its PlatformService)


def make_user(name: str, groups=(), admin: bool = False, uid: int = 1):
    """A hub-like user; all of them share one hub's settings, so their spawners share its `PlatformService`."""
    return types.SimpleNamespace(name=name, id=uid, url=f"/user/{name}/", settings=HUB_SETTINGS, admin=admin,
                                 groups=[types.SimpleNamespace(name=g) for g in groups])


async def restart_hub() -> None:
    """What a hub restart does to the platform's process state: the hub's `PlatformService`
    stops (its watch caches) and goes; spawners made afterwards get a fresh one."""
    from hub_ext.spawners.service import KEY

    service = HUB_SETTINGS.pop(KEY, None)
    if service is not None:
        await service.stop()


def use_kubeconfig(kubeconfig, monkeypatch) -> pathlib.Path:
    """KubeSpawners made in this process from now on use `kubeconfig`, until `monkeypatch` is undone."""
    import functools

    import kubernetes_asyncio
    import kubespawner.clients
    import kubespawner.spawner
    from kubespawner.clients import load_config

    configuration = kubernetes_asyncio.client.Configuration
    monkeypatch.setattr(kubernetes_asyncio.config.kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(kubeconfig))
    monkeypatch.setattr(configuration, "_default", configuration._default)  # restored afterwards
    monkeypatch.setattr(kubespawner.spawner, "load_config", functools.lru_cache()(load_config.__wrapped__))
    monkeypatch.setattr(kubespawner.clients, "_client_cache", {})  # clients made for an earlier identity
    return pathlib.Path(kubeconfig)


def hub_identity(cluster, path, monkeypatch) -> pathlib.Path:
    """Spawners made in this process from now on act as the hub's ServiceAccount (see above)."""
    return use_kubeconfig(hub_kubeconfig(cluster, path), monkeypatch)


async def whoami(api_client) -> str:
    """The user name the API server authenticates a client as (a SelfSubjectReview)."""
    from hub_ext.kube.client import Kube

    review = await Kube(api_client).request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                                            {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    return review["status"]["userInfo"]["username"]


def wait_default_service_account(cluster, ns: str, timeout: float = 30) -> None:
    """Until the ServiceAccount controller has made `default` in `ns` (admission refuses pods
    that run as a ServiceAccount that does not exist)."""
    deadline = time.monotonic() + timeout
    while cluster.get("", "v1", "serviceaccounts", ns, "default") is None:
        if time.monotonic() > deadline:
            raise TimeoutError(f"no default ServiceAccount in {ns}")
        time.sleep(0.05)


@contextlib.asynccontextmanager
async def platform_cluster(kube_cluster, tmp_path, monkeypatch, **kubelet):
    """The session's cluster with the test kubelet's GPU nodes (`NODES`; `kubelet` options such as
    ``auto_run=False``) and spawners acting as the hub; afterwards the spawners' shared caches and
    reflectors stop, the kubelets stop (their pods go at once) and the projects are deleted."""
    from kubespawner import KubeSpawner

    hub_identity(kube_cluster, tmp_path / "hub.kubeconfig", monkeypatch)
    kube_cluster.kubelet(nodes=NODES, **kubelet)
    try:
        yield kube_cluster
    finally:
        await restart_hub()
        await KubeSpawner._stop_all_reflectors()
        for handle in list(kube_cluster.kubelets):
            handle.stop()
        delete_projects(kube_cluster)


def create(cluster, body: dict) -> dict:
    """Create `body` as admin (someone other than the hub)."""
    return cluster.create("", "v1", PLURALS[body["kind"]], body["metadata"].get("namespace"), body)


async def until(check, what: str, timeout: float = 30):
    """Wait until the coroutine function `check` answers true; its answer."""
    for _ in range(int(timeout / 0.1)):
        answer = await check()
        if answer:
            return answer
        await asyncio.sleep(0.1)
    raise AssertionError(f"never: {what}")


def watch_progress(spawner):
    """Start collecting a spawn's progress messages: (the list, growing; the collecting task)."""
    messages = []

    async def collect():
        async for event in spawner.progress():
            messages.append(event["message"])
    return messages, asyncio.ensure_future(collect())


def make_spawner(user, user_options=None, **traits):
    from jupyterhub.objects import Hub

    from hub_ext.spawners.kube import PlatformSpawner

    hub = Hub(ip="127.0.0.1", port=8081, base_url="/hub/")
    settings = {**PLATFORM, "start_timeout": 30, "http_timeout": 10, "image": IMAGE,
                "cmd": ["jupyterhub-singleuser"], "wait_poll_interval": 0.2, **traits}
    spawner = PlatformSpawner(user=user, hub=hub, api_token=f"tok-{user.name}",
                              oauth_client_id=f"jupyterhub-user-{user.name}", **settings)
    spawner.user_options = dict(user_options or {})
    return spawner


async def stop_as_hub(spawner) -> None:
    """Stop a server in the order JupyterHub's `User.stop` does (these tests play the hub around a
    bare spawner): `stop` only if `poll` finds it running, then the post-stop hook, then the state
    cleared. A test that called `stop` alone would miss what the hook owes a server whose pod is gone."""
    from jupyterhub.utils import maybe_future

    if await spawner.poll() is None:
        await spawner.stop()
    await maybe_future(spawner.run_post_stop_hook())  # a plain Spawner's hook is not a coroutine
    spawner.clear_state()


def secret_body(ns: str, name: str, secret_type: str, files: dict) -> dict:
    return {"apiVersion": "v1", "kind": "Secret", "type": secret_type, "metadata": {"name": name, "namespace": ns},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in files.items()}}


def dataset_pvc(ns: str, name: str, source: str, size: str = "10Gi") -> dict:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": ns, "labels": {"mlplatform.io/dataset": "true"},
                         "annotations": {"mlplatform.io/source": source, "mlplatform.io/description": "train split"}},
            "spec": {"accessModes": ["ReadOnlyMany"], "resources": {"requests": {"storage": size}}}}


def _loaded(status: str, reason: str, message: str) -> dict:
    return {"status": {"conditions": [{"type": "Loaded", "status": status, "reason": reason, "message": message,
                                       "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}]}}


def set_loaded(cluster, ns: str, name: str, status: str, reason: str = "", message: str = "") -> dict:
    """Write the dataset loader's `Loaded` condition on a PVC (its status subresource, as admin).
    A dataset PVC with a source and no such condition is still loading (the loader has not begun):
    tests that need a ready dataset without running the operator's loader mark it so."""
    return cluster.patch("", "v1", "persistentvolumeclaims", ns, name, _loaded(status, reason, message),
                         subresource="status")


async def mark_loaded(kube, ns: str, name: str) -> None:
    """`set_loaded` True through an async admin `hub_ext.kube.client.Kube`."""
    await kube.request("PATCH", f"/api/v1/namespaces/{ns}/persistentvolumeclaims/{name}/status",
                       _loaded("True", "Loaded", ""), content_type="application/merge-patch+json")


def wait_bound(cluster, ns: str, claim: str, timeout: float = 30) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        pvc = cluster.get("", "v1", "persistentvolumeclaims", ns, claim)
        if pvc and (pvc.get("status") or {}).get("phase") == "Bound":
            return pvc
        if time.monotonic() > deadline:
            raise TimeoutError(f"the claim {ns}/{claim} was not bound: {pvc and pvc.get('status')}")
        time.sleep(0.1)


def pvc_dir(cluster, ns: str, claim: str) -> pathlib.Path:
    """The directory that backs a bound claim (what the process-mode kubelet mounts for it)."""
    pvc = wait_bound(cluster, ns, claim)
    pv = cluster.get("", "v1", "persistentvolumes", None, pvc["spec"]["volumeName"])
    return pathlib.Path(pv["spec"]["hostPath"]["path"])


def pod_home(kubelet_workdir, namespace: str, pod: str) -> pathlib.Path:
    """Where the process-mode kubelet puts a pod's home directory (the notebook server's cwd)."""
    return pathlib.Path(kubelet_workdir) / "pods" / namespace / pod / "home"


def delete_projects(cluster, timeout: float = 90) -> None:
    """Delete every namespace labelled as the platform's and wait until all are gone."""
    for ns in cluster.items("", "v1", "namespaces", labelSelector=MANAGED):
        cluster.delete("", "v1", "namespaces", None, ns["metadata"]["name"])
    deadline = time.monotonic() + timeout
    while cluster.items("", "v1", "namespaces", labelSelector=MANAGED):
        if time.monotonic() > deadline:
            left = [n["metadata"]["name"] for n in cluster.items("", "v1", "namespaces", labelSelector=MANAGED)]
            raise TimeoutError(f"project namespaces still terminating: {left}")
        time.sleep(0.2)


def kube_hub_config(state_dir, demo_secrets, **platform) -> str:
    """The demo hub's ``jupyterhub_config.py`` with PlatformSpawner instead of the local runtime
    (and the platform's `configure(c)` at the end). The cluster comes from the hub's ``KUBECONFIG``."""
    import os
    import sys

    from hub_ext.local.demo import demo_config, demo_source

    config = demo_config(demo_secrets, state_dir=state_dir, python=sys.executable, allow_root=os.geteuid() == 0)
    config.pop("LocalPlatformSpawner")
    config.pop("SimpleLocalProcessSpawner")
    config["JupyterHub"]["spawner_class"] = "platform"
    config["PlatformSpawner"] = {**PLATFORM, "image": IMAGE, "ip": "0.0.0.0", "start_timeout": 120,
                                 "http_timeout": 90, **platform}
    return demo_source(config)
