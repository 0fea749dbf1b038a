"""Profiles: what a user picks on the spawn form, parsed once into frozen objects.

Two spellings are accepted and give the same `Profile` objects:

- the platform's own (``c.PlatformSpawner.profiles``), a name-keyed dict::

      {"mig-small": {"display_name": "MIG 1g.5gb", "accelerator": "1g.5gb", "accelerator_count": 1,
                     "cpu": {"guarantee": 1, "limit": 4}, "memory": {"guarantee": "4G", "limit": "8G"},
                     "images": {"pytorch": {"image": "quay.io/jupyter/pytorch-notebook:2024.10",
                                            "default": True}}}}

- KubeSpawner's / z2jh's ``profile_list`` as it is (a list, or a dict keyed by slug) with
  ``display_name``, ``slug``, ``description``, ``default``, ``kubespawner_override`` and
  ``profile_options`` (``choices``, ``unlisted_choice``). The accelerator is read from
  ``kubespawner_override.extra_resource_limits``: matched against the catalogue, or taken as an
  ad-hoc accelerator when the catalogue has none for that resource.

Guarantees: exactly one default profile (the first, when none is marked); at most one default
choice per option; ``kubespawner_override`` keys must be KubeSpawner traits (an error, not
ignored); a profile asks for at most one accelerator resource type, a positive whole number of
them; CPU and memory guarantees do not exceed limits; an ``unlisted_choice.validation_regex``
compiles, and a user's value must match it *whole* (KubeSpawner anchors only the start).
Every problem is collected into one `ConfigError` with its path (``profiles['gpu'].cpu.limit``,
``profile_list[2].kubespawner_override.cpu_guarentee``). `read_profiles` / `read_profile_list`
also give what did parse (`ParsedProfiles`), so later sections (entitlements) can still be
checked; an accelerator name in ``unchecked`` (configured, but it failed to parse) is not reported
again as unknown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Container, Mapping

from slugify import slugify

from .catalog import MIG_PROFILE, Accelerator
from .errors import ConfigError, Problem, UserInputError

_MEMORY = re.compile(r"(?P<n>\d+(\.\d+)?)(?P<unit>[KMGT]i?)?")
_MEMORY_FACTORS = {None: 1, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
                   "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
_NATIVE_KEYS = {"display_name", "description", "default", "accelerator", "accelerator_count", "cpu", "memory",
                "images", "kubespawner_override", "profile_options"}
_Z2JH_KEYS = {"display_name", "slug", "description", "default", "kubespawner_override", "profile_options"}
_OPTION_KEYS = {"display_name", "choices", "unlisted_choice"}
_CHOICE_KEYS = {"display_name", "default", "kubespawner_override"}
_UNLISTED_KEYS = {"enabled", "display_name", "display_name_in_choices", "validation_regex", "validation_message",
                  "kubespawner_override"}


@dataclass(frozen=True)
class Choice:
    slug: str
    display_name: str
    override: Mapping[str, Any] = field(default_factory=dict)
    default: bool = False


@dataclass(frozen=True)
class Unlisted:
    display_name: str
    display_name_in_choices: str = "Other..."
    validation_regex: str | None = None
    validation_message: str | None = None
    override: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Option:
    name: str
    display_name: str
    choices: tuple[Choice, ...]
    unlisted: Unlisted | None = None

    @property
    def default_choice(self) -> Choice | None:
        return next((c for c in self.choices if c.default), self.choices[0] if self.choices else None)


@dataclass(frozen=True)
class Profile:
    slug: str
    display_name: str
    description: str = ""
    default: bool = False
    accelerator: Accelerator | None = None
    accelerator_count: int = 0
    cpu_guarantee: float | None = None
    cpu_limit: float | None = None
    mem_guarantee: str | None = None
    mem_limit: str | None = None
    override: Mapping[str, Any] = field(default_factory=dict)
    options: tuple[Option, ...] = ()


def memory_bytes(value: str) -> float:
    m = _MEMORY.fullmatch(value)
    if not m:
        raise ValueError(value)
    return float(m["n"]) * _MEMORY_FACTORS[m["unit"]]


@dataclass(frozen=True)
class ParsedProfiles:
    """What a profile section gave, problems or not."""
    profiles: tuple[Profile, ...]  # those without a problem of their own
    broken: frozenset[str]  # slugs of those with one (a reference to one is not a second problem)
    problems: tuple[Problem, ...]

    def checked(self) -> tuple[Profile, ...]:
        """The profiles, or a ConfigError listing every problem."""
        if self.problems:
            raise ConfigError(list(self.problems))
        return self.profiles


class _Parser:
    def __init__(self, accelerators: Mapping[str, Accelerator], traits: frozenset[str] | None,
                 unchecked: Container[str] = frozenset()):
        self.accelerators = accelerators
        self.traits = traits
        self.unchecked = unchecked  # accelerator names not to report as unknown (they failed themselves)
        self.problems: list[Problem] = []

    def problem(self, path: str, message: str) -> None:
        self.problems.append(Problem(path, message))

    def unknown_keys(self, raw: Mapping, allowed: set, path: str) -> None:
        for key in sorted(set(raw) - allowed, key=str):
            self.problem(f"{path}.{key}", "unknown key")

    def override(self, raw: Any, path: str) -> dict:
        if raw is None:
            return {}
        if not isinstance(raw, Mapping):
            self.problem(path, "must be a mapping of KubeSpawner trait names to values")
            return {}
        if self.traits is not None:
            for key in raw:
                if key not in self.traits:
                    self.problem(f"{path}.{key}", "is not a KubeSpawner trait")
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

    # ---- options -----------------------------------------------------------------------------
    def entries(self, raw: Any, path: str, what: str, keys: set):
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
            self.unknown_keys(entry, keys, epath)
            yield name, epath, entry

    def options(self, raw: Any, path: str) -> tuple[Option, ...]:
        out = []
        for name, opath, opt in self.entries(raw, path, "option names to options", _OPTION_KEYS):
            choices = []
            for slug, cpath, ch in self.entries(opt.get("choices") or {}, f"{opath}.choices",
                                                "choice names to choices", _CHOICE_KEYS):
                choices.append(Choice(str(slug), self.text(ch, "display_name", cpath, str(slug)),
                                      self.override(ch.get("kubespawner_override"), f"{cpath}.kubespawner_override"),
                                      self.flag(ch, "default", cpath)))
            if sum(c.default for c in choices) > 1:
                self.problem(f"{opath}.choices", "more than one choice is marked default")
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
        self.unknown_keys(raw, _UNLISTED_KEYS, path)
        if not self.flag(raw, "enabled", path):
            return None
        regex = self.text(raw, "validation_regex", path)
        if regex is not None:
            try:
                re.compile(regex)
            except re.error as e:
                self.problem(f"{path}.validation_regex", f"is not a valid regular expression: {e}")
        return Unlisted(self.text(raw, "display_name", path, "Other") or "Other",
                        self.text(raw, "display_name_in_choices", path, "Other...") or "Other...",
                        regex, self.text(raw, "validation_message", path),
                        self.override(raw.get("kubespawner_override"), f"{path}.kubespawner_override"))

    # ---- resources -------------------------------------------------------------------------------
    def _pair(self, raw: Any, path: str, valid, normalise, magnitude, hint: str) -> tuple:
        """A {"guarantee", "limit"} pair: each checked by `valid`, guarantee <= limit by `magnitude`."""
        if raw is None:
            return None, None
        if not isinstance(raw, Mapping):
            self.problem(path, "must be a mapping with 'guarantee' and/or 'limit'")
            return None, None
        self.unknown_keys(raw, {"guarantee", "limit"}, path)
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

    def memory(self, raw: Any, path: str) -> tuple[str | None, str | None]:
        return self._pair(raw, path, lambda v: isinstance(v, str) and bool(_MEMORY.fullmatch(v)), str,
                          memory_bytes, "a size such as '512M', '4G' or '8Gi'")

    def accelerator_from_override(self, override: Mapping, path: str) -> tuple[Accelerator | None, int]:
        limits = override.get("extra_resource_limits") or {}
        if not isinstance(limits, Mapping):
            return None, 0
        found = [(res, q) for res, q in limits.items() if "/" in str(res) and _accelerator_resource(str(res))]
        if len(found) > 1:
            self.problem(f"{path}.extra_resource_limits", "a container may request one accelerator resource type "
                                                          f"only, not {sorted(r for r, _ in found)}")
            return None, 0
        if not found:
            return None, 0
        resource, count = found[0]
        n = _count(count)
        if n is None:
            self.problem(f"{path}.extra_resource_limits.{resource}", f"must be a positive whole number, not {count!r}")
            return None, 0
        selector = override.get("node_selector") or {}
        for acc in self.accelerators.values():
            if acc.resource == resource and all(selector.get(k) == v for k, v in acc.node_selector):
                return acc, n
        return adhoc_accelerator(resource), n

    # ---- profiles ---------------------------------------------------------------------------------
    def native(self, slug: str, raw: Any) -> Profile | None:
        path = f"profiles[{slug!r}]"
        if not isinstance(raw, Mapping):
            self.problem(path, "must be a mapping")
            return None
        self.unknown_keys(raw, _NATIVE_KEYS, path)
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
        override = self.override(raw.get("kubespawner_override"), f"{path}.kubespawner_override")
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
            self.unknown_keys(entry, {"image", "display_name", "default"}, epath)
            choices.append(Choice(str(name), self.text(entry, "display_name", epath, entry["image"]),
                                  {"image": entry["image"]}, self.flag(entry, "default", epath)))
        if sum(c.default for c in choices) > 1:
            self.problem(path, "more than one image is marked default")
        return Option("image", "Image", tuple(choices))

    def z2jh(self, index: int, raw: Any, key: str | None) -> Profile | None:
        path = f"profile_list[{index}]" if key is None else f"profile_list[{key!r}]"
        if not isinstance(raw, Mapping):
            self.problem(path, "must be a mapping")
            return None
        self.unknown_keys(raw, _Z2JH_KEYS, path)
        display = self.text(raw, "display_name", path)
        if not display:
            self.problem(f"{path}.display_name", "is required")
            display = key or f"profile-{index}"
        slug = self.text(raw, "slug", path) or slugify(display)
        override = self.override(raw.get("kubespawner_override"), f"{path}.kubespawner_override")
        acc, count = self.accelerator_from_override(override, f"{path}.kubespawner_override")
        cpu = self.cpu({k: override[t] for k, t in (("guarantee", "cpu_guarantee"), ("limit", "cpu_limit"))
                        if override.get(t) is not None}, f"{path}.kubespawner_override.cpu")
        mem = self.memory({k: override[t] for k, t in (("guarantee", "mem_guarantee"), ("limit", "mem_limit"))
                           if isinstance(override.get(t), str)}, f"{path}.kubespawner_override.mem")
        return Profile(slug, display, self.text(raw, "description", path, "") or "", self.flag(raw, "default", path),
                       acc, count, cpu[0], cpu[1], mem[0], mem[1], override,
                       self.options(raw.get("profile_options"), f"{path}.profile_options"))


def _accelerator_resource(resource: str) -> bool:
    return resource.endswith("/gpu") or resource.startswith("nvidia.com/mig-") or resource in (
        "habana.ai/gaudi", "aws.amazon.com/neuron", "google.com/tpu")


def _count(value) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        n = int(str(value))
    except ValueError:
        return None
    return n if n > 0 else None


def adhoc_accelerator(resource: str) -> Accelerator:
    """An accelerator for a resource the catalogue does not declare (z2jh profiles as they are: no
    node selector and no toleration added, as KubeSpawner adds none)."""
    if resource.startswith("nvidia.com/mig-") and MIG_PROFILE.fullmatch(resource[len("nvidia.com/mig-"):]):
        profile = resource[len("nvidia.com/mig-"):]
        return Accelerator(profile, "mig", f"MIG {profile} slice", resource, tolerations=(),
                           mig_profile=profile, strategy="mixed")
    kind = "gpu" if resource == "nvidia.com/gpu" else "device"
    return Accelerator(resource, kind, "GPU" if kind == "gpu" else resource, resource, tolerations=())


def _is_unchecked(name: Any, unchecked: Container[str]) -> bool:
    try:
        return name in unchecked
    except TypeError:  # an unhashable value: reported as unknown
        return False


def _read(parser: _Parser, entries, where: str) -> ParsedProfiles:
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
    defaults = [p for p in parsed if p.default]
    if len(defaults) > 1:
        parser.problem(where, "more than one profile is marked default: " + ", ".join(p.slug for p in defaults))
    if good and not any(p.default for p in good):
        first = good[0]
        good[0] = Profile(**{**first.__dict__, "default": True})
    return ParsedProfiles(tuple(good), frozenset(broken), tuple(parser.problems))


def read_profiles(raw: Any, accelerators: Mapping[str, Accelerator], kubespawner_traits: frozenset[str] | None = None,
                  unchecked: Container[str] = frozenset()) -> ParsedProfiles:
    """The platform's name-keyed `profiles` dict → what parsed, and every problem."""
    if not isinstance(raw, Mapping):
        return ParsedProfiles((), frozenset(), (Problem("profiles", "must be a mapping of profile names to profiles"),))
    parser = _Parser(accelerators, kubespawner_traits, unchecked)
    return _read(parser, [(slug, lambda slug=slug, entry=entry: parser.native(slug, entry))
                          for slug, entry in raw.items()], "profiles")


