"""Storage of what plugins declare: a declared dataset's standard table made and recorded by
``migrate`` (no migration code), and a plugin's own Alembic branch upgraded with wbsync's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Connection, inspect, select

from tests.conftest_store import SCHEMA_HEAD
from wbsync.errors import StoreError
from wbsync.registry import Registrar
from wbsync.store import Database, Dataset, KeyField, Store
from wbsync.store.declared import AlembicBranch
from wbsync.store.schema import declared_datasets

DATASET = Dataset("plugin_rows", "GET /api/v1/plugin", (KeyField("row_id", "id"),))
OWNER = "test-plugin"

BRANCH_REVISION = """
import sqlalchemy as sa
from alembic import op

revision = "plg1"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table("plugin_extra", sa.Column("id", sa.Integer(), primary_key=True))


def downgrade() -> None:
    op.drop_table("plugin_extra")
"""


@pytest.fixture
def declare() -> Iterator[Registrar]:
    """A registrar for the test's declarations, undone afterwards (the registry is global)."""
    registrar = Registrar(OWNER)
    yield registrar
    for claim in registrar._claims:
        if claim.table.owner(claim.key) == OWNER:
            claim.table._drop(claim.key)


def _tables(conn: Connection) -> set[str]:
    return set(inspect(conn).get_table_names())


def _recorded(conn: Connection) -> list[tuple[str, str, str]]:
    rows = conn.execute(select(declared_datasets)).all()
    return [(r.dataset, r.table_name, r.owner) for r in rows]


async def test_a_declared_dataset_gets_its_table_recorded_usable_and_dropped_with_the_schema(
    empty_database: Database, declare: Registrar
) -> None:
    declare.declare(DATASET)
    declare.commit()
    db = empty_database
    done = await db.migrate()
    assert done.tables == ("wb_plugin_rows",)
    assert "wb_plugin_rows" in await db.run_sync(_tables)
    assert await db.run_sync(_recorded) == [("plugin_rows", "wb_plugin_rows", OWNER)]
    assert (await db.migrate()).action == "current"

    store = Store(db, secret_key="k" * 32)
    cabinet = await store.cabinets.add("shop", "t", "seller")
    assert await store.upsert("plugin_rows", cabinet.id, [{"id": 2}, {"id": 1}, {"id": 2}]) == 2
    assert await store.fetch("plugin_rows", cabinet.id) == [{"id": 1}, {"id": 2}]

    await db.downgrade("base")
    assert await db.run_sync(_tables) == {"alembic_version"}


async def test_a_changed_key_is_refused_with_what_to_do(
    empty_database: Database, declare: Registrar
) -> None:
    declare.declare(DATASET)
    declare.commit()
    await empty_database.migrate()
    for claim in declare._claims:  # the plugin, upgraded, now keys the rows differently
        claim.table._drop(claim.key)
    again = Registrar(OWNER)
    again.declare(Dataset("plugin_rows", "GET", (KeyField("row_id", "id", "str"),)))
    again.commit()
    with pytest.raises(StoreError, match=r"created with key .* ship an Alembic branch"):
        await empty_database.migrate()


async def test_a_plugins_alembic_branch_is_upgraded_with_wbsyncs_own(
    empty_database: Database, declare: Registrar, tmp_path: Path
) -> None:
    (tmp_path / "plg1_extra.py").write_text(BRANCH_REVISION)
    declare.declare(AlembicBranch("testplugin", tmp_path))
    declare.commit()
    done = await empty_database.migrate()
    assert done.after == SCHEMA_HEAD
    tables = await empty_database.run_sync(_tables)
    assert {"plugin_extra", "alembic_version_testplugin", "cabinets"} <= tables
    assert (await empty_database.migrate()).action == "current"
    # A process without the plugin shares the database: it finds its own schema current.
    for claim in declare._claims:
        claim.table._drop(claim.key)
    assert (await empty_database.migrate()).action == "current"
    assert await empty_database.current_revision() == SCHEMA_HEAD
