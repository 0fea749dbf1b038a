"""A platform configuration, parsed: `Runtime` (the catalogue, profiles and entitlements as frozen
objects, and the reservation `Ledger` every server of the hub counts against) and `Plan` (what pure
code decided for one spawn, which a runtime applies). `Runtime.parse(settings, kubespawner_traits())`
raises a `ConfigError` listing every problem with its path; `Runtime.warnings` holds what KubeSpawner
would ignore. No traitlets here: `hub_ext.spawners.platform.PlatformConfig` reads the traits."""

from __future__ import annotations

import dataclasses
import functools
import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Container, Mapping

from hub_ext.core.catalog import Accelerator, parse_accelerators
from hub_ext.core.entitlements import Entitlements, Grant, Ledger, Project, choose, parse_entitlements, projects_for
from hub_ext.core.errors import ConfigError, Problem, UserInputError
from hub_ext.core.logs import LOGGER
from hub_ext.core.mounts import Mounts
from hub_ext.core.profiles import Profile, read_profile_list, read_profiles, resolve
from hub_ext.spawners.profile_source import WHERE, is_callable

log = logging.getLogger(f"{LOGGER}.platform")


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
        from `hub_ext.spawners.profile_source.WHERE`), sharing its ledger; a `ConfigError` when it has problems."""
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
