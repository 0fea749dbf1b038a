"""A test helper playing a real component, not product code: the Kubeflow Training Operator v1
(PyTorchJob, TFJob) against the real control plane, until the real controller built from its Go
module runs there (issue 15; a debt until then). The CRDs it works on are the real ones
(`tests/cluster/crds`): the API server validates and prunes what it writes by their schemas.

`TrainingOperator(kube, namespace)` watches the two kinds and the pods of one namespace through
the API only (`hub_ext.kube.Kube`, an ordinary client) and, for each job, does what the operator
does:

- writes ``Created`` (status subresource, merge patch), creates one pod per replica named
  ``<job>-<type>-<i>`` with the operator's labels (``training.kubeflow.org/job-name``,
  ``replica-type``, ``replica-index``, ``operator-name``, ``job-role=master``), an ownerReference
  to the job and the env it injects (TFJob: ``TF_CONFIG``; PyTorchJob: ``MASTER_ADDR``,
  ``MASTER_PORT``, ``WORLD_SIZE``, ``RANK``, ``PYTHONUNBUFFERED``); then follows the pods:
  ``Running`` when the master (chief) runs, ``Succeeded`` when it succeeded, ``Failed`` (with the
  operator's message) when any replica failed; ``runPolicy.suspend`` deletes the pods and writes
  ``Suspended``. A pod create that fails (e.g. 403 exceeded quota) becomes a ``FailedCreatePod``
  Warning event on the job, and is tried again at the next change, as the operator requeues.

batch/v1 Jobs are not its business: the control plane's own Job controller runs them.
No Services are created (nothing in the tests resolves them). Pods it creates go into its pod
cache at once (the controllers' "expectations"), so no replica is created twice.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import logging
import uuid


from hub_ext.kube import Conflict, Kube, KubeError, NotFound, Unavailable, reason
from hub_ext.watchcache import WatchCache
from tests.kube.controller import Controller, controller_ref

log = logging.getLogger("tests.training_operator")
# kind → (collection path, replica specs field, default container, operator name)
KINDS = {"PyTorchJob": ("/apis/kubeflow.org/v1/namespaces/{ns}/pytorchjobs", "pytorchReplicaSpecs", "pytorch",
                        "pytorchjob-controller"),
         "TFJob": ("/apis/kubeflow.org/v1/namespaces/{ns}/tfjobs", "tfReplicaSpecs", "tensorflow", "tfjob-controller"),
         "Job": ("/apis/batch/v1/namespaces/{ns}/jobs", None, None, "job-controller")}
OPERATED = ("PyTorchJob", "TFJob")  # batch/v1 Jobs: the control plane's Job controller
PYTORCH_PORT, TF_PORT = 23456, 2222
MERGE = "application/merge-patch+json"


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def set_condition(conds: list[dict], type_: str, status: str, reason_: str, message: str) -> list[dict]:
    """The conditions with one set (times change only when the status does)."""
    old = next((c for c in conds if c["type"] == type_), None)
    if old and old["status"] == status and old.get("reason") == reason_:
        return conds
    ts = now()
    cond = {"type": type_, "status": status, "reason": reason_, "message": message, "lastUpdateTime": ts,
            "lastTransitionTime": old["lastTransitionTime"] if old and old["status"] == status else ts}
    return [cond if c["type"] == type_ else c for c in conds] if old else [*conds, cond]


def is_true(obj: dict, type_: str) -> bool:
    return any(c["type"] == type_ and c["status"] == "True" for c in (obj.get("status") or {}).get("conditions") or [])


class TrainingOperator(Controller):
    def __init__(self, kube: Kube, namespace: str):
        super().__init__(kube, namespace)
        self.jobs = {kind: self.watch(KINDS[kind][0].format(ns=namespace), kind) for kind in OPERATED}
        self.pods = self.watch(f"/api/v1/namespaces/{namespace}/pods")

    def caches(self) -> list[WatchCache]:
        return [*self.jobs.values(), self.pods]

    async def reconcile_all(self) -> None:
        for kind, cache in self.jobs.items():
            for job in cache.items():
                try:
                    await self.reconcile(kind, job)
                except KubeError as e:
                    log.warning("operator: %s %s: %s", kind, job["metadata"]["name"], reason(e))

    # ---- one job ------------------------------------------------------------------------------
    async def reconcile(self, kind: str, job: dict) -> None:
        if is_true(job, "Succeeded") or is_true(job, "Failed"):
            return
        meta, spec = job["metadata"], job["spec"]
        pods = [p for p in self.pods.items() if any(o.get("uid") == meta["uid"]
                                                    for o in p["metadata"].get("ownerReferences") or [])]
        status = copy.deepcopy(job.get("status") or {})
        conds = set_condition(status.get("conditions") or [], "Created", "True", f"{kind}Created",
                              f"{kind} {meta['name']} is created.")
        if (spec.get("runPolicy") or {}).get("suspend"):
            for p in pods:
                if not p["metadata"].get("deletionTimestamp"):
                    await self.kube.delete(f"/api/v1/namespaces/{self.ns}/pods/{p['metadata']['name']}")
            for type_, value in (("Running", "False"), ("Suspended", "True")):
                conds = set_condition(conds, type_, value, f"{kind}Suspended", f"{kind} {meta['name']} is suspended.")
            return await self._write(kind, job, {**status, "conditions": conds})
        if any(c["type"] == "Suspended" and c["status"] == "True" for c in conds):
            conds = set_condition(conds, "Suspended", "False", "Resumed", f"{kind} {meta['name']} is resumed.")
        status.setdefault("startTime", now())
        await self._write(kind, job, await self._training(kind, job, pods, {**status, "conditions": conds}))

    async def _training(self, kind: str, job: dict, pods: list[dict], status: dict) -> dict:
        meta, specs = job["metadata"], job["spec"][KINDS[kind][1]]
        by_task = {(p["metadata"]["labels"].get("training.kubeflow.org/replica-type"),
                    p["metadata"]["labels"].get("training.kubeflow.org/replica-index")): p for p in pods}
        counts, phases = {}, {}
        for rtype, rspec in specs.items():
            counts[rtype] = {"active": 0, "succeeded": 0, "failed": 0}
            for i in range(int(rspec.get("replicas", 1))):
                pod = by_task.get((rtype.lower(), str(i)))
                if pod is None:
                    pod = await self._create_pod(kind, job, self._replica_pod(kind, job, rtype, i))
                phase = ((pod or {}).get("status") or {}).get("phase", "Pending")
                phases[(rtype, i)] = phase
                key = {"Succeeded": "succeeded", "Failed": "failed"}.get(phase, "active")
                counts[rtype][key] += 1 if pod else 0
        status["replicaStatuses"] = {t: {k: v for k, v in c.items() if v} for t, c in counts.items()}
        master = next((t for t in ("Master", "Chief") if t in specs), "Worker")
        failed = [(t, c["failed"]) for t, c in counts.items() if c["failed"]]
        conds, name = status["conditions"], meta["name"]
        final = None
        if failed:
            final = ("Failed", f"{kind} {name} is failed because {failed[0][1]} {failed[0][0]} replica(s) failed.")
        elif phases.get((master, 0)) == "Succeeded":
            final = ("Succeeded", f"{kind} {name} is successfully completed.")
        elif phases.get((master, 0)) == "Running":
            conds = set_condition(conds, "Running", "True", f"{kind}Running", f"{kind} {name} is running.")
        if final:
            conds = set_condition(conds, "Running", "False", f"{kind}{final[0]}", final[1])
            conds = set_condition(conds, final[0], "True", f"{kind}{final[0]}", final[1])
            status["completionTime"] = now()
            clean = (job["spec"].get("runPolicy") or {}).get("cleanPodPolicy")
            for p in pods:  # cleanPodPolicy Running: pods still running when the job ends are deleted
                if clean == "All" or (clean == "Running" and p["status"].get("phase") in ("Pending", "Running")):
                    await self.kube.delete(f"/api/v1/namespaces/{self.ns}/pods/{p['metadata']['name']}")
        return {**status, "conditions": conds}

    def _replica_pod(self, kind: str, job: dict, rtype: str, index: int) -> dict:
        meta, specs = job["metadata"], job["spec"][KINDS[kind][1]]
        template = copy.deepcopy(specs[rtype]["template"])
        pod_meta = template.get("metadata") or {}
        labels = {**(pod_meta.get("labels") or {}), "training.kubeflow.org/job-name": meta["name"],
                  "training.kubeflow.org/operator-name": KINDS[kind][3],
                  "training.kubeflow.org/replica-type": rtype.lower(),
                  "training.kubeflow.org/replica-index": str(index)}
        if rtype in ("Master", "Chief") or (rtype == "Worker" and index == 0 and not
                                            {"Master", "Chief"} & set(specs)):
            labels["training.kubeflow.org/job-role"] = "master"
        spec = template["spec"]
        policy = specs[rtype].get("restartPolicy") or spec.get("restartPolicy") or "Never"
        spec["restartPolicy"] = "Never" if policy == "ExitCode" else policy
        env = self._env(kind, job, rtype, index)
        for c in spec["containers"]:
            if c["name"] == KINDS[kind][2]:
                c["env"] = [*(c.get("env") or []), *env]
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"{meta['name']}-{rtype.lower()}-{index}", "namespace": self.ns, "labels": labels,
                             "annotations": pod_meta.get("annotations") or {}, "ownerReferences": [controller_ref(job)]},
                "spec": spec}

    def _env(self, kind: str, job: dict, rtype: str, index: int) -> list[dict]:
        name, specs = job["metadata"]["name"], job["spec"][KINDS[kind][1]]
        if kind == "PyTorchJob":
            world = sum(int(s.get("replicas", 1)) for s in specs.values())
            rank = 0 if rtype == "Master" else index + (1 if "Master" in specs else 0)
            return [{"name": "MASTER_PORT", "value": str(PYTORCH_PORT)},
                    {"name": "MASTER_ADDR", "value": f"{name}-master-0"},
                    {"name": "WORLD_SIZE", "value": str(world)}, {"name": "RANK", "value": str(rank)},
                    {"name": "PYTHONUNBUFFERED", "value": "1"}]
        cluster = {t.lower(): [f"{name}-{t.lower()}-{i}.{self.ns}.svc:{TF_PORT}" for i in range(int(s.get("replicas", 1)))]
                   for t, s in specs.items() if t != "Evaluator"}
        config = {"cluster": cluster, "task": {"type": rtype.lower(), "index": index}, "environment": "cloud"}
        return [{"name": "TF_CONFIG", "value": json.dumps(config)}]

    async def _create_pod(self, kind: str, job: dict, pod: dict) -> dict | None:
        """The created pod; None when it exists already or was refused (a Warning event on the job)."""
        try:
            created = await self.kube.request("POST", f"/api/v1/namespaces/{self.ns}/pods", pod)
        except KubeError as e:
            if isinstance(e, Unavailable) and e.code == 0:
                raise  # no answer
            if not isinstance(e, Conflict):
                meta = job["metadata"]
                await self.kube.request("POST", f"/api/v1/namespaces/{self.ns}/events", {
                    "metadata": {"name": f"{meta['name']}.{uuid.uuid4().hex[:16]}", "namespace": self.ns},
                    "involvedObject": {"kind": kind, "apiVersion": job["apiVersion"], "name": meta["name"],
                                       "namespace": self.ns, "uid": meta["uid"]},
                    "reason": "FailedCreatePod", "message": f"Error creating: {reason(e)}", "type": "Warning",
                    "count": 1, "source": {"component": KINDS[kind][3]}, "firstTimestamp": now(), "lastTimestamp": now()})
            return None
        self.pods.put(created)
        return created

    async def _write(self, kind: str, job: dict, status: dict) -> None:
        if status == (job.get("status") or {}):
            return
        path = KINDS[kind][0].format(ns=self.ns) + f"/{job['metadata']['name']}/status"
        try:
            self.jobs[kind].put(await self.kube.request("PATCH", path, {"status": status}, content_type=MERGE))
        except NotFound:
            pass  # deleted meanwhile


