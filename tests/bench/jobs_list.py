"""Benchmark (not a test: prints figures, asserts nothing, exits 0) of ``jobs list`` in a project
with thousands of jobs: the Kubernetes job backend's watch cache next to a list through the typed
client, in one run.

    .venv/bin/python -m tests.bench.jobs_list [--jobs 5000] [--calls 200] [--baseline-calls 15]
                                              [--baseline-seconds 30]      (or: make bench)

The test cluster (the real control plane, `tests.cluster`) runs in its own process
(`tests.bench.jobs_env`), filled through the API before it serves: `--jobs` PyTorchJobs made by `kubeflow.job_manifest` from varied plans (machines, worker counts, runtimes,
labels, owners) in one namespace, each with Training Operator conditions written through the
``/status`` subresource (QUEUED, PREPARING, RUNNING, SUCCEEDED, FAILED, suspended). This process
then holds only what a notebook server would: the backend, its caches and the client.

- **cache**: what the REST API's ``GET …/jobs?filter=state=RUNNING`` does: `KubeBackend.list(project)`
  (from the warm watch caches) then `listing.page(jobs, filter="state=RUNNING")`; `--calls` calls.
- **baseline**: the same answer made the usual way: ``CustomObjectsApi.list_namespaced_custom_object``
  for pytorchjobs (same label selector), `status.job_json` on each item, the same `page()`. It runs
  `--baseline-calls` calls or for `--baseline-seconds`, whichever ends first (one call moves the
  whole namespace as JSON, so it is far slower).

Both are timed per call (wall clock, end to end); the fault proxy's request log gives the API
requests made during the measured cache calls (the goal: none).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import time

from kubernetes_asyncio.client import CustomObjectsApi

from server_ext.jobs.kube.kubeflow import API
from server_ext.jobs.kube.status import job_json
from server_ext.jobs.listing import page
from server_ext.runtimes.kube.backend import KubeBackend
from server_ext.runtimes.kube.project_caches import SELECTOR
from tests.bench.jobs_env import SETTINGS, Server, new_kube

PROJECT = "bench-jobs"
FILTER = "state=RUNNING"
GOAL_P95_MS, GOAL_FACTOR = 50.0, 50.0


def summary(times_ms: list[float]) -> dict:
    ordered = sorted(times_ms)
    p95 = statistics.quantiles(ordered, n=20, method="inclusive")[18] if len(ordered) > 1 else ordered[0]
    return {"n": len(ordered), "p50": statistics.median(ordered), "p95": p95, "max": ordered[-1]}


async def timed(fn, calls: int, seconds: float = float("inf")) -> tuple[list[float], dict]:
    out, last = [], None
    deadline = time.perf_counter() + seconds
    for _ in range(calls):
        t = time.perf_counter()
        last = await fn()
        out.append((time.perf_counter() - t) * 1000)
        if time.perf_counter() > deadline:
            break
    return out, last


class GcPauses:
    """Full (generation 2) garbage collections seen while a callback is registered, with their pause."""

    def __init__(self):
        self.full: list[float] = []
        self._t = 0.0

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._t = time.perf_counter()
        elif info["generation"] == 2:
            self.full.append((time.perf_counter() - self._t) * 1000)


async def main(args) -> None:
    pauses = GcPauses()
    t = time.perf_counter()
    server = Server({PROJECT: args.jobs})
    filled, counts = time.perf_counter() - t, server.filled[PROJECT]
    try:
        kube = await new_kube(server.kubeconfig)
        backend = KubeBackend(kube, SETTINGS, load_timeout=120)
        try:
            t = time.perf_counter()
            first = await backend.list(PROJECT)  # starts the three caches: one list each, then watches
            warm = time.perf_counter() - t

            split: list[tuple[float, float]] = []  # (backend.list ms, page ms) of each cache call

            async def cached():
                t0 = time.perf_counter()
                jobs = await backend.list(PROJECT)
                t1 = time.perf_counter()
                out = page(jobs, filter=FILTER)
                split.append(((t1 - t0) * 1000, (time.perf_counter() - t1) * 1000))
                return out

            group, version, plural = API["PyTorchJob"]
            custom = CustomObjectsApi(kube.api_client)

            async def typed():
                body = await custom.list_namespaced_custom_object(group, version, PROJECT, plural,
                                                                  label_selector=SELECTOR, _request_timeout=300)
                return page([job_json(o) for o in body["items"]], filter=FILTER)

            await timed(cached, 3)  # warm-up (imports, first filter compile)
            await timed(typed, 1)
            before = len(await server.requests())
            split.clear()
            gc.callbacks.append(pauses)
            try:
                cache_ms, cache_page = await timed(cached, args.calls)
            finally:
                gc.callbacks.remove(pauses)
            during = (await server.requests())[before:]
            base_ms, base_page = await timed(typed, args.baseline_calls, args.baseline_seconds)
        finally:
            await backend.close()
            await kube.api_client.close()
    finally:
        server.stop()

    running = sum(1 for j in first if j["state"] == "RUNNING")
    same = [j["jobId"] for j in cache_page["jobs"]] == [j["jobId"] for j in base_page["jobs"]]
    c, b = summary(cache_ms), summary(base_ms)
    print(f"\njobs list, {args.jobs} PyTorchJobs in one project (test cluster in its own process; started and filled in {filled:.1f} s; "
          f"caches loaded in {warm:.2f} s)")
    print("states written: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) +
          f"; read back RUNNING: {running}")
    print(f"each call: list + page(filter={FILTER!r}, pageSize 20) -> {len(cache_page['jobs'])} jobs on the page; "
          f"same page from both: {same}\n")
    print(f"{'path':44} {'calls':>5} {'p50 ms':>9} {'p95 ms':>9} {'max ms':>9}")
    print(f"{'watch cache: KubeBackend.list + page':44} {c['n']:5d} {c['p50']:9.2f} {c['p95']:9.2f} {c['max']:9.2f}")
    print(f"{'baseline: CustomObjectsApi list + job_json':44} {b['n']:5d} {b['p50']:9.2f} {b['p95']:9.2f} "
          f"{b['max']:9.2f}")
    factor50, factor95 = b["p50"] / c["p50"], b["p95"] / c["p95"]
    print(f"\nspeed-up: x{factor50:.1f} at p50, x{factor95:.1f} at p95")
    print(f"API requests during the {c['n']} measured cache calls: {len(during)} "
          f"({', '.join(sorted({f'{r.method} {r.path}' for r in during})) or 'none'})")
    lists, pages = zip(*split)
    print(f"inside a cache call (median): KubeBackend.list {statistics.median(lists):.1f} ms (job_json of every "
          f"cached object), page() {statistics.median(pages):.1f} ms; full GCs during the cache calls: "
          f"{len(pauses.full)}, {sum(pauses.full):.0f} ms in all, longest {max(pauses.full, default=0):.0f} ms "
          f"({len(gc.get_objects())} objects tracked in this process)")
    met = c["p95"] <= GOAL_P95_MS and factor95 >= GOAL_FACTOR
    print(f"goal: cache p95 <= {GOAL_P95_MS:.0f} ms and >= {GOAL_FACTOR:.0f}x faster than the baseline (p95): "
          f"{'met' if met else 'NOT met'} (p95 {c['p95']:.1f} ms, x{factor95:.1f})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--calls", type=int, default=200, help="measured cache calls")
    parser.add_argument("--baseline-calls", type=int, default=15, help="at most this many baseline calls")
    parser.add_argument("--baseline-seconds", type=float, default=30, help="and for at most this long")
    asyncio.run(main(parser.parse_args()))
    sys.exit(0)
