"""One test cluster: the real control plane, the fault proxy in front of it, a PV provisioner and
kubelets on demand — the object the tests' `cluster` fixtures hand out.

`Cluster(workdir).start()` starts the control plane (`controlplane.py`), installs the CRDs a
cluster of the platform has (Kubeflow PyTorchJob/TFJob, Katib Experiment/Trial/Suggestion, as
published), a default StorageClass whose claims the provisioner (`provisioner.py`) fills with
hostPath PersistentVolumes (directories), and the fault proxy (`proxy.py`). Clients get
kubeconfigs through the proxy by default (`write_kubeconfig`), so faults, cut watches, forced 410s
and the request log apply to them; `direct=True` bypasses it. Test controls are thread-safe.
`kubelet()` starts an emulated kubelet (`kubelet.py`) on the cluster's loop; `reset()` stops every
kubelet and clears faults and the request log between tests. `delete_namespaces()` deletes
namespaces and returns once they are gone, doing the namespace controller's work without its
5-second start delay.
"""

from __future__ import annotations

import asyncio
import pathlib
import threading
from typing import Any

import yaml

from .controlplane import ControlPlane, free_port
from .kubelet import Kubelet
from .kubelet_server import serve
from .provisioner import STORAGE_CLASS, Provisioner
from .proxy import FaultProxy
from .rest import ApiError, Rest

HERE = pathlib.Path(__file__).resolve().parent
CRD_DIR = HERE / "crds"
NAMESPACE_CONTROLLER = "system:serviceaccount:kube-system:namespace-controller"


def load_crds(directory: pathlib.Path = CRD_DIR) -> list[dict]:
    docs = []
    for path in sorted(directory.glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d and d.get("kind") == "CustomResourceDefinition"]
    return docs


def api_path(group: str, version: str, plural: str, ns: str | None = None, name: str | None = None) -> str:
    base = f"/api/{version}" if not group else f"/apis/{group}/{version}"
    path = f"{base}/namespaces/{ns}/{plural}" if ns else f"{base}/{plural}"
    return f"{path}/{name}" if name else path


