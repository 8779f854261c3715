"""SQLite's driver connection with fewer hand-offs to aiosqlite's thread.

aiosqlite runs every call on its connection's thread, and each call is a hand-off there and
back (a queue put, a wake-up, the result posted to the event loop): SQLAlchemy's adapter made
four per statement (create the cursor, execute, fetch, close) and two per transaction (commit,
then the pool's rollback of the connection given back), 33 for one finance job's store calls.
Here a statement is one hand-off (the cursor is created, run, read up to ``PREFETCH_ROWS`` rows
and closed in one go on the thread), and a commit or rollback with no transaction open is
skipped on the event loop (``sqlite3`` does nothing for it either), which leaves 8.

A result longer than ``PREFETCH_ROWS`` keeps its cursor open and costs one hand-off per further
fetch, so a streamed read (``yield_per``) holds at most that many rows (and one) ahead of its
reader.

It subclasses ``aiosqlite.Connection`` and uses its internals (``_execute``, ``_conn``,
``_connection``, ``_thread``), so pyproject.toml caps aiosqlite below the next minor version;
tests/store/test_store_sqlite_driver.py and every SQLite test of the suite run through it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, TypeVar, cast

import aiosqlite
from sqlalchemy.dialects.sqlite.aiosqlite import SQLiteDialect_aiosqlite
from sqlalchemy.engine import make_url

__all__ = ["PREFETCH_ROWS", "Connection", "creator"]

PREFETCH_ROWS = 1000
"""Rows a statement's own hand-off reads: a result this long or shorter costs no other."""

_Rows = list[Any]
T = TypeVar("T")


class Cursor:
    """A cursor for SQLAlchemy's aiosqlite adapter: one hand-off per execute.

    The ``sqlite3`` cursor is created on the connection's thread by the execute itself; its
    description, row count and last row id are read there, with the first ``PREFETCH_ROWS``
    rows, and it is closed there unless rows remain.
    """

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self._cursor: sqlite3.Cursor | None = None
        self._rows: _Rows = []
        self._more = False
        self.description: Any = None
        self.rowcount = -1
        self.lastrowid: int | None = None
        self.arraysize = 1

    async def __aenter__(self) -> Cursor:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def execute(self, sql: str, parameters: Any = ()) -> Cursor:
        return await self._run("execute", sql, parameters)

    async def executemany(self, sql: str, parameters: Iterable[Any]) -> Cursor:
        return await self._run("executemany", sql, parameters)

    async def _run(self, method: str, sql: str, parameters: Any) -> Cursor:
        await self.close()
        conn = self._connection._conn
        (
            self._cursor,
            self._rows,
            self.description,
            self.rowcount,
            self.lastrowid,
        ) = await self._connection.run(_run, conn, method, sql, parameters)
        self._more = self._cursor is not None
        return self

    async def fetchone(self) -> Any:
        rows = await self.fetchmany(1)
        return rows[0] if rows else None

    async def fetchmany(self, size: int | None = None) -> Sequence[Any]:
        size = self.arraysize if size is None else size
        if len(self._rows) < size and self._more:
            await self._fetch(size - len(self._rows))
        rows, self._rows = self._rows[:size], self._rows[size:]
        return rows

    async def fetchall(self) -> Sequence[Any]:
        if self._more:
            await self._fetch(None)
        rows, self._rows = self._rows, []
        return rows

    async def _fetch(self, size: int | None) -> None:
        assert self._cursor is not None
        rows, self._more = await self._connection.run(_fetch, self._cursor, size)
        self._rows.extend(rows)
        if not self._more:
            self._cursor = None

    async def close(self) -> None:
        self._rows = []
        self._more = False
        if self._cursor is not None:
            cursor, self._cursor = self._cursor, None
            await self._connection.run(cursor.close)


def _run(
    conn: sqlite3.Connection, method: str, sql: str, parameters: Any
) -> tuple[sqlite3.Cursor | None, _Rows, Any, int, int | None]:
    """On the connection's thread: a cursor created, run, read and (when read to its end)
    closed."""
    cursor = conn.cursor()
    try:
        getattr(cursor, method)(sql, parameters)
        rows = cursor.fetchmany(PREFETCH_ROWS + 1) if cursor.description else []
    except BaseException:
        cursor.close()
        raise
    out = (cursor.description, cursor.rowcount, cursor.lastrowid)
    if len(rows) <= PREFETCH_ROWS:
        cursor.close()
        return None, rows, *out
    return cursor, rows, *out


def _fetch(cursor: sqlite3.Cursor, size: int | None) -> tuple[_Rows, bool]:
    """On the connection's thread: ``size`` rows more and one past them, or all with None;
    whether any remain (the cursor is closed when none do)."""
    if size is None:
        rows, more = cursor.fetchall(), False
    else:  # one row past ``size`` tells whether any remain; it is kept for the next fetch
        rows = cursor.fetchmany(size + 1)
        more = len(rows) > size
    if not more:
        cursor.close()
    return rows, more


class Connection(aiosqlite.Connection):
    """aiosqlite's connection with one-hand-off cursors, and no hand-off for a commit or a
    rollback when no transaction is open."""

    def cursor(self) -> Any:  # aiosqlite's returns an awaitable context manager; so does this
        return Cursor(self)

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on the connection's thread: one hand-off."""
        execute = cast(Callable[..., Awaitable[T]], self._execute)
        return await execute(fn, *args)

    async def commit(self) -> None:
        if self.in_transaction:
            await self.run(self._conn.commit)

    async def rollback(self) -> None:
        if self._connection is not None and self.in_transaction:
            await self.run(self._conn.rollback)


def creator(url: str) -> Callable[[], Awaitable[Connection]]:
    """The ``async_creator`` of an engine on the SQLite ``url``: the arguments SQLAlchemy's
    aiosqlite dialect would pass ``sqlite3.connect``, with ``check_same_thread`` off (the event
    loop reads ``in_transaction``, a flag, while the thread is idle)."""
    args, kwargs = SQLiteDialect_aiosqlite().create_connect_args(make_url(url))
    kwargs = {**kwargs, "check_same_thread": False}

    open_file: Callable[..., sqlite3.Connection] = sqlite3.connect

    async def connect() -> Connection:
        connection = Connection(lambda: open_file(*args, **kwargs), iter_chunk_size=64)
        connection._thread.daemon = True  # as SQLAlchemy's dialect does: exit never waits on it
        await connection
        return connection

    return connect
