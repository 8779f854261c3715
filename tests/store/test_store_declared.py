"""Storage of what plugins declare: a declared dataset's standard table made and recorded by
``migrate`` (no migration code), and a plugin's own Alembic branch upgraded with wbsync's."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, inspect, select, text

from tests.support.databases import SCHEMA_HEAD, builtin_datasets, plugin_tables
from wbsync.catalog.registry import BUILTIN, Registrar
from wbsync.errors import StoreError
from wbsync.store import Database, Dataset, KeyField, Store
from wbsync.store.changes import ChangeEvent
from wbsync.store.datasets import IDENTIFIER_MAX, NAME_MAX
from wbsync.store.declared import AlembicBranch
from wbsync.store.schema import dataset_table, declared_datasets, model, utcnow

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
    rows = conn.execute(select(declared_datasets).where(declared_datasets.c.owner != BUILTIN))
    return [(r.dataset, r.table_name, r.owner) for r in rows]


async def test_a_declared_dataset_gets_its_table_recorded_usable_and_dropped_with_the_schema(
    empty_database: Database, declare: Registrar
) -> None:
    declare.declare(DATASET)
    declare.commit()
    db = empty_database
    done = await db.migrate()
    assert plugin_tables(done.tables) == ("wb_plugin_rows",)
    assert "wb_plugin_rows" in await db.run_sync(_tables)
    recorded = await db.run_sync(_recorded)
    assert [r for r in recorded if r[2] == OWNER] == [("plugin_rows", "wb_plugin_rows", OWNER)]
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


# A plugin's snapshot dataset, dated, kept 30 days: the change feed, tombstones and retention
# work on its standard table exactly as on wbsync's own.
FED = Dataset(
    "plugin_slots",
    "GET /api/v1/plugin/slots",
    (KeyField("slot_id", "id"), KeyField("day", "day", "date")),
    kind="snapshot",
    retention_days=30,
)


async def _write_counts(db: Database, table: str) -> dict[int, str]:
    """Each row's physical version: PostgreSQL's (xmin, ctid), SQLite's trigger-counted writes."""
    async with db.connection() as conn:
        if db.dialect == "postgresql":
            query = f"SELECT slot_id, xmin::text || ctid::text FROM {table}"
        else:
            query = f"SELECT slot_id, writes FROM {table}_writes"
        return {int(key): str(version) for key, version in await conn.execute(text(query))}


async def _count_sqlite_writes(db: Database, table: str) -> None:
    if db.dialect != "sqlite":
        return
    async with db.transaction() as conn:
        for sql in (
            f"CREATE TABLE {table}_writes (slot_id INTEGER PRIMARY KEY, writes INTEGER)",
            f"CREATE TRIGGER {table}_ins AFTER INSERT ON {table} BEGIN "
            f"INSERT INTO {table}_writes VALUES (new.slot_id, 1); END",
            f"CREATE TRIGGER {table}_upd AFTER UPDATE ON {table} BEGIN "
            f"UPDATE {table}_writes SET writes = writes + 1 WHERE slot_id = new.slot_id; END",
        ):
            await conn.execute(text(sql))


def _slots(values: dict[int, int], day: str = "2026-12-01") -> list[dict[str, object]]:
    return [{"id": slot, "day": day, "free": free} for slot, free in values.items()]


