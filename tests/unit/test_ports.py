"""`hub_ext.core.ports`: ports for what listens later are free, distinct, and below the kernel's
ephemeral range (where outgoing connections take their local ports)."""

import socket

import pytest

from hub_ext.core.ports import EPHEMERAL_RANGE, free_port, free_ports

pytestmark = pytest.mark.unit


def ephemeral_start() -> int:
    return int(EPHEMERAL_RANGE.read_text().split()[0]) if EPHEMERAL_RANGE.exists() else 32768


def test_ports_are_distinct_free_and_below_the_ephemeral_range():
    ports = free_ports(40)
    assert len(set(ports)) == 40
    assert all(1024 <= p < ephemeral_start() for p in ports), ports
    for port in ports:  # each can be listened on
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))
            s.listen()


def test_a_port_held_by_a_listener_is_never_given():
    with socket.socket() as held:
        held.bind(("127.0.0.1", free_port()))
        held.listen()
        taken = held.getsockname()[1]
        assert all(p != taken for _ in range(50) for p in free_ports(20))


def test_a_process_never_hands_out_a_port_twice_in_a_row():
    """Servers started side by side are each given a port before either listens: never the same."""
    ports = [free_port() for _ in range(2000)]
    assert len(set(ports)) == len(ports)
