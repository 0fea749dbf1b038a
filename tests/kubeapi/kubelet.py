"""An emulated scheduler + kubelet for the stand-in, a test tool clearly apart from the API server.

It registers Node objects, binds pending pods to a node that fits (see `scheduler.place`; pods that
fit nowhere stay Pending with `PodScheduled=False` and a FailedScheduling event), then runs them in
one of two modes:

* ``status``: no process. Pods go Pending → Running (podIP, Ready condition, ready container
  statuses, Scheduled/Pulled/Created/Started events) by themselves (``auto_run``) or on `run()`,
  and Succeeded/Failed on `finish()`; tests add log lines with `log()`.
* ``process``: each container's command runs as a local process bound to a pod IP of its own in
  127.0.0.0/8, with the pod's env. `0.0.0.0` in args and env becomes the pod IP (in a pod it
  means the pod's own interfaces). Secret, ConfigMap, emptyDir, PVC and projected volumes are
  files under a per-pod directory that is substituted for each mount path in args, env and
  workingDir (where a value starts with it, or has it after `=`, `:` or a JSON quote). stdout/stderr become the pod log; the exit code decides the phase; deleting the pod
  sends SIGTERM, then SIGKILL after the grace period (capped), then removes it. With no
  `command`, the image's ENTRYPOINT/CMD come from an image table (`images=`; JupyterHub
  single-user images run `jupyterhub-singleuser`), as a container runtime reads them.

Containers are not restarted (restartPolicy is not emulated): a container that exits ends the pod.
"""

from __future__ import annotations

import asyncio
import fnmatch
import os
import pathlib
import re
import shutil
import signal
import sys
import uuid

from . import scheduler
from .logs import PodLogs
from .podfs import PodFiles
from .store import Event, Store, now_iso

# Kubernetes' expansion of command, args and env values: `$(VAR)` of a defined variable is its value,
# `$$` is a `$` (so `$$(VAR)` stays `$(VAR)`), anything else is kept
_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
# What a container runtime reads from image metadata: ENTRYPOINT and CMD, by image name pattern.
DEFAULT_IMAGES = {
    "*singleuser*": {"entrypoint": [], "cmd": ["jupyterhub-singleuser"]},
    "*jupyter/*-notebook*": {"entrypoint": [], "cmd": ["jupyterhub-singleuser"]},
}
DEFAULT_NODE = {"name": "standin-node", "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110"}}


def node_manifest(name: str, allocatable: dict, labels: dict | None = None, taints: list | None = None) -> dict:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                              **(labels or {})}},
        "spec": {"taints": taints} if taints else {},
        "status": {"capacity": dict(allocatable), "allocatable": dict(allocatable),
                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
                   "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": name}],
                   "nodeInfo": {"kubeletVersion": "v1.31.0-standin", "kubeProxyVersion": "v1.31.0-standin",
                                "operatingSystem": "linux", "architecture": "amd64", "osImage": "stand-in",
                                "kernelVersion": "n/a", "containerRuntimeVersion": "standin://1",
                                "machineID": name, "systemUUID": name, "bootID": name}},
    }


