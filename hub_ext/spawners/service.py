"""The platform in one hub: `PlatformService`, made at configuration and kept in the tornado settings.

`hub_ext.setup.configure` makes one, with the parsed settings and the runtime the config chose
(``"kubernetes"`` or ``"local"``), and puts it in ``c.JupyterHub.tornado_settings["mlplatform"]``:
JupyterHub hands that dict to every handler (``handler.settings``) and user (``user.settings``),
so the hub API, the credentials page, the reconciler and every spawner reach the same object.
It holds what all servers of the hub share, nothing in module globals:

- the parsed config: one `Runtime` per distinct platform settings (with its reservation
  `Ledger`), and the warnings about a callable ``profile_list``'s results already logged;
- the parts a runtime keeps per hub, made on first use by the spawner that needs them (`part`):
  on Kubernetes the API client, the watch caches (capacity), the `Provisioner` and the projects'
  Secrets and claims (project files, credentials); locally the device allocator (capacity) and
  the state directory made private once;
- the user doors the handlers call (`projects`, `catalog`, `capacity`, `files`,
  `credentials_where`): each reads the user's spawner for that user's own configuration (a
  callable ``profile_list`` is called with it) and the shared parts above.

A spawner made outside a hub (tests, tools) whose user has no service in its settings gets one
made there on first use (`of`).
"""

from __future__ import annotations

import json
from typing import Any, Callable, Mapping, MutableMapping

from hub_ext.core.errors import ConfigError, Problem
from hub_ext.core.mounts import metadata
from hub_ext.core.publish import accelerator_json, profile_json
from hub_ext.spawners.profile_source import refusal
from hub_ext.spawners.runtime import Runtime, kubespawner_traits

KEY = "mlplatform"  # the service's key in the tornado settings
KINDS = ("kubernetes", "local")


class PlatformService:
    def __init__(self, kind: str = "local", settings: Mapping[str, Any] | None = None, runtime=None):
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
        self.kind = kind
        self._runtimes: dict[str, Any] = {}
        if runtime is not None and settings is not None:
            self._runtimes[_key(settings)] = runtime
        self.warned: set[Problem] = set()  # a callable's warnings already logged (once each per hub)
        self._parts: dict[tuple, Any] = {}

    def __deepcopy__(self, memo) -> "PlatformService":
        return self  # traitlets copies config values: the copy is the same one service of the hub

    @classmethod
    def of(cls, settings: MutableMapping[str, Any] | None, kind: str = "local") -> "PlatformService | None":
        """The service in these tornado settings; made there when missing (None without settings)."""
        if settings is None:
            return None
        service = settings.get(KEY)
        if service is None:
            service = settings[KEY] = cls(kind)
        return service

    # ---- the parsed config and the shared parts ------------------------------------------------
    def runtime(self, settings: Mapping[str, Any]):
        """The hub's one Runtime for these platform settings (parsed on first use, overrides
        checked against KubeSpawner's traits)."""
        key = _key(settings)
        if key not in self._runtimes:
            self._runtimes[key] = Runtime.parse(settings, kubespawner_traits())
        return self._runtimes[key]

    def part(self, key: tuple, make: Callable[[], Any]) -> Any:
        """The hub's part under `key`, made by `make` on first use."""
        if key not in self._parts:
            self._parts[key] = make()
        return self._parts[key]

    async def stop(self) -> None:
        """Stop the parts that run (watch caches); the next use makes them afresh (a restarted hub)."""
        parts, self._parts = list(self._parts.values()), {}
        for part in parts:
            stop = getattr(part, "stop", None)
            if stop is not None:
                await stop()

    # ---- the doors the hub's handlers call ---------------------------------------------------------
    @staticmethod
    def spawner(user):
        """The user's (default) spawner, which carries that user's platform configuration; None
        when the hub's spawner is no platform spawner."""
        spawner = user.spawner  # a platform spawner is a `PlatformConfig`, which names its runtime's kind
        return spawner if getattr(type(spawner), "platform_kind", None) in KINDS else None

    async def _with_profiles(self, user):
        spawner = self.spawner(user)
        try:
            await spawner.load_profiles()
        except ConfigError as e:
            spawner.log.error("the profile list for %s is invalid: %s", user.name, e)
            raise refusal(e, user.name) from None
        return spawner

    async def projects(self, user) -> list[dict]:
        """The user's projects with their profiles, limits and what is in use now; where Kueue holds
        the accelerators, also ``queue_ahead``: accelerator → the project's workloads waiting for it."""
        spawner = await self._with_profiles(user)
        offered = spawner.runtime.profiles_by_slug  # a grant may name a profile a callable did not give
        projects = spawner.user_projects()
        queue_ahead = getattr(spawner, "queue_ahead", None)
        ahead = await queue_ahead([p.name for p in projects]) if queue_ahead is not None else None
        out = []
        for p in projects:
            entry = {"name": p.name, "display_name": p.display_name, "personal": p.personal,
                     "profiles": sorted(p.profiles & offered.keys()), "limits": p.limits,
                     "in_use": await spawner.usage(p.name)}
            if ahead is not None:
                entry["queue_ahead"] = {acc: n for (project, acc), n in ahead.items() if project == p.name}
            out.append(entry)
        return out

    async def catalog(self, user) -> dict:
        """The accelerators, and the profiles the user may use."""
        spawner = await self._with_profiles(user)
        rt = spawner.runtime
        usable = set().union(*(p.profiles for p in spawner.user_projects()))
        return {"accelerators": [accelerator_json(a) for a in rt.accelerators.values()],
                "profiles": [profile_json(p) for p in rt.profiles if p.slug in usable]}

    async def capacity(self, user) -> dict[str, dict[str, int]]:
        return {name: {"free": free, "total": total}
                for name, (free, total) in (await self.spawner(user).capacity()).items()}

    async def files(self, user, kind: str) -> list[dict]:
        """Metadata of the ``credentials`` or ``datasets`` of every project of the user (never content)."""
        spawner = self.spawner(user)
        out = []
        for p in spawner.user_projects():
            out += metadata(getattr(await spawner.project_files(p.name), kind), p.name)
        return out

    def credentials_where(self, user) -> str | None:
        """None where the hub manages credentials (Kubernetes Secrets); else the directory where
        they are kept as files (the local runtime's projects)."""
        if self.kind == "kubernetes":
            return None
        return self.spawner(user).projects_dir


def _key(settings: Mapping[str, Any]) -> str:
    return json.dumps(settings, sort_keys=True, default=repr)
