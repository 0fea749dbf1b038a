"""Listing jobs as `ml.v1` does: `filter`, `pageSize`, `pageToken`. Pure.

Filter grammar (what ``gcloud ai-platform jobs list --filter`` and the API accept, for the fields
of the Job JSON)::

    expr  := term (("AND" | "OR") term)*        AND binds tighter than OR
    term  := ["NOT" | "-"] (atom | "(" expr ")")
    atom  := path op value                     path: jobId, state, labels.team, trainingInput.scaleTier, …
    op    := "=" | "!=" | ":" | "<" | "<=" | ">" | ">="

``=``/``!=`` compare whole values (case-sensitive, as the API does for ids and labels; enum
values such as states compare case-insensitively); ``:`` matches a value with ``*`` wildcards
(``jobId:census*``) or, with ``labels:team``, the presence of a key; ``<``/``>`` compare text (RFC
3339 times order as text: ``createTime>2026-01-01``). Values may be quoted with ``"`` or ``'``. A
malformed filter raises `UserInputError("filter", …)` saying where; so does one longer than
`MAX_FILTER` characters or nesting ``NOT``/``-``/``(`` more than `MAX_NESTING` deep.

`page(jobs, size, token, filter)`: newest first (createTime, then jobId); ``size`` defaults to 20
and may be at most 100 (as the API's), written in ASCII digits; the token is opaque and records
the last job of the page (not an offset), so jobs created or deleted between pages neither repeat
nor vanish from the rest. A token this module did not write is `UserInputError("pageToken", …)`.
"""

from __future__ import annotations

import base64
import fnmatch
import json
import re
from typing import Any, Callable, Iterable

from hub_ext.core.errors import UserInputError

DEFAULT_PAGE, MAX_PAGE = 20, 100
MAX_FILTER = 2000  # characters
MAX_NESTING = 32  # NOT, - and ( inside one another
MAX_TOKEN = 1024  # characters of a page token (one holds a createTime and a jobId of ≤ 128)
_SIZE = re.compile(r"-?[0-9]+")  # ASCII digits only (int() takes "١٢" and "1_0")
_TOKEN = re.compile(r"""\s*(?:(?P<paren>[()])|(?P<op>!=|<=|>=|[=:<>])|"(?P<dq>[^"]*)"|'(?P<sq>[^']*)'|(?P<word>[^\s()=:<>!"']+))""")
_VALUE = re.compile(r"""\s*(?:"(?P<dq>[^"]*)"|'(?P<sq>[^']*)'|(?P<word>[^\s()"']+))""")
_ENUM_FIELDS = ("state", "trainingInput.scaleTier")
Predicate = Callable[[dict], bool]


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        after_op = bool(out) and out[-1][0] == "op"
        m = (_VALUE if after_op else _TOKEN).match(text, pos)
        if not m or m.end() == pos:
            raise UserInputError("filter", f"cannot read {text[pos:].strip()[:20]!r} (at character {pos + 1})")
        pos = m.end()
        if not after_op and m["paren"]:
            out.append(("paren", m["paren"]))
        elif not after_op and m["op"]:
            out.append(("op", m["op"]))
        elif m["dq"] is not None or m["sq"] is not None:
            out.append(("value", m["dq"] if m["dq"] is not None else m["sq"]))
        else:
            out.append(("word", m["word"]))
    return out


def _lookup(job: dict, path: str) -> Any:
    value: Any = job
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _atom(path: str, op: str, wanted: str) -> Predicate:
    enum = path in _ENUM_FIELDS

    def norm(v: Any) -> str:
        text = json.dumps(v) if isinstance(v, (dict, list, bool)) else str(v)
        return text.upper() if enum else text

    want = wanted.upper() if enum else wanted
    if op == ":":
        def has(job: dict) -> bool:
            value = _lookup(job, path)
            if value is None:
                return False
            if isinstance(value, dict):
                return want in value
            if isinstance(value, list):
                return any(fnmatchcase(norm(v), want) for v in value)
            return fnmatchcase(norm(value), want)
        return has
    compare = {"=": lambda a: a == want, "!=": lambda a: a != want, "<": lambda a: a < want,
               "<=": lambda a: a <= want, ">": lambda a: a > want, ">=": lambda a: a >= want}[op]

    def test(job: dict) -> bool:
        value = _lookup(job, path)
        if value is None:
            return op == "!="
        return compare(norm(value))
    return test


