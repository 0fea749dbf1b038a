"""Discovery documents (`/api`, `/apis`, `/apis/{group}`, `/apis/{group}/{version}`, `/version`)
built from the registry, so clients and kubectl find every built-in kind and registered CRD."""

from __future__ import annotations

from . import errors
from .resources import Registry

_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


def version() -> dict:
    return {"major": "1", "minor": "31", "gitVersion": "v1.31.0-standin", "gitCommit": "standin",
            "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "n/a",
            "compiler": "n/a", "platform": "linux/amd64"}


def api_versions(host: str) -> dict:
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": host}]}


def _group_doc(name: str, versions: list[str]) -> dict:
    vs = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": vs, "preferredVersion": vs[0]}


def group_list(registry: Registry) -> dict:
    groups = [_group_doc(g, vs) for g, vs in sorted(registry.groups().items()) if g]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def group(registry: Registry, name: str) -> dict:
    versions = registry.groups().get(name)
    if not versions or not name:
        raise errors.ApiError(404, "NotFound", "the server could not find the requested resource")
    return {"kind": "APIGroup", "apiVersion": "v1", **_group_doc(name, versions)}


def resource_list(registry: Registry, group_name: str, version_name: str) -> dict:
    resources = []
    for rt in registry.all():
        if (rt.group, rt.version) != (group_name, version_name):
            continue
        entry = {"name": rt.plural, "singularName": rt.singular, "namespaced": rt.namespaced, "kind": rt.kind,
                 "verbs": _VERBS}
        if rt.short_names:
            entry["shortNames"] = list(rt.short_names)
        resources.append(entry)
        for sub in sorted(rt.subresources):
            verbs = ["get"] if sub == "log" else ["get", "patch", "update"]
            resources.append({"name": f"{rt.plural}/{sub}", "singularName": "", "namespaced": rt.namespaced,
                              "kind": "Pod" if sub == "log" else rt.kind, "verbs": verbs})
    if not resources:
        raise errors.ApiError(404, "NotFound", "the server could not find the requested resource")
    gv = f"{group_name}/{version_name}" if group_name else version_name
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}
