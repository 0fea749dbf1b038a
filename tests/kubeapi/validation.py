"""Object rules kube-apiserver applies before storing: names, labels, annotations, and the
built-in kinds' own checks and defaults (the ones the platform depends on, notably extended
resources such as `nvidia.com/gpu`, whose requests must equal their limits).

`check_metadata` and `check_object` return `(field, reason, message)` causes; an empty list means
valid. `apply_defaults` fills what the real registry strategies fill on create.
"""

from __future__ import annotations

import base64
import binascii
import re

from .quantity import parse_quantity

DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_STANDARD_RESOURCES = {"cpu", "memory", "ephemeral-storage", "storage", "pods"}

Cause = tuple[str, str, str]


def name_problem(name: str, label: bool) -> str | None:
    if label:
        if len(name) > 63:
            return "must be no more than 63 characters"
        if not DNS1123_LABEL.fullmatch(name):
            return ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
                    "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc')")
        return None
    if len(name) > 253:
        return "must be no more than 253 characters"
    if not DNS1123_SUBDOMAIN.fullmatch(name):
        return ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                "and must start and end with an alphanumeric character (e.g. 'example.com')")
    return None


def _qualified_key_problem(key: str) -> str | None:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not DNS1123_SUBDOMAIN.fullmatch(prefix)):
        return "prefix part must be a lowercase RFC 1123 subdomain"
    if not name or len(name) > 63 or not _QUALIFIED_NAME.fullmatch(name):
        return ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
                "with an alphanumeric character, at most 63 characters")
    return None


def check_metadata(meta: dict, label_name: bool) -> list[Cause]:
    causes: list[Cause] = []
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        causes.append(("metadata.name", "FieldValueRequired", "Required value: name or generateName is required"))
    else:
        problem = name_problem(name, label_name)
        if problem:
            causes.append(("metadata.name", "FieldValueInvalid", f'Invalid value: "{name}": {problem}'))
    for key, value in (meta.get("labels") or {}).items():
        problem = _qualified_key_problem(key)
        if problem:
            causes.append(("metadata.labels", "FieldValueInvalid", f'Invalid value: "{key}": {problem}'))
        if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.fullmatch(value):
            causes.append(("metadata.labels", "FieldValueInvalid",
                           f'Invalid value: "{value}": a valid label must be an empty string or consist of '
                           "alphanumeric characters, '-', '_' or '.', at most 63 characters"))
    annotations = meta.get("annotations") or {}
    for key, value in annotations.items():
        problem = _qualified_key_problem(key)
        if problem:
            causes.append(("metadata.annotations", "FieldValueInvalid", f'Invalid value: "{key}": {problem}'))
        if not isinstance(value, str):
            causes.append(("metadata.annotations", "FieldValueInvalid", f"Invalid value: {key}: must be a string"))
    if sum(len(k) + len(str(v)) for k, v in annotations.items()) > 256 * 1024:
        causes.append(("metadata.annotations", "FieldValueTooLong", "Too long: must have at most 262144 bytes"))
    for i, fin in enumerate(meta.get("finalizers") or []):
        if not isinstance(fin, str) or _qualified_key_problem(fin):
            causes.append((f"metadata.finalizers[{i}]", "FieldValueInvalid", f'Invalid value: "{fin}"'))
    for i, ref in enumerate(meta.get("ownerReferences") or []):
        for k in ("apiVersion", "kind", "name", "uid"):
            if not (isinstance(ref, dict) and ref.get(k)):
                causes.append((f"metadata.ownerReferences[{i}].{k}", "FieldValueRequired", "Required value"))
    return causes


def _check_resources(path: str, resources: dict) -> list[Cause]:
    causes: list[Cause] = []
    limits = resources.get("limits") or {}
    requests = resources.get("requests") or {}
    parsed = {}
    for section, values in (("limits", limits), ("requests", requests)):
        for res, q in values.items():
            try:
                parsed[(section, res)] = parse_quantity(q)
            except ValueError as e:
                causes.append((f"{path}.{section}[{res}]", "FieldValueInvalid", f"Invalid value: {q!r}: {e}"))
    for res in set(limits) | set(requests):
        lim, req = parsed.get(("limits", res)), parsed.get(("requests", res))
        extended = "/" in res and not res.startswith("kubernetes.io/") and res not in _STANDARD_RESOURCES
        if extended:
            for q in (lim, req):
                if q is not None and q != q.to_integral_value():
                    causes.append((f"{path}.requests[{res}]", "FieldValueInvalid",
                                   f"Invalid value: {q}: must be an integer"))
            if res in requests and res not in limits:
                causes.append((f"{path}.limits", "FieldValueRequired", "Required value: Limit must be set for non "
                               "overcommitable resources"))
            elif lim is not None and req is not None and lim != req:
                causes.append((f"{path}.requests", "FieldValueInvalid",
                               f'Invalid value: "{requests[res]}": must be equal to {res} limit of {limits[res]}'))
        elif lim is not None and req is not None and req > lim:
            causes.append((f"{path}.requests", "FieldValueInvalid",
                           f'Invalid value: "{requests[res]}": must be less than or equal to {res} limit of '
                           f"{limits[res]}"))
    return causes


