"""``Database.fetch``: one statement on its own, its rows by column name, on both databases (on
PostgreSQL straight through asyncpg, with the values converted as SQLAlchemy would)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import Integer, bindparam, func, select

from tests.support.statements import Sent, sent_statements
from wbsync.errors import StoreError, StoreUnavailableError
from wbsync.store import Database, Store
from wbsync.store.schema import sync_cursors, sync_runs


async def test_rows_come_by_column_name_with_json_and_zoned_timestamps(
    store: Store, database: Database
) -> None:
    cabinet = (await store.cabinets.add("shop", "token", "sid")).id
    moscow = timezone(timedelta(hours=3))
    written = datetime(2026, 12, 4, 15, 0, tzinfo=moscow)
    upsert = database.upsert_statement(
        sync_cursors, conflict=("cabinet_id", "sync"), update=("cursor", "updated_at")
    )
    params = {"cabinet_id": cabinet, "sync": "s", "cursor": {"rrdId": 7}, "updated_at": written}
    with sent_statements() as sent:
        assert await database.fetch(upsert, params) == []  # no RETURNING: no rows
    # One statement: in autocommit on PostgreSQL, in a transaction of its own on SQLite.
    postgres = database.dialect == "postgresql"
    assert sent == [Sent("INSERT", "AUTOCOMMIT" if postgres else None)]
    query = select(sync_cursors.c.cursor, sync_cursors.c.updated_at).where(
        sync_cursors.c.cabinet_id == bindparam("cabinet_id")
    )
    [row] = await database.fetch(query, {"cabinet_id": cabinet})
    assert row["cursor"] == {"rrdId": 7}
    assert row["updated_at"] == written and row["updated_at"].utcoffset() == timedelta(0)
    assert row["updated_at"].tzinfo is not None


async def test_a_statement_carries_its_own_values_and_a_missing_one_is_refused(
    database: Database,
) -> None:
    # coalesce's 0 is a value SQLAlchemy binds itself: the statement sends it.
    total = select(func.coalesce(func.sum(sync_runs.c.success_pages), 0).label("pages")).where(
        sync_runs.c.sync == bindparam("sync")
    )
    assert (await database.fetch(total, {"sync": "none"}))[0]["pages"] == 0
    with pytest.raises(StoreError) as caught:
        await database.fetch(total, {})
    assert not isinstance(caught.value, StoreUnavailableError)


async def test_a_value_postgresql_cannot_take_is_refused_and_the_next_statement_runs(
    database: Database,
) -> None:
    if database.dialect != "postgresql":
        pytest.skip("SQLite takes any value for any column")
    runs_of = sync_runs.c.cabinet_id == bindparam("id", type_=Integer)
    query = select(func.count().label("n")).where(runs_of)
    with pytest.raises(StoreError) as caught:
        await database.fetch(query, {"id": "not a number"})
    assert not isinstance(caught.value, StoreUnavailableError)
    assert (await database.fetch(query, {"id": 1}))[0]["n"] == 0