def read_profile_list(raw: Any, accelerators: Mapping[str, Accelerator],
                      kubespawner_traits: frozenset[str] | None = None,
                      unchecked: Container[str] = frozenset()) -> ParsedProfiles:
    """KubeSpawner's / z2jh's `profile_list` (list, or dict keyed by slug) → what parsed, and every problem."""
    if isinstance(raw, Mapping):
        entries = [(i, entry, key) for i, (key, entry) in enumerate(raw.items())]
        entries = [(i, {"slug": key, **entry} if isinstance(entry, Mapping) and "slug" not in entry else entry, key)
                   for i, entry, key in entries]
    elif isinstance(raw, list):
        entries = [(i, entry, None) for i, entry in enumerate(raw)]
    else:
        return ParsedProfiles((), frozenset(), (Problem("profile_list", "must be a list (or a dict keyed by slug) "
                                                                        "of profiles"),))
    parser = _Parser(accelerators, kubespawner_traits, unchecked)
    return _read(parser, [(key, lambda i=i, entry=entry, key=key: parser.z2jh(i, entry, key))
                          for i, entry, key in entries], "profile_list")


def parse_profiles(raw: Any, accelerators: Mapping[str, Accelerator],
                   kubespawner_traits: frozenset[str] | None = None) -> tuple[Profile, ...]:
    """The platform's name-keyed `profiles` dict → Profiles (ConfigError listing every problem)."""
    return read_profiles(raw, accelerators, kubespawner_traits).checked()


