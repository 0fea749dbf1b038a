"""Projects under the real Kueue for the kube tier's queueing tests (`test_kueue_jobs`,
`test_kueue_reclaim`): made as the hub makes them where it finds Kueue (`project_objects` with
`TenancySettings(kueue=True)`, applied by the hub's `Provisioner` with the hub's own identity, so
its RBAC and the platform's admission policies apply), with the platform's jobs API (`JobService`
on `KubeBackend`) acting as a member's own ServiceAccount; and what a failed wait shows.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import uuid

import kubernetes_asyncio

from hub_ext.core.entitlements import Project
from hub_ext.kube.client import Kube
from hub_ext.kube.provision import Provisioner
from hub_ext.manifests.tenancy import TenancySettings, member_binding_name, project_objects
from server_ext.runtimes.kube.backend import KubeBackend
from server_ext.service.jobs import JobService
from tests.cluster.identities import hub_kubeconfig, service_account_kubeconfig
from tests.kube.job_env import CATALOG, MODULE, PLAN_SETTINGS, SETTINGS, pods

KUEUE = "kueue.x-k8s.io"
USER = "alice@example.com"
A100 = "NVIDIA-A100-SXM4-40GB"
ONE_A100 = {"acceleratorConfig": {"type": "NVIDIA_TESLA_A100", "count": "1"}}


def gpu_node(gpus: int) -> dict:
    return {"name": "dgx-a100", "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110",
                                                 "nvidia.com/gpu": str(gpus)},
            "labels": {"nvidia.com/gpu.product": A100},
            "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]}


def one_a100_doc(job_id: str) -> dict:
    """One replica, one A100: a batch/v1 Job."""
    return {"jobId": job_id, "trainingInput": {**MODULE, "runtimeVersion": "python-3.11", "scaleTier": "CUSTOM",
                                               "masterType": "n1-standard-4", "masterConfig": ONE_A100}}


@contextlib.asynccontextmanager
async def queued_project(kube: Kube, kube_cluster, tmp_path, prefix: str, limits: dict, settings: TenancySettings,
                         accelerators=CATALOG, kube_settings=SETTINGS):
    """A team project `<prefix>-<random>` with these limits (of `accelerators`, its published catalogue)
    and the member `USER` (whose jobs backend has `kube_settings`), made by the hub
    under Kueue; yields (name, the jobs service acting as the member's ServiceAccount). Afterwards
    the namespace, the project's ClusterQueues and its Cohort are deleted."""
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    team = Project(name, name, False, frozenset(), limits, owner=f"group:{name}")
    objects = project_objects(team, accelerators, (), [(USER, "")], dataclasses.replace(settings, kueue=True))
    hub_api = await kubernetes_asyncio.config.new_client_from_config(
        config_file=str(hub_kubeconfig(kube_cluster, tmp_path / f"hub-{name}.kubeconfig")))
    try:
        await Provisioner(Kube(hub_api)).ensure(name, lambda: objects, f"prepare the project {name!r}")
    finally:
        await hub_api.close()
    api = await kubernetes_asyncio.config.new_client_from_config(config_file=str(service_account_kubeconfig(
        kube_cluster, tmp_path / f"{name}.kubeconfig", name, member_binding_name(USER))))
    backend = KubeBackend(Kube(api), kube_settings, poll_interval=0.1)

    async def projects(user: str) -> list[str]:
        return [name] if user == USER else []

    try:
        yield name, JobService(backend, PLAN_SETTINGS, projects)
    finally:
        await backend.close()
        await api.close()
        await kube.delete(f"/api/v1/namespaces/{name}")
        for path in (f"clusterqueues/mlp-{name}", f"clusterqueues/mlp-{name}-servers", f"cohorts/mlp-{name}"):
            with contextlib.suppress(Exception):  # Kueue's finalizer holds a queue until its Workloads are gone
                await kube.delete(f"/apis/{KUEUE}/v1beta2/{path}")


async def poll(check, what: str, timeout: float = 90, explain=None):
    """Await the async `check` until it answers something true, and return that; on timeout fail
    with what `explain()` (async) says of the state of things."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        answer = await check()
        if answer:
            return answer
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out ({timeout} s) waiting for {what}" + (f"\n{await explain()}" if explain else ""))


async def situation(kube, kueue, kube_cluster, *namespaces: str) -> str:
    """What a failed wait shows: the job objects, the Workloads, the pods, Kueue's log."""
    out = []
    for ns in namespaces:
        for kind, path in (("Job", f"/apis/batch/v1/namespaces/{ns}/jobs"),
                           ("PyTorchJob", f"/apis/kubeflow.org/v1/namespaces/{ns}/pytorchjobs")):
            for o in (await kube.list(path))["items"]:
                spec = o["spec"]
                suspend = spec.get("suspend", (spec.get("runPolicy") or {}).get("suspend"))
                out.append(f"{kind} {ns}/{o['metadata']['name']}: suspend={suspend} "
                           f"labels={o['metadata'].get('labels')} status={o.get('status')}")
        for w in (await kube.list(f"/apis/{KUEUE}/v1beta2/namespaces/{ns}/workloads"))["items"]:
            owners = [(r["kind"], r["name"]) for r in w["metadata"].get("ownerReferences") or []]
            out.append(f"Workload {ns}/{w['metadata']['name']}: owners={owners} status={w.get('status')}")
        out += [f"Pod {ns}/{p['metadata']['name']}: node={p['spec'].get('nodeName')} "
                f"phase={p['status'].get('phase')} gates={p['spec'].get('schedulingGates')}"
                for p in pods(kube_cluster, ns)]
    return "\n".join(out) + f"\n--- kueue-manager log:\n{kueue.process.tail(8000)}"


def state_check(jobs: JobService, ns: str, job_id: str, want: str):
    """An async check: the job as `jobs.get` answers, once its state is `want`."""
    async def check():
        job = await jobs.get(USER, ns, job_id)
        return job if job["state"] == want else None
    return check


def message_check(jobs: JobService, ns: str, job_id: str, words: str):
    """An async check: the job, once its statusMessage holds `words`."""
    async def check():
        job = await jobs.get(USER, ns, job_id)
        return job if words in (job.get("statusMessage") or "") else None
    return check
