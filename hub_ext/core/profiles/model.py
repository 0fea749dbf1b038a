"""The parsed profile objects (frozen) and the small pure helpers they need.

A `Profile` is what a user picks on the spawn form: its accelerator, CPU and memory, the
KubeSpawner settings it overrides and its `Option`s (each a set of `Choice`s and maybe a free-form
`Unlisted` value). `ParsedProfiles` is what a profile section gave: the profiles without problems,
the slugs of those with, every problem (refused: the hub does not start) and every warning (a key
KubeSpawner ignores: logged, and printed by ``mlplatform check-config``). Nothing here reads
configuration; `hub_ext.core.profiles.parser` builds these objects.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from hub_ext.core.catalog import MIG_PROFILE, Accelerator
from hub_ext.core.errors import ConfigError, Problem


@dataclass(frozen=True)
class Choice:
    slug: str
    display_name: str
    override: Mapping[str, Any] = field(default_factory=dict)
    default: bool = False
    description: str = ""


@dataclass(frozen=True)
class Unlisted:
    display_name: str
    display_name_in_choices: str = "Other..."
    validation_regex: str | None = None
    validation_message: str | None = None
    override: Mapping[str, Any] = field(default_factory=dict)
    description_in_choices: str = ""


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
    mem_guarantee: str | int | None = None  # as written; `hub_ext.core.quantities` gives its one meaning
    mem_limit: str | int | None = None
    override: Mapping[str, Any] = field(default_factory=dict)
    options: tuple[Option, ...] = ()


@dataclass(frozen=True)
class ParsedProfiles:
    """What a profile section gave, problems or not."""
    profiles: tuple[Profile, ...]  # those without a problem of their own
    broken: frozenset[str]  # slugs of those with one (a reference to one is not a second problem)
    problems: tuple[Problem, ...]
    warnings: tuple[Problem, ...] = ()  # what KubeSpawner would ignore: reported, not refused

    def checked(self) -> tuple[Profile, ...]:
        """The profiles, or a ConfigError listing every problem."""
        if self.problems:
            raise ConfigError(list(self.problems))
        return self.profiles


def accelerator_resource(resource: str) -> bool:
    """Whether an extended resource name is an accelerator (GPU, MIG slice, Gaudi, Neuron, TPU)."""
    return resource.endswith("/gpu") or resource.startswith("nvidia.com/mig-") or resource in (
        "habana.ai/gaudi", "aws.amazon.com/neuron", "google.com/tpu")


def adhoc_accelerator(resource: str) -> Accelerator:
    """An accelerator for a resource the catalogue does not declare (z2jh profiles as they are: no
    node selector and no toleration added, as KubeSpawner adds none)."""
    if resource.startswith("nvidia.com/mig-") and MIG_PROFILE.fullmatch(resource[len("nvidia.com/mig-"):]):
        profile = resource[len("nvidia.com/mig-"):]
        return Accelerator(profile, "mig", f"MIG {profile} slice", resource, tolerations=(),
                           mig_profile=profile, strategy="mixed")
    kind = "gpu" if resource == "nvidia.com/gpu" else "device"
    return Accelerator(resource, kind, "GPU" if kind == "gpu" else resource, resource, tolerations=())
