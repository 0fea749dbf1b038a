"""The platform's configuration (traitlets, at the edge) and its parsed, shared runtime state.

`PlatformConfig` is a mixin of the platform's spawners: its traits are set as
``c.PlatformConfig.accelerators = {...}`` (shared by every platform spawner) or on a spawner class
(``c.LocalPlatformSpawner.profiles = {...}``). `Runtime.parse(...)` parses them into frozen
objects (a `ConfigError` lists every problem with its path; `Runtime.warnings` what KubeSpawner
would ignore); a Runtime holds what must be shared by all servers of the hub: the reservation
`Ledger`. The hub's `PlatformService` (`hub_ext.service`, `PlatformConfig.platform`) keeps one
Runtime per settings, so every spawner of a hub counts against one ledger. A `Plan` carries the
spawn's chosen credentials and datasets as mounts (`PlatformConfig.spawn_plan`).

A callable ``profile_list`` (KubeSpawner's ``f(spawner)``, maybe async; `hub_ext.profile_source`)
is called for each spawn form and each spawn (`PlatformConfig.load_profiles`, run by
`get_options_form` and `run_pre_spawn_hook`): that spawner's Runtime is the hub's with the
profiles of the result, checked by the same parser, and entitlements naming a profile the result
lacks simply do not offer it (no project names it, ``"*"`` grants included); it shares the hub's ledger.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Container, Mapping

from traitlets import Any as AnyTrait
from traitlets import Callable as CallableTrait
from traitlets import Dict, Enum, List, Union, default
from traitlets.config import Configurable

from .catalog import Accelerator, parse_accelerators
from .entitlements import Entitlements, Grant, Ledger, Project, choose, parse_entitlements, projects_for
from .errors import ConfigError, Problem, UserInputError
from .form import options_from_form
from .logs import LOGGER
from .mounts import Mounts, choose_mounts
from .profile_source import WHERE, call, is_callable, refusal
from .profiles import Profile, read_profile_list, read_profiles, resolve

if TYPE_CHECKING:
    from .service import PlatformService

log = logging.getLogger(f"{LOGGER}.platform")


class PlatformConfig(Configurable):
    accelerators = Dict(
        help="""Accelerators offered, by name (see hub_ext.catalog for every key).

        c.PlatformConfig.accelerators = {
            "a100": {"type": "gpu", "product": "NVIDIA-A100-SXM4-40GB"},
            "1g.5gb": {"type": "mig", "profile": "1g.5gb"},
        }""",
    ).tag(config=True)

    profiles = Dict(
        help="""Profiles, by slug (see hub_ext.profiles). Use this or `profile_list`.

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
        from .service import PlatformService

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
        (`hub_ext.mounts.choose_mounts`; `allow_loading`: a dataset still loading is accepted)."""
        options = dict(user_options or {})
        credentials, datasets = options.pop("credentials", None), options.pop("datasets", None)
        plan = self.user_plan(options)
        available = await self.project_files(plan.project.name)
        return dataclasses.replace(plan, mounts=choose_mounts(available, credentials, datasets, plan.project.name,
                                                       allow_loading, allow_copies=self.makes_copies))

    def options_from_form(self, formdata):
        return options_from_form(formdata)


def applied_at_start(spawner, user_options) -> None:
    """JupyterHub's `Spawner.apply_user_options` hook of the platform spawners: nothing to do, as
    they validate and apply `user_options` themselves when the server starts (a plan:
    `LocalPlatformSpawner.make_plan`, `PlatformSpawner.load_user_options`). Being set, it keeps
    JupyterHub from warning that options nobody handles were received. A configured hook replaces
    it and runs in addition to the platform's own handling."""


@functools.cache
def kubespawner_traits() -> frozenset[str]:
    """KubeSpawner's trait names: what a `kubespawner_override` may set (any runtime)."""
    from kubespawner import KubeSpawner

    return frozenset(KubeSpawner.class_trait_names())


