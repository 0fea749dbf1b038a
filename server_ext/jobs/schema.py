"""Google's own `ml.v1` schemas (the bundled discovery document), used to read job documents.

`coerce(value, schema, path)` turns a document as users write it (a gcloud ``--config`` YAML,
REST JSON) into the API's canonical JSON shape, by the discovery document's field types:

- objects: only the schema's properties; an unknown field is refused with its path
  (``trainingInput.masterConfig.acceleratorConfig.cuont``) and, when close, the likely name;
- ``int64`` fields are strings of a whole number (``"4"``), as the API sends them; ``4`` and
  ``"4"`` are both accepted, ``4.5`` and ``"four"`` are not, nor a number outside the format's
  range (``int32``, ``int64``, ``uint64``);
- ``number`` (double) fields must be finite: NaN and ±Infinity (YAML's ``.nan``/``.inf``, the
  ``NaN``/``Infinity`` Python's JSON reader lets through) are refused;
- booleans accept ``true``/``false`` and YAML-ish spellings (``"yes"``, ``"True"``, ``1``, ``0``);
- enums must be one of the listed values (case-insensitive on input, ``-`` read as ``_``,
  upper-case out), except for fields named in `OPEN_ENUMS` (the accelerator type, which the
  platform extends with MIG slices: the job model checks those against the catalogue);
- ``google-datetime`` strings must be RFC 3339 timestamps; ``google-duration`` strings Google's
  duration syntax, whole or decimal seconds with an ``s`` (``7200s``, ``1.5s``, at most 9
  decimals and `MAX_DURATION_S`); ``additionalProperties`` maps (labels) must map strings to
  strings;
- every string (and map key) must be text a process can be given: no NUL character and no lone
  surrogate (``\\ud800``, which JSON can carry but UTF-8 cannot encode).

Pure; raises `UserInputError` naming the field, or `UserInputErrors` naming every field that is
wrong (an unknown field, a wrong type or enum value anywhere in the document: all told at once).
"""

from __future__ import annotations

import datetime
import difflib
import functools
import json
import math
import pathlib
import re
from typing import Any

from hub_ext.core.errors import UserInputError, collect, errors_of

DISCOVERY = pathlib.Path(__file__).parent / "data" / "ml-v1-discovery.json"
OPEN_ENUMS = ("acceleratorConfig.type",)
_TRUE = {"true", "yes", "y", "on", "1"}
_FALSE = {"false", "no", "n", "off", "0"}
MAX_DURATION_S = 315_576_000_000  # google.protobuf.Duration's largest (10,000 years)
_DURATION = re.compile(r"(?P<seconds>[0-9]+)(?:\.[0-9]{1,9})?s")
RANGES = {"int32": (-2**31, 2**31 - 1), "int64": (-2**63, 2**63 - 1), "uint32": (0, 2**32 - 1),
          "uint64": (0, 2**64 - 1)}


@functools.cache
def schemas() -> dict[str, dict]:
    return json.loads(DISCOVERY.read_text())["schemas"]


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def coerce(value: Any, schema: dict | str, path: str = "") -> Any:
    """`value` as `schema` reads it, or `UserInputError`(s) naming every field that is wrong."""
    with collect() as problems:
        out = _coerce(value, schema, path, problems)
    return out


