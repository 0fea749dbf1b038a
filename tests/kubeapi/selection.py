"""Label and field selectors, parsed the way kube-apiserver parses them.

`parse_label_selector` accepts `=`, `==`, `!=`, `in (...)`, `notin (...)`, `key` and `!key`, comma
separated; `parse_field_selector` accepts `=`, `==` and `!=` on the field labels a kind supports.
Both return a predicate over an object dict; a malformed selector raises `bad_request` (HTTP 400).
"""

from __future__ import annotations

import re
from typing import Callable

from .errors import bad_request

Predicate = Callable[[dict], bool]

_TERM = re.compile(
    r"""\s*(?:
      (?P<not>!)\s*(?P<nkey>[^\s,=!()]+)                              # !key
    | (?P<skey>[^\s,=!()]+)\s+(?P<setop>in|notin)\s*\((?P<vals>[^)]*)\)   # key in (a,b)
    | (?P<key>[^\s,=!()]+)\s*(?P<op>==|=|!=)\s*(?P<val>[^\s,=!()]*)       # key=value
    | (?P<ekey>[^\s,=!()]+)                                            # key
    )\s*(?:,|$)""",
    re.VERBOSE,
)


def _labels(obj: dict) -> dict:
    return (obj.get("metadata") or {}).get("labels") or {}


def parse_label_selector(text: str | None) -> Predicate | None:
    if not text or not text.strip():
        return None
    checks: list[Predicate] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _TERM.match(text, pos)
        if not m or m.end() == pos:
            raise bad_request(f"unable to parse requirement: invalid label selector: {text!r}")
        pos = m.end()
        if m["nkey"]:
            k = m["nkey"]
            checks.append(lambda o, k=k: k not in _labels(o))
        elif m["skey"]:
            k, vals = m["skey"], {v.strip() for v in m["vals"].split(",") if v.strip()}
            if not vals:
                raise bad_request(f"for 'in', 'notin' operators, values set can't be empty: {text!r}")
            if m["setop"] == "in":
                checks.append(lambda o, k=k, vals=vals: _labels(o).get(k) in vals)
            else:
                checks.append(lambda o, k=k, vals=vals: _labels(o).get(k) not in vals)
        elif m["key"]:
            k, v = m["key"], m["val"]
            if m["op"] == "!=":
                checks.append(lambda o, k=k, v=v: _labels(o).get(k) != v)
            else:
                checks.append(lambda o, k=k, v=v: _labels(o).get(k) == v)
        else:
            k = m["ekey"]
            checks.append(lambda o, k=k: k in _labels(o))
    return lambda o: all(c(o) for c in checks)


def field_value(obj: dict, path: str) -> str:
    cur = obj
    for part in path.split("."):
        if not isinstance(cur, dict):
            return ""
        cur = cur.get(part)
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def parse_field_selector(text: str | None, allowed: tuple[str, ...], kind: str) -> Predicate | None:
    if not text or not text.strip():
        return None
    checks: list[Predicate] = []
    for term in text.split(","):
        term = term.strip()
        if not term:
            continue
        m = re.fullmatch(r"([A-Za-z0-9_.]+)\s*(==|=|!=)\s*(.*)", term)
        if not m:
            raise bad_request(f"invalid field selector: {term!r}")
        path, op, value = m.groups()
        if path not in ("metadata.name", "metadata.namespace") and path not in allowed:
            raise bad_request(f'field label not supported: {path}')
        if op == "!=":
            checks.append(lambda o, p=path, v=value: field_value(o, p) != v)
        else:
            checks.append(lambda o, p=path, v=value: field_value(o, p) == v)
    return lambda o: all(c(o) for c in checks)
