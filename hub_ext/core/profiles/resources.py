"""The resources a profile asks for, checked: CPU and memory guarantees and limits, and the one
accelerator a ``kubespawner_override`` requests (`parser` reads the profiles; `checks` records).

Guarantees of `ResourceChecks`:

- ``cpu``/``memory`` pairs of the platform's spelling: a positive number of CPUs, a size such as
  ``512M``, ``4G`` or ``8Gi`` (`hub_ext.core.quantities`' one meaning); a guarantee above its limit
  is a problem (sizes compared in bytes), and so is any key but ``guarantee`` and ``limit``;
- `override_resources`: the same for ``cpu_guarantee``/``cpu_limit`` and the memory traits of a
  ``kubespawner_override`` (a value of the wrong type was reported by its trait already);
- `accelerator_from_override`: the accelerator requested in ``extra_resource_limits`` or, as
  KubeSpawner's own example does, ``extra_resource_guarantees`` alone (both given must be equal),
  matched against the catalogue by resource and node selector, else an ad-hoc accelerator; more
  than one accelerator resource type, or not a positive whole number of it, is a problem;
- `no_accelerator`: a choice or free-form value may not request an accelerator (the platform counts
  them per profile: entitlement limits, free capacity).
"""

from __future__ import annotations

from typing import Any, Mapping

from hub_ext.core.catalog import Accelerator
from hub_ext.core.profiles.checks import Checks
from hub_ext.core.profiles.model import accelerator_resource, adhoc_accelerator
from hub_ext.core.quantities import MEMORY_TRAITS, memory_bytes


class ResourceChecks(Checks):
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

    def pair(self, raw: Any, path: str, valid, normalise, magnitude, hint: str) -> tuple:
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
        return self.pair(raw, path, lambda v: not isinstance(v, bool) and isinstance(v, (int, float)) and v > 0,
                          float, float, "a positive number of CPUs")

    def memory(self, raw: Any, path: str) -> tuple[str | int | None, str | int | None]:
        return self.pair(raw, path, lambda v: _size(v) is not None, lambda v: v, memory_bytes,
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
                        if res in wanted and positive_count(wanted[res][1]) != positive_count(q):
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
        n = positive_count(count)
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


def positive_count(value) -> int | None:
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
