"""What a hung asyncio test was waiting on, in its own failure report.

The suite's per-test bound (pyproject.toml's ``timeout``, pytest-timeout's thread method) kills
the test's process and prints every thread's stack; an asyncio test's await chain is in none of
them (the loop's thread is in its poll). At ``WATCH_FRACTION`` of that bound, counted as the
bound is from the test's setup, this watch looks first: it records every task of the running
loop with its stack as the report's "asyncio tasks" section, then cancels the test's own task,
so the test fails with the await it was stuck on and the run goes on. A loop that is blocked,
or a test that loses the cancel, still meets the bound.
"""

from __future__ import annotations

import asyncio
import io
import threading
import time
import weakref
from collections.abc import Callable

import pytest

WATCH_FRACTION = 0.9
"""The share of the per-test bound after which a still-running test's tasks are looked at."""

_loops: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()


def tracked(
    factory: Callable[[], asyncio.AbstractEventLoop],
) -> Callable[[], asyncio.AbstractEventLoop]:
    """``factory``, with each loop it makes known to the watch."""

    def make() -> asyncio.AbstractEventLoop:
        loop = factory()
        _loops.add(loop)
        return loop

    return make


class Watch:
    """One test's watch: a timer thread that, once due (``after_s`` since the test's setup
    began, ``delay_s`` from now), has the running loop dump and cancel."""

    def __init__(self, item: pytest.Item, after_s: float, delay_s: float) -> None:
        self._name = getattr(item, "originalname", item.name)
        self._timer = threading.Timer(delay_s, self._due)
        self._timer.daemon = True
        self._after_s = after_s
        self.tasks: str | None = None

    def __enter__(self) -> Watch:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()

    def _due(self) -> None:
        for loop in list(_loops):
            if loop.is_running():
                loop.call_soon_threadsafe(self._dump_and_cancel, loop)

    def _dump_and_cancel(self, loop: asyncio.AbstractEventLoop) -> None:
        out = io.StringIO()
        out.write(f"still running after {self._after_s:.0f} s; the loop's tasks:\n")
        tests = []
        for task in asyncio.all_tasks(loop):
            out.write(f"\n{task!r}\n")
            task.print_stack(file=out)
            if getattr(task.get_coro(), "__name__", None) == self._name:
                tests.append(task)
        self.tasks = out.getvalue()
        for task in tests:
            task.cancel(f"{self._name} still running after {self._after_s:.0f} s")


_SETUP_BEGAN = pytest.StashKey[float]()


def setup_begins(item: pytest.Item) -> None:
    """Note when ``item``'s setup begins: the bound counts from there, and so does the watch."""
    item.stash[_SETUP_BEGAN] = time.monotonic()


def watched(item: pytest.Item) -> Watch | None:
    """A watch for ``item``'s call when the suite bounds a test's time (else None)."""
    bound = float(item.config.getini("timeout") or 0)
    if bound <= 0:
        return None
    after_s = bound * WATCH_FRACTION
    spent = time.monotonic() - item.stash.get(_SETUP_BEGAN, time.monotonic())
    return Watch(item, after_s, max(0.0, after_s - spent))
