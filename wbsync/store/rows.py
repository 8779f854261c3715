"""Synced WB rows: upserted on each dataset's natural key, so a page stored twice is harmless."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import func, select

from wbsync.errors import StoreError
from wbsync.store.datasets import Dataset, KeyValue, dataset
from wbsync.store.db import Database
from wbsync.store.schema import dataset_table, utcnow

__all__ = ["RowRepository"]

# Rows per executemany call: bounds the memory of one driver round trip on huge pages
# (a finance page can hold 100k rows) while keeping round trips few.
BATCH_ROWS = 1000


class RowRepository:
    """Upsert, count and read the rows of the registered datasets."""

    def __init__(self, database: Database) -> None:
        self._db = database

    async def upsert(
        self, name: str | Dataset, cabinet_id: int, rows: Sequence[Mapping[str, Any]]
    ) -> int:
        """Insert or update ``rows`` of one dataset for one cabinet, in one transaction.

        Returns the number of distinct keys written. When a key repeats (in this call or
        against stored rows) the later row wins.
        """
        ds = dataset(name)
        table = dataset_table(ds)
        # PostgreSQL refuses to update one row twice in a statement; the last copy wins anyway.
        by_key: dict[tuple[KeyValue, ...], Mapping[str, Any]] = {}
        for index, row in enumerate(rows):
            try:
                by_key[ds.row_key(row)] = row
            except StoreError as exc:
                raise StoreError(f"{ds.name} row {index}: {exc}") from None
        if not by_key:
            return 0
        now = utcnow()
        columns = [k.column for k in ds.key]
        params = [
            {
                "cabinet_id": cabinet_id,
                **dict(zip(columns, key, strict=True)),
                "data": dict(row),
                "updated_at": now,
            }
            # Key order: concurrent writers on PostgreSQL then lock rows in one order, no deadlock.
            for key, row in sorted(by_key.items(), key=lambda item: item[0])
        ]
        statement = self._db.upsert_statement(
            table, conflict=("cabinet_id", *columns), update=("data", "updated_at")
        )
        async with self._db.transaction() as conn:
            for start in range(0, len(params), BATCH_ROWS):
                await conn.execute(statement, params[start : start + BATCH_ROWS])
        return len(params)

    async def count(self, name: str | Dataset, cabinet_id: int | None = None) -> int:
        """How many rows a dataset holds, for one cabinet or for all."""
        table = dataset_table(name)
        query = select(func.count()).select_from(table)
        if cabinet_id is not None:
            query = query.where(table.c.cabinet_id == cabinet_id)
        async with self._db.connection() as conn:
            return int(await conn.scalar(query) or 0)

    async def fetch(
        self,
        name: str | Dataset,
        cabinet_id: int,
        *,
        key: Mapping[str, KeyValue] | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[dict[str, Any]]:
        """A cabinet's rows of a dataset as WB sent them, ordered by natural key.

        ``key`` filters on key columns by their column names (e.g. ``{"nm_id": 1}``).
        """
        ds = dataset(name)
        table = dataset_table(ds)
        query = (
            select(table.c.data)
            .where(table.c.cabinet_id == cabinet_id)
            .order_by(*(table.c[k.column] for k in ds.key))
            .offset(offset)
            .limit(limit)
        )
        known = {k.column for k in ds.key}
        for column, value in (key or {}).items():
            if column not in known:
                raise StoreError(f"{ds.name} has no key column {column!r}; it has {sorted(known)}")
            query = query.where(table.c[column] == value)
        async with self._db.connection() as conn:
            result = await conn.execute(query)
            return [dict(data) for data in result.scalars()]
