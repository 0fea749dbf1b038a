"""A user's choices → KubeSpawner settings (pure).

`resolve(profile, user_options)` merges, in KubeSpawner's order, the profile's
``kubespawner_override``, the settings its accelerator, CPU and memory fields stand for
(`resource_settings`), then each option's chosen (or default) choice's override, or its
``unlisted_choice`` override with ``{value}`` replaced by the user's text. `user_options` is
untrusted: anything not offered is refused with a `UserInputError` naming the field, and nothing
is partially applied. A None inside a dict-valued setting is kept in the result: it says "remove
this key from the configured value", as in KubeSpawner. A memory size is given as the trait
reads it with the platform's one meaning (`hub_ext.core.quantities.for_trait`: ``"4G"`` as written,
``"8Gi"`` as its bytes), so the spawners set the settings as they are. `apply_override` is that rule, applying a
dict-valued setting to a spawner's configured value (KubeSpawner's ``recursive_update``, on copies).
"""

from __future__ import annotations

import copy
import re
from typing import Any, Mapping

from hub_ext.core.errors import UserInputError
from hub_ext.core.profiles.model import Profile
from hub_ext.core.quantities import MEMORY_TRAITS, for_trait

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _substitute(value: Any, text: str) -> Any:
    if isinstance(value, str):
        return value.replace("{value}", text)
    if isinstance(value, Mapping):
        return {k: _substitute(v, text) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, text) for v in value]
    return value


class Replacing(dict):
    """A dict-valued override that replaces the configured value instead of merging into it: what
    a None (remove the key) and then a dict (KubeSpawner makes the key anew) come to as one."""


def merge_override(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """Two overrides as one, `extra` applied after `base` (KubeSpawner's order): dict values merge
    recursively, others replace. A None is kept (it is an instruction: `apply_override` removes
    that key from the configured value), so a profile's ``environment: {A: None}`` still removes
    ``A`` when a choice adds ``environment: {D: "5"}``; a later value replaces a None, a later dict
    after a None becomes `Replacing`."""
    out = dict(base)
    for key, value in extra.items():
        before = out.get(key)
        if isinstance(value, Mapping) and isinstance(before, Mapping):
            merged = merge_override(before, value)
            out[key] = Replacing(merged) if isinstance(before, Replacing) else merged
        elif isinstance(value, Mapping) and key in out and before is None:
            out[key] = Replacing(merge_override({}, value))
        else:
            out[key] = value
    return out


def called(value: Any, spawner: Any) -> Any:
    """An override value as KubeSpawner applies it: a callable is called with the spawner."""
    return value(spawner) if callable(value) else value


def apply_override(configured: Any, override: Any) -> Any:
    """A trait's value after `override` (one setting of a resolved plan) is applied to its
    `configured` value, by KubeSpawner's `_apply_overrides` rule (``recursive_update``), on copies:
    a dict merges recursively into a configured dict (None removes a key; a `Replacing` dict starts
    from nothing), anything else replaces the value. Neither argument is changed."""
    if not isinstance(override, Mapping) or (not isinstance(configured, Mapping) and not isinstance(override, Replacing)):
        return copy.deepcopy(override)
    out = {} if isinstance(override, Replacing) else copy.deepcopy(dict(configured))
    for key, value in override.items():
        if isinstance(value, Mapping):
            out[key] = apply_override(out[key] if isinstance(out.get(key), Mapping) else {}, value)
        elif value is None:
            out.pop(key, None)
        else:
            out[key] = copy.deepcopy(value)
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
    for trait in MEMORY_TRAITS:  # checked when the hub started (`profile_parser`): usable
        if trait in settings:
            settings[trait] = for_trait(settings[trait])
    return settings
