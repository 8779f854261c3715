"""Free ports for the children a process starts (``wbsync.system.procs``); that its children
die with it is tests/bench/test_children.py's."""

from __future__ import annotations

import socket
from collections import deque
from collections.abc import Iterator
from pathlib import Path

import pytest

from wbsync.system import procs


class _Picks:
    """A stand-in for ``free_port``'s random source that picks the given ports in turn."""

    def __init__(self, *ports: int) -> None:
        self._ports = list(ports)
        self.calls = 0

    def randrange(self, start: int, stop: int) -> int:
        self.calls += 1
        port = self._ports.pop(0) if len(self._ports) > 1 else self._ports[0]
        assert start <= port < stop, f"{port} is not in [{start}, {stop})"
        return port


def _ephemeral_low() -> int:
    return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])


@pytest.fixture
def clean_picks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(procs, "_GIVEN", deque(maxlen=procs._GIVEN.maxlen))


@pytest.mark.skipif(not Path("/proc/sys/net/ipv4").is_dir(), reason="Linux's port ranges")
def test_a_free_port_is_below_the_ephemeral_range_bindable_and_not_given_twice(
    clean_picks: None,
) -> None:
    """Outgoing connections take their local ports from the ephemeral range: a port picked
    there could be taken before the server binds it."""
    ports = [procs.free_port() for _ in range(300)]
    assert all(procs._PORTS_FROM <= p < _ephemeral_low() for p in ports)
    assert len(set(ports[-256:])) == 256  # none of its last 256 picks given again
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", ports[-1]))  # nothing took it


@pytest.fixture
def bound_port() -> Iterator[int]:
    """A port of the kernel's ephemeral range, bound for the test's length."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        yield taken.getsockname()[1]


def test_a_bound_port_or_one_already_given_is_passed_over(
    monkeypatch: pytest.MonkeyPatch, clean_picks: None, bound_port: int
) -> None:
    low = procs._ephemeral_low()
    unbound = (p for p in range(low - 1, procs._PORTS_FROM, -1) if procs._bindable(p))
    given, free = next(unbound), next(unbound)
    monkeypatch.setattr(procs, "_ephemeral_low", lambda: bound_port + 1)
    monkeypatch.setattr(procs, "_RNG", _Picks(given))
    assert procs.free_port() == given
    monkeypatch.setattr(procs, "_RNG", _Picks(bound_port, given, free))
    assert procs.free_port() == free


@pytest.mark.skipif(not Path("/proc/sys/net/ipv4").is_dir(), reason="Linux's port ranges")
def test_with_every_pick_bound_the_kernel_picks(
    monkeypatch: pytest.MonkeyPatch, clean_picks: None, bound_port: int
) -> None:
    """After ``_PORT_TRIES`` bound picks: a bind to port 0, which still gives a free port."""
    monkeypatch.setattr(procs, "_ephemeral_low", lambda: bound_port + 1)
    picks = _Picks(bound_port)
    monkeypatch.setattr(procs, "_RNG", picks)
    port = procs.free_port()
    assert picks.calls == procs._PORT_TRIES
    assert port != bound_port and port >= _ephemeral_low()  # the kernel's pick
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
