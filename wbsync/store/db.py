"""The database connection: the one module that creates engines (what it hands the drivers,
JSON, connection set-up, statements compiled for asyncpg, is ``store/dialects.py``).

Everything else in ``wbsync.store`` talks to :class:`Database`; SQLAlchemy and driver errors are
translated into :class:`~wbsync.errors.StoreError` here, at the boundary.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import orjson
from sqlalchemy import ClauseElement, Connection, CursorResult, Executable, Table, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.sql.dml import Insert

from wbsync.errors import ConfigError, StoreError, StoreUnavailableError
from wbsync.store import migrator, sqlite_driver
from wbsync.store.dialects import (
    DriverStatement,
    FetchedRow,
    driver_statement,
    fetch_on_driver,
    insert_ignoring,
    json_bytes,
    json_text,
    postgres_on_connect,
    sqlite_on_connect,
    upsert,
)
from wbsync.store.failures import store_error
from wbsync.store.migrator import MIGRATION_LOCK_TIMEOUT_S, Migration

__all__ = ["POOL_RECYCLE_S", "Database", "FetchedRow", "json_bytes"]

log = logging.getLogger(__name__)

T = TypeVar("T")

_SUPPORTED_DRIVERS = {"sqlite+aiosqlite": "sqlite", "postgresql+asyncpg": "postgresql"}

#: A pooled connection older than this is closed and replaced when next checked out (no round
#: trip): what keeps a connection from outliving a server's or a proxy's idle limits, now that
#: checkouts are not pinged (see ``Database._create_engine``).
POOL_RECYCLE_S = 1800

_OVERFLOW = 10
"""PostgreSQL connections a process opens beyond its pool for a burst, closed when given back."""


class Database:
    """An async SQLAlchemy engine with an explicit lifecycle.

    ``Database(url)`` does no I/O; ``await start()`` (or ``async with``) connects and
    ``await aclose()`` disposes of the pool. A closed database cannot be started again.
    """

    def __init__(self, url: str, *, echo: bool = False, pool_size: int = 15) -> None:
        if pool_size < 1:
            raise ConfigError(f"the database pool needs at least 1 connection, got {pool_size}")
        try:
            parsed = make_url(url)
        except ArgumentError:
            raise ConfigError(
                "WBSYNC_DATABASE_URL is not a database URL; use sqlite+aiosqlite:///./wbsync.db "
                "or postgresql+asyncpg://user@host/db"
            ) from None
        driver = parsed.drivername
        if driver not in _SUPPORTED_DRIVERS:
            raise ConfigError(
                f"WBSYNC_DATABASE_URL driver {driver!r} is not supported; use "
                + " or ".join(repr(d) for d in _SUPPORTED_DRIVERS)
            )
        self._url = url
        self._safe_url = parsed.render_as_string(hide_password=True)
        self._dialect = _SUPPORTED_DRIVERS[driver]
        self._echo = echo
        self._pool_size = pool_size
        self._engine: AsyncEngine | None = None
        self._probe_engine: AsyncEngine | None = None
        self._closed = False
        self._upserts: dict[tuple[Any, ...], Insert] = {}
        self._driver_statements: dict[tuple[ClauseElement, tuple[str, ...]], DriverStatement] = {}

    def __repr__(self) -> str:
        state = "closed" if self._closed else "started" if self._engine else "new"
        return f"Database({self._safe_url!r}, {state})"

    @property
    def dialect(self) -> str:
        """``"sqlite"`` or ``"postgresql"``."""
        return self._dialect

    @property
    def url(self) -> str:
        """The URL with any password masked, for logs and messages."""
        return self._safe_url

    async def start(self) -> None:
        """Create the engine and check that the database answers."""
        if self._closed:
            raise StoreError(f"{self!r} was closed; create a new Database")
        if self._engine is not None:
            return
        self._check_sqlite_directory()
        # SQLite has one writer at a time; a second connection waiting for the lock sleeps in
        # SQLite's busy handler in steps of up to 100 ms. One connection per process queues
        # writers in asyncio instead, handing over at once (other processes still wait).
        # PostgreSQL: ``pool_size`` connections kept open, and up to ``_OVERFLOW`` more opened
        # for a burst. An overflow connection is closed when given back: with 5 kept (the
        # default), steady load kept opening and closing backends (a fork, authentication and
        # the driver's set-up each), dozens in 30 s at 30 cabinets.
        pool = (
            {"pool_size": 1, "max_overflow": 0}
            if self._dialect == "sqlite"
            else {"pool_size": self._pool_size, "max_overflow": _OVERFLOW}
        )
        engine = self._create_engine(**pool)
        event.listen(
            engine.sync_engine,
            "connect",
            sqlite_on_connect if self._dialect == "sqlite" else postgres_on_connect,
        )
        # The dependency probe's own connection: never queued behind busy workers, in
        # autocommit, and pinged at checkout (one round trip there), so a probe after a
        # database restart answers for the database, not for a dead pooled connection. Opened
        # here, where the engine also learns the server (a dozen round trips a probe over a
        # slow link could not afford), and kept.
        probe_engine = self._create_engine(
            pool_size=1, max_overflow=0, isolation_level="AUTOCOMMIT", pool_pre_ping=True
        )
        self._engine, self._probe_engine = engine, probe_engine
        try:
            async with self.connection() as conn:
                await conn.run_sync(lambda _: None)
            await self.ping()
        except StoreError:
            self._engine = self._probe_engine = None
            await engine.dispose()
            await probe_engine.dispose()
            raise
        log.debug("database %s started", self._safe_url)

    def _create_engine(self, **options: Any) -> AsyncEngine:
        # No pre-ping on checkout: on PostgreSQL it cost three round trips (BEGIN, ping,
        # ROLLBACK) per checkout, a third of a page's. A pooled connection that died (the
        # server restarted, the backend was terminated) fails its first statement instead:
        # SQLAlchemy marks it invalidated, with every older connection of the pool, and the
        # error leaves ``transaction``/``connection``/``execute`` as StoreUnavailableError,
        # which costs a job no attempt; the next checkout opens a fresh connection.
        # ``pool_recycle`` retires connections before idle limits can cut them. SQLite's
        # connections cost fewer hand-offs to aiosqlite's thread (``sqlite_driver``).
        if self._dialect == "sqlite":
            options["async_creator"] = sqlite_driver.creator(self._url)
        return create_async_engine(
            self._url,
            echo=self._echo,
            # Keeps bound values (rows, encrypted tokens) out of SQL logs and error messages.
            hide_parameters=True,
            json_serializer=json_text,
            json_deserializer=orjson.loads,
            pool_recycle=POOL_RECYCLE_S,
            **options,
        )

    def _check_sqlite_directory(self) -> None:
        """Refuse a SQLite file whose directory is missing before connecting: aiosqlite's
        failed connect leaves its worker thread racing the closing event loop, which prints a
        traceback as the process exits."""
        path = make_url(self._url).database
        if self._dialect != "sqlite" or not path or path.startswith(("file:", ":memory:")):
            return
        directory = Path(path).parent
        if not directory.is_dir():
            raise StoreUnavailableError(
                f"database {self._safe_url}: unable to open database file: no directory "
                f"{str(directory)!r}"
            )

    async def start_configured(self) -> None:
        """``start`` for a process starting up: a database it cannot reach, open or log in to
        is a ``ConfigError`` (the process did not start) saying what to check."""
        try:
            await self.start()
        except StoreError as exc:
            raise ConfigError(
                f"WBSYNC_DATABASE_URL: {exc}; start the database or fix the URL (the host, port, "
                "user, password and database name; for SQLite, a file in a directory that "
                "exists and is writable)"
            ) from None

    async def aclose(self) -> None:
        """Dispose of the connection pool; the object cannot be reused afterwards."""
        self._closed = True
        engines = (self._engine, self._probe_engine)
        self._engine = self._probe_engine = None
        for engine in engines:
            if engine is not None:
                await engine.dispose()

    async def __aenter__(self) -> Database:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def ping(self) -> None:
        """Ask the database one trivial question (``SELECT 1``) on the probe's pooled connection.

        Two round trips on the open connection (its pre-ping, the query); reopening it (after
        the database restarted) costs about two more. ``StoreUnavailableError`` when the
        database does not answer.
        """
        self._require_engine()
        assert self._probe_engine is not None
        try:
            async with self._probe_engine.connect() as conn:
                await conn.exec_driver_sql("SELECT 1")
        except (SQLAlchemyError, OSError, TimeoutError) as exc:
            raise store_error(self._safe_url, exc) from exc

    def _require_engine(self) -> AsyncEngine:
        if self._engine is None:
            state = "closed" if self._closed else "not started"
            raise StoreError(f"{self!r} is {state}")
        return self._engine

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncConnection]:
        """A connection inside one transaction: committed on success, rolled back on error."""
        engine = self._require_engine()
        try:
            async with engine.begin() as conn:
                yield conn
        except (SQLAlchemyError, OSError, TimeoutError) as exc:
            raise store_error(self._safe_url, exc) from exc

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[AsyncConnection]:
        """A connection for reads (no explicit transaction is committed)."""
        engine = self._require_engine()
        try:
            async with engine.connect() as conn:
                yield conn
        except (SQLAlchemyError, OSError, TimeoutError) as exc:
            raise store_error(self._safe_url, exc) from exc

    async def execute(
        self, statement: Executable, params: Mapping[str, Any] | None = None
    ) -> CursorResult[Any]:
        """Run one statement on its own, its result buffered: atomic by itself, so on
        PostgreSQL it runs in autocommit (one round trip, no BEGIN and COMMIT around it); on
        SQLite in a transaction committed at once."""
        engine = self._require_engine()
        try:
            if self._dialect == "postgresql":
                async with engine.connect() as conn:
                    auto = await conn.execution_options(isolation_level="AUTOCOMMIT")
                    return await auto.execute(statement, params)
            async with engine.begin() as conn:
                return await conn.execute(statement, params)
        except (SQLAlchemyError, OSError, TimeoutError) as exc:
            raise store_error(self._safe_url, exc) from exc

    async def fetch(
        self, statement: Executable, params: Mapping[str, Any] | None = None
    ) -> list[FetchedRow]:
        """Run one statement on its own, as ``execute`` does, and return its rows, each read
        by column name (``row["id"]``).

        On PostgreSQL the statement goes straight to the driver (asyncpg) on a connection of
        the pool: compiled once by SQLAlchemy, its values converted by their column types, its
        rows as asyncpg decodes them. That costs half of ``execute``'s CPU (0.15 against 0.29
        ms for a one-row upsert, docs/scaling.md), which is why a run's own statements (its
        cabinet, its pages, its record) take this way. Its rows are not passed through
        SQLAlchemy's result types: for statements whose columns need no conversion beyond the
        driver's (integers, text, booleans, timestamps with their zone, JSON).

        A connection that failed under a statement, or was cut short by a cancel, is closed
        (``dialects.fetch_on_driver``). Pass a statement built once (a module's constant,
        ``upsert_statement``'s, a cached builder's): the statement object itself keys its
        compiled form, so one built per call would be compiled per call and kept.
        """
        if self._dialect != "postgresql":
            result = await self.execute(statement, params)
            return [dict(row._mapping) for row in result] if result.returns_rows else []
        engine = self._require_engine()
        values = params or {}
        try:
            driver = self._driver_statement(engine, statement, tuple(values))
            args = [
                value if convert is None else convert(value)
                for value, convert in zip(driver.values(values), driver.converters, strict=True)
            ]
        except (SQLAlchemyError, KeyError, TypeError, ValueError) as exc:  # not sendable
            raise store_error(self._safe_url, exc) from exc
        return await fetch_on_driver(engine, self._safe_url, driver, args)

    def _driver_statement(
        self, engine: AsyncEngine, statement: Executable, keys: tuple[str, ...]
    ) -> DriverStatement:
        """``statement`` compiled for the driver once per set of parameter names."""
        assert isinstance(statement, ClauseElement)
        shape = (statement, keys)
        driver = self._driver_statements.get(shape)
        if driver is None:
            driver = driver_statement(engine.dialect, statement, keys)
            self._driver_statements[shape] = driver
        return driver

    async def vacuum(self, table: str) -> None:
        """Make the space of ``table``'s deleted rows reusable now (PostgreSQL's ``VACUUM``,
        skipped if another vacuum holds the table); SQLite reuses freed pages by itself."""
        if self._dialect != "postgresql":
            return
        engine = self._require_engine()
        name = engine.dialect.identifier_preparer.quote(table)
        try:
            async with engine.connect() as conn:
                auto = await conn.execution_options(isolation_level="AUTOCOMMIT")
                await auto.execute(text(f"VACUUM (SKIP_LOCKED) {name}"))
        except (SQLAlchemyError, OSError, TimeoutError) as exc:
            raise store_error(self._safe_url, exc) from exc

    async def run_sync(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn`` with a synchronous connection inside one transaction (Alembic, inspection)."""
        async with self.transaction() as conn:
            return await conn.run_sync(fn)

    async def migrate(
        self, revision: str = "head", *, lock_timeout_s: float = MIGRATION_LOCK_TIMEOUT_S
    ) -> Migration:
        """Upgrade the schema to ``revision`` (default: the newest shipped migration).

        Processes started together on a fresh database must not race the schema: the
        migration runs under a database-wide lock (PostgreSQL: an advisory lock held by the
        migration's transaction; SQLite: an exclusive ``flock`` of ``<file>.migrate-lock``).
        The others wait up to ``lock_timeout_s``, then find the schema current.
        """
        self._require_engine()
        url, safe = self._url, self._safe_url
        async with migrator.sqlite_migration_lock(url, safe, lock_timeout_s):
            done = await self.run_sync(
                lambda conn: migrator.upgrade(conn, url, safe, revision, lock_timeout_s)
            )
        # No news is DEBUG: a start-up that fails next (a wrong secret key) says one line only.
        level = logging.DEBUG if done.action == "current" else logging.INFO
        log.log(level, "database %s: %s", self._safe_url, done)
        return done

    async def downgrade(self, revision: str) -> None:
        """Downgrade the schema to ``revision`` (``"base"`` drops every wbsync table)."""
        await self.run_sync(lambda conn: migrator.downgrade(conn, self._url, revision))

    async def current_revision(self) -> str | None:
        """The migration revision the database is at, or None for an empty database."""
        return await self.run_sync(migrator.revision)

    def insert_ignoring(self, table: Table) -> Insert:
        """``INSERT ... ON CONFLICT DO NOTHING``: a row whose key exists is left as it is."""
        return insert_ignoring(self._dialect, table)

    def upsert_statement(
        self,
        table: Table,
        *,
        conflict: Sequence[str],
        update: Sequence[str],
        where: Callable[[Table, Any], Any] | None = None,
        returning: Sequence[str] = (),
        computed: tuple[tuple[str, Callable[[Table, Any], Any]], ...] = (),
    ) -> Insert:
        """``INSERT ... ON CONFLICT (conflict) DO UPDATE SET update = excluded.update``.

        ``computed`` sets more columns on conflict, each to ``fn(table, excluded)``.

        ``where(table, excluded)`` guards the update: a conflicting row it rejects is left as
        it is (not rewritten), and not among the ``returning`` rows. Built once per shape and
        kept: the same object each time keeps its cache key (SQLAlchemy memoizes it) and so
        its compiled form.
        """
        shape = (table, tuple(conflict), tuple(update), where, tuple(returning), computed)
        statement = self._upserts.get(shape)
        if statement is None:
            statement = upsert(self._dialect, table, conflict, update, where, returning, computed)
            self._upserts[shape] = statement
        return statement
