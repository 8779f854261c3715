"""The one place that reads the local clock and sleeps, so tests and benchmarks can see both.

The rate limiter never uses this clock for bucket arithmetic (Redis ``TIME`` is the shared
clock); ``now_ms`` and ``monotonic`` are for deadlines, durations and BullMQ timestamps, which are
local by nature and always real.

The calendar (``today``, ``calendar_now``: the dates the syncs ask WB for, the emulator's "today",
the stamps of row changes and tombstones, the retention pass's "now") is real too, unless a
process is given a scaled calendar (``set_calendar``): from an origin instant, shared by every
process of a deployment, calendar time runs ``1 / time_scale`` as fast as real time, so a
compressed-time run (a soak at time scale 0.0005) sees days go by and age out. It is opt-in,
set where a process is composed: without an origin, a time scale compresses durations only.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

__all__ = [
    "Calendar",
    "calendar",
    "calendar_now",
    "monotonic",
    "now_ms",
    "set_calendar",
    "sleep_ms",
    "today",
]


@dataclass(frozen=True, slots=True)
class Calendar:
    """A scaled calendar: at real instant ``origin`` it reads ``origin``; then each real second
    is ``1 / time_scale`` calendar seconds."""

    origin: datetime
    time_scale: float

    def __post_init__(self) -> None:
        if self.origin.tzinfo is None:
            raise ValueError("the calendar's origin must be timezone-aware")
        if not self.time_scale > 0:
            raise ValueError(f"the calendar's time_scale must be > 0, got {self.time_scale}")

    def at(self, real_s: float) -> datetime:
        """The calendar instant at real epoch second ``real_s``."""
        return self.origin.astimezone(UTC) + timedelta(
            seconds=(real_s - self.origin.timestamp()) / self.time_scale
        )

    def now(self) -> datetime:
        """The calendar instant now."""
        return self.at(time.time())

    def today(self) -> date:
        """The calendar's date now (UTC)."""
        return self.now().date()


_calendar: Calendar | None = None


def set_calendar(origin: datetime | None, time_scale: float = 1.0) -> None:
    """Scale this process's calendar from ``origin`` by ``time_scale``; None: the real one."""
    global _calendar
    _calendar = None if origin is None else Calendar(origin, time_scale)


def calendar() -> Calendar | None:
    """The scaled calendar in force, None when the calendar is the real one."""
    return _calendar


def now_ms() -> float:
    """Wall-clock time in milliseconds since the epoch (always real)."""
    return time.time() * 1000.0


def calendar_now() -> datetime:
    """Now on the calendar, timezone-aware UTC (scaled when a calendar is set)."""
    if _calendar is None:
        return datetime.fromtimestamp(time.time(), tz=UTC)
    return _calendar.now()


def today() -> date:
    """Today's date in UTC, on the calendar."""
    return calendar_now().date()


def monotonic() -> float:
    """Monotonic seconds, for measuring durations."""
    return time.monotonic()


async def sleep_ms(ms: float) -> None:
    """Sleep ``ms`` milliseconds (no-op for zero or less)."""
    if ms > 0:
        await asyncio.sleep(ms / 1000.0)
