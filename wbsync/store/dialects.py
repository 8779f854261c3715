"""What the engine hands the drivers: JSON for the columns, each dialect's connection set-up,
statements compiled for asyncpg, and the inserts each dialect writes its own way.

Pieces of :class:`~wbsync.store.db.Database`, kept apart so that module holds the engine's
lifecycle and error translation; the rest of the store reaches them through ``Database``
(``json_bytes`` it re-exports).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import asyncpg
import orjson
from sqlalchemy import ClauseElement, Dialect, Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.dml import Insert
from sqlalchemy.util import greenlet_spawn

from wbsync.errors import StoreError
from wbsync.store.failures import store_error, unavailable

__all__ = [
    "DriverStatement",
    "FetchedRow",
    "driver_statement",
    "fetch_on_driver",
    "insert_ignoring",
    "json_bytes",
    "json_text",
    "postgres_on_connect",
    "sqlite_on_connect",
    "upsert",
]

_SQLITE_BUSY_TIMEOUT_MS = 30_000

_ORJSON_OPTIONS = {
    True: orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS,
    False: orjson.OPT_NON_STR_KEYS,
}


def _to_json(value: Any, *, sort_keys: bool) -> bytes:
    """``value`` as compact JSON in UTF-8 by orjson (WB text, mostly Cyrillic, stays readable);
    an integer beyond 64 bits, which orjson refuses, through the standard json, which writes the
    same text. A value neither can write raises the standard json's ``TypeError``."""
    try:
        return orjson.dumps(value, option=_ORJSON_OPTIONS[sort_keys])
    except orjson.JSONEncodeError:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=sort_keys)
        return text.encode()


def json_text(value: Any) -> str:
    """``value`` as JSON text, the engine's serializer: sorted keys make equal data equal
    text, which SQLite's change check compares."""
    return _to_json(value, sort_keys=True).decode()


def json_bytes(value: Any) -> bytes:
    """``value`` as JSON in UTF-8 bytes, its keys in the order given: for PostgreSQL's ``jsonb``,
    which keeps no key order, so sorting them (it triples orjson's time on a finance page) and
    a decode to ``str`` and encode back (what a ``jsonb`` parameter takes) buy nothing. A value
    that cannot be written as JSON (a set, say) is a ``StoreError``."""
    try:
        return _to_json(value, sort_keys=False)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"a value cannot be stored as JSON: {exc}") from None


class FetchedRow(Protocol):
    """A row of ``Database.fetch``: its columns by name."""

    def __getitem__(self, column: str) -> Any: ...


@dataclass(frozen=True, slots=True)
class DriverStatement:
    """A statement as asyncpg runs it: its SQL, its parameters' names in order, each
    parameter's conversion by its SQLAlchemy type (None: passed as it is), and the values the
    statement carries itself."""

    sql: str
    names: tuple[str, ...]
    converters: tuple[Callable[[Any], Any] | None, ...]
    defaults: Mapping[str, Any]

    def values(self, params: Mapping[str, Any]) -> Iterator[Any]:
        """The parameters' values in order: given, else the statement's own (KeyError: none)."""
        for name in self.names:
            yield params[name] if name in params else self.defaults[name]


def driver_statement(
    dialect: Dialect, statement: ClauseElement, keys: tuple[str, ...]
) -> DriverStatement:
    """``statement`` compiled by SQLAlchemy for the driver, given parameters named ``keys``."""
    compiled = statement.compile(dialect=dialect, column_keys=list(keys))
    assert isinstance(compiled, SQLCompiler)
    if compiled.literal_execute_params or compiled.post_compile_params:
        raise StoreError("a statement with expanding parameters cannot be fetched")
    names = tuple(compiled.positiontup or ())
    binds = [compiled.binds[n] for n in names]
    return DriverStatement(
        sql=compiled.string,
        names=names,
        converters=tuple(b.type.bind_processor(dialect) for b in binds),
        # The statement's own values (a literal SQLAlchemy bound, e.g. coalesce's 0).
        defaults={
            n: b.effective_value for n, b in zip(names, binds, strict=True) if not b.required
        },
    )


