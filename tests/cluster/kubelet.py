"""The tests' kubelet: nodes of the real control plane, emulated (a test tool, not a product part).

It is a client of the API server like a real kubelet: it registers Nodes (CPU, memory,
`nvidia.com/gpu` or MIG capacity and GPU product labels, from `nodes=`), keeps their Leases in
`kube-node-lease` and their Ready condition, watches the pods the real scheduler binds to its
nodes, writes their status through the status subresource, records Events, honours graceful
deletion (SIGTERM, then SIGKILL after the grace period, capped at `max_grace`; then the final
delete with grace 0) and serves container logs on its HTTPS port (`kubelet_server.py`), so
`pods/log` through the API server works. Two modes:

* ``status``: no process. Bound pods go Running (pod IP, Ready, ready container statuses,
  Pulled/Created/Started events) by themselves (``auto_run``) or on `run()`, Succeeded/Failed on
  `finish()`; tests add log lines with `log()`.
* ``process``: each container's command runs as a local process on a pod IP of its own, with the
  pod's env and volumes as files (`kubelet_process.py`, `podfiles.py`) and, where the cluster has
  DNS, its own /etc/resolv.conf naming the cluster DNS (`network.py`).

Pod IPs come from the cluster's pod network (`network.PodNetwork`: 10.244.B.x on `lo`, so
EndpointSlices accept them; 127.78.x.y where that is refused). Nodes declare `ephemeral-storage`
allocatable (100Gi unless given) as real nodes do: pods that request it (Katib's suggestions) are
otherwise unschedulable.

`start()` returns once the nodes are schedulable (the controller lifted the not-ready taint that
admission puts on new Nodes).
Containers are not restarted (restartPolicy is not emulated): a container that exits ends the pod.
On `shutdown()` the kubelet kills its processes, removes its pods (grace 0) and deletes its Nodes,
so the next test's kubelet starts from a clean node list.

Debt: one identity (`mlplatform-test-kubelet`, system:masters) acts for all its nodes, where real
kubelets act as `system:node:<name>` under the Node authorizer.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
import pathlib
import signal
import uuid

from tests.cluster.kubelet_process import DEFAULT_IMAGES, ProcessMode
from tests.cluster.pod_processes import signal_group
from tests.cluster.logs import PodLogs
from tests.cluster.network import PodNetwork
from tests.cluster.podfiles import PodFiles
from tests.cluster.rest import STRATEGIC, ApiError, Rest

log = logging.getLogger("tests.cluster.kubelet")

DEFAULT_NODE = {"name": "test-node", "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110"}}
LEASE_SECONDS = 40
NOT_READY = "node.kubernetes.io/not-ready"


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _micro_now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def node_manifest(name: str, allocatable: dict, labels: dict | None = None, taints: list | None = None) -> dict:
    alloc = {"pods": "110", "ephemeral-storage": "100Gi", **allocatable}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                              "kubernetes.io/arch": "amd64", **(labels or {})}},
        "spec": {"taints": taints} if taints else {},
        "status": {"capacity": dict(alloc), "allocatable": dict(alloc)},
    }


def _terminated(status: dict, code: int, ts: str, reason: str | None = None, message: str | None = None) -> dict:
    """A container's `status` once it ended with `code` at `ts` (its start kept from its running state)."""
    term = {"exitCode": code, "reason": reason or ("Completed" if code == 0 else "Error"),
            "startedAt": (status.get("state", {}).get("running") or {}).get("startedAt", ts), "finishedAt": ts}
    if message:
        term["message"] = message
    return {**status, "ready": False, "started": False, "state": {"terminated": term}}


