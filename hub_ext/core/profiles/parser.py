"""Profile sections → `ParsedProfiles`: every problem with its path, every ignored key warned.

Two spellings give the same `Profile` objects (`hub_ext.core.profiles` shows both):
`read_profiles` reads the platform's name-keyed ``profiles``; `read_profile_list` reads
KubeSpawner's / z2jh's ``profile_list`` as it is (a list, or a dict keyed by slug), with every
key KubeSpawner or jupyterhub-fancy-profiles reads (`hub_ext.core.profiles.keys`).

Refused (a problem: the hub does not start), as it would break a spawn or change what runs:
a value KubeSpawner's trait
refuses (checked with the trait itself; a memory size by `hub_ext.core.quantities`, which also reads
Kubernetes' ``8Gi``, with KubeSpawner's meaning of ``4G``), or a callable value of a trait the
platform counts at start (`COUNTED_TRAITS`: resources, CPU, memory, placement; any other trait's
callable is KubeSpawner's, called with the spawner at each spawn: `profile_resolve.called`); a profile without ``display_name``; a value of
the wrong type; more than one accelerator resource type, or not a positive whole number of it; a
CPU or memory guarantee above its limit (sizes compared in bytes by that one meaning); an
accelerator requested by a choice or free-form value (the platform counts accelerators per
profile); an ``unlisted_choice.validation_regex`` that does not compile (a user's value must later
match it *whole*); an option without choices or free-form value; duplicate slugs. Warned
(KubeSpawner ignores it; the path and a did-you-mean are given): an unknown key of a profile,
option, choice or ``unlisted_choice``; a ``kubespawner_override`` key that is not a KubeSpawner
trait (KubeSpawner sets it as a plain attribute, to no effect; the spawners skip it); more than one default (the first counts, as in
KubeSpawner). The platform's own spelling is strict: an unknown key there (its own
``kubespawner_override``'s included), or two defaults, is a problem.

An accelerator name in ``unchecked`` (configured, but it failed to parse) is not reported again
as unknown; a profile with a problem of its own is listed in ``broken`` so a reference to it is
not a second problem.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import re
from typing import Any, Container, Mapping

from slugify import slugify
from traitlets import HasTraits, TraitError

from hub_ext.core.catalog import Accelerator
from hub_ext.core.errors import Problem
from hub_ext.core.profiles import keys
from hub_ext.core.profiles.model import (
    Choice,
    Option,
    ParsedProfiles,
    Profile,
    Unlisted,
    accelerator_resource,
    adhoc_accelerator,
)
from hub_ext.core.quantities import CPU_TRAITS, MEMORY_TRAITS, cpu_hint, memory_bytes

# overrides the platform reads at hub start (limits, free capacity, the pod's placement): a value,
# never a callable; any other trait may be KubeSpawner's callable of the spawner
COUNTED_TRAITS = frozenset({"extra_resource_limits", "extra_resource_guarantees", "node_selector", "tolerations",
                            *MEMORY_TRAITS, *CPU_TRAITS})


@functools.cache
def _kubespawner_trait(name: str):
    from kubespawner import KubeSpawner

    return KubeSpawner.class_traits().get(name)


def trait_refuses(name: str, value: Any) -> str | None:
    """What KubeSpawner's trait `name` says of `value` when set (None: it takes it)."""
    trait = _kubespawner_trait(name)
    if trait is None:
        return None
    probe = type("KubeSpawner", (HasTraits,), {name: copy.deepcopy(trait)})()
    try:
        setattr(probe, name, value)
    except TraitError as e:
        return str(e).replace(" of a KubeSpawner instance", "")
    except Exception as e:  # a trait's own validation failing otherwise: still a value it refuses
        return f"KubeSpawner refuses it ({type(e).__name__}: {e})"
    return None