class Kubelet:
    def __init__(self, store: Store, logs: PodLogs, mode: str = "status", *, auto_run: bool = True,
                 nodes: list[dict] | None = None, workdir: str | os.PathLike | None = None,
                 env: dict | None = None, max_grace: float = 5.0, images: dict | None = None):
        if mode not in ("status", "process"):
            raise ValueError(f"kubelet mode must be 'status' or 'process', not {mode!r}")
        self.store, self.logs, self.mode, self.auto_run = store, logs, mode, auto_run
        self.workdir = pathlib.Path(workdir or f"/tmp/kubeapi-standin-{os.getpid()}")
        self.extra_env = dict(env or {})
        self.max_grace = max_grace
        self.images = {**DEFAULT_IMAGES, **(images or {})}
        self.pods_rt = store.rt("", "v1", "pods")
        self.nodes_rt = store.rt("", "v1", "nodes")
        self.events_rt = store.rt("", "v1", "events")
        self._ip_counter = 0
        self._started: set[tuple[str, str]] = set()
        self._stopping: set[tuple[str, str]] = set()
        self._procs: dict[tuple[str, str], list[asyncio.subprocess.Process]] = {}
        self._tasks: set[asyncio.Task] = set()
        self._unschedulable_msg: dict[tuple[str, str], str] = {}
        self._scheduled = False
        self.node_names: set[str] = set()
        for spec in nodes or [DEFAULT_NODE]:
            manifest = spec if "metadata" in spec else node_manifest(spec["name"], spec.get("allocatable", {}),
                                                                     spec.get("labels"), spec.get("taints"))
            self.add_node(manifest)
        store.listeners.append(self._on_event)
        store.graceful_pod = lambda pod: pod["spec"].get("nodeName") in self.node_names
        self._kick()

    # ---- nodes ---------------------------------------------------------------------------------
    def add_node(self, manifest: dict) -> dict:
        status = manifest.get("status")
        obj, _ = self.store.create(self.nodes_rt, None, manifest)
        if status:
            obj, _ = self.store.replace(self.nodes_rt, None, obj["metadata"]["name"], {**obj, "status": status},
                                        subresource="status")
        self.node_names.add(obj["metadata"]["name"])
        return obj

    # ---- reconcile -------------------------------------------------------------------------------
    def _on_event(self, ev: Event) -> None:
        if ev.rt.key == self.pods_rt.key and ev.type == "DELETED":
            key = (ev.obj["metadata"]["namespace"], ev.obj["metadata"]["name"])
            for proc in self._procs.pop(key, []):  # force-deleted (grace 0) while running
                _signal_group(proc, signal.SIGKILL)
            self._started.discard(key)
            self._unschedulable_msg.pop(key, None)
            self.logs.drop_pod(*key)
        if ev.rt.key in (self.pods_rt.key, self.nodes_rt.key):
            self._kick()

    def _kick(self) -> None:
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_event_loop().call_soon(self._reconcile)

    def _reconcile(self) -> None:
        self._scheduled = False
        pods = self.store.items(self.pods_rt)
        nodes = [n for n in self.store.items(self.nodes_rt)]
        bound: dict[str, list[dict]] = {}
        for p in pods:
            if p["spec"].get("nodeName") and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                bound.setdefault(p["spec"]["nodeName"], []).append(p)
        for pod in pods:
            key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
            node = pod["spec"].get("nodeName")
            if pod["metadata"].get("deletionTimestamp"):
                if node in self.node_names and key not in self._stopping:
                    self._stopping.add(key)
                    self._spawn(self._terminate(pod))
                continue
            if not node:
                if pod["spec"].get("schedulerName", "default-scheduler") != "default-scheduler":
                    continue
                chosen, why = scheduler.place(pod, nodes, bound)
                if chosen:
                    bound.setdefault(chosen, []).append(pod)
                    self._bind(pod, chosen)
                else:
                    self._unschedulable(pod, why)
                continue
            if node in self.node_names and key not in self._started and pod["status"].get("phase") == "Pending":
                if self.mode == "process":
                    self._started.add(key)
                    self._spawn(self._run_process(pod))
                elif self.auto_run:
                    self._started.add(key)
                    self._mark_running(pod)

    def _spawn(self, coro) -> None:
        task = asyncio.get_event_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ---- status writes -------------------------------------------------------------------------
    def _status(self, pod: dict, status: dict) -> dict:
        cur = self.store.find(self.pods_rt, pod["metadata"]["namespace"], pod["metadata"]["name"])
        if cur is None:
            return pod
        obj, _ = self.store.replace(self.pods_rt, cur["metadata"]["namespace"], cur["metadata"]["name"],
                                    {**cur, "status": status}, subresource="status")
        return obj

    def event(self, pod: dict, reason: str, message: str, type: str = "Normal", component: str = "kubelet") -> None:
        meta = pod["metadata"]
        ts = now_iso()
        self.store.create(self.events_rt, meta["namespace"], {
            "metadata": {"name": f"{meta['name']}.{uuid.uuid4().hex[:16]}", "namespace": meta["namespace"]},
            "involvedObject": {"kind": "Pod", "apiVersion": "v1", "name": meta["name"],
                               "namespace": meta["namespace"], "uid": meta["uid"]},
            "reason": reason, "message": message, "type": type, "count": 1,
            "source": {"component": component}, "reportingComponent": component,
            "firstTimestamp": ts, "lastTimestamp": ts, "eventTime": None,
        })

    def _bind(self, pod: dict, node: str) -> None:
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        self._unschedulable_msg.pop((ns, name), None)
        spec = {**pod["spec"], "nodeName": node}
        obj, _ = self.store.replace(self.pods_rt, ns, name, {**pod, "spec": spec})
        ts = now_iso()
        conditions = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": ts}]
        waiting = [{"name": c["name"], "ready": False, "restartCount": 0, "image": c["image"], "imageID": "",
                    "started": False, "state": {"waiting": {"reason": "ContainerCreating"}}}
                   for c in obj["spec"]["containers"]]
        obj = self._status(obj, {**obj["status"], "conditions": conditions, "containerStatuses": waiting,
                                 "hostIP": "127.0.0.1"})
        self.event(obj, "Scheduled", f"Successfully assigned {ns}/{name} to {node}", component="default-scheduler")

    def _unschedulable(self, pod: dict, why: str) -> None:
        key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        if self._unschedulable_msg.get(key) == why:
            return
        self._unschedulable_msg[key] = why
        cond = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": why,
                 "lastTransitionTime": now_iso()}]
        obj = self._status(pod, {**pod["status"], "conditions": cond})
        self.event(obj, "FailedScheduling", why, type="Warning", component="default-scheduler")

    def _pod_ip(self) -> str:
        self._ip_counter += 1
        n = self._ip_counter
        return f"127.77.{n // 250}.{n % 250 + 1}"

    def _mark_running(self, pod: dict, ip: str | None = None) -> dict:
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        ts = now_iso()
        for c in pod["spec"]["containers"]:
            self.logs.container(ns, name, c["name"])
            self.event(pod, "Pulled", f'Container image "{c["image"]}" already present on machine')
            self.event(pod, "Created", f"Created container {c['name']}")
            self.event(pod, "Started", f"Started container {c['name']}")
        statuses = [{"name": c["name"], "ready": True, "started": True, "restartCount": 0, "image": c["image"],
                     "imageID": f"standin://{c['image']}", "containerID": f"standin://{uuid.uuid4().hex}",
                     "state": {"running": {"startedAt": ts}}} for c in pod["spec"]["containers"]]
        conditions = [{"type": t, "status": "True", "lastTransitionTime": ts}
                      for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")]
        cur = self.store.find(self.pods_rt, ns, name) or pod
        return self._status(cur, {**cur["status"], "phase": "Running", "podIP": ip or self._pod_ip(),
                                  "podIPs": None, "hostIP": "127.0.0.1", "startTime": ts,
                                  "conditions": conditions, "containerStatuses": statuses})

    def _mark_terminated(self, ns: str, name: str, exit_codes: dict[str, int], reason: str | None = None) -> None:
        cur = self.store.find(self.pods_rt, ns, name)
        if cur is None:
            return
        ts = now_iso()
        statuses = []
        for st in cur["status"].get("containerStatuses") or []:
            code = exit_codes.get(st["name"], 0)
            term = {"exitCode": code, "reason": reason or ("Completed" if code == 0 else "Error"),
                    "startedAt": (st.get("state", {}).get("running") or {}).get("startedAt", ts), "finishedAt": ts}
            statuses.append({**st, "ready": False, "started": False, "state": {"terminated": term}})
            self.logs.container(ns, name, st["name"]).finish()
        phase = "Succeeded" if all(s["state"]["terminated"]["exitCode"] == 0 for s in statuses) else "Failed"
        conditions = [{**c, "status": "False"} if c["type"] in ("Ready", "ContainersReady") else c
                      for c in cur["status"].get("conditions") or []]
        self._status(cur, {**cur["status"], "phase": phase, "containerStatuses": statuses, "conditions": conditions})

    # ---- test commands (status mode) ------------------------------------------------------------
    def run(self, ns: str, name: str) -> dict:
        pod = self.store.get(self.pods_rt, ns, name)
        self._started.add((ns, name))
        return self._mark_running(pod)

    def finish(self, ns: str, name: str, exit_code: int = 0, container: str | None = None,
               reason: str | None = None) -> None:
        pod = self.store.get(self.pods_rt, ns, name)
        codes = {c["name"]: exit_code for c in pod["spec"]["containers"] if container in (None, c["name"])}
        self._mark_terminated(ns, name, codes, reason)

    def log(self, ns: str, name: str, text: str, container: str | None = None) -> None:
        pod = self.store.get(self.pods_rt, ns, name)
        self.logs.container(ns, name, container or pod["spec"]["containers"][0]["name"]).append(text)

    # ---- deletion ---------------------------------------------------------------------------------
    async def _terminate(self, pod: dict) -> None:
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        grace = pod["metadata"].get("deletionGracePeriodSeconds") or 0
        procs = self._procs.pop((ns, name), [])
        if procs:
            self.event(pod, "Killing", "Stopping container")
            for proc in procs:
                _signal_group(proc, signal.SIGTERM)
            try:
                await asyncio.wait_for(asyncio.gather(*(p.wait() for p in procs)), min(grace, self.max_grace))
            except asyncio.TimeoutError:
                for proc in procs:
                    _signal_group(proc, signal.SIGKILL)
                await asyncio.gather(*(p.wait() for p in procs))
        else:
            await asyncio.sleep(0)
        self.logs.drop_pod(ns, name)
        self._started.discard((ns, name))
        self._stopping.discard((ns, name))
        self.store.remove_now(self.pods_rt, ns, name)

    async def shutdown(self) -> None:
        for procs in list(self._procs.values()):
            for proc in procs:
                _signal_group(proc, signal.SIGKILL)
        for procs in list(self._procs.values()):
            for proc in procs:
                await proc.wait()
        self._procs.clear()
        for task in list(self._tasks):
            task.cancel()

    # ---- process mode -------------------------------------------------------------------------------
    async def _run_process(self, pod: dict) -> None:
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        ip = self._pod_ip()
        files = PodFiles(self.store, self.workdir, pod)
        procs = []
        try:
            mounts_by_container = files.materialise()
            for c in pod["spec"].get("initContainers") or []:
                proc = await self._start(pod, c, ip, files, mounts_by_container[c["name"]])
                code = await proc.wait() if proc else 127
                if code != 0:
                    self._mark_terminated(ns, name, {x["name"]: 1 for x in pod["spec"]["containers"]}, "Init:Error")
                    return
            for c in pod["spec"]["containers"]:
                proc = await self._start(pod, c, ip, files, mounts_by_container[c["name"]])
                if proc is None:
                    for _, p in procs:
                        _signal_group(p, signal.SIGKILL)
                    self._mark_terminated(ns, name, {x["name"]: 127 for x in pod["spec"]["containers"]},
                                          "StartError")
                    return
                procs.append((c["name"], proc))
        except LookupError as e:  # a Secret or ConfigMap the pod refers to is missing
            for _, p in procs:
                _signal_group(p, signal.SIGKILL)
            self._status(pod, {**pod["status"], "containerStatuses": [
                {**st, "state": {"waiting": {"reason": "CreateContainerConfigError", "message": str(e)}}}
                for st in pod["status"].get("containerStatuses") or []]})
            self.event(pod, "Failed", f"Error: {e}", type="Warning")
            return
        self._procs[(ns, name)] = [p for _, p in procs]
        self._mark_running(pod, ip)
        codes = {}
        for cname, proc in procs:
            codes[cname] = await proc.wait()
        if (ns, name) in self._stopping:
            return
        self._procs.pop((ns, name), None)
        self._mark_terminated(ns, name, codes)

    async def _start(self, pod: dict, container: dict, ip: str, files, mounts: dict[str, str]):
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        log = self.logs.container(ns, name, container["name"])
        env = files.env_for(container, ip)
        base = {"PATH": f"{pathlib.Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}",
                "HOME": str(files.home), "LANG": "C.UTF-8", **self.extra_env}
        full_env = {**base, **env}

        def subst(text: str) -> str:
            text = _VAR.sub(lambda m: "$" if m.group(0) == "$$" else full_env.get(m.group(1), m.group(0)), text)
            text = text.replace("0.0.0.0", ip)
            for mount_path in sorted(mounts, key=len, reverse=True):
                if text.startswith(mount_path) or any(f"{sep}{mount_path}" in text for sep in "=:\""):
                    text = text.replace(mount_path, mounts[mount_path])
            return text

        full_env = {k: subst(v) for k, v in full_env.items()}
        argv = [subst(a) for a in self._argv(container)]
        cwd = subst(container["workingDir"]) if container.get("workingDir") else str(files.home)
        pathlib.Path(cwd).mkdir(parents=True, exist_ok=True)
        exe = shutil.which(argv[0], path=full_env["PATH"]) if argv else None
        if not exe:
            log.append(f"standin kubelet: executable not found: {argv[:1]}")
            self.event(pod, "Failed", f"Error: executable not found in $PATH: {argv[:1]}", type="Warning")
            return None
        proc = await asyncio.create_subprocess_exec(exe, *argv[1:], env=full_env, cwd=cwd,
                                                    stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.STDOUT, start_new_session=True)
        self._spawn(_pump(proc, log))
        return proc


    def _argv(self, container: dict) -> list[str]:
        """Kubernetes' rule: `command` replaces ENTRYPOINT (and drops CMD); `args` replaces CMD."""
        image = next((meta for pattern, meta in self.images.items()
                      if fnmatch.fnmatch(container.get("image", ""), pattern)), {"entrypoint": [], "cmd": []})
        if container.get("command"):
            return list(container["command"]) + list(container.get("args") or [])
        return list(image["entrypoint"]) + list(container.get("args") or image["cmd"])


async def _pump(proc, log) -> None:
    while True:
        line = await proc.stdout.readline()
        if not line:
            break
        log.append(line.decode(errors="replace").rstrip("\n"))


def _signal_group(proc, sig) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass

