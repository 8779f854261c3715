"""Processes started together on a fresh database migrate it once; the lock's wait is bounded."""

from __future__ import annotations

import asyncio
import fcntl
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import Connection, inspect, text
from sqlalchemy.engine import make_url
from typer.testing import CliRunner

from tests.support.databases import SCHEMA_HEAD, DatabaseFactory, builtin_datasets
from tests.support.paths import ROOT
from wbsync.cli import app
from wbsync.config import get_settings
from wbsync.errors import StoreError
from wbsync.store import Database
from wbsync.store.migrator import PG_MIGRATION_LOCK_KEY
from wbsync.store.schema import model

PROCESSES = 4


def _schema(conn: Connection) -> tuple[list[str], set[str]]:
    versions = [row[0] for row in conn.execute(text("SELECT version_num FROM alembic_version"))]
    return versions, set(inspect(conn).get_table_names())


@pytest.mark.long
async def test_processes_migrating_at_once_migrate_a_fresh_database_once(
    db_backend: str, database_factory: DatabaseFactory
) -> None:
    url = await database_factory.new_url(db_backend)
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.support.migrate_worker",
            url,
            cwd=ROOT,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        for _ in range(PROCESSES)
    ]
    try:
        for proc in procs:  # every process is connected before any of them migrates
            assert proc.stdout is not None
            assert (await asyncio.wait_for(proc.stdout.readline(), 120)).strip() == b"ready"
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write(b"go\n")
        outs = [await asyncio.wait_for(proc.communicate(), 120) for proc in procs]
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.kill()
    assert [proc.returncode for proc in procs] == [0] * PROCESSES
    # One of them created the schema; the others waited for it and found it current.
    actions = sorted(out.decode().strip() for out, _ in outs)
    assert actions == ["created", *["current"] * (PROCESSES - 1)]
    async with Database(url) as db:
        versions, tables = await db.run_sync(_schema)
    assert versions == [SCHEMA_HEAD]
    assert tables == set(model(builtin_datasets()).tables) | {"alembic_version"}
    # `wbsync migrate` says what it found.
    invoke = CliRunner().invoke
    get_settings.cache_clear()  # the command reads the environment once per process
    try:
        env = {"WBSYNC_DATABASE_URL": url}
        reply = await asyncio.to_thread(invoke, app, ["migrate"], env=env)
    finally:
        get_settings.cache_clear()
    assert reply.exit_code == 0, reply.output
    assert reply.output.strip() == f"database schema is current (revision {SCHEMA_HEAD})"


@contextmanager
def _sqlite_lock_held(url: str) -> Iterator[None]:
    """Hold the SQLite migration lock as another process would (flock conflicts per open file)."""
    fd = os.open(f"{make_url(url).database}.migrate-lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


async def test_a_migration_lock_held_past_the_timeout_is_a_clear_error(
    db_backend: str, database_factory: DatabaseFactory
) -> None:
    url = await database_factory.new_url(db_backend)
    async with Database(url) as holder, Database(url) as db:
        if db_backend == "sqlite":
            with _sqlite_lock_held(url), pytest.raises(StoreError) as caught:
                await db.migrate(lock_timeout_s=0.2)
        else:
            async with holder.connection() as conn:
                lock = text("SELECT pg_advisory_lock(:key)")
                await conn.execute(lock, {"key": PG_MIGRATION_LOCK_KEY})
                with pytest.raises(StoreError) as caught:
                    await db.migrate(lock_timeout_s=0.2)
                await conn.execute(text("SELECT pg_advisory_unlock_all()"))
        assert "another process held the migration lock for more than 0.2 s" in str(caught.value)
        assert await db.current_revision() is None  # nothing was half done
        assert (await db.migrate()).action == "created"  # and once it is free, it goes ahead
