"""Migrations and the built-in datasets' declarations reproduce the model exactly; Database's
lifecycle and error translation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, inspect

from tests.support.databases import SCHEMA_HEAD, builtin_datasets
from wbsync.errors import ConfigError, StoreError
from wbsync.store import Database
from wbsync.store.schema import model


def _schema_diff(conn: Connection) -> list[Any]:
    context = MigrationContext.configure(conn, opts={"compare_type": True})
    return list(compare_metadata(context, model(builtin_datasets())))


def _tables(conn: Connection) -> set[str]:
    return set(inspect(conn).get_table_names())


async def test_migrate_from_empty_to_head_matches_the_model(empty_database: Database) -> None:
    db = empty_database
    assert await db.current_revision() is None
    assert await db.run_sync(_tables) == set()

    await db.migrate()

    assert await db.current_revision() == SCHEMA_HEAD
    assert await db.run_sync(_schema_diff) == []
    assert await db.run_sync(_tables) == set(model(builtin_datasets()).tables) | {"alembic_version"}


async def test_migrate_twice_is_a_no_op_and_downgrade_drops_everything(
    empty_database: Database,
) -> None:
    db = empty_database
    await db.migrate()
    await db.migrate()
    assert await db.current_revision() == SCHEMA_HEAD

    await db.downgrade("base")
    assert await db.current_revision() is None
    assert await db.run_sync(_tables) == {"alembic_version"}

    await db.migrate()
    assert await db.run_sync(_schema_diff) == []


async def test_constructor_does_no_io_and_a_closed_database_refuses_reuse(
    tmp_path: Path,
) -> None:
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'lazy.db'}")
    assert not (tmp_path / "lazy.db").exists()
    with pytest.raises(StoreError, match="not started"):
        async with db.connection():
            pass

    async with db:
        assert (tmp_path / "lazy.db").exists()
    with pytest.raises(StoreError, match="closed"):
        await db.start()
    with pytest.raises(StoreError, match="closed"):
        await db.migrate()


async def test_unreachable_database_is_a_store_error(tmp_path: Path) -> None:
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'no' / 'such' / 'dir.db'}")
    with pytest.raises(StoreError, match="unable to open"):
        await db.start()
    await db.aclose()


async def test_postgres_password_is_masked_in_errors() -> None:
    # Port 1 on loopback refuses at once; the message must not echo the password.
    db = Database("postgresql+asyncpg://user:hunter2@127.0.0.1:1/nodb")
    assert "hunter2" not in repr(db)
    with pytest.raises(StoreError) as caught:
        await db.start()
    assert "hunter2" not in str(caught.value)
    await db.aclose()


@pytest.mark.parametrize(
    "url",
    ["mysql+aiomysql://localhost/db", "sqlite:///./plain-sync-driver.db", "not a url"],
)
def test_unsupported_urls_are_config_errors(url: str) -> None:
    with pytest.raises(ConfigError, match="WBSYNC_DATABASE_URL"):
        Database(url)
