"""Free TCP ports for what listens a while after the port is chosen (a hub, its proxy, a demo's
services, a local job's rendezvous).

A port the kernel hands out for ``bind(0)`` lies in the ephemeral range (Linux's
``net.ipv4.ip_local_port_range``, 32768-60999 by default), from which every outgoing connection
takes its local port too: on a busy machine one of them can hold the port by the time the server
binds it (seen: configurable-http-proxy's ``EADDRINUSE`` minutes after a demo chose its port). So
ports are chosen at random below that range, where no outgoing connection goes, and each is checked
free by binding it; ``bind(0)`` only when none is found.
"""

from __future__ import annotations

import pathlib
import random
import socket

EPHEMERAL_RANGE = pathlib.Path("/proc/sys/net/ipv4/ip_local_port_range")
SPAN = 12000  # how many ports below the ephemeral range are drawn from
TRIES = 200


def _below_ephemeral() -> tuple[int, int]:
    try:
        first = int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        first = 32768
    return max(1024, first - SPAN), first - 1


def free_ports(n: int = 1, host: str = "127.0.0.1") -> list[int]:
    """`n` distinct TCP ports free on `host` a moment ago (the caller binds them soon after)."""
    low, high = _below_ephemeral()
    held: list[socket.socket] = []
    try:
        for _ in range(TRIES * n):
            if len(held) == n:
                break
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.bind((host, random.randint(low, high)))
            except OSError:
                s.close()
                continue
            held.append(s)
        while len(held) < n:  # the range below is full: what the kernel hands out
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            held.append(s)
        return [s.getsockname()[1] for s in held]
    finally:
        for s in held:
            s.close()


def free_port(host: str = "127.0.0.1") -> int:
    """One TCP port free on `host` a moment ago."""
    return free_ports(1, host)[0]