def _coerce(value: Any, schema: dict | str, path: str, problems: collect) -> Any:
    if isinstance(schema, str):
        schema = schemas()[schema]
    if "$ref" in schema:
        return _coerce(value, schemas()[schema["$ref"]], path, problems)
    kind = schema.get("type")
    where = path or "job"
    if kind == "object" and "properties" in schema:
        if not isinstance(value, dict):
            raise UserInputError(where, "must be a mapping of fields")
        out = {}
        props = schema["properties"]
        for key, item in value.items():  # every field's mistake told at once, not only the first
            if key not in props:
                close = difflib.get_close_matches(str(key), props, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                problems.add(_join(path, str(key)), f"unknown field{hint}")
            elif item is not None:
                _keep(problems, out, key, item, props[key], _join(path, key))
        return out
    if kind == "object":  # a map (labels, webAccessUris)
        if not isinstance(value, dict):
            raise UserInputError(where, "must be a mapping")
        inner = schema.get("additionalProperties") or {"type": "string"}
        for k in value:
            _check_text(str(k), f"{where}.{k}")
        return {str(k): _coerce(v, inner, f"{where}.{k}", problems) for k, v in value.items()}
    if kind == "array":
        if not isinstance(value, list):
            raise UserInputError(where, "must be a list")
        items: dict[int, Any] = {}
        for i, v in enumerate(value):
            _keep(problems, items, i, v, schema.get("items") or {}, f"{where}[{i}]")
        return [items[i] for i in sorted(items)]
    if kind == "boolean":
        return _boolean(value, where)
    if kind == "string" and schema.get("format") in ("int64", "uint64"):
        return _int64(value, where, schema["format"])
    if kind == "integer":
        return int(_int64(value, where, schema.get("format") or "int32"))
    if kind == "number":
        return _double(value, where)
    if kind == "string":
        return _string(value, schema, where)
    return value


def _keep(problems: collect, out: dict, key: Any, item: Any, schema: dict, where: str) -> None:
    """`out[key]` = `item` coerced by `schema`, or its mistake kept in `problems` (and no `key`)."""
    try:
        out[key] = _coerce(item, schema, where, problems)
    except UserInputError as e:
        problems.errors.extend(errors_of(e))


def _boolean(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower() if isinstance(value, (str, int)) else None
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise UserInputError(where, "must be true or false")


def _int64(value: Any, where: str, fmt: str = "int64") -> str:
    """A whole number in `fmt`'s range (`RANGES`), as text."""
    if isinstance(value, bool):
        raise UserInputError(where, "must be a whole number")
    low, high = RANGES.get(fmt, RANGES["int64"])
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and re.fullmatch(r"-?[0-9]+", value.strip()):
        text = value.strip()  # more than 40 digits is beyond every range (and int() refuses ~4300)
        value = int(text) if len(text) <= 40 else (low - 1 if text.startswith("-") else high + 1)
    if not isinstance(value, int):
        raise UserInputError(where, "must be a whole number")
    if not low <= value <= high:
        raise UserInputError(where, f"must be a whole number from {low} to {high} ({fmt})")
    return str(value)


def _double(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise UserInputError(where, "must be a number")
    try:
        number = float(value)
    except (ValueError, OverflowError):
        raise UserInputError(where, "must be a number") from None
    if not math.isfinite(number):
        raise UserInputError(where, "must be a finite number (not NaN or infinity)")
    return number


def _string(value: Any, schema: dict, where: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise UserInputError(where, "must be text")
    text = str(value)
    _check_text(text, where)
    enum = schema.get("enum")
    if enum:
        upper = text.strip().upper().replace("-", "_").replace(".", "_")
        if where.endswith(OPEN_ENUMS):
            return upper
        if upper not in enum:
            raise UserInputError(where, f"must be one of {', '.join(e for e in enum if not e.endswith('UNSPECIFIED'))}")
        return upper
    if schema.get("format") == "google-datetime":
        try:
            datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise UserInputError(where, "must be an RFC 3339 timestamp such as 2026-01-31T12:00:00Z") from None
    if schema.get("format") == "google-duration":
        text = text.strip()
        m = _DURATION.fullmatch(text)
        seconds = m["seconds"].lstrip("0") if m else ""
        if not m or len(seconds) > len(str(MAX_DURATION_S)) or int(seconds or "0") > MAX_DURATION_S:
            raise UserInputError(where, "must be a duration in seconds such as 7200s or 1.5s (at most 9 decimals, "
                                        f"at most {MAX_DURATION_S}s)")
    return text


def _check_text(text: str, where: str) -> None:
    """Text a process can be given (as an argument, an environment variable or a file name)."""
    if "\x00" in text:
        raise UserInputError(where, "must not contain a NUL character (\\u0000)")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise UserInputError(where, f"is not valid Unicode: it holds a lone surrogate at character {e.start} "
                                    "(\\ud800-\\udfff without its pair)") from None
