"""PATCH bodies by Content-Type: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and an
approximation of strategic merge patch (lists of named things merged by their key).

`apply_patch` raises `invalid`-style errors through `PatchError`; a body that does not fit its
Content-Type (a list for merge patch, an object for JSON patch) is refused, as kube-apiserver does.
"""

from __future__ import annotations

import copy

import jsonpatch

MERGE = "application/merge-patch+json"
JSON = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"

# list field name -> merge key, for strategic merge (the keys Kubernetes' Go types declare)
_MERGE_KEYS = {
    "containers": "name", "initContainers": "name", "ephemeralContainers": "name", "env": "name",
    "volumes": "name", "volumeMounts": "mountPath", "volumeDevices": "devicePath", "ports": "containerPort",
    "conditions": "type", "imagePullSecrets": "name", "ownerReferences": "uid", "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey", "resourceClaims": "name", "taints": "key",
    "addresses": "type",
}
_SET_LISTS = {"finalizers"}


class PatchError(Exception):
    pass


def merge_patch(target, patch):
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def strategic_patch(target, patch, field: str | None = None):
    if isinstance(patch, dict):
        if patch.get("$patch") == "replace":
            return {k: v for k, v in patch.items() if k != "$patch"}
        if patch.get("$patch") == "delete":
            return None
        out = dict(target) if isinstance(target, dict) else {}
        for k, v in patch.items():
            if k.startswith("$"):
                continue
            if v is None:
                out.pop(k, None)
            elif isinstance(v, list):
                out[k] = _strategic_list(out.get(k), v, k)
            else:
                merged = strategic_patch(out.get(k), v, k)
                if merged is None:
                    out.pop(k, None)
                else:
                    out[k] = merged
        return out
    return copy.deepcopy(patch)


def _strategic_list(target, patch: list, field: str):
    key = _MERGE_KEYS.get(field)
    current = list(target) if isinstance(target, list) else []
    if field in _SET_LISTS:
        return current + [v for v in patch if v not in current]
    if not key or not all(isinstance(p, dict) for p in patch):
        return copy.deepcopy(patch)
    for item in patch:
        if item.get("$patch") == "replace" and len(item) == 1:
            return []
        ident = item.get(key)
        idx = next((i for i, c in enumerate(current) if isinstance(c, dict) and c.get(key) == ident), None)
        if item.get("$patch") == "delete":
            if idx is not None:
                current.pop(idx)
        elif idx is None:
            current.append({k: v for k, v in item.items() if k != "$patch"})
        else:
            current[idx] = strategic_patch(current[idx], item, field)
    return current


def apply_patch(obj: dict, body, content_type: str) -> dict:
    if content_type == MERGE:
        if not isinstance(body, dict):
            raise PatchError("merge patch body must be a JSON object")
        return merge_patch(obj, body)
    if content_type == STRATEGIC:
        if not isinstance(body, dict):
            raise PatchError("strategic merge patch body must be a JSON object")
        return strategic_patch(obj, body)
    if content_type == JSON:
        if not isinstance(body, list):
            raise PatchError("json patch body must be a JSON array of operations")
        try:
            return jsonpatch.apply_patch(obj, body)
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, TypeError, KeyError) as e:
            raise PatchError(f"the server rejected our request due to an error in our request: {e}") from None
    raise ValueError(content_type)
