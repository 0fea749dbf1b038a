"""Benchmark (prints figures, asserts nothing): the cost the platform's gauges add to a scrape of
the hub's /hub/metrics, with N running servers.

    .venv/bin/python -m tests.bench.hub_metrics [--servers 1000] [--scrapes 50]   (or: make bench)

N real `LocalPlatformSpawner` objects (the demo's catalogue and profiles, a third each CPU, MIG
1g.5gb and MIG 3g.20gb, in 20 projects) hold a `jupyterhub.objects.Server` (what makes a spawner
``ready``); the scrape is prometheus_client's ``generate_latest`` of a registry with JupyterHub's
own metrics (its module imported, as in the hub) and the platform's collector, timed beside the
same registry without it, in one process: median and p95 per scrape, and the response size; and
the first scrape, which plans every server once (their labels are kept after).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import types

from jupyterhub import metrics as hub_metrics  # noqa: F401  (JupyterHub's own metrics, registered as in the hub)
from jupyterhub.objects import Server
from prometheus_client import generate_latest
from prometheus_client.registry import REGISTRY, CollectorRegistry

from hub_ext.spawners.local import LocalPlatformSpawner
from hub_ext.spawners.metrics import ServersCollector
from hub_ext.spawners.runtime import kubespawner_traits

ACCELERATORS = {"1g.5gb": {"type": "mig", "profile": "1g.5gb"}, "3g.20gb": {"type": "mig", "profile": "3g.20gb"}}
PROFILES = {"cpu": {"display_name": "CPU"}, "mig-1g": {"display_name": "1g", "accelerator": "1g.5gb"},
            "mig-3g": {"display_name": "3g", "accelerator": "3g.20gb"}}


def users(n: int) -> list:
    made, settings = [], {}  # one hub: its tornado settings, so one PlatformService and one parsed config
    for i in range(n):
        groups = [types.SimpleNamespace(name=f"team{i % 20}")]
        user = types.SimpleNamespace(name=f"user{i}", id=i, url=f"/user/user{i}/", settings=settings, admin=False,
                                     groups=groups)
        grants = {f"team{g}": {"project": f"team{g}", "profiles": list(PROFILES), "limits": {"1g.5gb": 10_000,
                                                                                              "3g.20gb": 10_000}}
                  for g in range(20)}
        spawner = LocalPlatformSpawner(user=user, inventory={}, accelerators=ACCELERATORS, profiles=PROFILES,
                                       groups=grants)
        spawner.user_options = {"project": f"team{i % 20}", "profile": list(PROFILES)[i % 3]}
        spawner.server = Server(ip="127.0.0.1", port=10_000 + i)
        user.spawners = {"": spawner}
        made.append(user)
    return made


def timed(registry, scrapes: int) -> tuple[float, float, int]:
    times, size = [], 0
    for _ in range(scrapes):
        start = time.perf_counter()
        size = len(generate_latest(registry))
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), statistics.quantiles(times, n=20)[18], size


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="tests.bench.hub_metrics", description=__doc__.splitlines()[0])
    p.add_argument("--servers", type=int, default=1000)
    p.add_argument("--scrapes", type=int, default=50)
    args = p.parse_args(argv)
    kubespawner_traits()  # as in a hub, where configure(c) parsed the configuration (and imported KubeSpawner)
    hub_users = users(args.servers)
    collector = ServersCollector(lambda: hub_users)
    registry = CollectorRegistry()
    registry.register(collector)
    start = time.perf_counter()
    generate_latest(registry)
    first = (time.perf_counter() - start) * 1000
    print(f"/hub/metrics with {args.servers} running servers, {args.scrapes} scrapes each (ms per scrape)")
    print(f"{'':36} {'median':>8} {'p95':>8} {'bytes':>8}")
    for name, registry in (("JupyterHub's metrics alone", REGISTRY), ("JupyterHub's + the platform's", None)):
        if registry is None:
            registry = CollectorRegistry()
            registry.register(_Both(collector))
        median, p95, size = timed(registry, args.scrapes)
        print(f"{name:36} {median:8.2f} {p95:8.2f} {size:8d}")
    print(f"the platform's first scrape (every server planned once): {first:.1f} ms")
    return 0


class _Both:
    """JupyterHub's registry and the platform's collector, as one scrape of the hub collects them."""

    def __init__(self, collector):
        self.collector = collector

    def collect(self):
        for metric in REGISTRY.collect():
            yield metric
        yield from self.collector.collect()


if __name__ == "__main__":
    sys.exit(main())