async def test_a_plugin_datasets_rows_are_change_fed_tombstoned_and_pruned(
    empty_database: Database, declare: Registrar
) -> None:
    declare.declare(FED)
    declare.commit()
    db = empty_database
    assert plugin_tables((await db.migrate()).tables) == ("wb_plugin_slots",)
    columns = {c["name"]: c for c in await db.run_sync(lambda c: _columns(c, "wb_plugin_slots"))}
    assert {"changed_at", "seq", "deleted_at"} <= set(columns)
    if db.dialect == "postgresql":
        assert str(columns["data"]["type"]) == "JSONB"
    await _count_sqlite_writes(db, "wb_plugin_slots")
    store = Store(db, secret_key="k" * 32)
    cabinet = (await store.cabinets.add("shop", "t", "seller")).id
    events: list[ChangeEvent] = []

    async def listen(event: ChangeEvent) -> None:
        events.append(event)

    store.add_listener(listen)

    # No counter row yet for the plugin's dataset: its first write makes it.
    first = await store.write("plugin_slots", cabinet, _slots({1: 5, 2: 6, 3: 7}))
    assert (first.rows, first.changed, first.last_seq) == (3, 3, 3)
    feed = await store.changes("plugin_slots")
    assert [(c.seq, c.key, c.data["free"]) for c in feed.changes] == [
        (1, {"slot_id": 1, "day": "2026-12-01"}, 5),
        (2, {"slot_id": 2, "day": "2026-12-01"}, 6),
        (3, {"slot_id": 3, "day": "2026-12-01"}, 7),
    ]
    before = await _write_counts(db, "wb_plugin_slots")

    # The same rows again are not rewritten and take no number; a changed one takes the next.
    again = await store.write("plugin_slots", cabinet, _slots({3: 7, 2: 6, 1: 5}))
    assert (again.changed, again.last_seq) == (0, None)
    assert await _write_counts(db, "wb_plugin_slots") == before
    changed = await store.write("plugin_slots", cabinet, _slots({1: 5, 2: 0, 3: 7}))
    # (Each row of a page is offered a number; the unchanged ones leave theirs unused.)
    assert changed.changed == 1
    assert changed.last_seq is not None and changed.last_seq > 3
    after = await _write_counts(db, "wb_plugin_slots")
    assert {k for k in before if before[k] != after[k]} == {2}
    news = (await store.changes("plugin_slots", after=feed.next, cabinet_id=cabinet)).changes
    assert [(c.seq, c.key["slot_id"], c.data["free"], c.deleted) for c in news] == [
        (changed.last_seq, 2, 0, False)
    ]
    assert [(e.dataset, e.rows, e.last_seq) for e in events] == [
        ("plugin_slots", 3, 3),
        ("plugin_slots", 1, changed.last_seq),
    ]

    # A complete snapshot run that no longer sees slot 3 tombstones it, in the feed.
    await store.snapshots.begin("plugin_slots", cabinet)
    await store.write("plugin_slots", cabinet, _slots({1: 5, 2: 0}), seen=True)
    assert await store.snapshots.complete("plugin_slots", cabinet) == 1
    gone = (await store.changes("plugin_slots", after=changed.last_seq)).changes
    assert [(c.key["slot_id"], c.deleted) for c in gone] == [(3, True)]
    assert gone[0].seq > changed.last_seq
    assert await store.count("plugin_slots", cabinet) == 2

    # Retention by the dataset's own date: an old day goes, the tombstone after its grace.
    await store.write("plugin_slots", cabinet, _slots({9: 1}, day="2001-01-01"))
    late = utcnow() + timedelta(days=FED.tombstone_grace_days + 1)
    pruned = await store.prune(late, datasets=("plugin_slots",))
    assert [(p.dataset, p.expired, p.tombstones) for p in pruned] == [("plugin_slots", 1, 1)]
    assert [r["id"] for r in await store.fetch("plugin_slots", cabinet)] == [1, 2]


async def test_a_plugin_table_made_before_the_change_feed_is_converted_by_its_migration(
    empty_database: Database, declare: Registrar
) -> None:
    db = empty_database
    await db.migrate("0004")
    # What ``migrate`` made for a plugin's dataset at revision 0004: the table and its record.
    async with db.transaction() as conn:
        await conn.execute(
            text(
                "CREATE TABLE wb_plugin_rows (cabinet_id INTEGER NOT NULL REFERENCES cabinets (id) "
                "ON DELETE CASCADE, row_id BIGINT NOT NULL, data JSON NOT NULL, "
                "updated_at TIMESTAMP WITH TIME ZONE NOT NULL, PRIMARY KEY (cabinet_id, row_id))"
            )
        )
        await conn.execute(
            declared_datasets.insert().values(
                dataset="plugin_rows",
                table_name="wb_plugin_rows",
                owner=OWNER,
                key=[["row_id", "int"]],
                created_at=utcnow(),
            )
        )
        await conn.execute(
            text(
                "INSERT INTO cabinets (name, token_encrypted, seller_id, active, created_at) "
                "VALUES ('shop', 'x', 'sid', true, CURRENT_TIMESTAMP)"
            )
        )
        for row_id in (1, 2, 3):
            await conn.execute(
                text(
                    "INSERT INTO wb_plugin_rows (cabinet_id, row_id, data, updated_at) "
                    "VALUES (1, :id, :data, CURRENT_TIMESTAMP)"
                ),
                {"id": row_id, "data": f'{{"id":{row_id},"n":{row_id}}}'},
            )
    declare.declare(DATASET)
    declare.commit()
    done = await db.migrate()
    assert (done.after, plugin_tables(done.tables)) == (SCHEMA_HEAD, ())

    store = Store(db, secret_key=None)
    page = await store.changes("plugin_rows")
    assert sorted((c.seq, c.data["n"]) for c in page.changes) == [(1, 1), (2, 2), (3, 3)]
    written = await store.write("plugin_rows", 1, [{"id": n, "n": n} for n in (1, 2, 3, 4)])
    assert written.changed == 1  # only the new row: the converted ones are equal
    news = (await store.changes("plugin_rows", after=3)).changes
    assert [(c.key, c.seq) for c in news] == [({"row_id": 4}, written.last_seq)]

    await db.downgrade("0004")
    columns = {c["name"] for c in await db.run_sync(lambda c: _columns(c, "wb_plugin_rows"))}
    assert columns == {"cabinet_id", "row_id", "data", "updated_at"}