class Cluster:
    def __init__(self, workdir: str | pathlib.Path):
        self.dir = pathlib.Path(workdir)
        self.cp = ControlPlane(self.dir / "controlplane")
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="test-cluster", daemon=True)
        self.proxy: FaultProxy | None = None
        self.rest: Rest | None = None
        self.kubelets: list[KubeletHandle] = []
        self._provisioner: Provisioner | None = None

    # ---- lifecycle ------------------------------------------------------------------------------
    def start(self) -> "Cluster":
        self.cp.start()
        try:
            pki = self.cp.pki
            self.proxy = FaultProxy(self.cp.url, pki.ca,
                                    pki.issue("proxy-serving", "mlplatform-fault-proxy", server=True,
                                              hosts=("127.0.0.1", "localhost")),
                                    pki.issue("proxy-client", "mlplatform-fault-proxy", ("system:masters",),
                                              client=True)).start()
            self._thread.start()
            self.cp.write_kubeconfig(self.dir / "tooling.kubeconfig", user="mlplatform-test-tooling")
            self.run(self._astart())
        except BaseException:
            self.stop()
            raise
        return self

    async def _astart(self) -> None:
        self.rest = Rest(self.dir / "tooling.kubeconfig")
        for crd in load_crds():
            await self.rest.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
        await self.rest.post("/apis/storage.k8s.io/v1/storageclasses", STORAGE_CLASS)
        self._provisioner = Provisioner(self.rest, self.dir / "volumes")
        self._provisioner.start()
        # established CRDs and a default ServiceAccount before the first test
        for crd in load_crds():
            await self._wait_established(crd["metadata"]["name"])

    async def _wait_established(self, name: str) -> None:
        for _ in range(300):
            crd = await self.rest.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
            if any(c["type"] == "Established" and c["status"] == "True"
                   for c in (crd.get("status") or {}).get("conditions") or []):
                return
            await asyncio.sleep(0.1)
        raise TimeoutError(f"CRD {name} not established")

    def stop(self) -> None:
        if self._thread.is_alive():
            self.reset()
            if self._provisioner:
                self.run(self._provisioner.stop())
            if self.rest:
                self.run(self.rest.close())
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
        if self.proxy:
            self.proxy.stop()
        self.cp.stop()

    def reset(self) -> None:
        """Between tests: no kubelets, no faults, an empty request log."""
        for k in list(self.kubelets):
            k.stop()
        self.kubelets.clear()
        if self.proxy:
            self.proxy.clear_faults()
            self.proxy.clear_gone()
            self.proxy.clear_requests()

    def run(self, coro, timeout: float = 120) -> Any:
        """Run a coroutine on the cluster's loop from any other thread and return its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    async def arun(self, coro) -> Any:
        """The same, awaited from an async test on its own loop."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    # ---- access ---------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        """Where clients connect: the fault proxy."""
        return self.proxy.url

    @property
    def ca(self) -> pathlib.Path:
        return self.cp.pki.ca

    def write_kubeconfig(self, path, namespace: str = "default", *, user: str = "admin",
                         groups: tuple[str, ...] = ("system:masters",), token: str | None = None,
                         direct: bool = False) -> pathlib.Path:
        return self.cp.write_kubeconfig(path, user=user, groups=groups, token=token, namespace=namespace,
                                        server=self.cp.url if direct else self.proxy.url)

    # ---- reading and writing as the test tooling (not through the proxy) -------------------------
    def get(self, group: str, version: str, plural: str, ns: str | None, name: str) -> dict | None:
        async def get():
            try:
                return await self.rest.get(api_path(group, version, plural, ns, name))
            except ApiError as e:
                if e.status == 404:
                    return None
                raise
        return self.run(get())

    def items(self, group: str, version: str, plural: str, ns: str | None = None, **params) -> list[dict]:
        return self.run(self.rest.get(api_path(group, version, plural, ns), **params))["items"]

    def create(self, group: str, version: str, plural: str, ns: str | None, body: dict) -> dict:
        return self.run(self.rest.post(api_path(group, version, plural, ns), body))

    def patch(self, group: str, version: str, plural: str, ns: str | None, name: str, body: dict,
              subresource: str = "") -> dict:
        path = api_path(group, version, plural, ns, name) + (f"/{subresource}" if subresource else "")
        return self.run(self.rest.patch(path, body))

    def delete(self, group: str, version: str, plural: str, ns: str | None, name: str) -> None:
        async def delete():
            try:
                await self.rest.delete(api_path(group, version, plural, ns, name))
            except ApiError as e:
                if e.status != 404:
                    raise
        self.run(delete())

    # ---- namespaces -----------------------------------------------------------------------------
    def delete_namespaces(self, names, timeout: float = 90) -> None:
        """Delete the namespaces `names` and return once they are gone; TimeoutError naming what
        is left in them after `timeout` seconds.

        The namespace controller starts on a deleted namespace only 5 seconds after it sees the
        deletion (a grace period for other API servers and etcd members to see it; there is one
        of each here), which made every test that deletes projects wait that long. So this does
        what the controller then does, at once and with the same rule: delete every namespaced
        resource in the namespace (DELETE of each collection, as the controller), wait until none
        is left (their finalizers honoured: a claim's pvc-protection finalizer still waits for its
        pods), and only then drop the namespace's `kubernetes` finalizer (its finalize subresource),
        which removes the namespace. Then it waits until the volumes of their claims (Delete
        reclaim policy) are gone too. Something that never goes still fails the caller, naming it.
        The controller keeps working on the same namespaces meanwhile; either may finish."""
        names = list(names)
        if names:
            self.run(self._delete_namespaces(names, timeout), timeout + 30)

    async def _delete_namespaces(self, names: list[str], timeout: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        for ns in names:
            await self._delete_ignoring_missing(f"/api/v1/namespaces/{ns}")
        # the content goes as the namespace controller's own identity (its RBAC; policies that
        # let only it delete some objects of a deleted namespace, e.g. the platform's reserved
        # ConfigMaps, let this do it too)
        kubeconfig = self.cp.write_kubeconfig(self.dir / "namespace-controller.kubeconfig", user=NAMESPACE_CONTROLLER,
                                              groups=("system:serviceaccounts", "system:serviceaccounts:kube-system"))
        rest = Rest(kubeconfig)
        try:
            await self._empty_and_finalize(rest, names, deadline)
        finally:
            await rest.close()
        # and their claims' volumes are gone (the PV controller released them, the provisioner
        # deleted them): the next test starts on a cluster that has settled, and a volume left
        # behind fails here as a namespace left behind does
        while volumes := [pv["metadata"]["name"] for pv in (await self.rest.get("/api/v1/persistentvolumes"))["items"]
                          if ((pv["spec"].get("claimRef") or {}).get("namespace") in names
                              and pv["spec"].get("persistentVolumeReclaimPolicy") == "Delete")]:
            if loop.time() > deadline:
                raise TimeoutError(f"volumes of the deleted namespaces {names} still there: {volumes}")
            await asyncio.sleep(0.1)

    async def _empty_and_finalize(self, rest: Rest, names: list[str], deadline: float) -> None:
        loop = asyncio.get_running_loop()
        plurals = await self._namespaced_collections()
        limit = asyncio.Semaphore(8)

        async def call(method: str, path: str, **params) -> dict | None:
            async with limit:
                try:
                    return await rest.request(method, path, params=params or None)
                except ApiError as e:
                    if e.status in (404, 405):
                        return None
                    raise

        async def delete_all(ns: str, base: str, plural: str, by_collection: bool) -> None:
            if by_collection:
                await call("DELETE", f"{base}/namespaces/{ns}/{plural}")
                return
            listed = await call("GET", f"{base}/namespaces/{ns}/{plural}")
            await asyncio.gather(*(call("DELETE", f"{base}/namespaces/{ns}/{plural}/{item['metadata']['name']}")
                                   for item in (listed or {}).get("items") or []))

        async def left_in(ns: str, collections: list) -> list:
            """Delete what is in these collections of `ns`; the ones still holding something."""
            await asyncio.gather(*(delete_all(ns, *c) for c in collections))
            found = await asyncio.gather(*(call("GET", f"{base}/namespaces/{ns}/{plural}", limit="1")
                                           for base, plural, _ in collections))
            return [c for c, listed in zip(collections, found) if listed and listed.get("items")]

        remaining = {ns: plurals for ns in names}
        while remaining:
            for ns, collections in zip(list(remaining), await asyncio.gather(*(left_in(ns, c)
                                                                               for ns, c in remaining.items()))):
                remaining[ns] = collections
                if not collections and await self._finalize_namespace(rest, ns):
                    del remaining[ns]
            if not remaining:
                return
            if loop.time() > deadline:
                raise TimeoutError("namespaces still terminating: " + "; ".join(
                    f"{ns} (still holding {', '.join(p for _, p, _ in c) or 'its finalizers'})"
                    for ns, c in remaining.items()))
            await asyncio.sleep(0.1)

    async def _delete_ignoring_missing(self, path: str) -> None:
        try:
            await self.rest.delete(path)
        except ApiError as e:
            if e.status != 404:
                raise

    async def _finalize_namespace(self, rest: Rest, ns: str) -> bool:
        """Drop the `kubernetes` finalizer of an emptied, deleted namespace; True once it is gone."""
        try:
            obj = await rest.get(f"/api/v1/namespaces/{ns}")
        except ApiError as e:
            if e.status == 404:
                return True
            raise
        if not obj["metadata"].get("deletionTimestamp"):
            raise AssertionError(f"namespace {ns} was made again while it was being deleted")
        finalizers = (obj.get("spec") or {}).get("finalizers") or []
        if "kubernetes" in finalizers:
            obj["spec"]["finalizers"] = [f for f in finalizers if f != "kubernetes"]
            try:
                await rest.put(f"/api/v1/namespaces/{ns}/finalize", obj)
            except ApiError as e:
                if e.status not in (404, 409):
                    raise
        try:
            await rest.get(f"/api/v1/namespaces/{ns}")
        except ApiError as e:
            if e.status == 404:
                return True
            raise
        return False  # other finalizers of its own (metadata.finalizers) are still there

    async def _namespaced_collections(self) -> list[tuple[str, str, bool]]:
        """(API path, plural, deletable by collection) of every namespaced resource that can be
        listed and deleted, each in its group's preferred version among those that serve it (as
        the namespace controller finds them: a group's versions may serve different resources,
        e.g. kubeflow.org's v1 PyTorchJobs and v1beta1 Experiments)."""
        lists = [("", "/api/v1", await self.rest.get("/api/v1"))]
        paths = []
        for g in (await self.rest.get("/apis"))["groups"]:
            preferred = g["preferredVersion"]["groupVersion"]
            paths += [(g["name"], f"/apis/{v}") for v in [preferred] + [v["groupVersion"] for v in g["versions"]
                                                                       if v["groupVersion"] != preferred]]
        lists += [(group, path, listed) for (group, path), listed
                  in zip(paths, await asyncio.gather(*(self.rest.get(path) for _, path in paths)))]
        found: dict[tuple[str, str], tuple[str, str, bool]] = {}
        for group, path, listed in lists:
            for r in listed["resources"]:
                if (r["namespaced"] and "/" not in r["name"] and {"list", "delete"} <= set(r["verbs"])
                        and (group, r["name"]) not in found):
                    found[(group, r["name"])] = (path, r["name"], "deletecollection" in r["verbs"])
        return list(found.values())

    # ---- the proxy's controls -------------------------------------------------------------------
    def inject_fault(self, method: str | None, path: str, status: int | None = 500, count: int = 1,
                     delay: float = 0.0) -> None:
        self.proxy.inject_fault(method, path, status, count, delay)

    def clear_faults(self) -> None:
        self.proxy.clear_faults()

    def requests(self, method: str | None = None, path: str | None = None) -> list:
        return self.proxy.requests(method, path)

    def clear_requests(self) -> None:
        self.proxy.clear_requests()

    def cut_watches(self) -> int:
        return self.proxy.cut_watches()

    def expire_watches(self) -> int:
        return self.proxy.expire_watches()

    # ---- kubelets -------------------------------------------------------------------------------
    def kubelet(self, mode: str = "status", **kwargs) -> "KubeletHandle":
        handle = KubeletHandle(self, mode, **kwargs)
        self.kubelets.append(handle)
        return handle


