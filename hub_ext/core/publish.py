"""The catalogue as the world outside the hub sees it: JSON for the platform API and for the
catalogue ConfigMap in every project namespace (read by the notebook server and the kubectl
plugin). Pure; one shape for both, so they never disagree."""

from __future__ import annotations

from typing import Iterable

from hub_ext.core.catalog import Accelerator
from hub_ext.core.entitlements import Project
from hub_ext.core.profiles import Profile

CATALOG_VERSION = 1


def accelerator_json(acc: Accelerator) -> dict:
    return {"name": acc.name, "type": acc.type, "display_name": acc.display_name, "resource": acc.resource,
            "mig_profile": acc.mig_profile, "node_selector": acc.node_selector_dict(),
            "tolerations": acc.tolerations_list(), "strategy": acc.strategy, "product": acc.product}


def accelerator_from_json(doc: dict) -> Accelerator:
    """The inverse of `accelerator_json` (for readers of the catalogue ConfigMap)."""
    return Accelerator(name=doc["name"], type=doc["type"], display_name=doc["display_name"],
                       resource=doc["resource"], node_selector=tuple(sorted((doc.get("node_selector") or {}).items())),
                       tolerations=tuple(tuple(sorted(t.items())) for t in doc.get("tolerations") or ()),
                       mig_profile=doc.get("mig_profile"), strategy=doc.get("strategy"), product=doc.get("product"))


def profile_json(p: Profile) -> dict:
    return {"slug": p.slug, "display_name": p.display_name, "description": p.description, "default": p.default,
            "accelerator": p.accelerator.name if p.accelerator else None, "accelerator_count": p.accelerator_count,
            "cpu": {"guarantee": p.cpu_guarantee, "limit": p.cpu_limit},
            "memory": {"guarantee": p.mem_guarantee, "limit": p.mem_limit},
            "options": [{"name": o.name, "display_name": o.display_name, "choices": [c.slug for c in o.choices],
                         "unlisted": o.unlisted is not None} for o in p.options]}


def catalog_json(accelerators: Iterable[Accelerator], profiles: Iterable[Profile],
                 project: Project | None = None) -> dict:
    """The catalogue; with `project`, only the profiles usable there, and its limits."""
    out = {"version": CATALOG_VERSION, "accelerators": [accelerator_json(a) for a in accelerators],
           "profiles": [profile_json(p) for p in profiles if project is None or p.slug in project.profiles]}
    if project is not None:
        out["project"] = {"name": project.name, "display_name": project.display_name, "personal": project.personal,
                          "limits": None if project.limits is None else dict(project.limits)}
    return out
