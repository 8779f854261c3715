"""A database built fresh and one upgraded from wbsync's first revision hold the same schema,
and every built-in dataset's table in them is the one its declaration builds (docs/storage.md,
"Where the tables come from")."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, inspect, text

from tests.support.databases import DatabaseFactory, builtin_datasets
from wbsync.store import Database
from wbsync.store.declared import MIGRATED_DATASETS
from wbsync.store.schema import dataset_table, metadata

Schema = dict[str, dict[str, Any]]


def _schema(conn: Connection) -> Schema:
    """Every table's columns (by name), keys, indexes, constraints and comment, as reflected."""
    found = inspect(conn)
    out: Schema = {}
    for table in found.get_table_names():
        columns = {
            c["name"]: (str(c["type"]), c["nullable"], c.get("default"), c.get("comment"))
            for c in found.get_columns(table)
        }
        out[table] = {
            "columns": columns,
            "pk": found.get_pk_constraint(table),
            "fks": sorted(map(repr, found.get_foreign_keys(table))),
            "indexes": sorted(map(repr, found.get_indexes(table))),
            "unique": sorted(map(repr, found.get_unique_constraints(table))),
            "checks": sorted(map(repr, found.get_check_constraints(table))),
        }
        if conn.dialect.name == "postgresql":  # SQLite keeps no comments
            out[table]["comment"] = found.get_table_comment(table).get("text")
    if conn.dialect.name == "postgresql":  # storage parameters (the snapshot keys' fillfactor)
        options = conn.execute(
            text(
                "SELECT relname, reloptions FROM pg_class WHERE relkind = 'r' "
                "AND relnamespace = 'public'::regnamespace"
            )
        )
        for name, reloptions in options:
            out[name]["options"] = sorted(reloptions or [])
    return out


async def _built(database_factory: DatabaseFactory, backend: str) -> Schema:
    async with Database(await database_factory.new_url(backend)) as db:
        await db.migrate()
        return await db.run_sync(_schema)


async def _upgraded(database_factory: DatabaseFactory, backend: str) -> Schema:
    """Created at revision 0001, given rows in every kind of table, then upgraded."""
    async with Database(await database_factory.new_url(backend)) as db:
        await db.migrate("0001")
        async with db.transaction() as conn:
            await conn.execute(
                text(
                    "INSERT INTO cabinets (name, token_encrypted, seller_id, active, created_at) "
                    "VALUES ('shop', 'x', 'sid', true, CURRENT_TIMESTAMP)"
                )
            )
            for sql in (
                "INSERT INTO wb_orders (cabinet_id, srid, data, updated_at) "
                """VALUES (1, 'o1', '{"srid": "o1"}', CURRENT_TIMESTAMP)""",
                "INSERT INTO wb_bids (cabinet_id, advert_id, nm_id, norm_query, data, updated_at) "
                """VALUES (1, 7, 8, 'q', '{"bid": 150}', CURRENT_TIMESTAMP)""",
                "INSERT INTO wb_advert_stats (cabinet_id, advert_id, date, data, updated_at) "
                """VALUES (1, 7, '2026-12-01', '{"views": 3}', CURRENT_TIMESTAMP)""",
                "INSERT INTO wb_sync_cursors (cabinet_id, sync, cursor, updated_at) "
                """VALUES (1, 'rnp-finance-sync', '{"rrdId": 5}', CURRENT_TIMESTAMP)""",
                "INSERT INTO sent_bids (cabinet_id, advert_id, nm_id, new_bid, sent_at) "
                "VALUES (1, 7, 8, 200, CURRENT_TIMESTAMP)",
                "INSERT INTO price_targets (cabinet_id, nm_id, price, updated_at) "
                "VALUES (1, 8, 990, CURRENT_TIMESTAMP)",
            ):
                await conn.execute(text(sql))
        await db.migrate()
        return await db.run_sync(_schema)


async def _declared(database_factory: DatabaseFactory, backend: str) -> Schema:
    """wbsync's own tables from its model, every built-in dataset's from its declaration, with
    no migration run."""
    tables = [*metadata.sorted_tables, *(dataset_table(n) for n in builtin_datasets())]

    def create(conn: Connection) -> None:
        for table in tables:
            table.create(conn)

    async with Database(await database_factory.new_url(backend)) as db:
        await db.run_sync(create)
        return await db.run_sync(_schema)


def _differences(left: Schema, right: Schema) -> list[str]:
    """What differs, table by table and aspect by aspect (empty when the schemas are equal)."""
    out = [f"table {t} only in one" for t in sorted(set(left) ^ set(right))]
    for table in sorted(set(left) & set(right)):
        for aspect in sorted(set(left[table]) | set(right[table])):
            if left[table].get(aspect) != right[table].get(aspect):
                out.append(
                    f"{table} {aspect}: {left[table].get(aspect)} != {right[table].get(aspect)}"
                )
    return out


def _forget_seq_default(schema: Schema) -> None:
    """On SQLite, the dataset tables migration 0005 converted keep the default its ``ADD
    COLUMN seq ... DEFAULT 0`` needed (SQLite drops a default only by rebuilding the table;
    PostgreSQL's is dropped). Every write sets ``seq``, so the default is never used."""
    for name in MIGRATED_DATASETS:
        columns = schema[dataset_table(name).name]["columns"]
        kind, nullable, default, comment = columns["seq"]
        assert default == "0"
        columns["seq"] = (kind, nullable, None, comment)


async def test_a_fresh_and_an_upgraded_database_hold_the_same_schema_as_the_declarations(
    db_backend: str, database_factory: DatabaseFactory
) -> None:
    built = await _built(database_factory, db_backend)
    upgraded = await _upgraded(database_factory, db_backend)
    assert _differences(built, upgraded) == []
    # Every built-in dataset has its table, and it is the one its declaration builds: the
    # migrations that made the first ones agree with the declarations, column for column.
    declared = await _declared(database_factory, db_backend)
    built.pop("alembic_version")
    assert {dataset_table(n).name for n in builtin_datasets()} <= set(built)
    if db_backend == "sqlite":
        _forget_seq_default(built)
    assert _differences(built, declared) == []
