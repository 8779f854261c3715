"""Fleet-wide datasets in the store: a table with no cabinet column, written with no cabinet,
its change feed, snapshot, export and retention as any dataset's, and no cabinet's rows."""

from __future__ import annotations

import io
import json
from datetime import timedelta

import pytest
from sqlalchemy import inspect

from wbsync.cabinets.export import export_changes
from wbsync.errors import StoreError
from wbsync.store import DATASETS, Database, Dataset, KeyField, Store
from wbsync.store.schema import dataset_table, utcnow
from wbsync.syncs.tariffs import BOX_RATES, COMMISSIONS


def _fees(*subjects: int, fee: float = 12.5) -> list[dict[str, object]]:
    return [{"subjectID": s, "subjectName": f"s{s}", "kgvpMarketplace": fee} for s in subjects]


def _box(day: str, *names: str) -> list[dict[str, object]]:
    return [{"warehouseName": n, "date": day, "boxDeliveryBase": "48"} for n in names]


def test_a_fleet_dataset_is_declared_with_its_scope_and_refuses_what_is_a_cabinets() -> None:
    assert DATASETS["tariffs_commission"].scope == "fleet" and COMMISSIONS.fleet
    assert DATASETS["orders"].scope == "cabinet"
    table = dataset_table(BOX_RATES)
    assert "cabinet_id" not in table.c and [c.name for c in table.primary_key] == [
        "warehouse_name",
        "date",
    ]
    assert BOX_RATES.schema_names == (
        "wb_tariffs_box",
        "pk_wb_tariffs_box",
        "ix_wb_tariffs_box_seq",
    )
    with pytest.raises(StoreError, match="scope must be one of cabinet, fleet"):
        Dataset("x", "src", (KeyField("id", "id"),), scope="world")  # type: ignore[arg-type]
    with pytest.raises(StoreError, match="keeps no columns"):
        Dataset("x", "src", (KeyField("id", "id"),), scope="fleet", columns=("note",))


async def test_the_table_made_by_migrate_has_no_cabinet_column(database: Database) -> None:
    columns = await database.run_sync(
        lambda conn: {c["name"] for c in inspect(conn).get_columns("wb_tariffs_commission")}
    )
    assert "cabinet_id" not in columns and {"subject_id", "data", "seq"} <= columns


async def test_fleet_rows_are_written_once_fed_with_no_cabinet_and_replaced_whole(
    store: Store,
) -> None:
    cabinet = (await store.cabinets.add("shop", "token", "sid")).id
    with pytest.raises(StoreError, match=r"fleet-wide .* written with no cabinet"):
        await store.write(COMMISSIONS, cabinet, _fees(1))
    first = await store.write(COMMISSIONS, None, _fees(1, 2, 3), whole=True)
    assert (first.changed, first.tombstoned) == (3, 0)
    assert first.event is not None and first.event.cabinet_id is None
    # The same reply again writes nothing; a reply without subject 2 tombstones it.
    assert (await store.write(COMMISSIONS, None, _fees(1, 2, 3), whole=True)).changed == 0
    gone = await store.write(COMMISSIONS, None, _fees(1, 3, fee=13.0), whole=True)
    assert (gone.changed, gone.tombstoned) == (2, 1)
    assert await store.count(COMMISSIONS) == 2
    assert [r["subjectID"] for r in await store.fetch(COMMISSIONS, None)] == [1, 3]

    page = await store.changes(COMMISSIONS)
    assert [(c.key["subject_id"], c.op, c.cabinet_id) for c in page.changes] == [
        (1, "update", None),
        (3, "update", None),
        (2, "delete", None),
    ]
    assert page.changes[0].as_json()["cabinet_id"] is None
    snapshot = await store.snapshot(COMMISSIONS)
    assert [c.key["subject_id"] for c in snapshot.changes] == [1, 3]
    with pytest.raises(StoreError, match=r"fleet-wide .* read it without a cabinet"):
        await store.changes(COMMISSIONS, cabinet_id=cabinet)
    # A removed cabinet takes no fleet row with it.
    await store.remove_cabinet(cabinet)
    assert await store.count(COMMISSIONS) == 2


async def test_a_fleet_dataset_exports_with_an_empty_cabinet(store: Store) -> None:
    await store.write(BOX_RATES, None, _box("2026-12-01", "Коледино", "Казань"))
    out = io.StringIO()
    stats = await export_changes(store, BOX_RATES, out, fmt="csv")
    header, *lines = out.getvalue().splitlines()
    assert stats.rows == 2 and header.startswith("seq,cabinet_id,warehouse_name,date,")
    assert [line.split(",")[1:4] for line in lines] == [
        ["", "Казань", "2026-12-01"],
        ["", "Коледино", "2026-12-01"],
    ]
    out = io.StringIO()
    await export_changes(store, BOX_RATES, out, fmt="jsonl")
    assert {json.loads(line)["cabinet_id"] for line in out.getvalue().splitlines()} == {None}


async def test_retention_prunes_a_fleet_datasets_old_days(store: Store) -> None:
    today = utcnow()
    keep = BOX_RATES.retention_days
    assert keep is not None
    old = (today - timedelta(days=keep + 2)).date().isoformat()
    await store.write(BOX_RATES, None, _box(old, "Тула") + _box(today.date().isoformat(), "Тула"))
    [pruned] = await store.prune(today, datasets=(BOX_RATES,))
    assert pruned.expired == 1
    assert [r["date"] for r in await store.fetch(BOX_RATES, None)] == [today.date().isoformat()]
