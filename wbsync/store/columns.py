"""A dataset's own columns (``Dataset.columns``): what wbsync notes about a row beside WB's data.

Storing WB's rows never writes them (``rows.py`` sets only ``data``, ``changed_at``, ``seq`` and
``deleted_at``), so a row WB sends again keeps its note. Setting a note changes neither the
row's data, its sequence number nor ``changed_at``: notes are not in the change feed, which
carries WB's data. A row that already holds the value is not written (no new row version, as
for WB's rows).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from sqlalchemy import Update, bindparam, select, tuple_, update

from wbsync.errors import StoreError
from wbsync.store.datasets import Dataset, KeyValue, dataset
from wbsync.store.db import Database
from wbsync.store.schema import dataset_table

__all__ = ["read_column", "set_column"]

Notes = Mapping[tuple[KeyValue, ...], str | None]


def _own(name: str | Dataset, column: str) -> Dataset:
    ds = dataset(name)
    if column not in ds.columns:
        raise StoreError(f"{ds.name} has no column {column!r} of its own; it has {ds.columns}")
    return ds


async def set_column(
    db: Database, name: str | Dataset, cabinet_id: int, column: str, values: Notes
) -> int:
    """Set ``column`` on the cabinet's rows of the given natural keys, in one transaction; how
    many rows it changed (keys without a row are left out).

    The rows' values are read first: a driver's count of the rows an executemany updated is
    not to be relied on (asyncpg gives none).
    """
    ds = _own(name, column)
    if not values:
        return 0
    table = dataset_table(ds)
    keys = [table.c[k.column] for k in ds.key]
    held = select(*keys, table.c[column]).where(
        table.c.cabinet_id == cabinet_id, tuple_(*keys).in_(list(values))
    )
    async with db.transaction() as conn:
        stored = {tuple(row[:-1]): row[-1] for row in await conn.execute(held)}
        # Key order: concurrent writers on PostgreSQL then lock rows in one order.
        changed = sorted(
            (key, value) for key, value in values.items() if key in stored and stored[key] != value
        )
        if changed:
            await conn.execute(
                _statement(ds, column),
                [_params(ds, cabinet_id, key, value) for key, value in changed],
            )
    return len(changed)


async def read_column(
    db: Database, name: str | Dataset, cabinet_id: int, column: str
) -> dict[tuple[KeyValue, ...], str | None]:
    """``column`` on the cabinet's live rows, by natural key."""
    ds = _own(name, column)
    table = dataset_table(ds)
    keys = [table.c[k.column] for k in ds.key]
    query = select(*keys, table.c[column]).where(
        table.c.cabinet_id == cabinet_id, table.c.deleted_at.is_(None)
    )
    async with db.connection() as conn:
        result = await conn.execute(query)
        return {tuple(row[:-1]): row[-1] for row in result}


@functools.cache
def _statement(ds: Dataset, column: str) -> Update:
    """Set ``column`` to ``at_value`` on one row, by cabinet (``at_cabinet``) and key
    (``at_<key column>``)."""
    table = dataset_table(ds)
    return (
        update(table)
        .where(
            table.c.cabinet_id == bindparam("at_cabinet"),
            *(table.c[k.column] == bindparam(f"at_{k.column}") for k in ds.key),
        )
        .values({column: bindparam("at_value")})
    )


def _params(
    ds: Dataset, cabinet_id: int, key: tuple[KeyValue, ...], value: str | None
) -> dict[str, Any]:
    columns = (k.column for k in ds.key)
    return {
        "at_cabinet": cabinet_id,
        "at_value": value,
        **{f"at_{c}": v for c, v in zip(columns, key, strict=True)},
    }
