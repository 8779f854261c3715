"""A crashing background task is logged at ERROR and restarted with backoff, never silent."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest
from pydantic import SecretStr
from sqlalchemy import text

from tests.support.databases import DatabaseFactory
from tests.support.runtimes import runtime_starter
from tests.support.waiting import wait_for
from wbsync.composition.service import active_cabinet_ids
from wbsync.config import Settings
from wbsync.jobs.fanout import FanOut
from wbsync.jobs.leader import FanOutLeases
from wbsync.shared.runtime import Runtime
from wbsync.system.supervise import reap, supervise

QUEUE = "pricing-bulk"


@pytest.fixture
async def runtime(
    redis_url: str, prefix: str, database_factory: DatabaseFactory
) -> AsyncIterator[Runtime]:
    settings = Settings(
        redis_url=redis_url,
        redis_prefix=prefix,
        secret_key=SecretStr("supervise-test-secret"),
        database_url=await database_factory.new_url("sqlite"),
    )
    async with runtime_starter(redis_url, prefix) as start:
        yield await start(settings)


async def _set_created_at(runtime: Runtime, value: str) -> None:
    async with runtime.database.transaction() as conn:
        await conn.execute(text("UPDATE cabinets SET created_at = :v"), {"v": value})


async def test_a_fanout_crashing_on_a_bad_row_is_logged_and_restarted(
    runtime: Runtime, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    cabinet = await runtime.store.cabinets.add("bad-row", "a-token", "seller")
    # A row the code cannot read (not a database failure): reading it raises a ValueError.
    await _set_created_at(runtime, "not a timestamp")
    queue = runtime.queue(QUEUE)
    fanout = FanOut({QUEUE: queue}, lambda: active_cabinet_ids(runtime), {QUEUE: 3600.0})
    leases = FanOutLeases(runtime.redis, prefix=prefix, lease_ms=60_000)
    stop = asyncio.Event()
    caplog.set_level(logging.ERROR, logger="wbsync.system.supervise")
    task = asyncio.create_task(
        supervise(
            "the fan-out",
            lambda: fanout.run(stop, leases),
            stop,
            backoff_s=0.05,
            backoff_max_s=0.2,
        )
    )
    try:
        await wait_for(lambda: len(caplog.records) >= 3, timeout_s=30)  # crashed, again, again
        crashes = [r for r in caplog.records if r.levelno == logging.ERROR]
        assert all("the fan-out crashed; restarting it" in r.getMessage() for r in crashes)
        assert all(r.exc_info and r.exc_info[0] is ValueError for r in crashes)
        assert await queue.job(str(cabinet.id)) is None  # no pass got through yet

        await _set_created_at(runtime, "2026-01-01 00:00:00.000000")  # the row repaired
        await wait_for(lambda: queue.job(str(cabinet.id)), timeout_s=30)  # a restart fanned out
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
    assert task.exception() is None


async def test_reap_ends_quietly_on_the_tasks_cancel_but_passes_on_the_reapers() -> None:
    forever = asyncio.Event()
    child = asyncio.create_task(forever.wait())
    child.cancel()
    await reap(child)  # its own cancellation is its end
    assert child.cancelled()

    slow = asyncio.create_task(forever.wait())

    async def reaper() -> None:
        await reap(slow)

    outer = asyncio.create_task(reaper())
    await asyncio.sleep(0)  # the reaper awaits the task
    outer.cancel()  # a Ctrl-C of the reaper: cancels what it awaits, and is not swallowed
    with pytest.raises(asyncio.CancelledError):
        await outer
    assert slow.cancelled()
