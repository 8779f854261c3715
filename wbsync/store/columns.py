"""A dataset's own columns (``Dataset.columns``): what wbsync notes about a row beside WB's data.

Storing WB's rows never writes them (``rows.py`` sets only ``data``, ``changed_at``, ``seq`` and
``deleted_at``), so a row WB sends again keeps its note. Setting a note changes neither the
row's data, its sequence number nor ``changed_at``: notes are not in the change feed, which
carries WB's data. A row that already holds the value is not written (no new row version, as
for WB's rows).

On PostgreSQL the rows' values are read with one statement generated once per (dataset,
column), the keys as one array parameter per key column, through the driver in autocommit; a
transaction is opened only when a value changes. The autobidder sets a note on every bid it
tries, every run, and in the steady state none changes: such a call is one round trip with no
statement to build, not a transaction around a statement built and compiled per call (an
``IN`` of every key).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from sqlalchemy import Integer, TextClause, Update, bindparam, select, text, tuple_, update

from wbsync.errors import StoreError
from wbsync.store.datasets import Dataset, KeyValue, dataset
from wbsync.store.db import Database
from wbsync.store.page_statement import PG_KEY_ARRAYS, PG_KEY_TYPES
from wbsync.store.schema import dataset_table, pg_quote

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
    """Set ``column`` on the cabinet's rows of the given natural keys, the changed ones in one
    transaction; how many rows it changed (keys without a row are left out).

    The rows' values are read first: a driver's count of the rows an executemany updated is
    not to be relied on (asyncpg gives none). On PostgreSQL the read comes before the
    transaction, which is opened only when a value changes (the rows' one writer is the
    cabinet's one live job of the sync).
    """
    ds = _own(name, column)
    if not values:
        return 0
    if db.dialect == "postgresql":
        stored = await _pg_held(db, ds, cabinet_id, column, values)
        changed = _changed(stored, values)
        if changed:
            async with db.transaction() as conn:
                await conn.execute(
                    _statement(ds, column),
                    [_params(ds, cabinet_id, key, value) for key, value in changed],
                )
        return len(changed)
    table = dataset_table(ds)
    keys = [table.c[k.column] for k in ds.key]
    held = select(*keys, table.c[column]).where(
        table.c.cabinet_id == cabinet_id, tuple_(*keys).in_(list(values))
    )
    async with db.transaction() as conn:
        stored = {tuple(row[:-1]): row[-1] for row in await conn.execute(held)}
        changed = _changed(stored, values)
        if changed:
            await conn.execute(
                _statement(ds, column),
                [_params(ds, cabinet_id, key, value) for key, value in changed],
            )
    return len(changed)


def _changed(
    stored: Mapping[tuple[KeyValue, ...], str | None], values: Notes
) -> list[tuple[tuple[KeyValue, ...], str | None]]:
    """The (key, value) pairs of rows that exist and hold another value, in key order:
    concurrent writers on PostgreSQL then lock rows in one order."""
    return sorted(
        (key, value) for key, value in values.items() if key in stored and stored[key] != value
    )


async def _pg_held(
    db: Database, ds: Dataset, cabinet_id: int, column: str, values: Notes
) -> dict[tuple[KeyValue, ...], str | None]:
    """``column`` on the cabinet's rows of the keys in ``values`` (keys without a row left
    out), in one statement."""
    params: dict[str, Any] = {f"k{i}": [key[i] for key in values] for i in range(len(ds.key))}
    params["cabinet_id"] = cabinet_id
    rows = await db.fetch(_pg_held_statement(ds, column), params)
    names = [k.column for k in ds.key]
    return {tuple(row[n] for n in names): row[column] for row in rows}


@functools.cache
def _pg_held_statement(ds: Dataset, column: str) -> TextClause:
    """The key columns and ``column`` of the cabinet's rows whose keys come as arrays
    (``k0``, ``k1``, ...), generated once."""
    keys = [pg_quote(k.column) for k in ds.key]
    unnest = ", ".join(f"CAST(:k{i} AS {PG_KEY_TYPES[k.kind]})" for i, k in enumerate(ds.key))
    sql = (
        f"SELECT {', '.join(f't.{k}' for k in keys)}, t.{pg_quote(column)}"
        f" FROM {pg_quote(dataset_table(ds).name)} AS t"
        f" JOIN unnest({unnest}) AS k({', '.join(keys)})"
        f" ON {' AND '.join(f't.{k} = k.{k}' for k in keys)}"
        " WHERE t.cabinet_id = :cabinet_id"
    )
    return text(sql).bindparams(
        *(bindparam(f"k{i}", type_=PG_KEY_ARRAYS[k.kind]) for i, k in enumerate(ds.key)),
        bindparam("cabinet_id", type_=Integer()),
    )


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
