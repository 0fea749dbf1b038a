"""Benchmark (not a test: prints figures, asserts nothing, exits 0) of what watching costs the
Kubernetes API while nothing happens: LIST requests per hour per watched kind, the job backend's
watch caches next to KubeSpawner's pod reflector, in one run.

    .venv/bin/python -m tests.bench.idle_lists [--seconds 60] [--watch-timeout 10]     (or: make bench)

The test cluster (the real control plane, `tests.cluster`) runs in its own process
(`tests.bench.jobs_env`), with two projects holding a few PyTorchJobs each. Side by side, on the
same cluster and for the same window:

- **KubeBackend**: one backend watching both projects (its three kinds each: 6 watch caches),
  with `watch_timeout` set to `--watch-timeout` so its watches end, and restart, many times in
  the window (as they would in an hour at the default 300 s).
- **KubeSpawner's PodReflector** (the baseline): started as KubeSpawner starts it
  (`KubeSpawner._start_watching_pods`, one namespace, the singleuser label), acting as the hub's
  ServiceAccount (`helm-values/hub-rbac.yaml`), with its own default watch timeout unless
  `--reflector-timeout` is given. It lists again at every watch restart.

Each watched path's requests come from the fault proxy's request log. The LISTs made before a
path's first WATCH are its initial lists; the LISTs after that are re-lists, extrapolated to an
hour: LISTs/hour = initial + re-lists x 3600 / window. The goal for the watch caches is <= 1
(the initial list only: watches resume from the last resourceVersion, bookmarks keep it fresh).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pathlib
import sys
import tempfile
import time
import types

# KubeSpawner loads the default kubeconfig, whose path kubernetes_asyncio takes from $KUBECONFIG when
# it is first imported: point it at the hub's (written once the cluster serves) before that.
KUBECONFIG = pathlib.Path(tempfile.mkdtemp(prefix="idle-lists-")) / "kubeconfig"
os.environ["KUBECONFIG"] = str(KUBECONFIG)

from server_ext.jobs.kube.kubeflow import resource_path  # noqa: E402
from server_ext.runtimes.kube.backend import KubeBackend  # noqa: E402
from server_ext.runtimes.kube.project_caches import KINDS  # noqa: E402
from tests.bench.jobs_env import SETTINGS, Server, is_watch, new_kube  # noqa: E402

PROJECTS = ("team-a", "team-b")
JOBS_PER_PROJECT = 25
POD_NAMESPACE = "default"


def per_path(records, path: str, window: float) -> dict:
    same = [r for r in records if r.method == "GET" and r.path == path]
    first_watch = next((i for i, r in enumerate(same) if is_watch(r)), len(same))
    initial = sum(1 for r in same[:first_watch] if not is_watch(r))
    lists = sum(1 for r in same if not is_watch(r))
    watches = len(same) - lists
    return {"path": path, "lists": lists, "watches": watches, "initial": initial,
            "per_hour": initial + (lists - initial) * 3600 / window}


async def start_reflector(timeout: int | None):
    from jupyterhub.objects import Hub
    from kubespawner import KubeSpawner
    from traitlets.config import Config

    config = Config()
    if timeout:
        config.PodReflector.timeout_seconds = timeout
    user = types.SimpleNamespace(name="idle@example.com", id=1, url="/user/idle/", settings={}, groups=[])
    spawner = KubeSpawner(config=config, user=user, hub=Hub(ip="127.0.0.1", port=8081, base_url="/hub/"),
                          namespace=POD_NAMESPACE, api_token="idle-token",
                          oauth_client_id="jupyterhub-user-idle")
    reflector = await spawner._start_watching_pods()
    return KubeSpawner, reflector


async def main(args) -> None:
    server = Server({p: JOBS_PER_PROJECT for p in PROJECTS}, hub_kubeconfig=KUBECONFIG)
    try:
        kube = await new_kube(server.kubeconfig)
        backend = KubeBackend(kube, SETTINGS, watch_timeout=args.watch_timeout)
        await server.clear_requests()
        t0 = time.monotonic()
        try:
            for project in PROJECTS:
                await backend.list(project)  # starts its three caches
            KubeSpawner, reflector = await start_reflector(args.reflector_timeout)
            await asyncio.sleep(max(0.0, args.seconds - (time.monotonic() - t0)))
            window = time.monotonic() - t0
            records = await server.requests()
        finally:
            await backend.close()
            await kube.api_client.close()
            if "KubeSpawner" in locals():
                await KubeSpawner._stop_all_reflectors()
    finally:
        server.stop()

    cache_paths = [resource_path(kind, p) for p in PROJECTS for kind in KINDS]
    pod_path = f"/api/v1/namespaces/{POD_NAMESPACE}/pods"
    rows = [("KubeBackend watch caches", args.watch_timeout, [per_path(records, p, window) for p in cache_paths]),
            ("KubeSpawner PodReflector", reflector.timeout_seconds, [per_path(records, pod_path, window)])]
    print(f"\nidle watching for {window:.0f} s on one test cluster (its own process): {len(PROJECTS)} projects x "
          f"{len(KINDS)} kinds for the job backend, 1 namespace of pods for KubeSpawner\n")
    print(f"{'watcher':26} {'watch timeout':>13} {'window s':>8} {'kinds':>5} {'LIST':>5} {'WATCH':>6} "
          f"{'LISTs/hour/kind':>15}")
    per_hour = {}
    for name, timeout, paths in rows:
        lists, watches = sum(p["lists"] for p in paths), sum(p["watches"] for p in paths)
        per_hour[name] = sum(p["per_hour"] for p in paths) / len(paths)
        print(f"{name:26} {timeout:>11} s {window:8.0f} {len(paths):5d} {lists:5d} {watches:6d} "
              f"{per_hour[name]:15.1f}")
    print("\nper watched path (LIST / WATCH; initial lists are those before the first watch):")
    for name, _, paths in rows:
        for p in paths:
            print(f"  {name:26} {p['path']:58} {p['lists']:3d} / {p['watches']:3d}  (initial {p['initial']})")
    ours, base = per_hour["KubeBackend watch caches"], per_hour["KubeSpawner PodReflector"]
    print(f"\nLISTs/hour/kind, extrapolated: watch caches {ours:.1f}, PodReflector {base:.1f}"
          + (f" (x{base / ours:.0f} fewer)" if ours else ""))
    print(f"goal: watch caches <= 1 LIST per hour per watched kind (the initial list only): "
          f"{'met' if ours <= 1 else 'NOT met'}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60, help="the idle window")
    parser.add_argument("--watch-timeout", type=int, default=10, help="the watch caches' watch timeout (s)")
    parser.add_argument("--reflector-timeout", type=int, default=0,
                        help="PodReflector.timeout_seconds (default: KubeSpawner's own)")
    asyncio.run(main(parser.parse_args()))
    sys.exit(0)
