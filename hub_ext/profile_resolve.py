"""A user's choices → KubeSpawner settings (pure).

`resolve(profile, user_options)` merges, in KubeSpawner's order, the profile's
``kubespawner_override``, the settings its accelerator, CPU and memory fields stand for
(`resource_settings`), then each option's chosen (or default) choice's override, or its
``unlisted_choice`` override with ``{value}`` replaced by the user's text. `user_options` is
untrusted: anything not offered is refused with a `UserInputError` naming the field, and nothing
is partially applied.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from .errors import UserInputError
from .profile_model import Profile

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
