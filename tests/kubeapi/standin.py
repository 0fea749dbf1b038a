"""Starting the stand-in: in a background thread of the test process, or as its own process.

`StandIn` owns one store, one HTTP server on 127.0.0.1 and optionally one emulated kubelet, all on
a private event loop in a daemon thread, so both the sync `kubernetes` client (which blocks) and
`kubernetes_asyncio` (on the test's own loop) can talk to it. Its control methods are thread-safe:
they run on the server loop and return the result.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import pathlib
import threading
from typing import Any, Callable

import yaml
from aiohttp import web

from . import quota
from .kubelet import Kubelet
from .logs import PodLogs
from .resources import load_crd_files
from .server import KubeAPI
from .store import Store


def kubeconfig(url: str, namespace: str = "default", token: str = "standin-token") -> dict:
    return {
        "apiVersion": "v1", "kind": "Config", "current-context": "standin",
        "clusters": [{"name": "standin", "cluster": {"server": url}}],
        "users": [{"name": "standin", "user": {"token": token}}],
        "contexts": [{"name": "standin", "context": {"cluster": "standin", "user": "standin",
                                                     "namespace": namespace}}],
    }


def write_kubeconfig(path: str | pathlib.Path, url: str, namespace: str = "default") -> pathlib.Path:
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(kubeconfig(url, namespace)))
    return path


async def build(history: int = 20000, bookmark_interval: float = 1.0, crds: bool = True) -> KubeAPI:
    """Store + API with the bundled CRDs registered (as created objects, so they are listable)."""
    store = Store(history=history)
    store.admission.append(quota.admit(store))
    store.listeners.append(quota.status_controller(store))
    api = KubeAPI(store, PodLogs(), bookmark_interval)
    if crds:
        crd_rt = store.rt("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        for crd in _CRD_CACHE or _load_crds():
            store.create(crd_rt, None, crd)
    return api


_CRD_CACHE: list[dict] = []


def _load_crds() -> list[dict]:
    _CRD_CACHE.extend(load_crd_files())
    return _CRD_CACHE


class StandIn:
    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, history: int = 20000,
                 bookmark_interval: float = 1.0):
        self.host, self.port = host, port
        self._history, self._bookmark_interval = history, bookmark_interval
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="kubeapi-standin", daemon=True)
        self.api: KubeAPI | None = None
        self.kubelets: list[Kubelet] = []
        self._runner: web.AppRunner | None = None

    # ---- lifecycle ------------------------------------------------------------------------------
    def start(self) -> "StandIn":
        self._thread.start()
        self._run(self._astart())
        return self

    async def _astart(self) -> None:
        self.api = await build(self._history, self._bookmark_interval)
        self._runner = web.AppRunner(self.api.app(), access_log=None, handle_signals=False, shutdown_timeout=1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        self._run(self._astop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)

    async def _astop(self) -> None:
        for k in self.kubelets:
            await k.shutdown()
        self.api.cut_watches()
        await self._runner.cleanup()

    def _run(self, coro, timeout: float = 60) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def call(self, fn: Callable, *args, **kwargs) -> Any:
        """Run `fn(*args, **kwargs)` on the server loop and return its result (or raise its error)."""
        if threading.current_thread() is self._thread:
            return fn(*args, **kwargs)
        fut: concurrent.futures.Future = concurrent.futures.Future()

        def run():
            try:
                fut.set_result(fn(*args, **kwargs))
            except BaseException as e:  # handed to the caller's thread
                fut.set_exception(e)

        self.loop.call_soon_threadsafe(run)
        return fut.result(30)

    # ---- conveniences ---------------------------------------------------------------------------------
    @property
    def store(self) -> Store:
        return self.api.store

    def write_kubeconfig(self, path, namespace: str = "default") -> pathlib.Path:
        return write_kubeconfig(path, self.url, namespace)

    def kubelet(self, mode: str = "status", **kwargs) -> "KubeletHandle":
        k = self.call(Kubelet, self.store, self.api.logs, mode, **kwargs)
        self.kubelets.append(k)
        return KubeletHandle(self, k)

    def inject_fault(self, method: str | None, path: str, status: int | None = 500, count: int = 1,
                     delay: float = 0.0) -> None:
        self.call(self.api.controls.inject, method, path, status, count, delay)

    def clear_faults(self) -> None:
        self.call(self.api.controls.faults.clear)

    def requests(self, method: str | None = None, path: str | None = None) -> list:
        records = self.call(lambda: list(self.api.controls.requests))
        return [r for r in records if (method is None or r.method == method) and (path is None or path in r.path)]

    def clear_requests(self) -> None:
        self.call(self.api.controls.requests.clear)

    def cut_watches(self) -> int:
        return self.call(self.api.cut_watches)

    def compact(self) -> None:
        self.call(self.store.compact)

    def get(self, group: str, version: str, plural: str, ns: str | None, name: str) -> dict | None:
        return self.call(lambda: self.store.find(self.store.rt(group, version, plural), ns, name))

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


class KubeletHandle:
    """Thread-safe face of a Kubelet for test code."""

    def __init__(self, standin: StandIn, kubelet: Kubelet):
        self._s, self.kubelet = standin, kubelet

    def run(self, ns: str, name: str) -> dict:
        return self._s.call(self.kubelet.run, ns, name)

    def finish(self, ns: str, name: str, exit_code: int = 0, container: str | None = None) -> None:
        self._s.call(self.kubelet.finish, ns, name, exit_code, container)

    def log(self, ns: str, name: str, text: str, container: str | None = None) -> None:
        self._s.call(self.kubelet.log, ns, name, text, container)

    def add_node(self, manifest: dict) -> dict:
        return self._s.call(self.kubelet.add_node, manifest)

    def event(self, ns: str, name: str, reason: str, message: str, type: str = "Normal") -> None:
        pod = self._s.get("", "v1", "pods", ns, name)
        self._s.call(self.kubelet.event, pod, reason, message, type)
