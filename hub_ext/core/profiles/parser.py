"""Profile sections → `ParsedProfiles`: every problem with its path, every ignored key warned.

Two spellings give the same `Profile` objects (`hub_ext.core.profiles` shows both):
`read_profiles` reads the platform's name-keyed ``profiles``; `read_profile_list` reads
KubeSpawner's / z2jh's ``profile_list`` as it is (a list, or a dict keyed by slug), with every
key KubeSpawner or jupyterhub-fancy-profiles reads (`hub_ext.core.profiles.keys`).

Refused (a problem: the hub does not start), as it would break a spawn or change what runs:
a ``kubespawner_override`` value KubeSpawner's trait refuses, or a callable value of a trait the
platform counts at start (`checks.Checks.override`); a profile without ``display_name``; a value of
the wrong type; more than one accelerator resource type, or not a positive whole number of it; a
CPU or memory guarantee above its limit; an accelerator requested by a choice or free-form value
(`resources.ResourceChecks`); an ``unlisted_choice.validation_regex`` that does not compile (a
user's value must later match it *whole*); an option without choices or free-form value; duplicate
slugs. Warned (KubeSpawner ignores it; the path and a did-you-mean are given): an unknown key of a
profile, option, choice or ``unlisted_choice``; a ``kubespawner_override`` key that is not a
KubeSpawner trait (KubeSpawner sets it as a plain attribute, to no effect; the spawners skip it);
more than one default (the first counts, as in KubeSpawner). The platform's own spelling is strict:
an unknown key there (its own ``kubespawner_override``'s included), or two defaults, is a problem.

An accelerator name in ``unchecked`` (configured, but it failed to parse) is not reported again
as unknown; a profile with a problem of its own is listed in ``broken`` so a reference to it is
not a second problem.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Container, Mapping

from slugify import slugify

from hub_ext.core.catalog import Accelerator
from hub_ext.core.errors import Problem
from hub_ext.core.profiles import keys
from hub_ext.core.profiles.model import Choice, Option, ParsedProfiles, Profile, Unlisted
from hub_ext.core.profiles.resources import ResourceChecks, positive_count


class _Parser(ResourceChecks):
    """The sections of both spellings read into `Profile` objects, with `Checks` and `ResourceChecks`."""

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
            count = positive_count(raw.get("accelerator_count", 1))
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