class Kubelet(ProcessMode):
    def __init__(self, rest: Rest, mode: str = "status", *, api_url: str, ca: pathlib.Path, port: int,
                 auto_run: bool = True, nodes: list[dict] | None = None, workdir: str | os.PathLike | None = None,
                 env: dict | None = None, max_grace: float = 5.0, images: dict | None = None,
                 network: PodNetwork | None = None):
        if mode not in ("status", "process"):
            raise ValueError(f"kubelet mode must be 'status' or 'process', not {mode!r}")
        self.rest, self.mode, self.auto_run = rest, mode, auto_run
        self.api_url, self.ca, self.port = api_url, ca, port
        self.logs = PodLogs()
        self.workdir = pathlib.Path(workdir or f"/tmp/test-kubelet-{os.getpid()}-{uuid.uuid4().hex[:6]}")
        self.extra_env = dict(env or {})
        self.max_grace = max_grace
        self.images = {**DEFAULT_IMAGES, **(images or {})}
        self._specs = nodes or [DEFAULT_NODE]
        self.node_names: set[str] = set()
        self.pods: dict[tuple[str, str], dict] = {}  # the latest seen state of each pod bound here
        self._started: set[tuple[str, str]] = set()
        self._stopping: set[tuple[str, str]] = set()
        self._procs: dict[tuple[str, str], list[asyncio.subprocess.Process]] = {}
        self._files: dict[tuple[str, str], PodFiles] = {}
        self._ips: dict[tuple[str, str], str] = {}
        self._sandboxes: dict = {}  # (ns, name) → pod_processes.Sandbox of pods with a PID namespace
        self._pull_tries: dict[str, int] = {}  # pod uid → image pulls tried (kubelet_process: the back-off)
        # every process and sandbox started and not yet ended, whether or not its pod still knows it:
        # `shutdown()` kills them all (a pod stopping or half-started at that moment held its own)
        self._live: set = set()
        self._tasks: set[asyncio.Task] = set()
        self.network = network or PodNetwork(self.workdir / "network")  # no block: 127.78.x.y, no DNS
        self._synced = asyncio.Event()

    # ---- start and stop ---------------------------------------------------------------------------
    async def start(self) -> "Kubelet":
        for spec in self._specs:
            manifest = spec if "metadata" in spec else node_manifest(spec["name"], spec.get("allocatable", {}),
                                                                     spec.get("labels"), spec.get("taints"))
            await self.add_node(manifest)
        self._spawn(self._watch_pods())
        self._spawn(self._heartbeat())
        await asyncio.wait_for(self._synced.wait(), 30)
        await self._wait_schedulable()
        return self

    async def shutdown(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        # not only the pods' registered processes: a pod being stopped (its processes taken by
        # `_terminate`) or half-started (by `_run_process`) when its task was cancelled holds its own
        for proc in [*(p for procs in self._procs.values() for p in procs), *self._live]:
            signal_group(proc, signal.SIGKILL)
        if self._tasks:  # let the cancelled tasks end (a process being started is killed by asyncio)
            await asyncio.wait(list(self._tasks), timeout=10)
        live = [*(p for procs in self._procs.values() for p in procs), *self._live]
        for proc in live:
            signal_group(proc, signal.SIGKILL)
        for proc in live:
            await proc.wait()
        self._procs.clear()
        self._live.clear()
        for ns, name in list(self._sandboxes):
            self._end_sandbox(ns, name)
        for (ns, name), pod in list(self.pods.items()):
            await self._final_delete(ns, name, pod["metadata"]["uid"])
        for node in sorted(self.node_names):
            try:
                await self.rest.delete(f"/api/v1/nodes/{node}")
            except ApiError as e:
                if e.status != 404:
                    raise
        self.node_names.clear()
        for ns, name in list(self.pods):
            self.logs.drop_pod(ns, name)
        for ip in self._ips.values():
            self.network.release(ip)
        self._ips.clear()
        for pod in self.pods.values():
            self.network.forget(pod["metadata"]["uid"])

    def _spawn(self, coro) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("kubelet task failed", exc_info=task.exception())

    # ---- nodes ------------------------------------------------------------------------------------
    async def add_node(self, manifest: dict) -> dict:
        name = manifest["metadata"]["name"]
        body = {k: v for k, v in manifest.items() if k != "status"}
        body.setdefault("apiVersion", "v1")
        body.setdefault("kind", "Node")
        try:
            await self.rest.post("/api/v1/nodes", body)
        except ApiError as e:
            if e.status != 409:
                raise
            await self.rest.patch(f"/api/v1/nodes/{name}", {"metadata": {"labels": body["metadata"].get("labels")},
                                                            "spec": body.get("spec") or {}})
        self.node_names.add(name)
        status = {**(manifest.get("status") or {}), **self._node_status(name)}
        obj = await self.rest.patch(f"/api/v1/nodes/{name}/status", {"status": status})
        await self._renew_lease(name)
        return obj

    async def _wait_schedulable(self, timeout: float = 30) -> None:
        """Until the node lifecycle controller has lifted the `node.kubernetes.io/not-ready` taint that
        admission (TaintNodesByCondition) puts on every new Node: before that the scheduler refuses
        the nodes ("untolerated taint"), so a test's first pod would wait for a retry."""
        deadline = asyncio.get_running_loop().time() + timeout
        for node in sorted(self.node_names):
            while any(t.get("key") == NOT_READY for t in
                      (await self.rest.get(f"/api/v1/nodes/{node}")).get("spec", {}).get("taints") or []):
                if asyncio.get_running_loop().time() > deadline:
                    log.warning("node %s still has the %s taint", node, NOT_READY)
                    return
                await asyncio.sleep(0.02)

    def _node_status(self, name: str) -> dict:
        ts = now_iso()
        return {
            "conditions": [
                {"type": t, "status": "False", "reason": f"KubeletHas{r}", "lastHeartbeatTime": ts,
                 "lastTransitionTime": ts} for t, r in (("MemoryPressure", "SufficientMemory"),
                                                        ("DiskPressure", "NoDiskPressure"),
                                                        ("PIDPressure", "SufficientPID"))] +
                [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "test kubelet is ready",
                  "lastHeartbeatTime": ts, "lastTransitionTime": ts}],
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": self.port}},
            "nodeInfo": {"kubeletVersion": "v1.37.2-test", "kubeProxyVersion": "", "operatingSystem": "linux",
                         "architecture": "amd64", "osImage": "test kubelet", "kernelVersion": os.uname().release,
                         "containerRuntimeVersion": "process://1", "machineID": name, "systemUUID": name,
                         "bootID": name},
        }

    async def _renew_lease(self, node: str) -> None:
        path = f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{node}"
        spec = {"holderIdentity": node, "leaseDurationSeconds": LEASE_SECONDS, "renewTime": _micro_now()}
        try:
            await self.rest.patch(path, {"spec": spec})
        except ApiError as e:
            if e.status != 404:
                raise
            await self.rest.post("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
                                 {"metadata": {"name": node}, "spec": spec})

    async def _heartbeat(self) -> None:
        beats = 0
        while True:
            await asyncio.sleep(5)
            beats += 1
            for node in list(self.node_names):
                try:
                    await self._renew_lease(node)
                    if beats % 6 == 0:  # the Ready condition's heartbeat every 30 s, as with leases
                        await self.rest.patch(f"/api/v1/nodes/{node}/status", {"status": self._node_status(node)},
                                              STRATEGIC)
                except ApiError as e:
                    log.warning("heartbeat of node %s failed: %s", node, e)
            for key, files in list(self._files.items()):
                if files.next_refresh <= asyncio.get_running_loop().time():
                    await files.refresh_tokens()

    # ---- pods -------------------------------------------------------------------------------------
    async def _watch_pods(self) -> None:
        """List, then watch; relist on 410 or any error (a cut watch resumes from the last version)."""
        rv = None
        while True:
            try:
                if rv is None:
                    listing = await self.rest.get("/api/v1/pods")
                    rv = listing["metadata"]["resourceVersion"]
                    for pod in listing["items"]:
                        self._on_pod("ADDED", pod)
                    self._synced.set()
                async for ev in self.rest.watch("/api/v1/pods", rv, timeoutSeconds="60"):
                    if ev["type"] == "ERROR":
                        rv = None
                        break
                    rv = ev["object"]["metadata"]["resourceVersion"]
                    if ev["type"] != "BOOKMARK":
                        self._on_pod(ev["type"], ev["object"])
            except asyncio.CancelledError:
                raise
            except Exception as e:  # a cut connection, a 5xx: watch again after a pause
                log.info("kubelet pod watch ended (%s); resuming", e)
                await asyncio.sleep(0.5)

    def _on_pod(self, kind: str, pod: dict) -> None:
        key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        if pod["spec"].get("nodeName") not in self.node_names:
            return
        if kind == "DELETED":
            self.pods.pop(key, None)
            self._pull_tries.pop(pod["metadata"]["uid"], None)
            for proc in self._procs.pop(key, []):  # force-deleted (grace 0) while running
                signal_group(proc, signal.SIGKILL)
            self._end_sandbox(*key)
            self._started.discard(key)
            self._files.pop(key, None)
            self.logs.drop_pod(*key)
            if key in self._ips:
                self.network.release(self._ips.pop(key))
            self.network.forget(pod["metadata"]["uid"])
            return
        self.pods[key] = pod
        if pod["metadata"].get("deletionTimestamp"):
            if key not in self._stopping:
                self._stopping.add(key)
                self._spawn(self._terminate(pod))
            return
        if key in self._started or (pod.get("status") or {}).get("phase") not in (None, "Pending"):
            return
        self._started.add(key)
        if self.mode == "process":
            self._spawn(self._run_process(pod))
        elif self.auto_run:
            self._spawn(self._mark_running(pod))
        else:
            self._spawn(self._mark_creating(pod))

    # ---- status writes ----------------------------------------------------------------------------
    async def _status(self, pod: dict, status: dict) -> dict:
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        try:
            obj = await self.rest.patch(f"/api/v1/namespaces/{ns}/pods/{name}/status",
                                        {"metadata": {"uid": pod["metadata"]["uid"]}, "status": status})
        except ApiError as e:
            if e.status in (404, 409):  # gone, or a new pod of the same name
                return pod
            raise
        self.pods[(ns, name)] = obj
        return obj

    async def event(self, pod: dict, reason: str, message: str, type: str = "Normal") -> None:
        meta = pod["metadata"]
        ts = now_iso()
        try:
            await self.rest.post(f"/api/v1/namespaces/{meta['namespace']}/events", {
                "metadata": {"name": f"{meta['name']}.{uuid.uuid4().hex[:16]}", "namespace": meta["namespace"]},
                "involvedObject": {"kind": "Pod", "apiVersion": "v1", "name": meta["name"],
                                   "namespace": meta["namespace"], "uid": meta["uid"]},
                "reason": reason, "message": message, "type": type, "count": 1,
                "source": {"component": "kubelet", "host": pod["spec"].get("nodeName", "")},
                "reportingComponent": "kubelet", "reportingInstance": pod["spec"].get("nodeName", ""),
                "firstTimestamp": ts, "lastTimestamp": ts})
        except ApiError as e:  # a terminating namespace refuses new events
            log.info("event %s for %s/%s not recorded: %s", reason, meta["namespace"], meta["name"], e)

    def _pod_ip(self) -> str:
        return self.network.allocate()

    @staticmethod
    def _conditions(pod: dict, ready: bool, ts: str) -> list[dict]:
        value = "True" if ready else "False"
        return [{"type": "PodScheduled", "status": "True", "lastTransitionTime": ts},
                {"type": "Initialized", "status": "True", "lastTransitionTime": ts},
                {"type": "ContainersReady", "status": value, "lastTransitionTime": ts},
                {"type": "Ready", "status": value, "lastTransitionTime": ts}]

    async def _mark_creating(self, pod: dict) -> dict:
        ts = now_iso()
        waiting = [{"name": c["name"], "ready": False, "restartCount": 0, "image": c["image"], "imageID": "",
                    "started": False, "state": {"waiting": {"reason": "ContainerCreating"}}}
                   for c in pod["spec"]["containers"]]
        return await self._status(pod, {"phase": "Pending", "hostIP": "127.0.0.1", "startTime": ts,
                                        "conditions": self._conditions(pod, False, ts),
                                        "containerStatuses": waiting})

    async def _mark_running(self, pod: dict, ip: str | None = None) -> dict:
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        ts = now_iso()
        for c in pod["spec"]["containers"]:
            self.logs.container(ns, name, c["name"])
            await self.event(pod, "Pulled", f'Container image "{c["image"]}" already present on machine')
            await self.event(pod, "Created", f"Created container {c['name']}")
            await self.event(pod, "Started", f"Started container {c['name']}")
        statuses = [{"name": c["name"], "ready": True, "started": True, "restartCount": 0, "image": c["image"],
                     "imageID": f"process://{c['image']}", "containerID": f"process://{uuid.uuid4().hex}",
                     "state": {"running": {"startedAt": ts}}} for c in pod["spec"]["containers"]]
        ip = ip or self._ips.setdefault((ns, name), self._pod_ip())
        return await self._status(pod, {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
                                        "hostIP": "127.0.0.1", "hostIPs": [{"ip": "127.0.0.1"}], "startTime": ts,
                                        "conditions": self._conditions(pod, True, ts),
                                        "containerStatuses": statuses})

    async def _mark_containers_ended(self, ns: str, name: str, exit_codes: dict[str, int]) -> None:
        """Some containers of a running pod ended (`exit_codes`), others run: theirs terminated, the
        pod Running but not Ready (what a Job's ``ready`` count and its watchers see)."""
        cur = self.pods.get((ns, name))
        if cur is None:
            return
        ts = now_iso()
        statuses = [_terminated(st, exit_codes[st["name"]], ts)
                    if st["name"] in exit_codes and "terminated" not in st.get("state", {}) else st
                    for st in (cur.get("status") or {}).get("containerStatuses") or []]
        await self._status(cur, {"containerStatuses": statuses, "conditions": self._conditions(cur, False, ts)})

    async def _mark_backoff(self, ns: str, name: str, container: str, code: int, count: int, delay: float) -> None:
        """A container that ended and waits to be started again: CrashLoopBackOff, with its end as
        `lastState` and `count` restarts; the pod Running, not Ready."""
        cur = self.pods.get((ns, name))
        if cur is None:
            return
        ts = now_iso()
        uid = cur["metadata"]["uid"]
        message = f"back-off {delay:g}s restarting failed container={container} pod={name}_{ns}({uid})"
        statuses = []
        for st in (cur.get("status") or {}).get("containerStatuses") or []:
            if st["name"] == container:
                ended = _terminated(st, code, ts)
                st = {**st, "ready": False, "started": False, "restartCount": count,
                      "lastState": ended["state"], "state": {"waiting": {"reason": "CrashLoopBackOff",
                                                                         "message": message}}}
            statuses.append(st)
        await self._status(cur, {"containerStatuses": statuses, "conditions": self._conditions(cur, False, ts)})
        await self.event(cur, "BackOff", f"Back-off restarting failed container {container} in pod "
                                         f"{name}_{ns}({uid})", type="Warning")

    async def _mark_restarted(self, ns: str, name: str, container: str) -> None:
        cur = self.pods.get((ns, name))
        if cur is None:
            return
        ts = now_iso()
        statuses = [{**st, "ready": True, "started": True, "containerID": f"process://{uuid.uuid4().hex}",
                     "state": {"running": {"startedAt": ts}}} if st["name"] == container else st
                    for st in (cur.get("status") or {}).get("containerStatuses") or []]
        ready = all(st.get("ready") for st in statuses)
        await self._status(cur, {"containerStatuses": statuses, "conditions": self._conditions(cur, ready, ts)})
        await self.event(cur, "Started", f"Started container {container}")

    async def _mark_terminated(self, ns: str, name: str, exit_codes: dict[str, int], reason: str | None = None,
                               message: str | None = None) -> None:
        cur = self.pods.get((ns, name))
        if cur is None:
            return
        ts = now_iso()
        statuses = []
        for c in cur["spec"]["containers"]:
            st = next((s for s in (cur.get("status") or {}).get("containerStatuses") or [] if s["name"] == c["name"]),
                      {"name": c["name"], "image": c["image"], "imageID": "", "restartCount": 0})
            statuses.append(_terminated(st, exit_codes.get(c["name"], 0), ts, reason, message))
            self.logs.container(ns, name, c["name"]).finish()
        phase = "Succeeded" if all(s["state"]["terminated"]["exitCode"] == 0 for s in statuses) else "Failed"
        await self._status(cur, {"phase": phase, "containerStatuses": statuses,
                                 "conditions": self._conditions(cur, False, ts)})

    # ---- test commands (status mode) --------------------------------------------------------------
    async def pod(self, ns: str, name: str, timeout: float = 30) -> dict:
        """The pod once it is bound to one of this kubelet's nodes and seen here."""
        deadline = asyncio.get_running_loop().time() + timeout
        while (ns, name) not in self.pods:
            if asyncio.get_running_loop().time() > deadline:
                raise LookupError(f"pod {ns}/{name} was not bound to the test kubelet's nodes")
            await asyncio.sleep(0.05)
        return self.pods[(ns, name)]

    async def run(self, ns: str, name: str) -> dict:
        pod = await self.pod(ns, name)
        self._started.add((ns, name))
        return await self._mark_running(pod)

    async def finish(self, ns: str, name: str, exit_code: int = 0, container: str | None = None,
                     reason: str | None = None) -> None:
        pod = await self.pod(ns, name)
        codes = {c["name"]: exit_code for c in pod["spec"]["containers"] if container in (None, c["name"])}
        await self._mark_terminated(ns, name, codes, reason)

    async def log(self, ns: str, name: str, text: str, container: str | None = None) -> None:
        pod = await self.pod(ns, name)
        self.logs.container(ns, name, container or pod["spec"]["containers"][0]["name"]).append(text)

    # ---- deletion -----------------------------------------------------------------------------------
    async def _terminate(self, pod: dict) -> None:
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        grace = pod["metadata"].get("deletionGracePeriodSeconds") or 0
        procs = self._procs.pop((ns, name), [])
        try:
            if procs:
                for proc in procs:  # at once: the event below is a request, slow under load
                    signal_group(proc, signal.SIGTERM)
                await self.event(pod, "Killing", "Stopping container")
                try:
                    await asyncio.wait_for(asyncio.gather(*(p.wait() for p in procs)), min(grace, self.max_grace))
                except asyncio.TimeoutError:
                    for proc in procs:
                        signal_group(proc, signal.SIGKILL)
                    await asyncio.gather(*(p.wait() for p in procs))
        except BaseException:  # cancelled (the kubelet shuts down) or failed: the processes go anyway
            for proc in procs:
                signal_group(proc, signal.SIGKILL)
            self._end_sandbox(ns, name)
            raise
        self._end_sandbox(ns, name)
        self.logs.drop_pod(ns, name)
        await self._final_delete(ns, name, pod["metadata"]["uid"])
        self._started.discard((ns, name))
        self._stopping.discard((ns, name))

    async def _final_delete(self, ns: str, name: str, uid: str) -> None:
        try:
            await self.rest.delete(f"/api/v1/namespaces/{ns}/pods/{name}",
                                   {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0,
                                    "preconditions": {"uid": uid}})
        except ApiError as e:
            if e.status not in (404, 409):
                raise
