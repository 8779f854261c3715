"""The calendar: real unless a scaled one is set; then a day passes in ``day * time_scale``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta

import pytest

from tests.support.calendar import reading
from tests.support.waiting import wait_for
from wbsync.config import Settings
from wbsync.emulator import EmulatorConfig
from wbsync.system import clock

DAY_S = 86_400.0
ORIGIN = datetime(2026, 12, 1, tzinfo=UTC)


@pytest.fixture(autouse=True)
def real_calendar() -> Iterator[None]:
    """Every test here leaves the process's calendar real."""
    yield
    clock.set_calendar(None)


def test_without_an_origin_the_calendar_is_the_real_one() -> None:
    clock.set_calendar(None, 0.0005)
    assert clock.calendar() is None
    before = datetime.now(UTC)
    now = clock.calendar_now()
    assert before <= now <= datetime.now(UTC)
    assert clock.today() in {before.date(), datetime.now(UTC).date()}


@pytest.mark.parametrize("scale", [0.0005, 0.01, 1.0])
def test_a_calendar_day_is_a_day_times_the_scale_of_real_time(scale: float) -> None:
    calendar = clock.Calendar(ORIGIN, scale)
    origin_s = ORIGIN.timestamp()
    assert calendar.at(origin_s) == ORIGIN
    for days in (1, 7):
        moment = calendar.at(origin_s + days * DAY_S * scale)
        assert abs(moment - (ORIGIN + timedelta(days=days))) < timedelta(milliseconds=1)


async def test_a_scaled_calendar_moves_the_date_while_real_time_stays_real() -> None:
    scale = 0.00001  # a calendar day in 0.864 real seconds
    clock.set_calendar(datetime.now(UTC), scale)
    start, real_start = clock.today(), time.time()
    await wait_for(lambda: clock.today() >= start + timedelta(days=2), timeout_s=60)
    # Two calendar days took at least (a little less than) two scaled days of real time...
    assert time.time() - real_start >= DAY_S * scale
    # ...and durations, deadlines and timestamps stayed real.
    assert abs(clock.now_ms() / 1000.0 - time.time()) < 60


def test_an_origin_must_say_its_zone_and_the_scale_be_positive() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        clock.set_calendar(datetime(2026, 12, 1), 0.5)
    with pytest.raises(ValueError, match="time_scale"):
        clock.set_calendar(ORIGIN, 0.0)
    assert clock.calendar() is None


def test_the_setting_and_the_emulator_option_take_an_aware_instant() -> None:
    settings = Settings(calendar_origin="2026-12-01T00:00:00Z", time_scale=0.5)  # type: ignore[arg-type]
    assert settings.calendar_origin == ORIGIN
    with pytest.raises(ValueError, match="timezone"):
        Settings(calendar_origin="2026-12-01T00:00:00")  # type: ignore[arg-type]
    fixed = EmulatorConfig(anchor_date=ORIGIN.date())
    assert fixed.today() == ORIGIN.date()  # no origin: the anchor, however long it runs
    moving = EmulatorConfig(
        anchor_date=ORIGIN.date(),
        calendar_origin=datetime.now(UTC) - timedelta(seconds=3),
        time_scale=0.00001,
    )
    assert moving.today() >= datetime.now(UTC).date() + timedelta(days=3)


@pytest.mark.parametrize(("hour", "ahead"), [(0, 0), (20, 0), (21, 1), (23, 1)])
def test_wb_today_is_moscows_date_and_ours_stays_utc(hour: int, ahead: int) -> None:
    still = reading(datetime(2026, 12, 5, hour, 59, tzinfo=UTC))
    clock.set_calendar(still.origin, still.time_scale)
    assert clock.wb_today() == date(2026, 12, 5) + timedelta(days=ahead)
    assert clock.today() == date(2026, 12, 5)
    assert clock.wb_now().utcoffset() == timedelta(hours=3)
