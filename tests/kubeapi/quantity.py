"""Kubernetes resource quantities ("500m", "1Gi", "2", "1.5e3") as exact Decimals."""

from __future__ import annotations

import re
from decimal import Decimal

_SUFFIX = {
    "": 1, "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"),
    "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
}
_RE = re.compile(r"([+-]?(?:\d+\.?\d*|\.\d+))(?:[eE]([+-]?\d+))?(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?")


def parse_quantity(value) -> Decimal:
    """Raises ValueError for anything that is not a quantity."""
    if isinstance(value, bool):
        raise ValueError(f"quantities must match the regular expression: {value!r}")
    if isinstance(value, (int, float)):
        return Decimal(str(value))
    m = _RE.fullmatch(str(value).strip())
    if not m:
        raise ValueError(f"quantities must match the regular expression "
                         f"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {value!r}")
    number, exp, suffix = m.groups()
    q = Decimal(number)
    if exp:
        q *= Decimal(10) ** int(exp)
    return q * Decimal(_SUFFIX[suffix or ""])


def format_quantity(q: Decimal) -> str:
    if q == q.to_integral_value():
        return str(int(q))
    milli = q * 1000
    if milli == milli.to_integral_value():
        return f"{int(milli)}m"
    return str(q)
