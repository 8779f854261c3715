"""Waiting on a condition with a deadline: the tests' one way to wait (never a bare sleep)."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any

Condition = Callable[[], Any | Awaitable[Any]]


async def wait_for(condition: Condition, timeout_s: float = 30.0) -> None:
    """Poll ``condition`` (plain or async) until it is truthy; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = condition()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return
        assert time.monotonic() < deadline, "condition not met before the deadline"
        await asyncio.sleep(0.005)