class KubeletHandle:
    """Thread-safe face of a `Kubelet` running on the cluster's loop, with its log server."""

    def __init__(self, cluster: Cluster, mode: str, **kwargs):
        self._c = cluster
        port = free_port()
        self.workdir = pathlib.Path(kwargs.pop("workdir", None) or cluster.dir / "kubelet" / str(port))
        pair = cluster.cp.pki.issue(f"kubelet-{port}", "mlplatform-test-kubelet", server=True, hosts=("127.0.0.1",))
        client = cluster.dir / f"kubelet-{port}.kubeconfig"
        cluster.cp.write_kubeconfig(client, user="mlplatform-test-kubelet", groups=("system:masters",))

        async def start():
            rest = Rest(client)
            k = Kubelet(rest, mode, api_url=cluster.url, ca=cluster.ca, port=port, workdir=self.workdir, **kwargs)
            runner = await serve(k.logs, lambda: k.pods, str(pair.cert), str(pair.key), port)
            await k.start()
            return k, runner, rest

        self.kubelet, self._runner, self._rest = cluster.run(start())

    def _call(self, coro) -> Any:
        if threading.current_thread() is self._c._thread:
            raise RuntimeError("KubeletHandle methods are for test code, not the cluster loop")
        return self._c.run(coro)

    def run(self, ns: str, name: str) -> dict:
        return self._call(self.kubelet.run(ns, name))

    def finish(self, ns: str, name: str, exit_code: int = 0, container: str | None = None) -> None:
        self._call(self.kubelet.finish(ns, name, exit_code, container))

    def log(self, ns: str, name: str, text: str, container: str | None = None) -> None:
        self._call(self.kubelet.log(ns, name, text, container))

    def add_node(self, manifest: dict) -> dict:
        return self._call(self.kubelet.add_node(manifest))

    def event(self, ns: str, name: str, reason: str, message: str, type: str = "Normal") -> None:
        async def event():
            pod = await self.kubelet.pod(ns, name)
            await self.kubelet.event(pod, reason, message, type)
        self._call(event())

    def wait_pod(self, ns: str, name: str, timeout: float = 30) -> dict:
        """The pod once the scheduler has bound it to one of this kubelet's nodes."""
        return self._call(self.kubelet.pod(ns, name, timeout))

    def processes(self, ns: str, name: str) -> list:
        return list(self.kubelet._procs.get((ns, name), []))

    def stop(self) -> None:
        async def stop():
            await self.kubelet.shutdown()
            await self._runner.cleanup()
            await self._rest.close()
        self._c.run(stop())
        if self in self._c.kubelets:
            self._c.kubelets.remove(self)
