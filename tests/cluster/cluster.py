"""One test cluster: the real control plane, the fault proxy in front of it, a PV provisioner and
kubelets on demand — the object the tests' `cluster` fixtures hand out.

`Cluster(workdir).start()` starts the control plane (`controlplane.py`), installs the CRDs a
cluster of the platform has (Kubeflow PyTorchJob/TFJob, Katib Experiment/Trial/Suggestion, as
published), a default StorageClass whose claims the provisioner (`provisioner.py`) fills with
hostPath PersistentVolumes (directories), and the fault proxy (`proxy.py`). Clients get
kubeconfigs through the proxy by default (`write_kubeconfig`), so faults, cut watches, forced 410s
and the request log apply to them; `direct=True` bypasses it. Where nftables and cgroup v2 are at
hand the pods' NetworkPolicies are enforced (`netpol.py`). Test controls are thread-safe.
`kubelet()` starts an emulated kubelet (`kubelet.py`) on the cluster's loop; `reset()` stops every
kubelet and clears faults and the request log between tests.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import pathlib
import threading
from typing import Any

import yaml

from tests.cluster.controlplane import ControlPlane, free_port
from tests.cluster.kubelet import Kubelet
from tests.cluster.kubelet_server import serve
from tests.cluster.netpol import PolicyEnforcer
from tests.cluster.network import PodNetwork
from tests.cluster.provisioner import STORAGE_CLASS, Provisioner
from tests.cluster.proxy import FaultProxy
from tests.cluster.rest import ApiError, Rest

HERE = pathlib.Path(__file__).resolve().parent
CRD_DIR = HERE / "crds"


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
        self.network = PodNetwork(self.dir / "network")

    # ---- lifecycle ------------------------------------------------------------------------------
    def start(self) -> "Cluster":
        self.cp.start(before_controllers=self._install_crds)
        try:
            pki = self.cp.pki
            self.proxy = FaultProxy(self.cp.url, pki.ca,
                                    pki.issue("proxy-serving", "mlplatform-fault-proxy", server=True,
                                              hosts=("127.0.0.1", "localhost")),
                                    pki.issue("proxy-client", "mlplatform-fault-proxy", ("system:masters",),
                                              client=True)).start()
            self._thread.start()
            self.cp.write_kubeconfig(self.dir / "tooling.kubeconfig", user="mlplatform-test-tooling")
            # the cluster DNS reads Services and EndpointSlices straight from the API server (not through
            # the fault proxy: test faults and the request log are the platform's)
            self.network.start(self.cp.write_kubeconfig(self.dir / "dns.kubeconfig", user="mlplatform-test-dns"))
            self.run(self._astart())
        except BaseException:
            self.stop()
            raise
        return self

    def _install_crds(self) -> None:
        """The CRDs, established, before the controller-manager starts: its resource quota controller
        finds the resources to count at its first discovery. Installed after it, they are found at its
        next (every 30 s), and until then a new project's quota refuses every PyTorchJob/TFJob/
        Experiment with 403 "status unknown for quota" (seen in the hub tier under xdist)."""
        async def install() -> None:
            rest = Rest(self.cp.admin_kubeconfig)
            try:
                for crd in load_crds():
                    await rest.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
                for crd in load_crds():
                    await self._wait_established(crd["metadata"]["name"], rest)
            finally:
                await rest.close()

        # its own loop, in a thread of its own when the caller runs one (the benchmarks start the
        # cluster from their async main)
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            pool.submit(asyncio.run, install()).result()

    async def _astart(self) -> None:
        self.rest = Rest(self.dir / "tooling.kubeconfig")
        await self.rest.post("/apis/storage.k8s.io/v1/storageclasses", STORAGE_CLASS)
        self._provisioner = Provisioner(self.rest, self.dir / "volumes")
        self._provisioner.start()
        if self.network.cgroups is not None:  # NetworkPolicies enforced (straight to the API server, as DNS)
            rest = Rest(self.cp.write_kubeconfig(self.dir / "netpol.kubeconfig", user="mlplatform-test-netpol"))
            self.network.policies = await PolicyEnforcer(rest, self.network.cgroups, self.network.block).start()

    async def _wait_established(self, name: str, rest: Rest | None = None) -> None:
        for _ in range(300):
            crd = await (rest or self.rest).get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
            if any(c["type"] == "Established" and c["status"] == "True"
                   for c in (crd.get("status") or {}).get("conditions") or []):
                return
            await asyncio.sleep(0.1)
        raise TimeoutError(f"CRD {name} not established")

    def stop(self) -> None:
        try:
            if self._thread.is_alive():
                try:
                    self.reset()
                    if self._provisioner:
                        self.run(self._provisioner.stop())
                    if self.network.policies is not None:
                        self.run(self.network.policies.stop())
                        self.run(self.network.policies.rest.close())
                        self.network.policies = None
                    if self.rest:
                        self.run(self.rest.close())
                finally:
                    self.loop.call_soon_threadsafe(self.loop.stop)
                    self._thread.join(10)
            if self.proxy:
                self.proxy.stop()
        finally:  # the pod network's address on lo and the DNS server go even when the rest failed
            self.network.stop()
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
            k = Kubelet(rest, mode, api_url=cluster.url, ca=cluster.ca, port=port, workdir=self.workdir,
                        network=cluster.network, **kwargs)
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
