"""The event loop every wbsync process runs on: uvloop where it is installed, else asyncio's own.

A page is a chain of round trips (WB, Redis, the database), and each one wakes the event loop;
uvloop (the loop on libuv, in C) does that for less CPU than asyncio's loop in Python, with the
same API. It is a dependency everywhere uvloop is built (Linux and macOS); elsewhere (Windows)
the processes run on asyncio's loop, which behaves the same. The figures that decided it are in
docs/scaling.md ("The event loop (uvloop) and the Redis parser (hiredis), both adopted").
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

try:
    import uvloop
except ImportError:  # no build for this platform: asyncio's own loop
    uvloop = None  # type: ignore[assignment]

__all__ = ["NAME", "new_event_loop", "run"]

T = TypeVar("T")

NAME = "uvloop" if uvloop is not None else "asyncio"
"""The loop wbsync's processes run on."""


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A new loop of the kind ``NAME`` names."""
    if uvloop is not None:
        return uvloop.new_event_loop()
    return asyncio.new_event_loop()


def run(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` to completion on a new loop (as ``asyncio.run`` does), then close the loop.

    A cancel of ``main`` (the Ctrl-C of a command without handlers of its own) ends the run as
    cancelled even when a part inside lost it and ``main`` returned (Python 3.11's
    ``asyncio.wait_for`` returns a result that completed as it was cancelled): a process asked
    to stop exits as interrupted (130), never as a success.
    """
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(_cancel_kept(main))


async def _cancel_kept(main: Coroutine[Any, Any, T]) -> T:
    result = await main
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError  # asked for and lost on the way: still a cancel
    return result
