"""The database pool: a process keeps ``pool_size`` connections and never opens more."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text

from tests.conftest_store import DatabaseFactory
from wbsync import clock
from wbsync.errors import ConfigError
from wbsync.store import Database


async def test_more_jobs_than_connections_share_the_pool(
    db_backend: str, database_factory: DatabaseFactory
) -> None:
    """Six tasks ask for a connection while two are held: they wait for those two instead of
    opening more, and all complete."""
    if db_backend != "postgresql":
        pytest.skip("SQLite keeps one connection whatever the size")
    async with Database(await database_factory.new_url(db_backend), pool_size=2) as db:
        held = 0
        go = asyncio.Event()

        async def one() -> int:
            nonlocal held
            async with db.connection() as conn:
                pid = int((await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one())
                held += 1
                await go.wait()
            return pid

        tasks = [asyncio.create_task(one()) for _ in range(6)]
        deadline = clock.monotonic() + 30.0
        while held < 2:
            assert clock.monotonic() < deadline, "two tasks never got a connection"
            await asyncio.sleep(0.01)
        assert held == 2  # the pool gave out its two: the other four wait
        go.set()
        pids = await asyncio.wait_for(asyncio.gather(*tasks), 30.0)
        assert held == 6
        assert len(set(pids)) <= 2


def test_a_pool_without_connections_is_refused() -> None:
    with pytest.raises(ConfigError, match="at least 1 connection, got 0"):
        Database("sqlite+aiosqlite:///x.db", pool_size=0)