class _Parser:
    def __init__(self, accelerators: Mapping[str, Accelerator], traits: frozenset[str] | None,
                 unchecked: Container[str] = frozenset()):
        self.accelerators = accelerators
        self.traits = traits
        self.unchecked = unchecked  # accelerator names not to report as unknown (they failed themselves)
        self.problems: list[Problem] = []
        self.warnings: list[Problem] = []

    def problem(self, path: str, message: str) -> None:
        self.problems.append(Problem(path, message))

    def warn(self, path: str, message: str) -> None:
        self.warnings.append(Problem(path, message))

    def unknown_keys(self, raw: Mapping, known: Mapping | set, path: str, strict: bool = False) -> None:
        for key in sorted(set(raw) - set(known), key=str):
            if strict:
                self.problem(f"{path}.{key}", f"unknown key{keys.did_you_mean(key, known)}")
            else:
                self.warn(f"{path}.{key}", keys.unknown(key, known))

    def override(self, raw: Any, path: str, strict: bool = False) -> dict:
        if raw is None:
            return {}
        if not isinstance(raw, Mapping):
            self.problem(path, "must be a mapping of KubeSpawner trait names to values")
            return {}
        for key, value in raw.items():
            if self.traits is not None and key not in self.traits:  # KubeSpawner sets it as a plain attribute
                if strict:
                    self.problem(f"{path}.{key}", f"is not a KubeSpawner trait{keys.did_you_mean(key, self.traits)}")
                else:
                    self.warn(f"{path}.{key}", "is not a KubeSpawner trait, so it has no effect"
                                               f"{keys.did_you_mean(key, self.traits)}")
            elif callable(value):  # KubeSpawner calls it with the spawner at each spawn (`resolved_value`)
                if key in COUNTED_TRAITS:
                    self.problem(f"{path}.{key}", "is a callable: the platform counts accelerators, CPU, memory "
                                                  "and placement when the hub starts, so give a value here (or "
                                                  "make profile_list itself a function of the spawner)")
            elif key in MEMORY_TRAITS and value is not None:
                try:  # the platform's one meaning (`hub_ext.core.quantities`), also where the trait refuses it ('8Gi')
                    memory_bytes(value)
                except ValueError as e:
                    self.problem(f"{path}.{key}", str(e))
            elif self.traits is not None:
                refused = trait_refuses(key, value)
                if refused:
                    self.problem(f"{path}.{key}", refused + (cpu_hint(value) if key in CPU_TRAITS else ""))
        return dict(raw)

    def text(self, raw: Mapping, key: str, path: str, default: str | None = None) -> str | None:
        value = raw.get(key, default)
        if value is not None and not isinstance(value, str):
            self.problem(f"{path}.{key}", "must be a string")
            return default
        return value

    def flag(self, raw: Mapping, key: str, path: str) -> bool:
        value = raw.get(key, False)
        if not isinstance(value, bool):
            self.problem(f"{path}.{key}", "must be true or false")
            return False
        return value

    def first_default(self, items: list, path: str, what: str, strict: bool) -> list:
        """At most one default: a problem (strict), else a warning and the first one counts."""
        marked = [i for i in items if i.default]
        if len(marked) <= 1:
            return items
        names = ", ".join(i.slug for i in marked)
        if strict:
            self.problem(path, f"more than one {what} is marked default: {names}")
            return items
        self.warn(path, f"more than one {what} is marked default ({names}): KubeSpawner uses the first, "
                        f"{marked[0].slug!r}")
        return [dataclasses.replace(i, default=False) if i.default and i is not marked[0] else i for i in items]

    # ---- options -----------------------------------------------------------------------------
    def entries(self, raw: Any, path: str, what: str, known: Mapping):
        """(name, path, entry) for each entry of a mapping of named mappings; problems recorded."""
        if raw is None:
            return
        if not isinstance(raw, Mapping):
            self.problem(path, f"must be a mapping of {what}")
            return
        for name, entry in raw.items():
            epath = f"{path}.{name}"
            if not isinstance(entry, Mapping):
                self.problem(epath, "must be a mapping")
                continue
            self.unknown_keys(entry, known, epath)
            yield name, epath, entry

    def no_accelerator(self, override: Mapping, path: str) -> None:
        """A choice or free-form value may not request an accelerator: the platform counts them per
        profile (entitlement limits, free capacity), so one there would go uncounted."""
        for where in ("extra_resource_limits", "extra_resource_guarantees"):
            given = override.get(where)
            found = sorted(str(r) for r in given if accelerator_resource(str(r))) if isinstance(given, Mapping) else []
            if found:
                self.problem(f"{path}.{where}", f"requests {', '.join(found)} in an option: accelerators are "
                                                "counted per profile; make one profile per accelerator size or "
                                                "count instead")

    def choice(self, key: Any, raw: Mapping, path: str) -> Choice:
        slug = self.text(raw, "slug", path)
        if slug is not None and slug != str(key):
            self.warn(f"{path}.slug", f"differs from the choice's key {str(key)!r}, which is what names it in "
                                      "user_options (KubeSpawner ignores 'slug' here)")
        override = self.override(raw.get("kubespawner_override"), f"{path}.kubespawner_override")
        self.no_accelerator(override, f"{path}.kubespawner_override")
        return Choice(str(key), self.text(raw, "display_name", path, str(key)) or str(key), override,
                      self.flag(raw, "default", path), self.text(raw, "description", path, "") or "")

    def options(self, raw: Any, path: str) -> tuple[Option, ...]:
        out = []
        for name, opath, opt in self.entries(raw, path, "option names to options", keys.OPTION):
            choices = [self.choice(key, ch, cpath) for key, cpath, ch in self.entries(
                opt.get("choices") or {}, f"{opath}.choices", "choice names to choices", keys.CHOICE)]
            choices = self.first_default(choices, f"{opath}.choices", "choice", strict=False)
            unlisted = self.unlisted(opt.get("unlisted_choice"), f"{opath}.unlisted_choice")
            if not choices and unlisted is None:
                self.problem(f"{opath}.choices", "an option needs choices or an enabled unlisted_choice")
            out.append(Option(str(name), self.text(opt, "display_name", opath, str(name)), tuple(choices), unlisted))
        return tuple(out)

    def unlisted(self, raw: Any, path: str) -> Unlisted | None:
        if raw is None:
            return None
        if not isinstance(raw, Mapping):
            self.problem(path, "must be a mapping")
            return None
        self.unknown_keys(raw, keys.UNLISTED, path)
        if not self.flag(raw, "enabled", path):
            return None
        regex = self.text(raw, "validation_regex", path)
        if regex is not None:
            try:
                re.compile(regex)
            except re.error as e:
                self.problem(f"{path}.validation_regex", f"is not a valid regular expression: {e}")
        override = self.override(raw.get("kubespawner_override"), f"{path}.kubespawner_override")
        self.no_accelerator(override, f"{path}.kubespawner_override")
        return Unlisted(self.text(raw, "display_name", path, "Other") or "Other",
                        self.text(raw, "display_name_in_choices", path, "Other...") or "Other...",
                        regex, self.text(raw, "validation_message", path), override,
                        self.text(raw, "description_in_choices", path, "") or "")

    # ---- resources -------------------------------------------------------------------------------
    def _pair(self, raw: Any, path: str, valid, normalise, magnitude, hint: str) -> tuple:
        """A {"guarantee", "limit"} pair: each checked by `valid`, guarantee <= limit by `magnitude`."""
        if raw is None:
            return None, None
        if not isinstance(raw, Mapping):
            self.problem(path, "must be a mapping with 'guarantee' and/or 'limit'")
            return None, None
        self.unknown_keys(raw, {"guarantee", "limit"}, path, strict=True)
        values = []
        for key in ("guarantee", "limit"):
            v = raw.get(key)
            if v is not None and not valid(v):
                self.problem(f"{path}.{key}", f"must be {hint}, not {v!r}")
                v = None
            values.append(normalise(v) if v is not None else None)
        guarantee, limit = values
        if guarantee and limit and magnitude(guarantee) > magnitude(limit):
            self.problem(f"{path}.guarantee", f"{guarantee:g} is more than the limit {limit:g}"
                         if isinstance(guarantee, float) else f"{guarantee} is more than the limit {limit}")
        return guarantee, limit

    def cpu(self, raw: Any, path: str) -> tuple[float | None, float | None]:
        return self._pair(raw, path, lambda v: not isinstance(v, bool) and isinstance(v, (int, float)) and v > 0,
                          float, float, "a positive number of CPUs")

    def memory(self, raw: Any, path: str) -> tuple[str | int | None, str | int | None]:
        return self._pair(raw, path, lambda v: _size(v) is not None, lambda v: v, memory_bytes,
                          "a size such as '512M', '4G' or '8Gi'")

    def accelerator_from_override(self, override: Mapping, path: str) -> tuple[Accelerator | None, int]:
        """The accelerator an override requests in ``extra_resource_limits`` or, as KubeSpawner's own
        example does, in ``extra_resource_guarantees`` alone (Kubernetes needs the limit: the
        platform sets it from the profile's accelerator); both given must be equal."""
        wanted: dict[str, tuple[str, Any]] = {}  # resource → (where, quantity); limits win
        for where in ("extra_resource_guarantees", "extra_resource_limits"):
            given = override.get(where) or {}
            if isinstance(given, Mapping):
                for res, q in given.items():
                    if "/" in str(res) and accelerator_resource(str(res)):
                        if res in wanted and _count(wanted[res][1]) != _count(q):
                            self.problem(f"{path}.extra_resource_guarantees.{res}",
                                         f"must equal extra_resource_limits.{res} ({q!r}): Kubernetes does not "
                                         "overcommit accelerators")
                        wanted[res] = (where, q)
        if len(wanted) > 1:
            where = "extra_resource_limits" if "extra_resource_limits" in override else "extra_resource_guarantees"
            self.problem(f"{path}.{where}", "a container may request one accelerator resource type "
                                            f"only, not {sorted(wanted)}")
            return None, 0
        if not wanted:
            return None, 0
        resource, (where, count) = next(iter(wanted.items()))
        n = _count(count)
        if n is None:
            self.problem(f"{path}.{where}.{resource}", f"must be a positive whole number, not {count!r}")
            return None, 0
        selector = override.get("node_selector") or {}
        for acc in self.accelerators.values():
            if acc.resource == resource and all(selector.get(k) == v for k, v in acc.node_selector):
                return acc, n
        return adhoc_accelerator(resource), n

    def override_resources(self, override: Mapping, path: str) -> tuple[tuple, tuple]:
        """(cpu guarantee, limit), (memory guarantee, limit) of a kubespawner_override; a value of the
        wrong type was reported by its trait, a guarantee above its limit is reported here."""
        cpu = [override.get(t) if isinstance(override.get(t), (int, float)) and not isinstance(override.get(t), bool)
               else None for t in ("cpu_guarantee", "cpu_limit")]
        cpu = [float(v) if v is not None else None for v in cpu]
        mem = [override.get(t) if _size(override.get(t)) is not None else None for t in MEMORY_TRAITS]
        if None not in cpu and cpu[0] > cpu[1]:
            self.problem(f"{path}.cpu_guarantee", f"{cpu[0]:g} is more than cpu_limit {cpu[1]:g}")
        if None not in mem and _size(mem[0]) > _size(mem[1]):
            self.problem(f"{path}.mem_guarantee", f"{mem[0]} is more than mem_limit {mem[1]}")
        return tuple(cpu), tuple(mem)

    # ---- profiles ---------------------------------------------------------------------------------
    def native(self, slug: str, raw: Any) -> Profile | None:
        path = f"profiles[{slug!r}]"
        if not isinstance(raw, Mapping):
            self.problem(path, "must be a mapping")
            return None
        self.unknown_keys(raw, keys.NATIVE, path, strict=True)
        acc, count = None, 0
        if raw.get("accelerator") is not None:
            acc = self.accelerators.get(raw["accelerator"])
            if acc is None and not _is_unchecked(raw["accelerator"], self.unchecked):
                known = ", ".join(sorted(self.accelerators)) or "none configured"
                self.problem(f"{path}.accelerator", f"unknown accelerator {raw['accelerator']!r} (known: {known})")
            count = _count(raw.get("accelerator_count", 1))
            if count is None:
                self.problem(f"{path}.accelerator_count", "must be a positive whole number")
                count = 0
        elif "accelerator_count" in raw:
            self.problem(f"{path}.accelerator_count", "is set but no accelerator is")
        cpu = self.cpu(raw.get("cpu"), f"{path}.cpu")
        mem = self.memory(raw.get("memory"), f"{path}.memory")
        override = self.override(raw.get("kubespawner_override"), f"{path}.kubespawner_override", strict=True)
        if acc is not None and override.get("extra_resource_limits"):
            other, _ = self.accelerator_from_override(override, f"{path}.kubespawner_override")
            if other is not None:
                self.problem(f"{path}.kubespawner_override.extra_resource_limits",
                             "requests an accelerator as well as 'accelerator': choose one")
        options = list(self.options(raw.get("profile_options"), f"{path}.profile_options"))
        images = self.images(raw.get("images"), f"{path}.images")
        if images is not None:
            options.insert(0, images)
        return Profile(str(slug), self.text(raw, "display_name", path, str(slug)),
                       self.text(raw, "description", path, "") or "", self.flag(raw, "default", path),
                       acc, count if acc else 0, cpu[0], cpu[1], mem[0], mem[1], override, tuple(options))

    def images(self, raw: Any, path: str) -> Option | None:
        if raw is None:
            return None
        if not isinstance(raw, Mapping) or not raw:
            self.problem(path, "must be a non-empty mapping of names to {'image': ..., 'display_name': ...}")
            return None
        choices = []
        for name, entry in raw.items():
            epath = f"{path}.{name}"
            if not isinstance(entry, Mapping) or not isinstance(entry.get("image"), str) or not entry["image"]:
                self.problem(f"{epath}.image", "is required (an image reference such as "
                                               "'quay.io/jupyter/pytorch-notebook:2024.10')")
                continue
            self.unknown_keys(entry, keys.IMAGE, epath, strict=True)
            choices.append(Choice(str(name), self.text(entry, "display_name", epath, entry["image"]),
                                  {"image": entry["image"]}, self.flag(entry, "default", epath)))
        if sum(c.default for c in choices) > 1:
            self.problem(path, "more than one image is marked default")
        return Option("image", "Image", tuple(choices))

    def z2jh(self, path: str, raw: Any, key: str | None, index: int) -> Profile | None:
        if not isinstance(raw, Mapping):
            self.problem(path, "must be a mapping")
            return None
        self.unknown_keys(raw, keys.PROFILE, path)
        display = self.text(raw, "display_name", path)
        if not display:
            self.problem(f"{path}.display_name", "is required (KubeSpawner shows it, and makes the slug from it)")
            display = key or f"profile-{index}"
        slug = self.text(raw, "slug", path) or slugify(display)
        override = self.override(raw.get("kubespawner_override"), f"{path}.kubespawner_override")
        acc, count = self.accelerator_from_override(override, f"{path}.kubespawner_override")
        cpu, mem = self.override_resources(override, f"{path}.kubespawner_override")
        return Profile(slug, display, self.text(raw, "description", path, "") or "", self.flag(raw, "default", path),
                       acc, count, cpu[0], cpu[1], mem[0], mem[1], override,
                       self.options(raw.get("profile_options"), f"{path}.profile_options"))


