"""Process mode of the tests' kubelet: each container of a bound pod as a local process.

`ProcessMode` is mixed into `Kubelet` (which owns the pod map, status writes and events). A pod's
containers run on a pod IP of its own (`network.py`) with the pod's env (downward API,
Secret/ConfigMap refs, `KUBERNETES_SERVICE_*` naming the API server's address); init containers
first, each to completion. `0.0.0.0` in args and env becomes the pod IP; `$(VAR)` and `$$` expand
as Kubernetes expands them; volumes are files (`podfiles.py`) whose directories replace each
mount path in args, env and workingDir (where a value starts with it, or has it after `=`, `:` or
a JSON quote). stdout/stderr become the pod log; the exit codes decide the phase. With no
`command`, ENTRYPOINT/CMD come from an image table (`images=`; `DEFAULT_IMAGES` maps Katib's goptuna
suggestion and file-metrics-collector images to the binaries `make controllers` builds, and its
Python services' images to their virtual environments). A pod whose
Secret/ConfigMap is missing waits in CreateContainerConfigError and is retried every
`CONFIG_RETRY_SECONDS`.

Pods with `shareProcessNamespace: true` (Katib's trial pods: its metrics collector looks for the
trial's process as a process whose parent is outside the pod, ppid 0, FINDINGS P9) get a pod
sandbox: a PID and mount namespace whose PID 1 is a pause process (`unshare --pid --mount --fork
--mount-proc sleep infinity`; ready once its own /proc is mounted, see `pod_processes.Sandbox.start`), each
container entered into it (`nsenter -t PAUSE -p -m`) and run in
its own mount namespace with its volumes bind-mounted at their real mount paths (no rewriting of
paths in args or env) and its resolv.conf. The sandbox ends with SIGKILL to its PID 1 (a PID
namespace's init ignores SIGTERM from outside, P11), which ends every process left in it. Other
pods run as before (host PID namespace, paths rewritten), which is cheaper.

A container that ends is started again in the same pod as the pod's `restartPolicy` asks (Always;
OnFailure after a failure), after the kubelet's CrashLoopBackOff (`RESTART_BACKOFF_SECONDS`), with
its `restartCount` and `lastState`; a pod that has ended gives its address back at once.

Each pod has its own copy of the fixed scratch directories programs share by name under /tmp
(`POD_SCRATCH`), as a container has its own /tmp.

Each container runs as the user its securityContext (or its image, the table's ``user``) names, never
as root unless that is what it says (`kubelet_identity`: setpriv; runAsNonRoot with root refused).

Every container's process is registered under its pod as soon as it runs (init containers too), and
a pod found deleted while it was being started has its processes killed and its start abandoned
(`_track`); `Kubelet.shutdown` also kills processes no pod holds any more (`_live`). Both paths once
left processes behind (a Katib suggestion's goptuna among them; test_katib_pod_processes.py).
"""

from __future__ import annotations

import asyncio
import fnmatch
import os
import pathlib
import re
import shlex
import shutil
import signal
import sys

from tests.cluster import kubelet_identity
from tests.cluster.kubelet_identity import NonRootRefused
from tests.cluster.network import private_mounts
from tests.cluster.rest import ApiError
from tests.cluster.podfiles import PodFiles
from tests.cluster.pod_processes import Sandbox, pump, signal_group

