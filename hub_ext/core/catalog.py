"""The accelerator catalogue: what a notebook or job may ask the cluster for.

Parsed once, when the hub (or `mlplatform check-config`) loads its configuration, from a
name-keyed dict into frozen `Accelerator`s; every problem is reported together in one
`ConfigError`, each with its path (``accelerators['a100'].product``). Guarantees:

- Each accelerator maps to exactly one Kubernetes extended resource, so a container requests
  one accelerator resource type only.
- Whole GPUs: ``nvidia.com/gpu``, optionally pinned to a product through the GPU Feature
  Discovery node label ``nvidia.com/gpu.product``.
- MIG slices under the NVIDIA device plugin's ``mixed`` strategy: ``nvidia.com/mig-<profile>``
  (``1g.5gb`` … ``7g.40gb``, the 80 GB names ``1g.10gb`` … ``7g.80gb``, any ``<n>g.<m>gb``
  with optional ``+me``); under the ``single`` strategy: ``nvidia.com/gpu`` on nodes whose
  ``nvidia.com/gpu.product`` is ``<product>-MIG-<profile>`` (so ``product`` is required).
- Other vendors by resource name (``amd.com/gpu``, ``habana.ai/gaudi``).
- Node selectors and tolerations per accelerator; the NVIDIA taint toleration
  (``nvidia.com/gpu: Exists``) is added for NVIDIA resources unless ``tolerations`` is given.

Example (``c.PlatformSpawner.accelerators``)::

    {
        "a100": {"type": "gpu", "product": "NVIDIA-A100-SXM4-40GB"},
        "1g.5gb": {"type": "mig", "profile": "1g.5gb"},
        "3g.20gb-single": {"type": "mig", "profile": "3g.20gb", "strategy": "single",
                           "product": "NVIDIA-A100-SXM4-40GB"},
        "mi250": {"type": "device", "resource": "amd.com/gpu"},
    }
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from hub_ext.core.errors import ConfigError, Problem

PRODUCT_LABEL = "nvidia.com/gpu.product"
NVIDIA_GPU = "nvidia.com/gpu"
MIG_PROFILE = re.compile(r"(?P<compute>[1-7])g\.(?P<memory>\d+)gb(?P<media>\+me)?")
# <vendor-domain>/<name>, as Kubernetes requires of extended resources
EXTENDED_RESOURCE = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
NAME = re.compile(r"[a-z0-9]([-a-z0-9_.]*[a-z0-9])?")
_KEYS = {
    "gpu": {"type", "display_name", "product", "resource", "node_selector", "tolerations"},
    "mig": {"type", "display_name", "profile", "strategy", "product", "node_selector", "tolerations"},
    "device": {"type", "display_name", "resource", "node_selector", "tolerations"},
}
_DEFAULT_TOLERATION = (("effect", "NoSchedule"), ("key", NVIDIA_GPU), ("operator", "Exists"))


@dataclass(frozen=True)
class Accelerator:
    name: str
    type: str  # "gpu" | "mig" | "device"
    display_name: str
    resource: str
    node_selector: tuple[tuple[str, str], ...] = ()
    tolerations: tuple[tuple[tuple[str, Any], ...], ...] = ()
    mig_profile: str | None = None
    strategy: str | None = None  # MIG only: "mixed" | "single"
    product: str | None = None

    def limits(self, count: int) -> dict[str, str]:
        """The container `resources.limits` entry for `count` of this accelerator."""
        return {self.resource: str(count)}

    def node_selector_dict(self) -> dict[str, str]:
        return dict(self.node_selector)

    def tolerations_list(self) -> list[dict[str, Any]]:
        return [dict(t) for t in self.tolerations]


def _str_map(value, path: str, problems: list[Problem]) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        problems.append(Problem(path, "must be a mapping of label names to string values"))
        return ()
    return tuple(sorted(value.items()))


_TOLERATION_KEYS = {"key", "operator", "value", "effect", "tolerationSeconds"}


def _tolerations(value, path: str, problems: list[Problem]) -> tuple:
    if not isinstance(value, list):
        problems.append(Problem(path, "must be a list of tolerations"))
        return ()
    out = []
    for i, tol in enumerate(value):
        if not isinstance(tol, Mapping) or not set(tol) <= _TOLERATION_KEYS:
            extra = sorted(set(tol) - _TOLERATION_KEYS) if isinstance(tol, Mapping) else None
            problems.append(Problem(f"{path}[{i}]", f"unknown keys {extra}" if extra else "must be a mapping"))
            continue
        if tol.get("operator", "Equal") not in ("Equal", "Exists"):
            problems.append(Problem(f"{path}[{i}].operator", "must be 'Equal' or 'Exists'"))
        if tol.get("effect") not in (None, "", "NoSchedule", "PreferNoSchedule", "NoExecute"):
            problems.append(Problem(f"{path}[{i}].effect", "must be NoSchedule, PreferNoSchedule or NoExecute"))
        out.append(tuple(sorted(tol.items())))
    return tuple(out)


def _one(name: str, raw: Any, problems: list[Problem]) -> Accelerator | None:
    path = f"accelerators[{name!r}]"
    before = len(problems)
    if not isinstance(name, str) or not NAME.fullmatch(name):
        problems.append(Problem(path, "names are lower-case letters, digits, '-', '_' and '.'"))
    if not isinstance(raw, Mapping):
        problems.append(Problem(path, "must be a mapping"))
        return None
    kind = raw.get("type")
    if kind not in _KEYS:
        problems.append(Problem(f"{path}.type", f"must be one of 'gpu', 'mig', 'device', not {kind!r}"))
        return None
    for key in sorted(set(raw) - _KEYS[kind]):
        problems.append(Problem(f"{path}.{key}", f"unknown key for a {kind!r} accelerator"))
    display = raw.get("display_name")
    if display is not None and not isinstance(display, str):
        problems.append(Problem(f"{path}.display_name", "must be a string"))
    product = raw.get("product")
    if product is not None and (not isinstance(product, str) or not product):
        problems.append(Problem(f"{path}.product", "must be a non-empty string (a nvidia.com/gpu.product value)"))
        product = None
    selector = dict(_str_map(raw.get("node_selector", {}), f"{path}.node_selector", problems))
    profile = strategy = None
    if kind == "gpu":
        resource = raw.get("resource", NVIDIA_GPU)
        if product:
            selector[PRODUCT_LABEL] = product
        display = display or (f"GPU ({product})" if product else "GPU")
    elif kind == "mig":
        profile = raw.get("profile")
        strategy = raw.get("strategy", "mixed")
        if not isinstance(profile, str) or not MIG_PROFILE.fullmatch(profile):
            problems.append(Problem(f"{path}.profile", f"must be a MIG profile such as '1g.5gb' or '3g.20gb', "
                                                       f"not {profile!r}"))
            return None
        if strategy not in ("mixed", "single"):
            problems.append(Problem(f"{path}.strategy", f"must be 'mixed' or 'single', not {strategy!r}"))
        if strategy == "single":
            resource = NVIDIA_GPU
            if not product:
                problems.append(Problem(f"{path}.product", "is required with the 'single' MIG strategy (the GPU "
                                                           "product, e.g. 'NVIDIA-A100-SXM4-40GB')"))
            else:
                selector[PRODUCT_LABEL] = f"{product}-MIG-{profile}"
        else:
            resource = f"nvidia.com/mig-{profile}"
            if product:
                selector[PRODUCT_LABEL] = product
        display = display or f"MIG {profile} slice"
    else:
        resource = raw.get("resource")
        display = display or str(resource)
    if not isinstance(resource, str) or not EXTENDED_RESOURCE.fullmatch(resource) or resource.startswith(
            ("kubernetes.io/", "requests.")):
        problems.append(Problem(f"{path}.resource", f"must be an extended resource name such as 'amd.com/gpu', "
                                                    f"not {resource!r}"))
    if "tolerations" in raw:
        tolerations = _tolerations(raw["tolerations"], f"{path}.tolerations", problems)
    else:
        tolerations = (_DEFAULT_TOLERATION,) if str(resource).startswith("nvidia.com/") else ()
    if len(problems) > before:
        return None
    return Accelerator(name=name, type=kind, display_name=display, resource=resource,
                       node_selector=tuple(sorted(selector.items())), tolerations=tolerations,
                       mig_profile=profile, strategy=strategy, product=product)


def parse_accelerators(raw: Any) -> dict[str, Accelerator]:
    """Name → Accelerator, or ConfigError listing every problem."""
    problems: list[Problem] = []
    if not isinstance(raw, Mapping):
        raise ConfigError([Problem("accelerators", "must be a mapping of names to accelerator settings")])
    out = {}
    for name, entry in raw.items():
        acc = _one(name, entry, problems)
        if acc is not None:
            out[name] = acc
    seen: dict[tuple, str] = {}
    for acc in out.values():
        ident = (acc.resource, acc.node_selector)
        if ident in seen:
            problems.append(Problem(f"accelerators[{acc.name!r}]", f"requests the same resource on the same nodes "
                                                                   f"as {seen[ident]!r}"))
        seen.setdefault(ident, acc.name)
    if problems:
        raise ConfigError(problems)
    return out
