"""A plan's settings on a spawner's traits, and the configured values back before the next plan
(part `ConfiguredTraits` of both platform spawners).

Guarantees: `apply` sets each setting of a plan that names a trait of the spawner as KubeSpawner
applies an override (`hub_ext.core.profiles.resolve.apply_override`: a dict-valued trait merged
recursively, None removing a key, others replaced; a callable value called with the spawner
first), or, for the traits named `added`, the configured items followed by the plan's that are not
among them (a profile adds volumes; it never drops the home volume); `skip` names traits left
alone. The first time a trait is changed here (or, for those named `always`, at the first
`restore`), its value is kept (a deep copy), and `restore` puts every kept value back, so each
spawn starts from the configured values whatever an earlier (maybe failed) spawn of the same
spawner object set.
"""

from __future__ import annotations

import copy
from typing import Any, Iterable, Mapping

from hub_ext.core.profiles.resolve import apply_override, called


class ConfiguredTraits:
    """The configured values of the traits plans change on `spawner`; `always`: traits a spawner
    sets itself (not through `set`) that are kept from the first `restore` on."""

    def __init__(self, spawner, always: Iterable[str] = ()):
        self.spawner, self.always = spawner, tuple(always)
        self.values: dict[str, Any] = {}

    def restore(self) -> None:
        """Put back every trait an earlier plan changed."""
        for trait in self.always:
            self.values.setdefault(trait, copy.deepcopy(getattr(self.spawner, trait)))
        for trait, value in self.values.items():
            setattr(self.spawner, trait, copy.deepcopy(value))

    def set(self, trait: str, value: Any) -> None:
        self.values.setdefault(trait, copy.deepcopy(getattr(self.spawner, trait)))
        setattr(self.spawner, trait, value)

    def apply(self, settings: Mapping[str, Any], skip: Iterable[str] = (), added: Iterable[str] = ()) -> None:
        """A plan's `settings` (trait → value) on the spawner's traits."""
        skip, added = set(skip), set(added)
        for trait, value in settings.items():
            if trait in skip or not self.spawner.has_trait(trait):
                continue
            current = getattr(self.spawner, trait)
            if trait in added:
                value = list(current) + [i for i in value if i not in current]
            else:  # KubeSpawner's rule
                value = apply_override(current, called(value, self.spawner))
            self.set(trait, value)