def _count(value) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        n = int(str(value))
    except ValueError:
        return None
    return n if n > 0 else None


def _size(value: Any) -> int | None:
    """Bytes by the platform's one meaning (`hub_ext.core.quantities`), or None (no value, or unusable)."""
    if value is None:
        return None
    try:
        return memory_bytes(value)
    except ValueError:
        return None


def _is_unchecked(name: Any, unchecked: Container[str]) -> bool:
    try:
        return name in unchecked
    except TypeError:  # an unhashable value: reported as unknown
        return False


def _read(parser: _Parser, entries, where: str, strict: bool) -> ParsedProfiles:
    """`entries`: (slug if known, parse → Profile | None). Problems of one profile mark it broken."""
    parsed: list[Profile] = []
    good: list[Profile] = []
    broken: set[str] = set()
    for slug, parse in entries:
        before = len(parser.problems)
        profile = parse()
        if profile is not None:
            parsed.append(profile)
        if profile is not None and len(parser.problems) == before:
            good.append(profile)
        elif profile is not None or slug is not None:
            broken.add(profile.slug if profile is not None else str(slug))
    slugs = [p.slug for p in parsed]
    for slug in sorted({s for s in slugs if slugs.count(s) > 1}):
        parser.problem(where, f"more than one profile has the slug {slug!r}")
    adjusted = parser.first_default(parsed, where, "profile", strict)
    swap = {id(a): b for a, b in zip(parsed, adjusted)}
    good = [swap.get(id(p), p) for p in good]
    if good and not any(p.default for p in good):
        good[0] = dataclasses.replace(good[0], default=True)
    return ParsedProfiles(tuple(good), frozenset(broken), tuple(parser.problems), tuple(parser.warnings))