# Kubernetes' expansion of command, args and env values: `$(VAR)` of a defined variable is its value,
# `$$` is a `$` (so `$$(VAR)` stays `$(VAR)`), anything else is kept
_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
CONTROLLERS_BIN = pathlib.Path(__file__).resolve().parent.parent / "controllers" / "bin"
DEFAULT_IMAGES = {
    # the Jupyter images run as jovyan (uid 1000, group users 100), as their Dockerfiles' USER says
    "*singleuser*": {"entrypoint": [], "cmd": ["jupyterhub-singleuser"], "user": 1000, "group": 100},
    "*jupyter/*-notebook*": {"entrypoint": [], "cmd": ["jupyterhub-singleuser"], "user": 1000, "group": 100},
    # Katib's Go images (built by `make controllers`). The goptuna service binds its pod IP (P5: Katib's
    # own binary binds 0.0.0.0:6789, one per host); "0.0.0.0" in args becomes the pod IP.
    "ghcr.io/kubeflow/katib/suggestion-goptuna:*": {
        "entrypoint": [str(CONTROLLERS_BIN / "goptuna-suggestion-listen")], "cmd": ["-listen", "0.0.0.0:6789"]},
    "ghcr.io/kubeflow/katib/file-metrics-collector:*": {
        "entrypoint": [str(CONTROLLERS_BIN / "file-metricscollector")], "cmd": []},
    # Katib's Python services (`make controllers`: tests/controllers/build_python.sh), each its own
    # main.py in its own virtual environment, on the pod IP (katib/serve_python.py)
    **{f"ghcr.io/kubeflow/katib/{image}:*": {
        "entrypoint": [str(CONTROLLERS_BIN / "katib-python" / venv / "bin" / "python"),
                       str(CONTROLLERS_BIN.parent / "katib" / "serve_python.py"), service_dir], "cmd": ["0.0.0.0"],
        "volumes_at_paths": venv == "medianstop"}
       for image, venv, service_dir in (
           ("suggestion-skopt", "skopt", "suggestion/skopt/v1beta1"),
           ("suggestion-hyperopt", "hyperopt", "suggestion/hyperopt/v1beta1"),
           ("suggestion-optuna", "optuna", "suggestion/optuna/v1beta1"),
           ("suggestion-hyperband", "hyperband", "suggestion/hyperband/v1beta1"),
           ("earlystopping-medianstop", "medianstop", "earlystopping/medianstop/v1beta1"))},
}
CONFIG_RETRY_SECONDS = 1.0  # a pod whose Secret/ConfigMap is missing is retried this often
IMAGE_BACKOFF_SECONDS = (10.0, 300.0)  # the kubelet's image pull back-off: the first, doubling up to the second
RESTART_BACKOFF_SECONDS = (10.0, 300.0)  # the kubelet's CrashLoopBackOff: the first, doubling up to the second


def restarts(policy: str | None, code: int) -> bool:
    """Whether a container that exited with `code` is started again in its pod (restartPolicy)."""
    return (policy or "Always") == "Always" or (policy == "OnFailure" and code != 0)


class ImageUnavailable(Exception):
    """A container with no `command` whose image the table has no program for: as an image that
    cannot be pulled (the pod waits in ErrImagePull / ImagePullBackOff and is retried with back-off)."""


def _keep_path_in_login_shells(home: pathlib.Path, path: str) -> None:
    """A container's PATH survives a login shell, as an image's ENV PATH does in a real container:
    JupyterLab's terminals run ``sh -l``, and this host's /etc/profile resets PATH for root (so
    ``kubectl ai-platform``, in the venv, was not found in a notebook's terminal). ``$HOME/.profile``,
    read after /etc/profile, puts the container's PATH back."""
    profile = home / ".profile"
    line = f"export PATH={shlex.quote(path)}\n"
    if not profile.exists() or profile.read_text() != line:
        profile.write_text(line)
    owner = home.stat()  # the home's user's, readable whatever the kubelet's umask (demo-kube's is 077)
    os.chown(profile, owner.st_uid, owner.st_gid)
    os.chmod(profile, 0o644)


_NO_IMAGE = {"entrypoint": [], "cmd": []}

# Fixed directories under /tmp that programs share by name (cloudml-hypertune's metrics file is
# /tmp/hypertune/output.metrics): in a container they are its own /tmp's. Pods here share the host's
# /tmp, so each pod gets its own of these (bind-mounted in the container's mount namespace): one
# pod's file is not another's, and a directory a root pod made does not refuse a pod of another user.
POD_SCRATCH = ("/tmp/hypertune",)


