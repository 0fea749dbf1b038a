"""The checks every profile section is read with: each problem and warning recorded with its path,
keys checked against what KubeSpawner reads, strings and flags typed, one default at most, and a
``kubespawner_override`` checked value by value (`hub_ext.core.profiles.parser` reads the sections
with them; `hub_ext.core.profiles.resources` adds the resource checks).

Guarantees of `Checks`:

- nothing is raised: every problem (the hub does not start) and every warning (KubeSpawner ignores
  it) is a `Problem` with the path of the value at fault, in the order found;
- an unknown key is warned with a did-you-mean (`keys.unknown`), or a problem where the spelling
  is strict (the platform's own);
- `override`: a value KubeSpawner's trait refuses is a problem (checked with the trait itself,
  `trait_refuses`; a memory size by `hub_ext.core.quantities`, which also reads Kubernetes' ``8Gi``,
  with KubeSpawner's meaning of ``4G``); a callable value of a trait the platform counts at start
  (`COUNTED_TRAITS`: resources, CPU, memory, placement) is a problem, any other trait's callable is
  KubeSpawner's (called with the spawner at each spawn); a key that is not a KubeSpawner trait is
  warned (KubeSpawner sets it as a plain attribute, to no effect), or a problem where strict;
- `first_default`: more than one default is a problem where strict, else warned and the first
  counts, as in KubeSpawner.

Pure but for loading KubeSpawner's trait definitions (`kubespawner`, imported on the first check of
a trait value).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
from typing import Any, Container, Mapping

from traitlets import HasTraits, TraitError

from hub_ext.core.catalog import Accelerator
from hub_ext.core.errors import Problem
from hub_ext.core.profiles import keys
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


class Checks:
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
