"""The one place that reads the local clock and sleeps, so tests and benchmarks can see both.

The rate limiter never uses this clock for bucket arithmetic (Redis ``TIME`` is the shared
clock); ``now_ms`` and ``monotonic`` are for deadlines, durations and BullMQ timestamps, which are
local by nature and always real.

The calendar (``calendar_now``, ``today``: the stamps of row changes and tombstones, the
retention pass's "now"; ``wb_now``, ``wb_today``: the dates and times the syncs ask WB for) is
real too, unless a process is given a scaled calendar (``set_calendar``): from an origin instant,
shared by every process of a deployment, calendar time runs ``1 / time_scale`` as fast as real
time, so a compressed-time run (a soak at time scale 0.0005) sees days go by and age out. It is
opt-in, set where a process is composed: without an origin, a time scale compresses durations
only.

WB's calendar is Moscow's (UTC+3, no daylight saving): every date or time WB reads (a report's
``dateFrom``, a stats window, the sales-funnel period) is Moscow wall time, and between 21:00 and
24:00 UTC it is already tomorrow there. ``wb_now`` and ``wb_today`` are the one place that says
what time and day it is at WB; what is ours (change stamps, retention) stays UTC.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, timezone

__all__ = [
    "WB_ZONE",
    "Calendar",
    "calendar",
    "calendar_now",
    "monotonic",
    "now_ms",
    "set_calendar",
    "sleep_ms",
    "today",
    "wb_now",
    "wb_today",
]

#: WB's zone: Moscow, UTC+3 all year (Russia keeps no daylight saving since 2014).
WB_ZONE = timezone(timedelta(hours=3), "MSK")


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


def wb_now() -> datetime:
    """Now at WB: the calendar's instant in Moscow time (timezone-aware, UTC+3)."""
    return calendar_now().astimezone(WB_ZONE)


def wb_today() -> date:
    """Today at WB: Moscow's date on the calendar (a day ahead of UTC's from 21:00 UTC)."""
    return wb_now().date()


def monotonic() -> float:
    """Monotonic seconds, for measuring durations."""
    return time.monotonic()


async def sleep_ms(ms: float) -> None:
    """Sleep ``ms`` milliseconds (no-op for zero or less)."""
    if ms > 0:
        await asyncio.sleep(ms / 1000.0)
