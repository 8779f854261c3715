"""The database pool: ``pool_size`` PostgreSQL connections kept open, a burst opens up to
``_OVERFLOW`` more and no others; the test session's own drops of its databases hold at most
``DROP_CONNECTIONS`` server connections at once."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from tests.support.databases import DROP_CONNECTIONS, POSTGRES_ENV, DatabaseFactory
from wbsync.errors import ConfigError
from wbsync.store import Database
from wbsync.store.db import _OVERFLOW
from wbsync.system import clock


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


async def test_the_test_sessions_drops_hold_at_most_drop_connections_at_once(
    tmp_path: Path,
) -> None:
    """Past ``DROP_CONNECTIONS`` databases, the session's end drops them all, never more than
    that many at once (each drop is a server connection of its own)."""
    server = os.environ.get(POSTGRES_ENV)
    if not server:
        pytest.skip(f"set {POSTGRES_ENV} to run")

    class Counted(DatabaseFactory):
        dropping = peak = 0

        async def admin(self, sql: str) -> None:
            if not sql.startswith("DROP"):
                return await super().admin(sql)
            self.dropping += 1
            self.peak = max(self.peak, self.dropping)
            try:
                await super().admin(sql)
            finally:
                self.dropping -= 1

    factory = Counted(tmp_path, server)
    names = [
        make_url(await factory.new_url("postgresql")).database for _ in range(DROP_CONNECTIONS + 2)
    ]
    await factory.drop_all()
    # The drops start together: as many as the bound lets through are under way at once.
    assert factory.peak == DROP_CONNECTIONS
    engine = create_async_engine(server)
    try:
        async with engine.connect() as conn:
            left = await conn.execute(
                text("SELECT datname FROM pg_database WHERE datname = ANY(:names)"),
                {"names": names},
            )
            assert left.all() == []
    finally:
        await engine.dispose()
