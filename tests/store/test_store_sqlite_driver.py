"""SQLite's driver connection (``store/sqlite_driver.py``): one hand-off to aiosqlite's thread
per statement, none for a commit or rollback with no transaction open, and a result longer than
``PREFETCH_ROWS`` read whole, in order, a bounded number of rows at a time."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from wbsync.errors import StoreError
from wbsync.store import Database
from wbsync.store.sqlite_driver import PREFETCH_ROWS, Connection

ROWS = 2 * PREFETCH_ROWS + 345  # past the bound: more than two prefetches


@pytest.fixture
def hand_offs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every call run on the connection's thread, by name, as it is made."""
    calls: list[str] = []
    run = Connection.run

    async def counted(self: Connection, fn: Callable[..., Any], *args: Any) -> Any:
        calls.append(getattr(fn, "__name__", repr(fn)))
        return await run(self, fn, *args)

    monkeypatch.setattr(Connection, "run", counted)
    return calls


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    async with Database(f"sqlite+aiosqlite:///{tmp_path}/driver.db") as database:
        async with database.transaction() as conn:
            await conn.execute(text("CREATE TABLE t (x INTEGER PRIMARY KEY)"))
            await conn.execute(
                text("INSERT INTO t (x) VALUES (:x)"), [{"x": i} for i in range(ROWS)]
            )
        yield database


async def test_a_statement_is_one_hand_off_and_a_read_commits_nothing(
    db: Database, hand_offs: list[str]
) -> None:
    assert (await db.execute(text("SELECT count(*) FROM t"))).scalar_one() == ROWS
    assert hand_offs == ["_run"]  # no cursor, fetch or close apart, no commit, no rollback
    hand_offs.clear()
    async with db.transaction() as conn:
        await conn.execute(text("INSERT INTO t (x) VALUES (-1)"))
        await conn.execute(text("DELETE FROM t WHERE x = -1"))
    assert hand_offs == ["_run", "_run", "commit"]  # the write's commit, no rollback after it


async def test_a_result_past_the_prefetch_is_read_whole_and_in_order(
    db: Database, hand_offs: list[str]
) -> None:
    result = await db.execute(text("SELECT x FROM t ORDER BY x"))
    assert [row.x for row in result] == list(range(ROWS))
    assert hand_offs == ["_run", "_fetch"]  # the first PREFETCH_ROWS, then the rest at once
    hand_offs.clear()
    batch = PREFETCH_ROWS // 4
    seen: list[int] = []
    async with db.connection() as conn:
        stream = await conn.stream(text("SELECT x FROM t ORDER BY x"))
        async for partition in stream.partitions(batch):
            assert len(partition) <= batch
            seen.extend(row.x for row in partition)
    assert seen == list(range(ROWS))
    # Streamed: the rows past the prefetch come a batch per hand-off, never all at once.
    fetches = hand_offs.count("_fetch")
    assert fetches >= (ROWS - PREFETCH_ROWS) // batch
    assert hand_offs[0] == "_run" and "commit" not in hand_offs


async def test_a_failed_statement_rolls_its_transaction_back_and_the_connection_goes_on(
    db: Database,
) -> None:
    with pytest.raises(StoreError):
        async with db.transaction() as conn:
            await conn.execute(text("INSERT INTO t (x) VALUES (-5)"))
            await conn.execute(text("INSERT INTO t (x) VALUES (0)"))  # the key exists
    with pytest.raises(StoreError):
        await db.execute(text("SELECT nothing FROM nowhere"))
    assert (await db.execute(text("SELECT count(*) FROM t WHERE x = -5"))).scalar_one() == 0
    assert (await db.execute(text("SELECT count(*) FROM t"))).scalar_one() == ROWS
