"""The one place that reads the local clock and sleeps, so tests and benchmarks can see both.

The rate limiter never uses this clock for bucket arithmetic (Redis ``TIME`` is the shared
clock); it is for deadlines, durations and BullMQ timestamps, which are local by nature.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, date, datetime


def now_ms() -> float:
    """Wall-clock time in milliseconds since the epoch."""
    return time.time() * 1000.0


def today() -> date:
    """Today's date in UTC."""
    return datetime.now(UTC).date()


def monotonic() -> float:
    """Monotonic seconds, for measuring durations."""
    return time.monotonic()


async def sleep_ms(ms: float) -> None:
    """Sleep ``ms`` milliseconds (no-op for zero or less)."""
    if ms > 0:
        await asyncio.sleep(ms / 1000.0)
