"""Container logs: what `GET .../pods/{name}/log` serves.

Lines are appended (by the emulated kubelet or a test) with their timestamp; readers select by
`tailLines`, `sinceTime`/`sinceSeconds`, and `follow` readers wait for new lines until the
container is marked terminated or the pod goes away.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from dataclasses import dataclass, field


@dataclass
class ContainerLog:
    lines: list[tuple[dt.datetime, str]] = field(default_factory=list)
    terminated: bool = False
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def append(self, text: str, when: dt.datetime | None = None) -> None:
        when = when or dt.datetime.now(dt.timezone.utc)
        for line in text.splitlines() or [""]:
            self.lines.append((when, line))
        self._wake()

    def finish(self) -> None:
        self.terminated = True
        self._wake()

    def _wake(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()


class PodLogs:
    def __init__(self):
        self._logs: dict[tuple[str, str, str], ContainerLog] = {}

    def container(self, ns: str, pod: str, container: str) -> ContainerLog:
        return self._logs.setdefault((ns, pod, container), ContainerLog())

    def has(self, ns: str, pod: str, container: str) -> bool:
        return (ns, pod, container) in self._logs

    def drop_pod(self, ns: str, pod: str) -> None:
        for key in [k for k in self._logs if k[:2] == (ns, pod)]:
            self._logs.pop(key).finish()


def format_line(when: dt.datetime, line: str, timestamps: bool) -> str:
    if timestamps:
        return f"{when.strftime('%Y-%m-%dT%H:%M:%S.%f')}000Z {line}\n"
    return line + "\n"


def select(log: ContainerLog, tail: int | None, since: dt.datetime | None) -> list[tuple[dt.datetime, str]]:
    lines = log.lines
    if since is not None:
        lines = [entry for entry in lines if entry[0] >= since]
    if tail is not None:
        lines = lines[-tail:] if tail > 0 else []
    return list(lines)
