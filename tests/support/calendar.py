"""Calendars that stand at a chosen instant, for tests of what happens at a given hour."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from wbsync.system import clock

#: A calendar this slow stands still for the length of a test (a calendar second per ~11 days).
STILL = 1e6


def reading(moment: datetime, time_scale: float = STILL) -> clock.Calendar:
    """A calendar of ``time_scale`` that reads ``moment`` now: its origin is where the scaled
    line through (now, moment) meets real time (``time_scale`` must not be 1)."""
    now = time.time()
    origin_s = (time_scale * moment.timestamp() - now) / (time_scale - 1)
    return clock.Calendar(datetime.fromtimestamp(origin_s, tz=UTC), time_scale)
