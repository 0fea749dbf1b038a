"""The platform's configuration (traitlets, at the edge) and its parsed, shared runtime state.

`PlatformConfig` is a mixin of the platform's spawners: its traits are set as
``c.PlatformConfig.accelerators = {...}`` (shared by every platform spawner) or on a spawner class
(``c.LocalPlatformSpawner.profiles = {...}``). `Runtime.for_config(...)` parses them once into
frozen objects (a `ConfigError` lists every problem with its path) and holds what must be shared
by all servers of the hub process: the reservation `Ledger`. The same settings give the same
Runtime object, so every spawner of a hub counts against one ledger.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from typing import Any, ClassVar, Container, Mapping

from traitlets import Any as AnyTrait
from traitlets import Dict, Enum, List, Union, default
from traitlets.config import Configurable

from .catalog import Accelerator, parse_accelerators
from .entitlements import Entitlements, Ledger, Project, choose, parse_entitlements, projects_for
from .errors import ConfigError, Problem, UserInputError
from .form import options_from_form
from .profiles import Profile, read_profile_list, read_profiles, resolve


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
        [List(), Dict()],
        default_value=[],
        help="""KubeSpawner / z2jh `profile_list`, accepted as it is (used when `profiles` is empty).

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

    # ---- what every platform spawner (it has `self.user`) asks of the parsed settings ------------
    @property
    def runtime(self) -> "Runtime":
        if getattr(self, "_runtime", None) is None:
            self._runtime = Runtime.for_config(self.platform_settings())
        return self._runtime

    def user_projects(self) -> list[Project]:
        """The projects this spawner's user may use."""
        return self.runtime.projects(self.user.name, [g.name for g in getattr(self.user, "groups", [])],
                                     self.user.admin)

    def user_plan(self, user_options: Mapping[str, Any]) -> "Plan":
        """`Runtime.plan` for this spawner's user."""
        return self.runtime.plan(self.user.name, [g.name for g in getattr(self.user, "groups", [])],
                                 self.user.admin, user_options)

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
    """What pure code decided for one spawn; a runtime applies it."""
    project: Project
    profile: Profile
    settings: Mapping[str, Any]  # KubeSpawner trait → value

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

    _cache: ClassVar[dict[str, "Runtime"]] = {}

    @classmethod
    def parse(cls, settings: Mapping[str, Any], kubespawner_traits: frozenset[str] | None = None) -> "Runtime":
        """The settings parsed, or a ConfigError with every problem of every section: the catalogue,
        the profiles and the entitlements are each checked even when an earlier one has problems,
        and a reference to an entry that failed to parse (an accelerator, a profile) is not
        reported again as unknown."""
        problems: list[Problem] = []
        raw_accelerators = settings.get("accelerators") or {}
        try:
            accelerators, unparsed_accelerators = parse_accelerators(raw_accelerators), frozenset()
        except ConfigError as e:
            problems += e.problems
            accelerators, unparsed_accelerators = _parsed_accelerators(raw_accelerators)
        if settings.get("profiles"):
            parsed = read_profiles(settings["profiles"], accelerators, kubespawner_traits, unparsed_accelerators)
        else:
            parsed = read_profile_list(settings.get("profile_list") or [], accelerators, kubespawner_traits,
                                       unparsed_accelerators)
        problems += parsed.problems
        profiles, unparsed_profiles = parsed.profiles, parsed.broken
        if not parsed.problems and not profiles:
            problems.append(Problem("profiles", "no profiles are configured"))
        if not profiles and not unparsed_profiles:
            unparsed_profiles = _EVERY  # nothing to check the entitlements' profile names against
        everyone, groups = settings.get("everyone"), settings.get("groups") or {}
        known_profiles = [*profiles, *(Profile(name, name) for name in
                                       _referenced(everyone, groups, "profiles", unparsed_profiles))]
        known_accelerators = {**accelerators, **{name: Accelerator(name, "device", name, "") for name in
                                                 _referenced(everyone, groups, "limits", unparsed_accelerators)}}
        try:
            ent = parse_entitlements(everyone, groups, known_profiles, known_accelerators)
        except ConfigError as e:
            problems += e.problems
        if problems:
            raise ConfigError(problems)
        return cls(accelerators, profiles, ent)

    @classmethod
    def for_config(cls, settings: Mapping[str, Any]) -> "Runtime":
        """The hub's one Runtime for these settings (parsed on first use, overrides checked against
        KubeSpawner's traits)."""
        key = json.dumps(settings, sort_keys=True, default=repr)
        runtime = cls._cache.get(key)
        if runtime is None:
            runtime = cls._cache[key] = cls.parse(settings, kubespawner_traits())
        return runtime

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
