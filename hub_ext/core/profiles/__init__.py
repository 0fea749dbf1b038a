"""Profiles: what a user picks on the spawn form, parsed once into frozen objects.

Two spellings are accepted and give the same `Profile` objects:

- the platform's own (``c.PlatformSpawner.profiles``), a name-keyed dict::

      {"mig-small": {"display_name": "MIG 1g.5gb", "accelerator": "1g.5gb", "accelerator_count": 1,
                     "cpu": {"guarantee": 1, "limit": 4}, "memory": {"guarantee": "4G", "limit": "8G"},
                     "images": {"pytorch": {"image": "quay.io/jupyter/pytorch-notebook:2024.10",
                                            "default": True}}}}

- KubeSpawner's / z2jh's ``profile_list`` as it is (a list, or a dict keyed by slug) with
  ``display_name``, ``slug``, ``description``, ``default``, ``kubespawner_override`` and
  ``profile_options`` (``choices`` with ``display_name``, ``description``, ``slug``,
  ``default``, ``kubespawner_override``; ``unlisted_choice``), and jupyterhub-fancy-profiles'
  keys (`hub_ext.core.profiles.keys` lists every key and its meaning). The accelerator is read from
  ``kubespawner_override.extra_resource_limits``: matched against the catalogue, or taken as an
  ad-hoc accelerator when the catalogue has none for that resource. ``profile_list`` may also be
  a function of the spawner (maybe async), as in KubeSpawner: `hub_ext.spawners.profile_source` calls it
  for each form and spawn and checks its result the same way.

The modules: `hub_ext.core.profiles.model` (the frozen objects), `hub_ext.core.profiles.keys` (the keys and
their meaning), `hub_ext.core.profiles.parser` (configuration → objects: what is refused, what is only
warned about; its checks in `hub_ext.core.profiles.checks` and `.resources`),
`hub_ext.core.profiles.resolve` (a user's choices → KubeSpawner settings), `hub_ext.spawners.profile_source`
(a callable ``profile_list``), `hub_ext.core.quantities` (memory sizes: one meaning, KubeSpawner's
1024-based ``K``/``M``/``G``/``T`` and Kubernetes' ``Ki``/``Mi``/``Gi``/``k``).
This module gathers their public names.
"""

from __future__ import annotations

from hub_ext.core.profiles.model import (
                            Choice,
                            Option,
                            ParsedProfiles,
                            Profile,
                            Unlisted,
                            accelerator_resource,
                            adhoc_accelerator,
)
from hub_ext.core.profiles.parser import parse_profile_list, parse_profiles, read_profile_list, read_profiles
from hub_ext.core.profiles.resolve import merge_override, resolve, resource_settings
from hub_ext.core.quantities import memory_bytes

__all__ = ["Choice", "Option", "ParsedProfiles", "Profile", "Unlisted", "accelerator_resource", "adhoc_accelerator",
           "memory_bytes", "parse_profile_list", "parse_profiles", "read_profile_list", "read_profiles",
           "merge_override", "resolve", "resource_settings"]