def _columns(conn: Connection, table: str) -> list[dict[str, Any]]:
    return [dict(column) for column in inspect(conn).get_columns(table)]


def _names(conn: Connection, table: str) -> set[str]:
    """The index and constraint names the database holds for ``table``."""
    found = inspect(conn)
    names = {ix["name"] for ix in found.get_indexes(table)}
    names |= {fk["name"] for fk in found.get_foreign_keys(table)}
    names.add(found.get_pk_constraint(table)["name"])
    return {name for name in names if name}


async def test_names_at_postgresqls_limit_are_kept_whole_and_longer_ones_refused_when_declared(
    empty_database: Database, declare: Registrar, db_backend: str
) -> None:
    """Every name wbsync's schema brings fits PostgreSQL's identifiers, and a dataset declared
    at the limits (a name of NAME_MAX characters, a key column of IDENTIFIER_MAX) gets its
    table with every name whole, on both databases; one character more is refused when the
    dataset is declared, never cut short by PostgreSQL."""
    for table in model(builtin_datasets()).tables.values():
        names = [table.name, *(c.name for c in table.columns)]
        names += [str(c.name) for c in table.constraints]
        names += [str(ix.name) for ix in table.indexes]
        assert max(map(len, names)) <= IDENTIFIER_MAX, table.name
    longest = Dataset("n" * NAME_MAX, "GET", (KeyField("k" * IDENTIFIER_MAX, "id"),))
    declare.declare(longest)
    declare.commit()
    table = dataset_table(longest)
    # The names the convention derives are the ones the dataset knows (and the checks count).
    derived = {str(c.name) for c in table.constraints} | {str(ix.name) for ix in table.indexes}
    assert derived | {table.name} == set(longest.schema_names)
    assert max(map(len, longest.schema_names)) == IDENTIFIER_MAX
    await empty_database.migrate()
    held = await empty_database.run_sync(lambda conn: _names(conn, table.name))
    expected = set(longest.schema_names[1:])
    if db_backend == "sqlite":  # SQLite keeps no names for its primary and foreign keys
        expected = {n for n in expected if n.startswith("ix_")}
    assert expected <= held
    with pytest.raises(StoreError, match=f"past {NAME_MAX}: .* choose a shorter name"):
        Dataset("n" * (NAME_MAX + 1), "GET", (KeyField("row_id", "id"),))
    with pytest.raises(StoreError, match=f"past PostgreSQL's {IDENTIFIER_MAX}"):
        Dataset("plugin_rows", "GET", (KeyField("k" * (IDENTIFIER_MAX + 1), "id"),))


async def test_a_declared_snapshot_dataset_whose_name_needs_quoting_ends_its_runs(
    empty_database: Database, declare: Registrar
) -> None:
    """A plugin's dataset named with capitals and a dash: its table's name is quoted in the
    statements wbsync writes as SQL text (the page's and, on PostgreSQL, a run's end)."""
    odd = Dataset("Plugin-Snap", "GET /api/v1/plugin", (KeyField("row_id", "id"),), "snapshot")
    declare.declare(odd)
    declare.commit()
    db = empty_database
    await db.migrate()
    store = Store(db, secret_key="k" * 32)
    cabinet = (await store.cabinets.add("shop", "t", "seller")).id
    rows = [{"id": n} for n in range(5)]
    await store.upsert(odd.name, cabinet, rows)
    await store.snapshots.begin(odd.name, cabinet)
    await store.write(odd.name, cabinet, rows, seen=True)
    assert await store.snapshots.complete(odd.name, cabinet) == 0  # every row seen
    await store.snapshots.begin(odd.name, cabinet)
    await store.write(odd.name, cabinet, rows[1:], seen=True)
    assert await store.snapshots.complete(odd.name, cabinet) == 1
    assert await store.fetch(odd.name, cabinet) == rows[1:]
