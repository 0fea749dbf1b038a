"""The hub's platform metrics, on JupyterHub's own ``/hub/metrics`` (prometheus_client's registry,
scope ``read:metrics``): what its running servers hold, read at each scrape from the hub's users.

- ``mlplatform_servers_running{project, profile, accelerator}``: servers of the platform's spawners
  that are up (JupyterHub's ``ready``: started, not stopping);
- ``mlplatform_accelerators_allocated{project, profile, accelerator}``: the accelerators they hold
  (a profile's count of whole GPUs or MIG slices; none for a CPU profile).

``project`` and ``profile`` are the platform's names (the project's, the profile's slug),
``accelerator`` the catalogue's (``a100``, ``1g.5gb``; empty for CPU). A server is labelled by the
options it was started with, planned again as its spawner would (`PlatformConfig.user_plan`); one
whose options no longer plan (its profile removed, its user out of the team) keeps its options' own
project and profile and the catalogue's accelerator of that profile if there is one. No label
holds a user's name, a credential or a dataset.
"""

from __future__ import annotations

import collections
import json
import logging
from typing import Any, Callable, Iterable, Mapping

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import REGISTRY, CollectorRegistry

from hub_ext.core.errors import ConfigError, UserInputError
from hub_ext.core.logs import LOGGER
from hub_ext.spawners.platform import PlatformConfig

LABELS = ("project", "profile", "accelerator")
_MOUNT_OPTIONS = ("credentials", "datasets")
_KEPT = "_mlplatform_metric_labels"  # the spawner's own attribute: (key, runtime, labels)
log = logging.getLogger(f"{LOGGER}.metrics")


def server_labels(spawner: Any) -> tuple[tuple[str, str, str], int]:
    """(project, profile, accelerator) of a platform spawner's server, and the accelerators it holds;
    kept per spawner while its options, its runtime and its user's groups are the same (a scrape of
    1,000 servers would otherwise plan 1,000 spawns: tests/bench/hub_metrics.py)."""
    options: Mapping[str, Any] = {k: v for k, v in (spawner.user_options or {}).items() if k not in _MOUNT_OPTIONS}
    key = (json.dumps(options, sort_keys=True, default=str),
           tuple(sorted(g.name for g in getattr(spawner.user, "groups", []))), bool(spawner.user.admin))
    runtime = spawner.runtime
    known = spawner.__dict__.get(_KEPT)
    if known is not None and known[0] == key and known[1] is runtime:
        return known[2]
    found = _labels(spawner, options)
    spawner.__dict__[_KEPT] = (key, runtime, found)
    return found


def _labels(spawner: Any, options: Mapping[str, Any]) -> tuple[tuple[str, str, str], int]:
    try:
        plan = spawner.user_plan(options)
    except (UserInputError, ConfigError):
        slug = options.get("profile")
        profile = spawner.runtime.profiles_by_slug.get(slug) if isinstance(slug, str) else None
        accelerator = profile.accelerator.name if profile is not None and profile.accelerator else ""
        count = profile.accelerator_count if profile is not None and profile.accelerator else 0
        return (str(options.get("project") or ""), str(slug or ""), accelerator), count
    accelerator = plan.accelerator.name if plan.accelerator else ""
    return (plan.project.name, plan.profile.slug, accelerator), (plan.count if plan.accelerator else 0)


class ServersCollector:
    """A prometheus_client collector of the servers of `users()` (JupyterHub `User` objects)."""

    def __init__(self, users: Callable[[], Iterable[Any]]):
        self.users = users

    def describe(self):
        return [GaugeMetricFamily("mlplatform_servers_running", "", labels=LABELS),
                GaugeMetricFamily("mlplatform_accelerators_allocated", "", labels=LABELS)]

    def collect(self):
        servers: collections.Counter = collections.Counter()
        held: collections.Counter = collections.Counter()
        for user in self.users():
            for spawner in list(getattr(user, "spawners", {}).values()):
                if isinstance(spawner, PlatformConfig) and spawner.ready:
                    try:
                        labels, count = server_labels(spawner)
                    except Exception as e:  # one server's configuration must not take the hub's metrics down
                        log.debug("%s: not counted in the metrics: %s", spawner._log_name, e)
                        continue
                    servers[labels] += 1
                    held[labels] += count
        running = GaugeMetricFamily("mlplatform_servers_running",
                                    "Servers of the platform's spawners that are up", labels=LABELS)
        allocated = GaugeMetricFamily("mlplatform_accelerators_allocated",
                                      "Accelerators (whole GPUs or MIG slices) held by running servers", labels=LABELS)
        for labels in sorted(servers):
            running.add_metric(labels, servers[labels])
            allocated.add_metric(labels, held[labels])
        yield running
        yield allocated


def hub_users() -> list[Any]:
    """The running hub's users (none outside a hub)."""
    from jupyterhub.app import JupyterHub

    return list(JupyterHub.instance().users.values()) if JupyterHub.initialized() else []


def register(registry: CollectorRegistry = REGISTRY) -> None:
    """Add the servers' metrics to `registry` (JupyterHub's), once per process."""
    try:
        registry.register(ServersCollector(hub_users))
    except ValueError:  # already there: the hub's configuration was loaded again in this process
        pass
