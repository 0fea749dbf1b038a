"""Shared set-up for PlatformSpawner tests against the stand-in: a GPU cluster (one DGX-like node
with MIG slices, one with whole A100s, one CPU node), hub-like user objects and spawners."""

from __future__ import annotations

import base64
import json
import types

from hub_ext.demo import DEMO_PLATFORM

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


def make_user(name: str, groups=(), admin: bool = False, uid: int = 1):
    return types.SimpleNamespace(name=name, id=uid, url=f"/user/{name}/", settings={}, admin=admin,
                                 groups=[types.SimpleNamespace(name=g) for g in groups])


def make_spawner(standin, user, user_options=None, **traits):
    from jupyterhub.objects import Hub

    from hub_ext.kube_spawner import PlatformSpawner

    hub = Hub(ip="127.0.0.1", port=8081, base_url="/hub/")
    settings = {**PLATFORM, "start_timeout": 30, "http_timeout": 10, "image": IMAGE,
                "cmd": ["jupyterhub-singleuser"], "wait_poll_interval": 0.2, **traits}
    spawner = PlatformSpawner(user=user, hub=hub, k8s_api_host=standin.url, api_token=f"tok-{user.name}",
                              oauth_client_id=f"jupyterhub-user-{user.name}", **settings)
    spawner.user_options = dict(user_options or {})
    return spawner


def secret_body(ns: str, name: str, secret_type: str, files: dict) -> dict:
    return {"apiVersion": "v1", "kind": "Secret", "type": secret_type, "metadata": {"name": name, "namespace": ns},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in files.items()}}


def dataset_pvc(ns: str, name: str, source: str, size: str = "10Gi") -> dict:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": ns, "labels": {"mlplatform.io/dataset": "true"},
                         "annotations": {"mlplatform.io/source": source, "mlplatform.io/description": "train split"}},
            "spec": {"accessModes": ["ReadOnlyMany"], "resources": {"requests": {"storage": size}}}}


def kube_hub_config(standin, state_dir, demo_secrets, **platform):
    """The demo hub's ``jupyterhub_config.py`` with PlatformSpawner against `standin` instead of the
    local runtime (and the platform's `configure(c)` at the end)."""
    import os
    import sys

    from hub_ext.demo import demo_config, demo_source

    config = demo_config(demo_secrets, state_dir=state_dir, python=sys.executable, allow_root=os.geteuid() == 0)
    config.pop("LocalPlatformSpawner")
    config.pop("SimpleLocalProcessSpawner")
    config["JupyterHub"]["spawner_class"] = "platform"
    config["PlatformSpawner"] = {**PLATFORM, "k8s_api_host": standin.url, "image": IMAGE, "ip": "0.0.0.0",
                                 "start_timeout": 120, "http_timeout": 90, **platform}
    return demo_source(config)


def pod_home(kubelet_workdir, namespace: str, pod: str):
    """Where the process-mode kubelet puts a pod's home directory (the notebook server's cwd)."""
    import pathlib

    return pathlib.Path(kubelet_workdir) / "pods" / namespace / pod / "home"


def pvc_dir(kubelet_workdir, namespace: str, claim: str):
    """Where the process-mode kubelet keeps a PVC's files (shared by every pod that mounts it)."""
    import pathlib

    return pathlib.Path(kubelet_workdir) / "pvcs" / namespace / claim
