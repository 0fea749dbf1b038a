"""What a request to `ml/v1` carries besides its path, read strictly. Pure.

- `json_body(raw)`: the body as JSON (empty: ``{}``). Not JSON, nested more than `MAX_DEPTH`
  deep (json's own recursion would fail first on thousands of levels), or holding text that is
  not Unicode (a lone surrogate such as ``"\\ud800"``, which JSON's escapes allow and UTF-8
  cannot carry) → `UserInputError` naming ``body``, or the field holding the bad text
  (``trainingInput.args[0]``).
- `follow(text)`: the logs' ``follow`` parameter: ``true``/``false``/``1``/``0`` (and
  ``yes``/``no``), any case; anything else names ``follow``.
- `after(header, query)`: the last line a client has, from ``Last-Event-ID`` (which wins) or
  ``after``: ASCII digits only (``int`` takes ``"١٢"`` and ``"1_0"``), naming the one it came from.
"""

from __future__ import annotations

import json
import re
from typing import Any

from server_ext.errors import UserInputError

MAX_DEPTH = 64  # a Job is ~6 levels deep; a Katib Experiment's trialSpec with a pod spec ~20
_SURROGATE = re.compile("[\ud800-\udfff]")
_LINE = re.compile(r"[0-9]{1,18}")
_FOLLOW = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def _path(chain: tuple | None) -> str:
    parts: list[str] = []
    while chain is not None:
        chain, key = chain
        parts.append(f"[{key}]" if isinstance(key, int) else f".{key}")
    return "".join(reversed(parts)).lstrip(".")


def json_body(raw: bytes | None) -> Any:
    try:
        value = json.loads(raw or b"{}")
    except RecursionError:
        raise UserInputError("body", f"is nested too deeply (at most {MAX_DEPTH} levels)") from None
    except ValueError:  # UnicodeDecodeError (not UTF-8) is one
        raise UserInputError("body", "is not valid JSON") from None
    stack: list[tuple[Any, tuple | None, int]] = [(value, None, 0)]  # (value, its path as a chain, depth)
    while stack:
        item, chain, depth = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                raise UserInputError(_path(chain) or "body", "is not valid Unicode text (a lone surrogate)")
        elif isinstance(item, (dict, list)):
            if depth >= MAX_DEPTH:
                raise UserInputError("body", f"is nested too deeply (at most {MAX_DEPTH} levels)")
            if isinstance(item, dict):
                for key, v in item.items():
                    if _SURROGATE.search(key):
                        raise UserInputError(_path(chain) or "body", "has a key that is not valid Unicode "
                                                                     "text (a lone surrogate)")
                    stack.append((v, (chain, key), depth + 1))
            else:
                stack.extend((v, (chain, i), depth + 1) for i, v in enumerate(item))
    return value


def follow(text: str) -> bool:
    try:
        return _FOLLOW[text.strip().lower()]
    except KeyError:
        raise UserInputError("follow", "must be true or false") from None


def after(header: str | None, query: str | None) -> int:
    field, text = ("Last-Event-ID", header) if header else ("after", query)
    if not text:
        return 0
    if not _LINE.fullmatch(text.strip()):
        raise UserInputError(field, "must be the number of a line already received (0 or more, in digits 0-9)")
    return int(text)