def _pod_scratch(pod_root: pathlib.Path, who: kubelet_identity.Identity) -> dict[str, pathlib.Path]:
    """`POD_SCRATCH`'s directories of the pod (under its own directory), owned by `who`."""
    binds = {}
    for target in POD_SCRATCH:
        source = pod_root / "scratch" / target.strip("/").replace("/", "-")
        source.mkdir(parents=True, exist_ok=True)
        os.chown(source.parent, who.uid, who.gid)
        os.chown(source, who.uid, who.gid)
        binds[target] = source
    return binds


class ProcessMode:
    async def _run_process(self, pod: dict) -> None:
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        ip = self._ips.setdefault((ns, name), self._pod_ip())
        files = PodFiles(self.rest, self.workdir, pod, api_url=self.api_url, ca=self.ca)
        self._files[(ns, name)] = files
        waiting = {((st.get("state") or {}).get("waiting") or {}).get("reason")
                   for st in (pod.get("status") or {}).get("containerStatuses") or []}
        if not waiting & {"CreateContainerConfigError", "ErrImagePull", "ImagePullBackOff"}:
            pod = await self._mark_creating(pod)  # (a retry keeps the error until it is fixed)
        uid = pod["metadata"]["uid"]
        await self.network.admit(pod, ip)  # its cgroup, and the NetworkPolicies on it, before any process
        procs = []
        try:
            every = [*(pod["spec"].get("initContainers") or []), *pod["spec"]["containers"]]
            for c in every:
                if not c.get("command") and self._image(c) is _NO_IMAGE:
                    raise ImageUnavailable(c["image"])
            who = {c["name"]: self._identity(pod, c) for c in every}  # runAsNonRoot refused before anything
            mounts_by_container = await files.materialise(ip)
            fs_group = (pod["spec"].get("securityContext") or {}).get("fsGroup")
            for c in every:
                kubelet_identity.give_access(who[c["name"]], files.root, files.claim_dirs, fs_group)
            sandbox = None
            if pod["spec"].get("shareProcessNamespace") and os.geteuid() == 0 and shutil.which("nsenter"):
                sandbox = self._sandboxes.get((ns, name)) or await Sandbox.start()
                self._sandboxes[(ns, name)] = sandbox
                if self._gone(ns, name, uid):
                    self._end_sandbox(ns, name)
                    return
            for c in pod["spec"].get("initContainers") or []:
                proc = await self._start(pod, c, ip, files, mounts_by_container[c["name"]], sandbox)
                if proc is not None and not self._track(ns, name, uid, proc):
                    return
                code = await proc.wait() if proc else 127
                if proc is not None and proc in self._procs.get((ns, name), []):
                    self._procs[(ns, name)].remove(proc)
                if self._gone(ns, name, uid):
                    return
                if code != 0:
                    self._end_sandbox(ns, name)
                    await self._mark_terminated(ns, name, {x["name"]: 1 for x in pod["spec"]["containers"]},
                                                "Init:Error")
                    self._free_address(ns, name, uid)
                    return
            for c in pod["spec"]["containers"]:
                proc = await self._start(pod, c, ip, files, mounts_by_container[c["name"]], sandbox)
                if proc is None:
                    for _, p in procs:
                        signal_group(p, signal.SIGKILL)
                    self._procs.pop((ns, name), None)
                    self._end_sandbox(ns, name)
                    await self._mark_terminated(ns, name, {x["name"]: 127 for x in pod["spec"]["containers"]},
                                                "StartError")
                    self._free_address(ns, name, uid)
                    return
                if not self._track(ns, name, uid, proc):
                    return
                procs.append((c["name"], proc))
        except ImageUnavailable as e:
            await self._image_backoff(pod, str(e), waiting)
            return
        except ApiError as e:  # the pod went while its files were made (its token asked for a pod now gone)
            if e.status != 404 or f'pods "{name}" not found' not in str(e):
                raise
            for _, p in procs:
                signal_group(p, signal.SIGKILL)
            return
        except LookupError as e:  # a Secret or ConfigMap the pod refers to is missing; runAsNonRoot as root
            for _, p in procs:
                signal_group(p, signal.SIGKILL)
            self._procs.pop((ns, name), None)
            await self._status(pod, {"containerStatuses": [
                {**st, "state": {"waiting": {"reason": "CreateContainerConfigError", "message": str(e)}}}
                for st in (pod.get("status") or {}).get("containerStatuses") or []]})
            await self.event(pod, "Failed", f"Error: {e}", type="Warning")
            after = RESTART_BACKOFF_SECONDS[0] if isinstance(e, NonRootRefused) else CONFIG_RETRY_SECONDS
            self._spawn(self._retry(ns, name, pod["metadata"]["uid"], after))
            return
        await self._mark_running(pod, ip)
        codes = {}
        containers = {c["name"]: c for c in pod["spec"]["containers"]}
        waits = {asyncio.ensure_future(self._container_life(pod, containers[cname], proc, ip, files,
                                                            mounts_by_container[cname], sandbox)): cname
                 for cname, proc in procs}
        try:
            while waits:  # each container's end written as it ends (the pod not Ready), as a kubelet does
                done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                for w in done:
                    codes[waits.pop(w)] = w.result()
                if waits and (ns, name) not in self._stopping:
                    await self._mark_containers_ended(ns, name, codes)
        finally:  # the kubelet shutting down (this task cancelled): the containers' lives end with it
            for w in waits:
                w.cancel()
        if (ns, name) in self._stopping:
            return
        self._procs.pop((ns, name), None)
        self._end_sandbox(ns, name)
        await self._mark_terminated(ns, name, codes)
        self._free_address(ns, name, uid)  # a pod that has ended holds no address (its status keeps it)

    async def _container_life(self, pod: dict, container: dict, proc, ip: str, files: PodFiles,
                              mounts: dict[str, str], sandbox: "Sandbox | None") -> int:
        """A container's exit code once it has ended for good: as long as the pod's restartPolicy asks
        (Always; OnFailure after a failure) it is started again in the same pod, after the kubelet's
        CrashLoopBackOff (10 s, doubling up to 5 min), its restartCount and lastState written. So a
        crashing Deployment's pod stays one pod, as on a real node."""
        ns, name, uid = pod["metadata"]["namespace"], pod["metadata"]["name"], pod["metadata"]["uid"]
        count = 0
        while True:
            code = await proc.wait()
            if not restarts(pod["spec"].get("restartPolicy"), code) or self._gone(ns, name, uid):
                return code
            count += 1
            first, most = RESTART_BACKOFF_SECONDS
            delay = min(first * 2 ** (count - 1), most)
            await self._mark_backoff(ns, name, container["name"], code, count, delay)
            await asyncio.sleep(delay)
            if self._gone(ns, name, uid):
                return code
            new = await self._start(pod, container, ip, files, mounts, sandbox)
            if new is None:
                return 127
            live = self._procs.get((ns, name), [])
            if proc in live:
                live.remove(proc)
            if not self._track(ns, name, uid, new):
                return code
            proc = new
            await self._mark_restarted(ns, name, container["name"])

    def _free_address(self, ns: str, name: str, uid: str) -> None:
        if (ns, name) in self._ips:
            self.network.release(self._ips.pop((ns, name)))
        self.network.forget(uid)

    def _gone(self, ns: str, name: str, uid: str) -> bool:
        """Whether the pod is being deleted or gone (or replaced by a new pod of its name)."""
        pod = self.pods.get((ns, name))
        return ((ns, name) in self._stopping or pod is None or pod["metadata"]["uid"] != uid
                or bool(pod["metadata"].get("deletionTimestamp")))

    def _track(self, ns: str, name: str, uid: str, proc) -> bool:
        """Register a container's process under its pod as soon as it runs, so that a deletion
        meanwhile (`_terminate` takes the pod's processes) stops it too. A pod deleted while it was
        being started (its `_terminate` may have run already, with fewer processes): every process
        of it killed, its sandbox ended, and False."""
        self._procs.setdefault((ns, name), []).append(proc)
        if not self._gone(ns, name, uid):
            return True
        for p in self._procs.pop((ns, name), []):
            signal_group(p, signal.SIGKILL)
        signal_group(proc, signal.SIGKILL)
        self._end_sandbox(ns, name)
        return False

    async def _image_backoff(self, pod: dict, image: str, waiting: set) -> None:
        """ErrImagePull at the first try, then ImagePullBackOff, retried after the kubelet's back-off."""
        tries = self._pull_tries.get(pod["metadata"]["uid"], 0) + 1
        self._pull_tries[pod["metadata"]["uid"]] = tries
        reason = "ImagePullBackOff" if waiting & {"ErrImagePull", "ImagePullBackOff"} else "ErrImagePull"
        message = (f'Back-off pulling image "{image}"' if reason == "ImagePullBackOff" else
                   f'test kubelet: no program for image "{image}" on this machine (give the container a '
                   "command, or map the image: tests/cluster/kubelet_process.py DEFAULT_IMAGES)")
        await self._status(pod, {"phase": "Pending", "containerStatuses": [
            {"name": c["name"], "ready": False, "restartCount": 0, "image": c["image"], "imageID": "", "started": False,
             "state": {"waiting": {"reason": reason, "message": message}}} for c in pod["spec"]["containers"]]})
        await self.event(pod, "Failed" if reason == "ErrImagePull" else "BackOff",
                         f'Failed to pull image "{image}": {message}' if reason == "ErrImagePull" else message,
                         type="Warning")
        first, most = IMAGE_BACKOFF_SECONDS
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        self._spawn(self._retry(ns, name, pod["metadata"]["uid"], min(first * 2 ** (tries - 1), most)))

    async def _retry(self, ns: str, name: str, uid: str, after: float = CONFIG_RETRY_SECONDS) -> None:
        """Start the pod again after a pause, as the kubelet retries a CreateContainerConfigError or an
        image pull (with the latest state of the pod; not at each of its changes: those are our own writes)."""
        await asyncio.sleep(after)
        pod = self.pods.get((ns, name))
        if pod is None or pod["metadata"]["uid"] != uid or pod["metadata"].get("deletionTimestamp"):
            return  # gone, or replaced by a new pod of the same name (started on its own)
        self._started.discard((ns, name))
        self._on_pod("MODIFIED", pod)

    def _end_sandbox(self, ns: str, name: str) -> None:
        sandbox = self._sandboxes.pop((ns, name), None)
        if sandbox is not None:
            sandbox.kill()

    async def _start(self, pod: dict, container: dict, ip: str, files: PodFiles, mounts: dict[str, str],
                     sandbox: "Sandbox | None" = None):
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        clog = self.logs.container(ns, name, container["name"])
        env = await files.env_for(container, ip)
        host, _, port = self.api_url.removeprefix("https://").partition(":")
        service_env = {"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port,
                       "KUBERNETES_SERVICE_PORT_HTTPS": port, "KUBERNETES_PORT": f"tcp://{host}:{port}",
                       "KUBERNETES_PORT_443_TCP": f"tcp://{host}:{port}", "KUBERNETES_PORT_443_TCP_PROTO": "tcp",
                       "KUBERNETES_PORT_443_TCP_ADDR": host, "KUBERNETES_PORT_443_TCP_PORT": port}
        base = {"PATH": f"{pathlib.Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}",
                "HOME": str(files.home), "LANG": "C.UTF-8", "HOSTNAME": name, **service_env, **self.extra_env}
        full_env = {**base, **env}

        # volumes at their mount paths: in a pod sandbox, and for an image whose program reads fixed
        # paths (Katib's medianstop: its ServiceAccount's files, as the Kubernetes client reads them)
        at_paths = sandbox is not None or self._image(container).get("volumes_at_paths", False)

        def subst(text: str) -> str:
            text = _VAR.sub(lambda m: "$" if m.group(0) == "$$" else full_env.get(m.group(1), m.group(0)), text)
            text = text.replace("0.0.0.0", ip)
            if at_paths:  # volumes are mounted at their paths
                return text
            for mount_path in sorted(mounts, key=len, reverse=True):
                if text.startswith(mount_path) or any(f"{sep}{mount_path}" in text for sep in "=:\""):
                    text = text.replace(mount_path, mounts[mount_path])
            return text

        full_env = {k: subst(v) for k, v in full_env.items()}
        _keep_path_in_login_shells(files.home, full_env["PATH"])
        argv = [subst(a) for a in self._argv(container)]
        cwd = subst(container["workingDir"]) if container.get("workingDir") else str(files.home)
        pathlib.Path(cwd).mkdir(parents=True, exist_ok=True)
        exe = shutil.which(argv[0], path=full_env["PATH"]) if argv else None
        if not exe:
            clog.append(f"test kubelet: executable not found: {argv[:1]}")
            await self.event(pod, "Failed", f"Error: executable not found in $PATH: {argv[:1]}", type="Warning")
            return None
        who = self._identity(pod, container)
        if not who.root:  # what a runtime gives a container's user: its program, its working directory
            kubelet_identity.traversable(pathlib.Path(exe))
            if pathlib.Path(cwd).is_relative_to(files.root):
                os.chown(cwd, who.uid, -1)
        argv = who.wrap([exe, *argv[1:]])
        resolv = self._resolv_conf(pod)
        scratch = _pod_scratch(files.root, who)
        if at_paths:
            binds = {**mounts, **scratch}
            if resolv is not None:
                binds["/etc/resolv.conf"] = resolv
            if resolv is not None and self.network.service_hosts is not None:  # Services' names (a debt)
                binds["/etc/hosts"] = self.network.service_hosts
            argv = private_mounts(binds, argv)
        if sandbox is not None:  # into the pod's PID namespace
            argv = ["nsenter", "-t", str(sandbox.init_pid), "-p", "-m", "--", *argv]
        elif not at_paths and os.geteuid() == 0 and shutil.which("unshare"):
            # the pod's own /etc/resolv.conf (as the kubelet writes for ClusterFirst) and scratch directories
            argv = private_mounts({**scratch, **({"/etc/resolv.conf": resolv} if resolv is not None else {})}, argv)
        argv = self.network.enter(pod["metadata"]["uid"], argv)  # the pod's cgroup: its traffic is known
        proc = await asyncio.create_subprocess_exec(*argv, env=full_env, cwd=cwd,
                                                    stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.STDOUT, start_new_session=True)
        self._live.add(proc)
        self._spawn(pump(proc, clog))
        self._spawn(self._reap(proc))
        return proc

    async def _reap(self, proc) -> None:
        await proc.wait()
        self._live.discard(proc)

    def _resolv_conf(self, pod: dict):
        """The cluster DNS's resolv.conf for a pod whose dnsPolicy uses it (ClusterFirst, the default;
        ClusterFirstWithHostNet), else None (the host's resolver)."""
        spec = pod["spec"]
        policy = spec.get("dnsPolicy") or "ClusterFirst"
        if policy == "ClusterFirstWithHostNet" or (policy == "ClusterFirst" and not spec.get("hostNetwork")):
            return self.network.resolv_conf(pod["metadata"]["namespace"])
        return None

    def _identity(self, pod: dict, container: dict) -> kubelet_identity.Identity:
        """The user, group and groups the container runs as (`kubelet_identity`)."""
        image = self._image(container)
        return kubelet_identity.identity(pod, container, int(image.get("user", 0)), int(image.get("group", 0)))

    def _image(self, container: dict) -> dict:
        """What the image table says of the container's image (`_NO_IMAGE` if nothing)."""
        return next((meta for pattern, meta in self.images.items()
                     if fnmatch.fnmatch(container.get("image", ""), pattern)), _NO_IMAGE)

    def _argv(self, container: dict) -> list[str]:
        """Kubernetes' rule: `command` replaces ENTRYPOINT (and drops CMD); `args` replaces CMD."""
        image = self._image(container)
        if container.get("command"):
            return list(container["command"]) + list(container.get("args") or [])
        return list(image["entrypoint"]) + list(container.get("args") or image["cmd"])
