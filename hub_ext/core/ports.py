"""Free TCP ports for what listens a while after the port is chosen (a hub, its proxy, a demo's
services, a local job's rendezvous).

A port the kernel hands out for ``bind(0)`` lies in the ephemeral range (Linux's
``net.ipv4.ip_local_port_range``, 32768-60999 by default), from which every outgoing connection
takes its local port too: on a busy machine one of them can hold the port by the time the server
binds it (seen: configurable-http-proxy's ``EADDRINUSE`` minutes after a demo chose its port). So
ports are chosen at random below that range (from 10000), where no outgoing connection goes, and each
is checked free by binding it; ``bind(0)`` only when none is found. A process never hands out the
same port twice in a row of `REMEMBERED` (two servers it starts side by side, each given a port before
either listens, never get the same one); other processes' not-yet-bound choices are the one risk
left, as with ``bind(0)``.
"""

from __future__ import annotations

import collections
import pathlib
import random
import socket
import threading

EPHEMERAL_RANGE = pathlib.Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST = 10000  # below: well-known and registered services' ports
TRIES = 200
REMEMBERED = 4096  # ports this process handed out last, never handed out again meanwhile

_given: collections.deque[int] = collections.deque(maxlen=REMEMBERED)
_lock = threading.Lock()
_draw = random.SystemRandom()  # the OS's randomness: no seeding of `random` makes two processes draw alike


def _below_ephemeral() -> tuple[int, int]:
    try:
        first = int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        first = 32768
    return min(LOWEST, first - 1000), first - 1


def free_ports(n: int = 1, host: str = "127.0.0.1") -> list[int]:
    """`n` distinct TCP ports free on `host` a moment ago (the caller binds them soon after)."""
    low, high = _below_ephemeral()
    held: list[socket.socket] = []
    with _lock:
        try:
            for _ in range(TRIES * n):
                if len(held) == n:
                    break
                port = _draw.randint(low, high)
                if port in _given:
                    continue
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                try:
                    s.bind((host, port))
                except OSError:
                    s.close()
                    continue
                held.append(s)
            while len(held) < n:  # the range below is full: what the kernel hands out
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.bind((host, 0))
                held.append(s)
            ports = [s.getsockname()[1] for s in held]
            _given.extend(ports)
            return ports
        finally:
            for s in held:
                s.close()


def free_port(host: str = "127.0.0.1") -> int:
    """One TCP port free on `host` a moment ago."""
    return free_ports(1, host)[0]
