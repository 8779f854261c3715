"""Child processes wbsync starts itself (the embedded Redis, the benchmarks' emulator and
``wbsync run`` processes), and how they die with the process that started them.

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
import signal
import socket
import subprocess
from collections.abc import Callable

__all__ = ["dies_with_parent", "free_port", "stop_child"]

_PR_SET_PDEATHSIG = 1
_ORPHANED_EXIT = 70  # the child's exit status when its parent was already gone


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
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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
