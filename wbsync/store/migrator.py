"""Schema migrations: Alembic run in code, under a database-wide lock, for wbsync and plugins.

:class:`~wbsync.store.db.Database` runs these functions on one of its connections
(``Database.migrate``/``downgrade``); this module holds no engine and translates no errors.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from importlib.resources import files

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from wbsync.errors import StoreError
from wbsync.store.declared import MIGRATION_BRANCHES, AlembicBranch, create_declared_tables
from wbsync.system import clock

__all__ = [
    "MIGRATION_LOCK_TIMEOUT_S",
    "PG_MIGRATION_LOCK_KEY",
    "Migration",
    "alembic_config",
    "downgrade",
    "revision",
    "sqlite_migration_lock",
    "upgrade",
]

#: How long ``migrate`` waits while another process migrates the same database, then fails.
MIGRATION_LOCK_TIMEOUT_S = 600.0
#: The PostgreSQL advisory lock (one bigint) every wbsync process takes to migrate ("wbsyncmg").
PG_MIGRATION_LOCK_KEY = 0x7762_7379_6E63_6D67
_LOCK_POLL_S = 0.05


@dataclass(frozen=True)
class Migration:
    """What ``migrate`` did: the schema revision before and after."""

    before: str | None
    after: str | None
    tables: tuple[str, ...] = ()
    """The standard tables created from datasets' declarations."""

    @property
    def action(self) -> str:
        """``"created"``, ``"upgraded"`` or ``"current"`` (nothing to do)."""
        if self.before == self.after and not self.tables:
            return "current"
        return "created" if self.before is None else "upgraded"

    def __str__(self) -> str:
        if self.tables:
            made = f"; tables created for declared datasets: {', '.join(self.tables)}"
            return self._revisions() + made
        return self._revisions()

    def _revisions(self) -> str:
        if self.before is None:
            return f"database schema created at revision {self.after}"
        if self.before != self.after:
            return f"database schema upgraded from revision {self.before} to {self.after}"
        return f"database schema is current (revision {self.after})"


def revision(conn: Connection) -> str | None:
    """The revision of wbsync's own schema the database is at (None: empty)."""
    return MigrationContext.configure(conn).get_current_revision()


def alembic_config(url: str, branch: AlembicBranch | None = None) -> Config:
    """An Alembic configuration for ``url`` built in code: no alembic.ini to ship or find;
    with ``branch``, for a plugin's own revisions (their directory, their version table)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(files("wbsync.store") / "migrations"))
    if branch is not None:
        cfg.set_main_option("path_separator", "os")
        cfg.set_main_option("version_locations", str(branch.directory).replace("%", "%%"))
        cfg.attributes["version_table"] = branch.version_table
    # ConfigParser interpolation would choke on a '%' in a password.
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def _lock_timed_out(safe_url: str, timeout_s: float) -> StoreError:
    return StoreError(
        f"database {safe_url}: another process held the migration lock for more than "
        f"{timeout_s:g} s; check for a stuck 'wbsync migrate' (or a long migration) and "
        "start this one again when it is done"
    )


def upgrade(
    conn: Connection, url: str, safe_url: str, target: str, lock_timeout_s: float
) -> Migration:
    """Upgrade wbsync's schema to ``target`` on ``conn`` (in its transaction), then, for
    ``"head"``, every plugin's branch and the standard tables of declared datasets.

    PostgreSQL: under the advisory lock first (SQLite: the caller holds
    :func:`sqlite_migration_lock`).
    """
    if conn.dialect.name == "postgresql":
        _pg_migration_lock(conn, safe_url, lock_timeout_s)
    before = revision(conn)
    cfg = alembic_config(url)
    cfg.attributes["connection"] = conn
    command.upgrade(cfg, target)
    after = revision(conn)
    if target != "head":  # plugins' storage follows wbsync's newest schema only
        return Migration(before, after)
    for branch in MIGRATION_BRANCHES.values():
        plugin = alembic_config(url, branch)
        plugin.attributes["connection"] = conn
        command.upgrade(plugin, "head")
    return Migration(before, after, tables=tuple(create_declared_tables(conn)))


def downgrade(conn: Connection, url: str, target: str) -> None:
    """Downgrade wbsync's schema to ``target`` (``"base"``: plugins' branches first, their
    tables refer to wbsync's)."""
    if target == "base":
        for branch in MIGRATION_BRANCHES.values():
            plugin = alembic_config(url, branch)
            plugin.attributes["connection"] = conn
            command.downgrade(plugin, "base")
    cfg = alembic_config(url)
    cfg.attributes["connection"] = conn
    command.downgrade(cfg, target)


def _pg_migration_lock(conn: Connection, safe_url: str, timeout_s: float) -> None:
    # A transaction-level lock: released by the migration's commit or rollback, so a
    # process that dies mid-migration never leaves it behind.
    conn.exec_driver_sql(f"SET LOCAL lock_timeout = {max(1, round(timeout_s * 1000))}")
    try:
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": PG_MIGRATION_LOCK_KEY})
    except DBAPIError as exc:
        if getattr(exc.orig, "sqlstate", None) == "55P03":  # lock_not_available
            raise _lock_timed_out(safe_url, timeout_s) from None
        raise
    conn.exec_driver_sql("SET LOCAL lock_timeout = DEFAULT")


@asynccontextmanager
async def sqlite_migration_lock(url: str, safe_url: str, timeout_s: float) -> AsyncIterator[None]:
    """An exclusive ``flock`` of ``<file>.migrate-lock`` for a SQLite file (else nothing)."""
    parsed = make_url(url)
    database = parsed.database if parsed.get_backend_name() == "sqlite" else None
    if not database or database == ":memory:":
        yield
        return
    # The lock file stays: removing it would let a late process lock an unlinked file.
    fd = os.open(f"{database}.migrate-lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = clock.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if clock.monotonic() >= deadline:
                    raise _lock_timed_out(safe_url, timeout_s) from None
                await asyncio.sleep(_LOCK_POLL_S)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
