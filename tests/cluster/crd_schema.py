"""Structural-schema pruning and validation of custom objects, offline, as kube-apiserver does
for CRDs: the unit tier checks what the platform emits against the published CRDs without a
cluster (the kube tier sends the same objects to the real API server).

`prune(obj, schema)` drops fields the schema does not declare (unless a level has
`x-kubernetes-preserve-unknown-fields`) and nulls where the schema is not `nullable`, returning the
dotted paths it dropped (served as `Warning` headers, or refused under `fieldValidation=Strict`).
`validate(obj, schema)` returns `(field, reason, message)` causes for a 422 Invalid. CEL rules
(`x-kubernetes-validations`) are not evaluated here; the real API server evaluates them.
"""

from __future__ import annotations

import json

import jsonschema

_ROOT_KEEP = ("apiVersion", "kind", "metadata")


def prune(obj: dict, schema: dict) -> list[str]:
    dropped: list[str] = []
    for key in list(obj):
        if key in _ROOT_KEEP:
            continue
        _prune_key(obj, key, schema, "", dropped)
    return dropped


def _prune_key(container: dict, key: str, schema: dict, prefix: str, dropped: list[str]) -> None:
    path = f"{prefix}{key}"
    props = schema.get("properties")
    if props is not None and key in props:
        sub = props[key]
    elif isinstance(schema.get("additionalProperties"), dict):
        sub = schema["additionalProperties"]
    elif schema.get("x-kubernetes-preserve-unknown-fields") or schema.get("additionalProperties") is True:
        return
    else:
        dropped.append(path)
        del container[key]
        return
    value = container[key]
    if value is None and not sub.get("nullable"):
        del container[key]
        return
    _prune_value(value, sub, path, dropped)


def _prune_value(value, schema: dict, path: str, dropped: list[str]) -> None:
    if isinstance(value, dict):
        if schema.get("x-kubernetes-embedded-resource"):
            keep = _ROOT_KEEP
        else:
            keep = ()
        if schema.get("type") in (None, "object") and (
            "properties" in schema or "additionalProperties" in schema
            or not schema.get("x-kubernetes-preserve-unknown-fields")
        ):
            for k in list(value):
                if k not in keep:
                    _prune_key(value, k, schema, f"{path}.", dropped)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            _prune_value(item, schema["items"], f"{path}[{i}]", dropped)


def _to_jsonschema(schema: dict) -> dict:
    """OpenAPI v3 `nullable` → JSON-Schema type lists; everything else passes through."""
    if isinstance(schema, dict):
        out = {k: _to_jsonschema(v) for k, v in schema.items() if not k.startswith("x-kubernetes-validations")}
        if schema.get("nullable") and "type" in out:
            out["type"] = [out["type"], "null"]
        return out
    if isinstance(schema, list):
        return [_to_jsonschema(s) for s in schema]
    return schema


_VALIDATORS: dict[int, tuple[dict, object]] = {}


def _validator(original: dict):
    schema = _to_jsonschema(original)
    # apiVersion/kind/metadata are checked by the generic object rules, not the CRD schema
    props = dict(schema.get("properties") or {})
    for k in _ROOT_KEEP:
        props.pop(k, None)
    if "properties" in schema:
        schema["properties"] = props
    return jsonschema.Draft4Validator(schema)


def validator_for(schema: dict):
    """Compiled once per schema object (the schema is kept alive beside it, so ids stay unique)."""
    hit = _VALIDATORS.get(id(schema))
    if hit is None or hit[0] is not schema:
        hit = _VALIDATORS[id(schema)] = (schema, _validator(schema))
    return hit[1]


def _path(error) -> str:
    out = ""
    for part in error.absolute_path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def validate(obj: dict, schema: dict) -> list[tuple[str, str, str]]:
    causes = []
    for error in sorted(validator_for(schema).iter_errors(obj), key=lambda e: list(map(str, e.absolute_path))):
        path = _path(error)
        if error.validator == "required":
            missing = error.message.split("'")[1] if "'" in error.message else "?"
            field = f"{path}.{missing}" if path else missing
            causes.append((field, "FieldValueRequired", "Required value"))
        elif error.validator == "enum":
            allowed = ", ".join(json.dumps(v) for v in error.validator_value)
            causes.append((path, "FieldValueNotSupported",
                           f"Unsupported value: {json.dumps(error.instance)}: supported values: {allowed}"))
        else:
            causes.append((path or "<root>", "FieldValueInvalid",
                           f"Invalid value: {json.dumps(error.instance)[:200]}: {path} in body {_short(error)}"))
    return causes


def _short(error) -> str:
    v = error.validator
    if v == "type":
        t = error.validator_value
        return f"must be of type {t if isinstance(t, str) else t[0]}"
    if v in ("minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems", "pattern"):
        return f"should satisfy {v} {error.validator_value}"
    return error.message