def parse_profile_list(raw: Any, accelerators: Mapping[str, Accelerator],
                       kubespawner_traits: frozenset[str] | None = None) -> tuple[Profile, ...]:
    """KubeSpawner's / z2jh's `profile_list` (list, or dict keyed by slug) → Profiles."""
    return read_profile_list(raw, accelerators, kubespawner_traits).checked()


# ---- a user's choices → KubeSpawner settings (pure) ------------------------------------------------
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _substitute(value: Any, text: str) -> Any:
    if isinstance(value, str):
        return value.replace("{value}", text)
    if isinstance(value, Mapping):
        return {k: _substitute(v, text) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, text) for v in value]
    return value


def merge_override(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """KubeSpawner's rule: dict values merge recursively (None removes a key); others replace."""
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            merged = merge_override(out[key], value)
            out[key] = {k: v for k, v in merged.items() if v is not None}
        else:
            out[key] = value
    return out


def resource_settings(profile: Profile) -> dict[str, Any]:
    """The KubeSpawner traits a profile's accelerator, CPU and memory fields stand for."""
    out: dict[str, Any] = {}
    for trait, value in (("cpu_guarantee", profile.cpu_guarantee), ("cpu_limit", profile.cpu_limit),
                         ("mem_guarantee", profile.mem_guarantee), ("mem_limit", profile.mem_limit)):
        if value is not None:
            out[trait] = value
    acc = profile.accelerator
    if acc is not None:
        out["extra_resource_limits"] = acc.limits(profile.accelerator_count)
        if acc.node_selector:
            out["node_selector"] = acc.node_selector_dict()
        if acc.tolerations:
            out["tolerations"] = acc.tolerations_list()
    return out


def resolve(profile: Profile, user_options: Mapping[str, Any]) -> dict[str, Any]:
    """The KubeSpawner settings for `profile` with the user's option choices.

    `user_options` is untrusted input (form POST or REST): option name → choice slug, or
    ``<option>--unlisted-choice`` → free text. Unknown keys, unknown choices, a disabled
    unlisted choice and text that does not match ``validation_regex`` as a whole are refused
    with a `UserInputError` naming the field; nothing is partially applied.
    """
    options = {o.name: o for o in profile.options}
    allowed = set(options) | {f"{name}--unlisted-choice" for name in options}
    for key in user_options:
        if key not in allowed:
            raise UserInputError(f"profile_options.{key}", f"the profile {profile.slug!r} has no such option")
    settings = merge_override(profile.override, resource_settings(profile))
    for name, option in options.items():
        free = user_options.get(f"{name}--unlisted-choice")
        picked = user_options.get(name)
        if free not in (None, ""):
            field_name = f"profile_options.{name}--unlisted-choice"
            if option.unlisted is None:
                raise UserInputError(field_name, "free-form values are not enabled for this option")
            if not isinstance(free, str) or _CONTROL.search(free) or len(free) > 1000:
                raise UserInputError(field_name, "must be a single line of text")
            regex = option.unlisted.validation_regex
            if regex and not re.fullmatch(regex, free):
                raise UserInputError(field_name, option.unlisted.validation_message
                                     or f"must match the pattern {regex}")
            settings = merge_override(settings, _substitute(option.unlisted.override, free))
            continue
        if picked in (None, ""):
            choice = option.default_choice
        else:
            choice = next((c for c in option.choices if c.slug == picked), None)
            if choice is None:
                known = ", ".join(c.slug for c in option.choices)
                raise UserInputError(f"profile_options.{name}", f"unknown choice {picked!r} (choose one of: {known})")
        if choice is not None:
            settings = merge_override(settings, choice.override)
    return settings