@dataclass(frozen=True)
class Plan:
    """What pure code decided for one spawn; a runtime applies it (`mounts`: once chosen, `spawn_plan`)."""
    project: Project
    profile: Profile
    settings: Mapping[str, Any]  # KubeSpawner trait → value
    mounts: Mounts = field(default_factory=Mounts)

    @property
    def accelerator(self) -> Accelerator | None:
        return self.profile.accelerator

    @property
    def count(self) -> int:
        return self.profile.accelerator_count


@dataclass
class Runtime:
    accelerators: Mapping[str, Accelerator]
    profiles: tuple[Profile, ...]
    entitlements: Entitlements
    ledger: Ledger = field(default_factory=Ledger)
    warnings: tuple[Problem, ...] = ()  # what KubeSpawner would ignore: logged, not refused
    settings: Mapping[str, Any] = field(default_factory=dict, repr=False)  # as parsed
    dynamic: Callable | None = None  # a callable profile_list, called per spawn

    @classmethod
    def parse(cls, settings: Mapping[str, Any], kubespawner_traits: frozenset[str] | None = None, *,
              where: str = "profile_list", offered_only: bool = False) -> "Runtime":
        """The settings parsed, or a ConfigError with every problem of every section: the catalogue,
        the profiles and the entitlements are each checked even when an earlier one has problems,
        and a reference to an entry that failed to parse (an accelerator, a profile) is not
        reported again as unknown. A callable profile_list is kept to be called per spawn (the
        entitlements' profile names are then checked against each result). `offered_only`: a
        profile an entitlement names but the list lacks is not offered (a callable's result for
        one user), rather than a problem; `where` starts the profile list's paths."""
        problems: list[Problem] = []
        warnings: list[Problem] = []
        raw_accelerators = settings.get("accelerators") or {}
        try:
            accelerators, unparsed_accelerators = parse_accelerators(raw_accelerators), frozenset()
        except ConfigError as e:
            problems += e.problems
            accelerators, unparsed_accelerators = _parsed_accelerators(raw_accelerators)
        raw_list = settings.get("profile_list")
        dynamic = raw_list if is_callable(raw_list) and not settings.get("profiles") else None
        if settings.get("profiles"):
            parsed = read_profiles(settings["profiles"], accelerators, kubespawner_traits, unparsed_accelerators)
            if raw_list:
                warnings.append(Problem("profile_list", "is ignored: 'profiles' is set too (configure one of them)"))
        elif dynamic is not None:
            parsed = read_profile_list([], accelerators)  # called per spawn, checked then
        else:
            parsed = read_profile_list(raw_list or [], accelerators, kubespawner_traits, unparsed_accelerators, where)
        problems += parsed.problems
        warnings += parsed.warnings
        profiles, unparsed_profiles = parsed.profiles, parsed.broken
        if not parsed.problems and not profiles and dynamic is None:
            problems.append(Problem(where if offered_only else "profiles",
                                    "gave no profiles" if offered_only else "no profiles are configured"))
        if (not profiles and not unparsed_profiles) or dynamic is not None:
            unparsed_profiles = _EVERY  # nothing to check the entitlements' profile names against
        elif offered_only:
            unparsed_profiles = _Offered({p.slug for p in profiles})
        everyone, groups = settings.get("everyone"), settings.get("groups") or {}
        known_profiles = [*profiles, *(Profile(name, name) for name in
                                       _referenced(everyone, groups, "profiles", unparsed_profiles))]
        known_accelerators = {**accelerators, **{name: Accelerator(name, "device", name, "") for name in
                                                 _referenced(everyone, groups, "limits", unparsed_accelerators)}}
        try:
            ent = parse_entitlements(everyone, groups, known_profiles, known_accelerators)
            if offered_only:
                ent = _offered(ent, frozenset(p.slug for p in profiles))
        except ConfigError as e:
            problems += e.problems
        if problems:
            raise ConfigError(problems)
        return cls(accelerators, profiles, ent, warnings=tuple(warnings), settings=dict(settings), dynamic=dynamic)

    def for_profile_list(self, raw: Any) -> "Runtime":
        """This Runtime with the profiles of a callable profile_list's result (same checks, paths
        from `hub_ext.profile_source.WHERE`), sharing its ledger; a `ConfigError` when it has problems."""
        settings = {**self.settings, "profiles": None, "profile_list": raw if raw is not None else []}
        if is_callable(raw):
            raise ConfigError([Problem(WHERE, "returned a function, not a list (or a dict keyed by slug) of profiles")])
        runtime = Runtime.parse(settings, kubespawner_traits(), where=WHERE, offered_only=True)
        return dataclasses.replace(runtime, ledger=self.ledger, dynamic=self.dynamic)

    @property
    def profiles_by_slug(self) -> dict[str, Profile]:
        return {p.slug: p for p in self.profiles}

    def projects(self, username: str, groups, admin: bool) -> list[Project]:
        return projects_for(self.entitlements, username, groups, admin)

    def plan(self, username: str, groups, admin: bool, user_options: Mapping[str, Any]) -> Plan:
        """Validate untrusted `user_options` ({"project", "profile", <option>...}) into a Plan."""
        options = dict(user_options or {})
        project, profile = choose(self.projects(username, groups, admin), self.profiles_by_slug,
                                  _text(options.pop("project", None), "project"),
                                  _text(options.pop("profile", None), "profile"))
        return Plan(project, profile, resolve(profile, options))


