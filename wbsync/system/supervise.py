"""Supervision of a process's background tasks: a crash is logged and the task restarted.

``wbsync run`` and ``wbsync api`` run their loops (the fan-out, the dependency probes) under
``supervise``: an exception (a bug, a row the code cannot read) or a loop that ends by itself
is logged at ERROR with its traceback, and the loop starts again after a backoff of
``RESTART_BACKOFF_S`` doubling up to ``RESTART_BACKOFF_MAX_S`` (reset once it ran that long
without a crash). So a crash is never silent and never leaves a half-alive process.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from wbsync.system import clock

log = logging.getLogger(__name__)

RESTART_BACKOFF_S = 1.0
RESTART_BACKOFF_MAX_S = 60.0


async def supervise(
    name: str,
    loop: Callable[[], Awaitable[None]],
    stop: asyncio.Event,
    *,
    backoff_s: float = RESTART_BACKOFF_S,
    backoff_max_s: float = RESTART_BACKOFF_MAX_S,
) -> None:
    """Run ``loop()`` until ``stop`` is set, restarting it with backoff when it crashes."""
    wait = backoff_s
    while not stop.is_set():
        started = clock.monotonic()
        crash: Exception | None = None
        try:
            await loop()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            crash = exc
        if stop.is_set():
            return
        if clock.monotonic() - started >= backoff_max_s:
            wait = backoff_s
        what = "crashed" if crash is not None else "ended by itself"
        log.error("%s %s; restarting it in %.1f s", name, what, wait, exc_info=crash)
        try:
            await asyncio.wait_for(stop.wait(), wait)
        except TimeoutError:
            pass
        wait = min(wait * 2, backoff_max_s)


async def reap(task: asyncio.Task[object]) -> None:
    """Await ``task`` (cancelled or told to end) to its end, its own cancellation taken as its
    end; a cancel of the awaiting task itself (a Ctrl-C, a stop) still propagates."""
    try:
        await task
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise
