"""The latency benchmarks' figures (`login_ready`, `submit_first_log`): a header and one row per
series of seconds, with its median, 90th percentile and the third figure the caller names."""

from __future__ import annotations

import statistics
from collections.abc import Callable


def p90(values: list[float]) -> float:
    """The 90th percentile (nearest rank) of `values`."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]


def table(rows: dict[str, list[float]], first: str, extreme: tuple[str, Callable] = ("max", max)) -> str:
    """`rows` (name → seconds) as a table: median, p90 and `extreme` per row."""
    width = max(len(first), *(len(name) for name in rows)) + 2
    lines = [f"{first:<{width}} {'median s':>9} {'p90 s':>9} {extreme[0] + ' s':>9}"]
    for name, values in rows.items():
        lines.append(f"{name:<{width}} {statistics.median(values):>9.3f} {p90(values):>9.3f} {extreme[1](values):>9.3f}")
    return "\n".join(lines)
