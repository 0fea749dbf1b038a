"""The platform's configuration (traitlets, at the edge) and its parsed, shared runtime state.

`PlatformConfig` is a mixin of the platform's spawners: its traits are set as
``c.PlatformConfig.accelerators = {...}`` (shared by every platform spawner) or on a spawner class
(``c.LocalPlatformSpawner.profiles = {...}``). `Runtime.parse(...)` parses them into frozen
objects (a `ConfigError` lists every problem with its path; `Runtime.warnings` what KubeSpawner
would ignore); a Runtime holds what must be shared by all servers of the hub: the reservation
`Ledger`. The hub's `PlatformService` (`hub_ext.spawners.service`, `PlatformConfig.platform`) keeps one
Runtime per settings, so every spawner of a hub counts against one ledger. A `Plan` carries the
spawn's chosen credentials and datasets as mounts (`PlatformConfig.spawn_plan`).

A callable ``profile_list`` (KubeSpawner's ``f(spawner)``, maybe async; `hub_ext.spawners.profile_source`)
is called for each spawn form and each spawn (`PlatformConfig.load_profiles`, run by
`get_options_form` and `run_pre_spawn_hook`): that spawner's Runtime is the hub's with the
profiles of the result, checked by the same parser, and entitlements naming a profile the result
lacks simply do not offer it (no project names it, ``"*"`` grants included); it shares the hub's ledger.

What both spawners do alike with it: the spawn form's POST read into `user_options`, the ticks of
credentials and datasets of a project other than the chosen one refused with the field named
(`hub_ext.core.mounts.refuse_other_projects`), not dropped; `refused(e)`, the one way a spawner
turns a platform error into the `web.HTTPError` JupyterHub expects of a refused start or form (a
config error is logged for the administrator); and `server_profile(user_options)`, the profile and
project a server was started with, in words, for the hub's home page
(``hub_ext/templates/home.html``): the display names its options plan to, or the options' own
words when they no longer plan (the profile was removed, the user left the team).
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
from typing import TYPE_CHECKING, Any, ClassVar, Mapping

from tornado import web
from traitlets import Any as AnyTrait
from traitlets import Callable as CallableTrait
from traitlets import Dict, Enum, List, Union, default
from traitlets.config import Configurable

from hub_ext.core.entitlements import Project
from hub_ext.core.errors import ConfigError, PlatformError, UserInputError
from hub_ext.core.logs import LOGGER
from hub_ext.core.mounts import choose_mounts, refuse_other_projects
from hub_ext.spawners.experience import http_error
from hub_ext.spawners.form import options_from_form
from hub_ext.spawners.profile_source import call, refusal
from hub_ext.spawners.runtime import Plan, Runtime

if TYPE_CHECKING:
    from hub_ext.spawners.service import PlatformService

log = logging.getLogger(f"{LOGGER}.platform")


class PlatformConfig(Configurable):
    accelerators = Dict(
        help="""Accelerators offered, by name (see hub_ext.core.catalog for every key).

        c.PlatformConfig.accelerators = {
            "a100": {"type": "gpu", "product": "NVIDIA-A100-SXM4-40GB"},
            "1g.5gb": {"type": "mig", "profile": "1g.5gb"},
        }""",
    ).tag(config=True)

    profiles = Dict(
        help="""Profiles, by slug (see hub_ext.core.profiles). Use this or `profile_list`.

        c.PlatformConfig.profiles = {
            "cpu": {"display_name": "CPU only", "cpu": {"limit": 2}, "memory": {"limit": "4G"}},
            "mig-small": {"display_name": "MIG 1g.5gb", "accelerator": "1g.5gb"},
        }""",
    ).tag(config=True)

    profile_list = Union(
        [List(), Dict(), CallableTrait()],
        default_value=[],
        help="""KubeSpawner / z2jh `profile_list`, accepted as it is (used when `profiles` is empty); or,
        as in KubeSpawner, a function of the spawner returning it (maybe async), called for each
        spawn form and spawn.

        c.PlatformConfig.profile_list = [{"display_name": "GPU", "kubespawner_override": {
            "extra_resource_limits": {"nvidia.com/gpu": "1"}}}]""",
    ).tag(config=True)

    everyone = AnyTrait(
        None,
        allow_none=True,
        help="""What every user may use in their personal project. Default: every profile, no accelerators.

        c.PlatformConfig.everyone = {"profiles": ["cpu"], "limits": {}}""",
    ).tag(config=True)

    groups = Dict(
        help="""Grants by JupyterHub group name; `project` gives the group a team project.

        c.PlatformConfig.groups = {"vision": {"project": "vision", "profiles": ["cpu", "mig-small"],
                                              "limits": {"1g.5gb": 2}}}""",
    ).tag(config=True)

    when_full = Enum(
        ["refuse", "wait"],
        default_value="refuse",
        help="""When no accelerator of the chosen profile is free: refuse before anything starts, or
        wait (with progress messages) until one is, up to start_timeout.

        c.PlatformConfig.when_full = "wait"
        """,
    ).tag(config=True)

    @default("apply_user_options")
    def _default_apply_user_options(self):
        return applied_at_start

    def platform_settings(self) -> dict[str, Any]:
        return {"accelerators": self.accelerators, "profiles": self.profiles, "profile_list": self.profile_list,
                "everyone": self.everyone, "groups": self.groups}

    platform_kind: ClassVar[str] = "local"  # the runtime: `PlatformService.kind`

    # ---- what every platform spawner (it has `self.user`) asks of the hub's service ------------
    @property
    def platform(self) -> "PlatformService":
        """The hub's `PlatformService` (from the user's tornado settings; made there when missing)."""
        from hub_ext.spawners.service import PlatformService

        service = PlatformService.of(getattr(self.user, "settings", None), self.platform_kind)
        if service is None:  # a user object without settings (tools): this spawner's own
            service = self.__dict__.setdefault("_own_platform", PlatformService(self.platform_kind))
        return service

    @property
    def runtime(self) -> "Runtime":
        """The hub's Runtime; with a callable profile_list, this spawner's once `load_profiles` ran."""
        if getattr(self, "_runtime", None) is None:
            self._runtime = self.platform.runtime(self.platform_settings())
        return self._runtime

    async def load_profiles(self) -> "Runtime":
        """With a callable profile_list: call it for this spawner and make its Runtime from the result
        (a `ConfigError` naming the path when it raises or gives a list with problems)."""
        base = self.platform.runtime(self.platform_settings())
        if base.dynamic is None:
            self._runtime = base
            return base
        runtime = base.for_profile_list(await call(base.dynamic, self))
        warned = self.platform.warned
        for warning in runtime.warnings:
            if warning not in warned:
                warned.add(warning)
                log.warning("profile list for %s: %s", getattr(self, "_log_name", "?"), warning)
        self._runtime = runtime
        return runtime

    async def _profiles_or_refusal(self) -> None:
        try:
            await self.load_profiles()
        except ConfigError as e:
            log.error("the profile list for %s is invalid: %s", getattr(self, "_log_name", "?"), e)
            raise refusal(e, self.user.name) from None

    async def get_options_form(self):
        """The spawn form, from this user's profiles (a callable profile_list is called first)."""
        await self._profiles_or_refusal()
        return await super().get_options_form()

    def run_pre_spawn_hook(self):
        """Before each start: this user's profiles (a callable profile_list is called), then the
        configured pre_spawn_hook."""
        return self._before_spawn()

    async def _before_spawn(self) -> None:
        await self._profiles_or_refusal()
        result = super().run_pre_spawn_hook()
        if inspect.isawaitable(result):
            await result

    def user_projects(self) -> list[Project]:
        """The projects this spawner's user may use."""
        return self.runtime.projects(self.user.name, [g.name for g in getattr(self.user, "groups", [])],
                                     self.user.admin)

    def user_plan(self, user_options: Mapping[str, Any]) -> "Plan":
        """`Runtime.plan` for this spawner's user."""
        return self.runtime.plan(self.user.name, [g.name for g in getattr(self.user, "groups", [])],
                                 self.user.admin, user_options)

    makes_copies = False  # a spawner that makes ``<dataset>:copy`` choices into writable copies

    async def spawn_plan(self, user_options: Mapping[str, Any], allow_loading: bool = False) -> "Plan":
        """`user_plan` with the chosen credentials and datasets (``user_options["credentials"]``,
        ``["datasets"]``) of the plan's project, checked and made into their mounts once
        (`hub_ext.core.mounts.choose_mounts`; `allow_loading`: a dataset still loading is accepted)."""
        options = dict(user_options or {})
        credentials, datasets = options.pop("credentials", None), options.pop("datasets", None)
        plan = self.user_plan(options)
        available = await self.project_files(plan.project.name)
        return dataclasses.replace(plan, mounts=choose_mounts(available, credentials, datasets, plan.project.name,
                                                       allow_loading, allow_copies=self.makes_copies))

    def hub_url(self) -> str:
        """The hub's own pages' prefix (``/hub/`` under JupyterHub's base_url), for the form's links."""
        hub = getattr(self, "hub", None)
        return getattr(hub, "base_url", None) or "/hub/"

    def options_from_form(self, formdata):
        project = (formdata.get("project") or [None])[0]
        try:
            refuse_other_projects(formdata, project)
        except UserInputError as e:
            raise self.refused(e) from None
        return options_from_form(formdata)

    def refused(self, e: PlatformError) -> web.HTTPError:
        """The answer to a spawn (or its form) the platform refuses; a config error is logged for
        the administrator (the user is told only that the platform is misconfigured)."""
        if isinstance(e, ConfigError):
            self.log.error("platform configuration is invalid for %s: %s", self._log_name, e)
        return http_error(e)

    def server_profile(self, user_options: Mapping[str, Any] | None) -> dict[str, str]:
        """{"profile": …, "project": …} in words for a server of this user started with `user_options`."""
        options = {k: v for k, v in (user_options or {}).items() if k not in ("credentials", "datasets")}
        try:
            plan = self.user_plan(options)
        except (UserInputError, ConfigError):
            slug, project = options.get("profile"), options.get("project")
            known = self.runtime.profiles_by_slug.get(slug) if isinstance(slug, str) else None
            return {"profile": known.display_name if known else str(slug or ""), "project": str(project or "")}
        return {"profile": plan.profile.display_name, "project": plan.project.display_name}


def applied_at_start(spawner, user_options) -> None:
    """JupyterHub's `Spawner.apply_user_options` hook of the platform spawners: nothing to do, as
    they validate and apply `user_options` themselves when the server starts (a plan:
    `LocalPlatformSpawner.make_plan`, `PlatformSpawner.load_user_options`). Being set, it keeps
    JupyterHub from warning that options nobody handles were received. A configured hook replaces
    it and runs in addition to the platform's own handling."""