class _Every:
    """Contains every name: the whole section failed to parse, so no name in it is known."""

    def __contains__(self, item) -> bool:
        return True


_EVERY = _Every()


class _Offered:
    """Contains every name but the given ones: entitlements naming a profile a callable's result
    lacks get a stand-in for it (not a problem), which `_offered` then takes out of every grant."""

    def __init__(self, offered: set[str]):
        self.offered = offered

    def __contains__(self, item) -> bool:
        return item not in self.offered


def _offered(ent: Entitlements, offered: frozenset[str]) -> Entitlements:
    """The entitlements with every grant's profiles cut to those offered: a stand-in (a profile a
    grant names, or a ``"*"`` grant took, that a callable's result lacks) is in no project."""
    def cut(grant: Grant) -> Grant:
        return dataclasses.replace(grant, profiles=grant.profiles & offered)

    return Entitlements(cut(ent.everyone), {name: cut(g) for name, g in ent.groups.items()},
                        {name: dataclasses.replace(t, grant=cut(t.grant)) for name, t in ent.teams.items()})


def _parsed_accelerators(raw: Any) -> tuple[dict[str, Accelerator], Container[str]]:
    """The accelerators of a catalogue with problems that parse on their own, and the names that do not."""
    if not isinstance(raw, Mapping):
        return {}, _EVERY
    good: dict[str, Accelerator] = {}
    for name, entry in raw.items():
        try:
            good.update(parse_accelerators({name: entry}))
        except ConfigError:
            pass
    return good, frozenset(str(n) for n in raw if n not in good)


def _referenced(everyone: Any, groups: Any, key: str, unparsed: Container[str]) -> list[str]:
    """The names under `key` ("profiles" or "limits") of the grants that failed to parse: the
    entitlements are checked with stand-ins for them, so they are not reported again as unknown
    (there are problems then, so the entitlements parsed against stand-ins are never kept)."""
    grants = [everyone, *(groups.values() if isinstance(groups, Mapping) else [])]
    names: list[str] = []
    for grant in grants:
        refs = grant.get(key) if isinstance(grant, Mapping) else None
        if isinstance(refs, (list, Mapping)):
            names += [n for n in refs if isinstance(n, str) and n in unparsed and n not in names]
    return names


def _text(value, field_name: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise UserInputError(field_name, "must be a string")
    return value
