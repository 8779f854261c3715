"""Real databases for storage tests, SQLite always, PostgreSQL when configured.

Set ``WBSYNC_TEST_POSTGRES_URL`` (e.g. ``postgresql+asyncpg://postgres@127.0.0.1:5432/postgres``)
to run every storage test on PostgreSQL too: :class:`DatabaseFactory` creates fresh
``wbsync_test_<random>`` databases through that server and drops them at the end of the session,
so parallel runs do not collide. Without it the PostgreSQL variants are skipped.

The fixtures on it are in tests/conftest.py (``database_factory``, ``db_backend``, ``database``,
``store``) and tests/store/conftest.py (``empty_database``, ``throwaway``).
"""

from __future__ import annotations

import asyncio
import secrets
import sqlite3
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import closing
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from tests.support.paths import ROOT
from wbsync.catalog.registry import BUILTIN
from wbsync.store import DATASETS, Database
from wbsync.system import eventloop

POSTGRES_ENV = "WBSYNC_TEST_POSTGRES_URL"
TEST_SECRET_KEY = "test-secret-key-for-the-store-tests"
BACKENDS = ("sqlite", "postgresql")
#: Databases the session drops at once at its end (each drop is a connection of its own).
DROP_CONNECTIONS = 4
# The newest schema revision: revisions are numbered, and their files start with the number.
_VERSIONS = ROOT / "wbsync" / "store" / "migrations" / "versions"
SCHEMA_HEAD = max(p.name.split("_", 1)[0] for p in _VERSIONS.glob("[0-9]*_*.py"))


def builtin_datasets() -> list[str]:
    """The built-in datasets (registered by ``wbsync.syncs``): their tables are in every
    migrated database."""
    return [name for name in DATASETS if DATASETS.owner(name) == BUILTIN]


def plugin_tables(tables: tuple[str, ...]) -> tuple[str, ...]:
    """Of the tables a migration made from declarations, the plugins' (not the built-ins' that
    come from their declarations too, the report tasks')."""
    builtin = {f"wb_{name}" for name in builtin_datasets()}
    return tuple(t for t in tables if t not in builtin)


