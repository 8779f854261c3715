"""Child processes: how a process that starts others (wbsync's embedded Redis and private
Redis Cluster; the benchmarks' emulator and ``wbsync run`` processes) gives them free ports and
makes them die with it.

A child started with ``preexec_fn=dies_with_parent()`` gets SIGTERM when its parent dies, however
it dies (SIGKILL from a timeout included): Linux's ``PR_SET_PDEATHSIG``, armed in the child
between fork and exec, so no parent code has to run. If the parent died before the signal was
armed, the child exits at once instead of starting. SIGTERM is what a clean stop sends too, so
each child stops as it would then (a ``wbsync run`` within its shutdown grace). Linux fires the
signal when the *thread* that started the child ends: start children from the main thread (an
asyncio loop's), not from a worker thread. Elsewhere than Linux nothing is armed and only the
parent's own stop (``stop_child``) ends its children.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import random
import signal
import socket
import subprocess
from collections import deque
from collections.abc import Callable
from pathlib import Path

__all__ = ["dies_with_parent", "free_port", "stop_child"]

_PR_SET_PDEATHSIG = 1
_ORPHANED_EXIT = 70  # the child's exit status when its parent was already gone

_PORTS_FROM = 10_000
"""``free_port`` picks from here up to the kernel's ephemeral range (below it: common services)."""
_PORT_TRIES = 50
_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_EPHEMERAL_LOW = 32_768  # Linux's default, taken where /proc cannot be read
_RNG = random.Random()
_GIVEN: deque[int] = deque(maxlen=256)  # this process's last picks: not given again


@functools.lru_cache(maxsize=1)
def _prctl() -> Callable[..., int] | None:
    """libc's ``prctl``, looked up in the parent (a forked child should only call it)."""
    try:
        # The running program's own symbols: libc's among them, with no library search.
        prctl: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError, TypeError):
        return None
    return prctl


def dies_with_parent() -> Callable[[], None]:
    """A ``preexec_fn`` that makes the child get SIGTERM when this process dies (Linux)."""
    parent = os.getpid()
    prctl = _prctl()

    def arm() -> None:
        if prctl is not None:
            with contextlib.suppress(OSError):
                prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the parent died before the signal was armed
            os._exit(_ORPHANED_EXIT)

    return arm


def free_port() -> int:
    """A TCP port on loopback that nothing is bound to right now, below the kernel's ephemeral
    range, for a server about to be started on it.

    The kernel's own pick (a bind to port 0) comes from the ephemeral range, where it also takes
    the local port of every outgoing connection: between this call and the server's bind, any
    connection opened on the machine could take the port (a test suite in four processes opens
    thousands). Below that range no connection takes it; a random pick out of thousands keeps
    processes racing each other apart, and one process is not given a port of its last 256
    picks (several ports taken before any server binds). After ``_PORT_TRIES`` ports that are
    bound or given, or where the range leaves no room below it, the kernel's pick.
    """
    low = _ephemeral_low()
    for _ in range(_PORT_TRIES if low > _PORTS_FROM else 0):
        port = _RNG.randrange(_PORTS_FROM, low)
        if port not in _GIVEN and _bindable(port):
            _GIVEN.append(port)
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range."""
    try:
        return int(_EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return _EPHEMERAL_LOW


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def stop_child(proc: subprocess.Popen[bytes], *, timeout_s: float = 5.0) -> None:
    """Terminate ``proc`` (kill it if it lingers), wait for it, and close its stderr pipe."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc.stderr:
        proc.stderr.close()