async def fetch_on_driver(
    engine: AsyncEngine, safe_url: str, driver: DriverStatement, args: list[Any]
) -> list[FetchedRow]:
    """Run ``driver`` with ``args`` on asyncpg's own connection, lent by ``engine``'s pool.

    A connection that failed under the statement, or was cut short by a cancel, is closed
    rather than given back to the pool; a statement the server refused leaves it in.
    """
    try:
        pooled = await engine.raw_connection()
    except (SQLAlchemyError, OSError, TimeoutError, engine.dialect.loaded_dbapi.Error) as exc:
        # A new connection's failure comes as the driver adapter's own error (its SQLSTATE
        # kept), not wrapped by SQLAlchemy as a statement's would be.
        raise store_error(safe_url, exc) from exc
    broken: BaseException | None = None
    try:
        connection: asyncpg.Connection = pooled.driver_connection
        rows: list[FetchedRow] = await connection.fetch(driver.sql, *args)
        return rows
    except asyncpg.PostgresError as exc:
        if unavailable(exc):
            broken = exc  # the connection failed, not the statement
        raise store_error(safe_url, exc) from exc
    except (asyncpg.InterfaceError, OSError, TimeoutError) as exc:
        broken = exc
        raise store_error(safe_url, exc) from exc
    except BaseException as exc:  # a cancel mid-statement: the connection's state is unknown
        broken = exc
        raise
    finally:
        if broken is not None:
            pooled.invalidate(broken if isinstance(broken, Exception) else None)
        await greenlet_spawn(pooled.close)


def insert_ignoring(dialect: str, table: Table) -> Insert:
    """``INSERT ... ON CONFLICT DO NOTHING`` in ``dialect``."""
    if dialect == "postgresql":
        return postgresql.insert(table).on_conflict_do_nothing()
    return sqlite.insert(table).on_conflict_do_nothing()


def upsert(
    dialect: str,
    table: Table,
    conflict: Sequence[str],
    update: Sequence[str],
    where: Callable[[Table, Any], Any] | None,
    returning: Sequence[str],
    computed: tuple[tuple[str, Callable[[Table, Any], Any]], ...],
) -> Insert:
    """``INSERT ... ON CONFLICT (conflict) DO UPDATE`` in ``dialect`` (``Database.upsert_statement``
    says what each argument does)."""
    insert = postgresql.insert(table) if dialect == "postgresql" else sqlite.insert(table)
    excluded = insert.excluded
    statement: Insert = insert.on_conflict_do_update(
        index_elements=list(conflict),
        set_={
            **{c: excluded[c] for c in update},
            **{c: fn(table, excluded) for c, fn in computed},
        },
        where=None if where is None else where(table, excluded),
    )
    if returning:
        statement = statement.returning(*(table.c[c] for c in returning))
    return statement


#: lz4 for the values PostgreSQL compresses (rows past about 2 KB: a finance report row is one),
#: where the server has it (PostgreSQL 14 and later, built with lz4); its own default (pglz)
#: otherwise. A finance page cost the server a third less CPU, its table a quarter more space
#: (docs/scaling.md, "Rows compressed with lz4"). Values keep the method they were written
#: with, so tables written before (or by other clients) read as ever.
_LZ4_IF_SUPPORTED = (
    "SELECT set_config('default_toast_compression', 'lz4', false) FROM pg_settings "
    "WHERE name = 'default_toast_compression' AND 'lz4' = ANY(enumvals)"
)


def postgres_on_connect(dbapi_conn: Any, _record: Any) -> None:
    """Set up a new PostgreSQL connection: lz4 compression where the server has it."""
    # On asyncpg's own connection, outside any transaction (a rollback would undo it).
    dbapi_conn.run_async(lambda conn: conn.execute(_LZ4_IF_SUPPORTED))


def sqlite_on_connect(dbapi_conn: Any, _record: Any) -> None:
    """Set up a new SQLite connection: foreign keys, WAL, a busy timeout."""
    cursor = dbapi_conn.cursor()
    # SQLite ignores foreign keys (and so ON DELETE CASCADE) unless each connection asks.
    cursor.execute("PRAGMA foreign_keys=ON")
    # WAL lets the HTTP API read while a worker writes; the busy timeout makes concurrent
    # writers in one process queue up instead of failing with "database is locked".
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute(f"PRAGMA busy_timeout={_SQLITE_BUSY_TIMEOUT_MS}")
    cursor.close()