class DatabaseFactory:
    """Makes empty databases for one test session and drops them all at its end."""

    def __init__(self, tmp_dir: Path, postgres_url: str | None) -> None:
        self._tmp_dir = tmp_dir
        self._postgres_url = postgres_url
        self._prefix = f"wbsync_test_{secrets.token_hex(4)}"
        self._count = 0
        self._postgres_names: list[str] = []  # the shared migrated ones too
        self._fresh: list[str] = []  # made by new_url since the last release
        self._dropped: set[str] = set()
        self._migrated: dict[str, str] = {}
        self._templates: dict[str, str] = {}
        self._dropper: ThreadPoolExecutor | None = None
        self._drops: list[Future[None]] = []

    async def new_url(self, backend: str) -> str:
        """The URL of a new, empty database on ``backend``, the test's own: ``release`` drops
        it once the test is over."""
        name, url = await self._create(backend)
        if name is not None:
            self._fresh.append(name)
        return url

    async def new_migrated_url(self, backend: str) -> str:
        """As ``new_url``, but migrated to head: a copy of the session's template on
        ``backend`` (PostgreSQL's ``CREATE DATABASE ... TEMPLATE``, SQLite's backup of the
        file), which ``migrate`` then finds current. For a test that needs a database of its
        own, not one that tells what a migration of an empty database does."""
        template = await self._template(backend)
        name, url = await self._create(backend, template=template)
        if name is None:
            with (
                closing(sqlite3.connect(make_url(template).database or "")) as source,
                closing(sqlite3.connect(make_url(url).database or "")) as copy,
            ):
                source.backup(copy)
        else:
            self._fresh.append(name)
        return url

    async def _create(self, backend: str, *, template: str | None = None) -> tuple[str | None, str]:
        """A new database's name (None for SQLite: nothing to drop) and URL; on PostgreSQL, a
        copy of the database at ``template`` when given."""
        name = f"{self._prefix}_{self._count}"
        self._count += 1
        if backend == "sqlite":
            return None, f"sqlite+aiosqlite:///{self._tmp_dir / name}.db"
        assert self._postgres_url is not None
        copied = f' TEMPLATE "{make_url(template).database}"' if template else ""
        await self.admin(f'CREATE DATABASE "{name}"{copied}')
        self._postgres_names.append(name)
        url = make_url(self._postgres_url).set(database=name)
        return name, url.render_as_string(hide_password=False)

    async def migrated_url(self, backend: str) -> str:
        """A database migrated to head, shared by the session's tests on ``backend``."""
        if backend not in self._migrated:
            self._migrated[backend] = await self._new_migrated(backend)
        return self._migrated[backend]

    async def _template(self, backend: str) -> str:
        """The session's template on ``backend``: migrated to head, then never connected to
        again (PostgreSQL copies a database only while nobody is connected to it)."""
        if backend not in self._templates:
            self._templates[backend] = await self._new_migrated(backend)
        return self._templates[backend]

    async def _new_migrated(self, backend: str) -> str:
        _, url = await self._create(backend)
        async with Database(url) as db:
            await db.migrate()
        return url

    def release(self) -> None:
        """The databases ``new_url`` made since the last release are done with (their test is
        over): a thread of the factory's own drops them while the next tests run, on a loop of
        its own (the tests' loop keeps its timing). A drop waits for a checkpoint of the whole
        server: left for the session's end, a worker's drops were the tail of the run."""
        names, self._fresh = self._fresh, []
        if names:
            if self._dropper is None:
                self._dropper = ThreadPoolExecutor(1, thread_name_prefix="database-drops")
            self._drops.append(self._dropper.submit(self._drop_in_thread, names))

    async def drop_all(self) -> None:
        """Drop every PostgreSQL database this session created (SQLite files go with tmp),
        once the drops under way are done."""
        if self._dropper is not None:
            await asyncio.to_thread(self._dropper.shutdown)
            for done in self._drops:
                done.result()  # a drop that failed fails the session's end, named
        await self._drop([name for name in self._postgres_names if name not in self._dropped])

    def _drop_in_thread(self, names: list[str]) -> None:
        eventloop.run(self._drop(names))

    async def _drop(self, names: list[str]) -> None:
        # Each drop waits for a checkpoint; side by side they share them (seconds, not tens).
        # At most DROP_CONNECTIONS at once: the server's connections are shared with others.
        slots = asyncio.Semaphore(DROP_CONNECTIONS)

        async def drop(name: str) -> None:
            async with slots:
                await self.admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            self._dropped.add(name)

        await asyncio.gather(*(drop(name) for name in names))

    async def admin(self, sql: str) -> None:
        """Run ``sql`` on the configured PostgreSQL server's own database, outside a transaction."""
        assert self._postgres_url is not None
        # CREATE/DROP DATABASE cannot run inside a transaction block.
        engine = create_async_engine(self._postgres_url, isolation_level="AUTOCOMMIT")
        try:
            async with engine.connect() as conn:
                await conn.execute(text(sql))
        finally:
            await engine.dispose()

    async def lock_out(self, url: str) -> None:
        """The database at ``url`` refuses new connections (ALLOW_CONNECTIONS false) and every
        open one is terminated."""
        await self.admin(f'ALTER DATABASE "{make_url(url).database}" ALLOW_CONNECTIONS false')
        await self.terminate(url)

    async def let_in(self, url: str) -> None:
        """The database at ``url`` accepts connections again."""
        await self.admin(f'ALTER DATABASE "{make_url(url).database}" ALLOW_CONNECTIONS true')

    async def terminate(self, url: str) -> None:
        """Every open connection to the database at ``url`` terminated by the server (waiting
        until each backend has exited, so the next use of a pooled connection meets a closed
        one)."""
        await self.admin(
            "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity "
            f"WHERE datname = '{make_url(url).database}' AND pid <> pg_backend_pid()"
        )