def _check_pod_spec(spec: dict, path: str) -> list[Cause]:
    causes: list[Cause] = []
    containers = spec.get("containers")
    if not containers:
        return [(f"{path}.containers", "FieldValueRequired", "Required value")]
    seen = set()
    for group in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(group) or []):
            cpath = f"{path}.{group}[{i}]"
            name = c.get("name")
            if not name:
                causes.append((f"{cpath}.name", "FieldValueRequired", "Required value"))
            elif name_problem(name, True):
                causes.append((f"{cpath}.name", "FieldValueInvalid", f'Invalid value: "{name}": {name_problem(name, True)}'))
            elif name in seen:
                causes.append((f"{cpath}.name", "FieldValueDuplicate", f'Duplicate value: "{name}"'))
            seen.add(name)
            if not c.get("image"):
                causes.append((f"{cpath}.image", "FieldValueRequired", "Required value"))
            causes += _check_resources(f"{cpath}.resources", c.get("resources") or {})
            volume_names = {v.get("name") for v in spec.get("volumes") or []}
            for j, m in enumerate(c.get("volumeMounts") or []):
                if m.get("name") not in volume_names:
                    causes.append((f"{cpath}.volumeMounts[{j}].name", "FieldValueNotFound",
                                   f'Not found: "{m.get("name")}"'))
    return causes


def check_object(kind: str, obj: dict) -> list[Cause]:
    """Kind-specific rules for built-in kinds."""
    if kind == "Pod":
        return _check_pod_spec(obj.get("spec") or {}, "spec")
    if kind == "Job":
        template = ((obj.get("spec") or {}).get("template") or {})
        causes = _check_pod_spec(template.get("spec") or {}, "spec.template.spec")
        policy = (template.get("spec") or {}).get("restartPolicy")
        if policy not in ("Never", "OnFailure"):
            causes.append(("spec.template.spec.restartPolicy", "FieldValueNotSupported",
                           f'Unsupported value: "{policy or "Always"}": supported values: "OnFailure", "Never"'))
        return causes
    if kind == "Secret":
        causes = []
        for key, value in (obj.get("data") or {}).items():
            try:
                base64.b64decode(value or "", validate=True)
            except (binascii.Error, TypeError, ValueError):
                causes.append((f"data[{key}]", "FieldValueInvalid", "Invalid value: <secret contents redacted>: "
                               "illegal base64 data"))
        return causes
    if kind == "PersistentVolumeClaim":
        spec = obj.get("spec") or {}
        causes = []
        if not spec.get("accessModes"):
            causes.append(("spec.accessModes", "FieldValueRequired", "Required value: at least 1 access mode is required"))
        if not ((spec.get("resources") or {}).get("requests") or {}).get("storage"):
            causes.append(("spec.resources[storage]", "FieldValueRequired", "Required value"))
        return causes
    return []


def apply_defaults(kind: str, obj: dict) -> None:
    if kind == "Pod":
        _default_pod_spec(obj.setdefault("spec", {}))
    elif kind == "Job":
        spec = obj.setdefault("spec", {})
        spec.setdefault("backoffLimit", 6)
        spec.setdefault("completions", 1)
        spec.setdefault("parallelism", 1)
        _default_pod_spec(spec.setdefault("template", {}).setdefault("spec", {}))
    elif kind == "Secret":
        obj.setdefault("type", "Opaque")
        string_data = obj.pop("stringData", None) or {}
        data = obj.setdefault("data", {})
        for k, v in string_data.items():
            data[k] = base64.b64encode(str(v).encode()).decode()
    elif kind == "Namespace":
        obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj["metadata"]["name"]


def _default_pod_spec(spec: dict) -> None:
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("serviceAccountName", spec.get("serviceAccount") or "default")
    for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        image = c.get("image") or ""
        tagged = ":" in image.rsplit("/", 1)[-1] and not image.endswith(":latest")
        c.setdefault("imagePullPolicy", "IfNotPresent" if tagged or "@" in image else "Always")
        c.setdefault("terminationMessagePath", "/dev/termination-log")
        resources = c.setdefault("resources", {})
        limits = resources.get("limits") or {}
        if limits:
            requests = resources.setdefault("requests", {})
            for res, q in limits.items():
                requests.setdefault(res, q)