def fnmatchcase(value: str, pattern: str) -> bool:
    return fnmatch.fnmatchcase(value, pattern) if "*" in pattern or "?" in pattern else value == pattern


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]]):
        self.tokens, self.i, self.depth = tokens, 0, 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        tok = self.peek()
        if tok is None:
            raise UserInputError("filter", "ends too early")
        self.i += 1
        return tok

    def expr(self) -> Predicate:
        ors = [self.conj()]
        while self.peek() == ("word", "OR"):
            self.take()
            ors.append(self.conj())
        return ors[0] if len(ors) == 1 else (lambda job: any(p(job) for p in ors))

    def conj(self) -> Predicate:
        ands = [self.term()]
        while True:
            tok = self.peek()
            if tok == ("word", "AND"):
                self.take()
            elif tok is None or tok in (("word", "OR"), ("paren", ")")):
                break
            ands.append(self.term())  # juxtaposition means AND, as in gcloud
        return ands[0] if len(ands) == 1 else (lambda job: all(p(job) for p in ands))

    def nested(self, parse: Callable[[], Predicate]) -> Predicate:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise UserInputError("filter", f"nests NOT, - and parentheses more than {MAX_NESTING} deep")
        try:
            return parse()
        finally:
            self.depth -= 1

    def term(self) -> Predicate:
        tok = self.take()
        if tok == ("word", "NOT") or (tok[0] == "word" and tok[1].startswith("-") and len(tok[1]) > 1):
            if tok[1] != "NOT":
                self.tokens.insert(self.i, ("word", tok[1][1:]))
            inner = self.nested(self.term)
            return lambda job: not inner(job)
        if tok == ("paren", "("):
            inner = self.nested(self.expr)
            if self.peek() != ("paren", ")"):
                raise UserInputError("filter", "a '(' is not closed")
            self.take()
            return inner
        if tok[0] != "word":
            raise UserInputError("filter", f"expected a field name, found {tok[1]!r}")
        op = self.take()
        if op[0] != "op":
            raise UserInputError("filter", f"expected an operator (=, !=, :, <, >) after {tok[1]!r}")
        value = self.take()
        if value[0] not in ("word", "value"):
            raise UserInputError("filter", f"expected a value after {tok[1]}{op[1]}")
        return _atom(tok[1], op[1], value[1])


def compile_filter(text: str | None) -> Predicate:
    if not text or not text.strip():
        return lambda job: True
    if len(text) > MAX_FILTER:
        raise UserInputError("filter", f"is longer than {MAX_FILTER} characters")
    parser = _Parser(_tokens(text))
    predicate = parser.expr()
    if parser.peek() is not None:
        raise UserInputError("filter", f"unexpected {parser.peek()[1]!r}")
    return predicate


def _key(job: dict) -> tuple[str, str]:
    return job.get("createTime", ""), job.get("jobId", "")


def page_size(value: Any) -> int:
    if value in (None, ""):
        return DEFAULT_PAGE
    text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(text, str) or not _SIZE.fullmatch(text):
        raise UserInputError("pageSize", "must be a whole number")
    size = int(text) if len(text) <= 9 else MAX_PAGE + 1
    if not 0 <= size <= MAX_PAGE:
        raise UserInputError("pageSize", f"must be between 1 and {MAX_PAGE}")
    return size or DEFAULT_PAGE


def _encode(key: tuple[str, str]) -> str:
    return base64.urlsafe_b64encode(json.dumps(list(key)).encode()).decode().rstrip("=")


def _decode(token: str) -> tuple[str, str]:
    if len(token) <= MAX_TOKEN:
        try:
            key = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
            if isinstance(key, list) and len(key) == 2 and all(isinstance(k, str) for k in key):
                return key[0], key[1]
        except (ValueError, RecursionError):  # binascii.Error and UnicodeDecodeError are ValueErrors
            pass
    raise UserInputError("pageToken", "is not a token this API gave out")


def page(jobs: Iterable[dict], size: Any = None, token: str | None = None, filter: str | None = None) -> dict:
    """``{"jobs": [...], "nextPageToken": "…"}`` (no token on the last page), as ``projects.jobs.list``."""
    n = page_size(size)
    keep = compile_filter(filter)
    ordered = sorted((j for j in jobs if keep(j)), key=_key, reverse=True)
    if token:
        last = _decode(token)
        ordered = [j for j in ordered if _key(j) < last]
    out: dict = {"jobs": ordered[:n]}
    if len(ordered) > n:
        out["nextPageToken"] = _encode(_key(ordered[n - 1]))
    return out
