"""Retention: dated rows past their dataset's retention and tombstones past their grace go."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import text

from tests.support.waiting import wait_for
from wbsync.cabinets.pruning import Pruner
from wbsync.errors import StoreError
from wbsync.store import DATASETS, Database, Dataset, KeyField, Store
from wbsync.store.schema import dataset_table, utcnow


def test_retention_needs_a_date_key_and_sane_bounds() -> None:
    with pytest.raises(StoreError, match="needs a key field of kind 'date'"):
        Dataset("x", "src", (KeyField("id", "id"),), retention_days=3)
    with pytest.raises(StoreError, match="retention_days must be >= 1"):
        Dataset("x", "src", (KeyField("day", "day", "date"),), retention_days=0)
    with pytest.raises(StoreError, match="tombstone_grace_days must be >= 0"):
        Dataset("x", "src", (KeyField("id", "id"),), tombstone_grace_days=-1)


async def test_prune_removes_exactly_the_expired_rows_in_bounded_batches(store: Store) -> None:
    cabinet = (await store.cabinets.add("shop", "token", "sid")).id
    now = utcnow()
    keep_days = DATASETS["acceptance_coefficients"].retention_days
    assert keep_days is not None
    # Rows dated from keep_days + 5 days ago up to 3 days ahead: those older than the cutoff go.
    days = [now.date() - timedelta(days=d) for d in range(-3, keep_days + 6)]
    rows = [
        {"warehouseID": w, "date": day.isoformat(), "boxTypeID": 2, "coefficient": 1}
        for day in days
        for w in (1, 2)
    ]
    await store.upsert("acceptance_coefficients", cabinet, rows)
    cutoff = (now - timedelta(days=keep_days)).date()
    expected = sorted(str(r["date"]) for r in rows if str(r["date"]) >= cutoff.isoformat())

    pruned = await store.prune(now, datasets=("acceptance_coefficients",), batch=3)
    assert [(p.dataset, p.expired, p.tombstones) for p in pruned] == [
        ("acceptance_coefficients", len(rows) - len(expected), 0)
    ]
    left = await store.fetch("acceptance_coefficients", cabinet)
    assert sorted(r["date"] for r in left) == expected
    again = await store.prune(now, datasets=("acceptance_coefficients",), batch=3)
    assert again[0].expired == 0


async def test_prune_removes_tombstones_only_after_their_grace(store: Store) -> None:
    cabinet = (await store.cabinets.add("shop", "token", "sid")).id
    rows = [{"nmId": nm, "chrtId": 1, "warehouseId": 1} for nm in range(5)]
    await store.upsert("stocks", cabinet, rows)
    await store.snapshots.begin("stocks", cabinet)
    await store.write("stocks", cabinet, rows[:2], seen=True)
    assert await store.snapshots.complete("stocks", cabinet) == 3
    grace = timedelta(days=DATASETS["stocks"].tombstone_grace_days)

    async def stored() -> int:
        return len((await store.changes("stocks")).changes)

    early = await store.prune(utcnow() + grace - timedelta(hours=1), datasets=("stocks",))
    assert (early[0].tombstones, await stored()) == (0, 5)
    late = await store.prune(utcnow() + grace + timedelta(hours=1), datasets=("stocks",), batch=2)
    assert (late[0].expired, late[0].tombstones, await stored()) == (0, 3, 2)
    assert await store.count("stocks", cabinet) == 2  # the live rows are untouched


async def test_the_leader_hook_prunes_its_queues_datasets_once_per_interval(store: Store) -> None:
    cabinet = (await store.cabinets.add("shop", "token", "sid")).id
    old = {"warehouseID": 1, "date": "2001-01-01", "boxTypeID": 2}
    await store.upsert("acceptance_coefficients", cabinet, [old])
    await store.upsert("advert_stats", cabinet, [{"advertId": 1, "date": "2001-01-01"}])
    pruner = Pruner(
        store,
        interval_s=3600,
        datasets={"booking-slot-monitor": [DATASETS["acceptance_coefficients"]]},
    )
    await pruner.on_lead(["booking-slot-monitor"])
    await wait_for(lambda: pruner.passes == 1)
    assert await store.count("acceptance_coefficients") == 0
    assert await store.count("advert_stats") == 1  # not a dataset of a led queue
    await store.upsert("acceptance_coefficients", cabinet, [old])
    await pruner.on_lead(["booking-slot-monitor"])  # not due again within the interval
    await pruner.aclose()
    assert (pruner.passes, await store.count("acceptance_coefficients")) == (1, 1)


async def test_a_pass_that_deleted_rows_vacuums_their_table_on_postgresql(
    store: Store, database: Database
) -> None:
    """The space of pruned rows is made reusable by the pass itself (a manual VACUUM of the
    table, counted by PostgreSQL apart from autovacuum's); a pass that deleted nothing from a
    table leaves it alone."""
    if database.dialect != "postgresql":
        pytest.skip("SQLite reuses freed pages by itself")
    cabinet = (await store.cabinets.add("shop", "token", "sid")).id
    old = {"warehouseID": 1, "date": "2001-01-01", "boxTypeID": 2}
    await store.upsert("acceptance_coefficients", cabinet, [old])
    await store.upsert("stocks", cabinet, [{"nmId": 1, "chrtId": 1, "warehouseId": 1}])
    tables = {name: dataset_table(name).name for name in ("acceptance_coefficients", "stocks")}

    async def vacuums() -> dict[str, int]:
        query = text("SELECT relname, vacuum_count FROM pg_stat_user_tables")
        counts = {row.relname: int(row.vacuum_count) for row in await database.execute(query)}
        return {name: counts.get(table, 0) for name, table in tables.items()}

    before = await vacuums()
    pruned = await store.prune(utcnow(), datasets=tuple(tables))
    assert [(p.dataset, p.expired) for p in pruned] == [
        ("acceptance_coefficients", 1),
        ("stocks", 0),
    ]

    async def vacuumed() -> bool:
        return (await vacuums())["acceptance_coefficients"] > before["acceptance_coefficients"]

    await wait_for(vacuumed)
    assert (await vacuums())["stocks"] == before["stocks"]
