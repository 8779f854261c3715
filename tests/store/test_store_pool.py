"""The database pool: ``pool_size`` PostgreSQL connections kept open, a burst opens up to
``_OVERFLOW`` more and no others."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text

from tests.support.databases import DatabaseFactory
from wbsync import clock
from wbsync.errors import ConfigError
from wbsync.store import Database
from wbsync.store.db import _OVERFLOW


async def test_a_burst_past_the_pool_and_its_overflow_waits(
    db_backend: str, database_factory: DatabaseFactory
) -> None:
    """One connection kept and ``_OVERFLOW`` more for a burst: of ``_OVERFLOW`` + 3 tasks
    asking at once, that many hold one and the rest wait for them; afterwards the one kept
    serves every later use (the burst's others were closed)."""
    if db_backend != "postgresql":
        pytest.skip("SQLite keeps one connection whatever the size")
    ceiling = 1 + _OVERFLOW
    async with Database(await database_factory.new_url(db_backend), pool_size=1) as db:
        held = 0
        go = asyncio.Event()

        async def one() -> int:
            nonlocal held
            async with db.connection() as conn:
                pid = int((await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one())
                held += 1
                await go.wait()
            return pid

        tasks = [asyncio.create_task(one()) for _ in range(ceiling + 2)]
        deadline = clock.monotonic() + 60.0
        while held < ceiling:
            assert clock.monotonic() < deadline, f"only {held} tasks got a connection"
            await asyncio.sleep(0.01)
        assert held == ceiling  # the pool gave out all it may: the other two wait
        go.set()
        pids = await asyncio.wait_for(asyncio.gather(*tasks), 60.0)
        assert held == ceiling + 2
        assert len(set(pids)) <= ceiling
        later = set()
        for _ in range(5):
            async with db.connection() as conn:
                later.add(int((await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one()))
        assert len(later) == 1 and later <= set(pids)


def test_a_pool_without_connections_is_refused() -> None:
    with pytest.raises(ConfigError, match="at least 1 connection, got 0"):
        Database("sqlite+aiosqlite:///x.db", pool_size=0)