def read_profiles(raw: Any, accelerators: Mapping[str, Accelerator], kubespawner_traits: frozenset[str] | None = None,
                  unchecked: Container[str] = frozenset()) -> ParsedProfiles:
    """The platform's name-keyed `profiles` dict → what parsed, and every problem."""
    if not isinstance(raw, Mapping):
        return ParsedProfiles((), frozenset(), (Problem("profiles", "must be a mapping of profile names to profiles"),))
    parser = _Parser(accelerators, kubespawner_traits, unchecked)
    return _read(parser, [(slug, lambda slug=slug, entry=entry: parser.native(slug, entry))
                          for slug, entry in raw.items()], "profiles", strict=True)


def read_profile_list(raw: Any, accelerators: Mapping[str, Accelerator],
                      kubespawner_traits: frozenset[str] | None = None,
                      unchecked: Container[str] = frozenset(), where: str = "profile_list") -> ParsedProfiles:
    """KubeSpawner's / z2jh's `profile_list` (list, or dict keyed by slug) → what parsed, and every
    problem; paths start with `where` (``profile_list``, or where a function's result came from)."""
    if isinstance(raw, Mapping):
        entries = [(f"{where}[{key!r}]", {"slug": key, **entry} if isinstance(entry, Mapping) and "slug" not in entry
                    else entry, key) for key, entry in raw.items()]
    elif isinstance(raw, (list, tuple)):
        entries = [(f"{where}[{i}]", entry, None) for i, entry in enumerate(raw)]
    else:
        return ParsedProfiles((), frozenset(), (Problem(where, "must be a list (or a dict keyed by slug) of profiles, "
                                                               f"not {type(raw).__name__}"),))
    parser = _Parser(accelerators, kubespawner_traits, unchecked)
    return _read(parser, [(key, lambda i=i, path=path, entry=entry, key=key: parser.z2jh(path, entry, key, i))
                          for i, (path, entry, key) in enumerate(entries)], where, strict=False)


def parse_profiles(raw: Any, accelerators: Mapping[str, Accelerator],
                   kubespawner_traits: frozenset[str] | None = None) -> tuple[Profile, ...]:
    """The platform's name-keyed `profiles` dict → Profiles (ConfigError listing every problem)."""
    return read_profiles(raw, accelerators, kubespawner_traits).checked()


def parse_profile_list(raw: Any, accelerators: Mapping[str, Accelerator],
                       kubespawner_traits: frozenset[str] | None = None) -> tuple[Profile, ...]:
    """KubeSpawner's / z2jh's `profile_list` (list, or dict keyed by slug) → Profiles."""
    return read_profile_list(raw, accelerators, kubespawner_traits).checked()
