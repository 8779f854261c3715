"""The change feed as a contract: ops, one order, checked cursors, the low-water mark and the
resync, a removed cabinet's rows as deletes (on SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import text

from wbsync.errors import CabinetNotFoundError, FeedCursorError, FeedCursorGoneError, StoreError
from wbsync.store import Store
from wbsync.store.changes import Change, ChangeEvent
from wbsync.store.datasets import TOMBSTONE_GRACE_DAYS
from wbsync.store.rows import BATCH_ROWS
from wbsync.store.sequences import advance_sequence, lock_sequence
from wbsync.system import clock

PAST_GRACE = timedelta(days=TOMBSTONE_GRACE_DAYS + 1)


async def _cabinet(store: Store, name: str = "shop") -> int:
    return (await store.cabinets.add(name, f"token-{name}", f"sid-{name}")).id


def _stocks(quantities: dict[int, int]) -> list[dict[str, Any]]:
    return [
        {"nmId": nm, "chrtId": 1, "warehouseId": 7, "quantity": q} for nm, q in quantities.items()
    ]


async def _feed(store: Store, name: str, after: int | str = 0, **kw: Any) -> list[Change]:
    return [
        c
        for page in [p async for p in store.iter_changes(name, after=after, **kw)]
        for c in page.changes
    ]


async def _tombstone_all(store: Store, cabinet: int) -> None:
    await store.snapshots.begin("stocks", cabinet)
    await store.snapshots.complete("stocks", cabinet)


# -- ops -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("rows", [3, BATCH_ROWS + 1], ids=["one-statement", "transaction"])
async def test_each_change_says_insert_update_or_delete(store: Store, rows: int) -> None:
    cabinet = await _cabinet(store)
    await store.write("stocks", cabinet, _stocks(dict.fromkeys(range(rows), 1)))
    first = await store.changes("stocks")
    assert {c.op for c in first.changes} == {"insert"}
    # 0 updated, 1 unchanged, the rest gone (a whole page), then 2 comes back.
    await store.write("stocks", cabinet, _stocks({0: 5, 1: 1}), whole=True)
    await store.write("stocks", cabinet, _stocks({2: 1}))
    ops = {c.key["nm_id"]: (c.op, c.deleted) for c in await _feed(store, "stocks")}
    assert ops[0] == ("update", False) and ops[1] == ("insert", False)
    assert ops[2] == ("insert", False)  # back from a tombstone: an insert again
    assert all(ops[nm] == ("delete", True) for nm in range(3, rows))
    updated_again = await store.write("stocks", cabinet, _stocks({2: 9}))
    last = await store.changes("stocks", after=updated_again.last_seq - 1)  # type: ignore[operator]
    assert [(c.key["nm_id"], c.op) for c in last.changes] == [(2, "update")]
    assert last.changes[0].as_json()["op"] == "update"


# -- one order -----------------------------------------------------------------------------------


async def test_changed_at_never_decreases_along_seq_whatever_the_writers(store: Store) -> None:
    cabinets = [await _cabinet(store, f"c{i}") for i in range(4)]
    # Another writer's clock ran ahead: its stamp is the floor of every later write.
    async with store.database.transaction() as conn:
        locked = await lock_sequence(conn, store.database, "stocks")
        ahead = locked.stamp(clock.calendar_now()) + timedelta(minutes=5)
        await advance_sequence(conn, "stocks", locked.last, ahead)

    async def writer(cabinet: int) -> None:
        for r in range(6):
            await store.write("stocks", cabinet, _stocks({nm: r * (nm % 2) for nm in range(20)}))
            if r == 3:  # a whole page: tombstones in the same write
                await store.write("stocks", cabinet, _stocks({0: 9}), whole=True)

    await asyncio.gather(*(writer(c) for c in cabinets))
    await _tombstone_all(store, cabinets[0])  # a snapshot run's own tombstones
    feed = await _feed(store, "stocks")
    assert len(feed) > 40
    stamps = [c.changed_at for c in feed]
    assert stamps == sorted(stamps), "changed_at ran backwards against seq"
    assert min(stamps) >= ahead
    assert all(c.as_json()["changed_at"].endswith("Z") for c in feed)


# -- cursors -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("after", "reason", "says"),
    [
        ("", "empty", "is empty"),
        ("x1", "malformed", "must be a sequence number"),
        ("orders:", "malformed", "must be a sequence number"),
        ("-3", "malformed", "must be a sequence number"),
        ("stocks:1", "other-dataset", "a cursor of the stocks feed, not of orders"),
        ("99", "future", "beyond the end of the orders feed (2)"),
        ("orders:99", "future", "beyond the end of the orders feed (2)"),
        ("o" * 200 + ":1", "malformed", "must be a sequence number"),
    ],
)
async def test_a_cursor_that_cannot_be_right_is_refused_saying_why(
    store: Store, after: str, reason: str, says: str
) -> None:
    cabinet = await _cabinet(store)
    await store.upsert("orders", cabinet, [{"srid": "a"}, {"srid": "b"}])
    await store.upsert("stocks", cabinet, _stocks({1: 1}))
    with pytest.raises(FeedCursorError) as refused:
        await store.changes("orders", after=after)
    assert refused.value.reason == reason and says in str(refused.value)


async def test_a_token_and_a_bare_number_read_the_same(store: Store) -> None:
    cabinet = await _cabinet(store)
    await store.upsert("orders", cabinet, [{"srid": f"o{i}"} for i in range(5)])
    page = await store.changes("orders", limit=2)
    assert page.cursor == "orders:2" and page.next == 2
    by_token = await store.changes("orders", after=page.cursor)
    by_number = await store.changes("orders", after=page.next)
    assert by_token == by_number and [c.seq for c in by_token.changes] == [3, 4, 5]


# -- the low-water mark and the resync -----------------------------------------------------------


async def test_pruned_tombstones_raise_the_low_water_mark_and_a_cursor_below_it_is_gone(
    store: Store,
) -> None:
    cabinet = await _cabinet(store)
    await store.write("stocks", cabinet, _stocks({1: 1, 2: 1, 3: 1}))
    reader = (await store.changes("stocks")).next  # a reader that read the inserts, then left
    await store.write("stocks", cabinet, _stocks({1: 1}), whole=True)  # 2 and 3 deleted
    tombstones = [c.seq for c in await _feed(store, "stocks") if c.deleted]
    assert (await store.changes("stocks")).low_water == 0
    assert [c.seq for c in (await store.changes("stocks", after=reader)).changes] == tombstones

    await store.prune(clock.calendar_now() + PAST_GRACE, datasets=("stocks",), batch=1)
    page = await store.changes("stocks")
    assert page.low_water == max(tombstones)
    with pytest.raises(FeedCursorGoneError) as gone:
        await store.changes("stocks", after=reader)
    assert gone.value.low_water == max(tombstones) and gone.value.reason == "gone"
    assert "/api/v1/datasets/stocks/snapshot" in str(gone.value)
    # From the mark on, and from 0 (a reader holding nothing), the feed is complete.
    assert (await store.changes("stocks", after=max(tombstones))).changes == []
    assert [c.key["nm_id"] for c in page.changes] == [1]


async def test_retention_pruning_is_not_in_the_feed_and_leaves_the_mark(store: Store) -> None:
    cabinet = await _cabinet(store)
    old = (clock.calendar_now() - timedelta(days=40)).date().isoformat()
    await store.upsert(
        "acceptance_coefficients", cabinet, [{"warehouseID": 1, "date": old, "boxTypeID": 2}]
    )
    [pruned] = await store.prune(clock.calendar_now(), datasets=("acceptance_coefficients",))
    assert (pruned.expired, pruned.tombstones) == (1, 0)
    page = await store.changes("acceptance_coefficients", after=1)
    assert (page.changes, page.low_water) == ([], 0)


async def test_a_reader_below_the_mark_resyncs_to_the_live_rows_with_nothing_stale(
    store: Store,
) -> None:
    cabinets = [await _cabinet(store, f"c{i}") for i in range(2)]
    for cabinet in cabinets:
        await store.write("stocks", cabinet, _stocks(dict.fromkeys(range(10), 1)))
    replica: dict[tuple[int | None, int], dict[str, Any]] = {}
    for change in await _feed(store, "stocks"):
        replica[(change.cabinet_id, int(change.key["nm_id"]))] = change.data
    cursor = (await store.changes("stocks", after=0, limit=1000)).cursor
    # While the reader is away: deletes, pruned after their grace.
    for cabinet in cabinets:
        await store.write("stocks", cabinet, _stocks({nm: 2 for nm in range(5)}), whole=True)
    await store.prune(clock.calendar_now() + PAST_GRACE, datasets=("stocks",))
    with pytest.raises(FeedCursorGoneError):
        await store.changes("stocks", after=cursor)

    # The resync: a snapshot of the live rows at a number, paged while writers go on ...
    fresh: dict[tuple[int | None, int], dict[str, Any]] = {}
    snap = await store.snapshot("stocks", limit=3)
    at = snap.at
    step = 0
    while True:
        for change in snap.changes:
            assert change.op != "delete" and change.seq <= at
            fresh[(change.cabinet_id, int(change.key["nm_id"]))] = change.data
        # Writers go on: an update, a delete, an insert, after the snapshot's number.
        cabinet = cabinets[step % 2]
        await store.write("stocks", cabinet, _stocks({step % 5: 100 + step, 50 + step: 1}))
        if step == 1:
            await store.write("stocks", cabinet, _stocks({0: 1}), whole=True)
        step += 1
        if not snap.more:
            break
        snap = await store.snapshot("stocks", at=at, after=snap.next, limit=3)
    # ... then the feed from the snapshot's number.
    for change in await _feed(store, "stocks", after=snap.resume):
        key = (change.cabinet_id, int(change.key["nm_id"]))
        if change.deleted:
            fresh.pop(key, None)
        else:
            fresh[key] = change.data
    live = {
        (cabinet, int(row["nmId"])): row
        for cabinet in cabinets
        for row in await store.fetch("stocks", cabinet)
    }
    assert fresh == live
    assert set(replica) - set(live), "the old replica had stale rows to lose"


async def test_a_snapshot_refuses_a_future_at_and_an_after_past_it(store: Store) -> None:
    cabinet = await _cabinet(store)
    await store.upsert("orders", cabinet, [{"srid": "a"}])
    with pytest.raises(FeedCursorError, match="beyond the end"):
        await store.snapshot("orders", at=5)
    with pytest.raises(FeedCursorError, match="past the snapshot's 'at'=0"):
        await store.snapshot("orders", at=0, after=1)
    with pytest.raises(FeedCursorError, match="not of orders"):
        await store.snapshot("orders", at="stocks:0")


# -- removed cabinets ----------------------------------------------------------------------------


async def test_a_removed_cabinets_rows_become_deletes_in_bounded_batches_that_resume(
    store: Store,
) -> None:
    kept, gone = await _cabinet(store, "kept"), await _cabinet(store, "gone")
    for cabinet in (kept, gone):
        await store.write("stocks", cabinet, _stocks(dict.fromkeys(range(7), 1)))
        await store.upsert("orders", cabinet, [{"srid": f"{cabinet}-{i}"} for i in range(4)])
    before = {name: (await store.changes(name)).next for name in ("stocks", "orders")}
    events: list[ChangeEvent] = []

    async def crash_on_the_second_batch(event: ChangeEvent) -> None:
        events.append(event)
        if len(events) == 2:
            raise RuntimeError("the process died")

    store.add_listener(crash_on_the_second_batch)
    with pytest.raises(RuntimeError, match="died"):
        await store.remove_cabinet("gone", batch=3)
    # Committed batches stay; the cabinet is gone from listings, its rows partly live.
    assert [c.name for c in await store.cabinets.list()] == ["kept"]
    assert 0 < await store.count("orders", gone) + await store.count("stocks", gone) < 11

    await store.remove_cabinet(gone, batch=3)  # the removal resumed
    assert await store.count("orders", gone) == await store.count("stocks", gone) == 0
    assert await store.count("stocks", kept) == 7 and await store.count("orders", kept) == 4
    for name, rows in (("orders", 4), ("stocks", 7)):
        deletes = await _feed(store, name, after=before[name])
        assert [(c.cabinet_id, c.op) for c in deletes] == [(gone, "delete")] * rows
        # Each batch is one event of at most 3 rows (the one the crash cut short was sent).
        told = [e.rows for e in events if e.dataset == name]
        assert sum(told) == rows and max(told) == 3
    # The feed answers for the removed cabinet until its tombstones are pruned.
    assert len((await store.changes("stocks", cabinet_id=gone)).changes) == 7

    assert await store.finish_removals() == 0  # its tombstones are within their grace
    await store.prune(clock.calendar_now() + PAST_GRACE)
    assert await store.finish_removals() == 1
    with pytest.raises(CabinetNotFoundError):
        await store.cabinets.get(gone, removed=True)
    assert (await store.cabinets.get("kept")).id == kept


async def test_the_retention_pass_finishes_a_removal_a_job_wrote_into(store: Store) -> None:
    cabinet = await _cabinet(store)
    await store.remove_cabinet(cabinet)
    # A job's page stored as the cabinet was being removed.
    await store.upsert("orders", cabinet, [{"srid": "late"}])
    assert await store.finish_removals() == 0
    assert await store.count("orders", cabinet) == 0
    [late] = (await store.changes("orders")).changes[-1:]
    assert (late.data["srid"], late.op) == ("late", "delete")


async def test_deactivating_keeps_the_rows_live(store: Store) -> None:
    cabinet = await _cabinet(store)
    await store.upsert("orders", cabinet, [{"srid": "a"}])
    await store.cabinets.deactivate(cabinet)
    assert await store.count("orders", cabinet) == 1
    assert [c.op for c in (await store.changes("orders")).changes] == ["insert"]


async def test_the_migration_keeps_bare_sequence_numbers_usable(store: Store) -> None:
    cabinet = await _cabinet(store)
    await store.upsert("orders", cabinet, [{"srid": "a"}])
    async with store.database.connection() as conn:
        low = await conn.scalar(
            text("SELECT low_seq FROM wb_change_sequences WHERE dataset = 'orders'")
        )
    assert low == 0


async def _poison(store: Store, srid: str) -> None:
    """A trigger that fails the transaction tombstoning order ``srid``: a crash mid-batch."""
    sqlite = [
        "CREATE TRIGGER crash BEFORE UPDATE ON wb_orders "
        f"WHEN new.deleted_at IS NOT NULL AND old.srid = '{srid}' "
        "BEGIN SELECT RAISE(ABORT, 'crash mid-batch'); END"
    ]
    postgresql = [
        "CREATE OR REPLACE FUNCTION crash() RETURNS trigger AS "
        "$$ BEGIN RAISE EXCEPTION 'crash mid-batch'; END $$ LANGUAGE plpgsql",
        "CREATE TRIGGER crash BEFORE UPDATE ON wb_orders FOR EACH ROW "
        f"WHEN (NEW.deleted_at IS NOT NULL AND OLD.srid = '{srid}') EXECUTE FUNCTION crash()",
    ]
    async with store.database.transaction() as conn:
        for sql in postgresql if store.database.dialect == "postgresql" else sqlite:
            await conn.execute(text(sql))


async def test_a_removal_that_crashes_mid_batch_keeps_the_batch_whole_and_resumes(
    store: Store,
) -> None:
    cabinet = await _cabinet(store)
    await store.upsert("orders", cabinet, [{"srid": f"o{i}"} for i in range(10)])
    await _poison(store, "o5")  # the second batch of three: o3, o4 written, o5 fails
    try:
        with pytest.raises(StoreError):
            await store.remove_cabinet(cabinet, batch=3)
    finally:  # the session's tests share the database
        on = " ON wb_orders" if store.database.dialect == "postgresql" else ""
        async with store.database.transaction() as conn:
            await conn.execute(text("DROP TRIGGER crash" + on))
    live = sorted(str(r["srid"]) for r in await store.fetch("orders", cabinet))
    assert live == [f"o{i}" for i in range(3, 10)]  # the failed batch left nothing behind
    assert (await store.changes("orders")).next == 13  # 10 inserts, one batch of 3 deletes

    await store.remove_cabinet(cabinet, batch=3)
    deletes = await _feed(store, "orders", after=10)
    assert [c.seq for c in deletes] == list(range(11, 21))
    assert sorted(str(c.data["srid"]) for c in deletes) == [f"o{i}" for i in range(10)]
    assert {c.op for c in deletes} == {"delete"}


async def test_a_removed_cabinets_record_stays_while_an_unloaded_plugins_table_holds_its_rows(
    store: Store,
) -> None:
    cabinet = await _cabinet(store)
    await store.remove_cabinet(cabinet)
    # A plugin's dataset that another process loads: its table and record, not this registry
    # (dropped at the end: the session's tests share the database).
    async with store.database.transaction() as conn:
        for sql in (
            "CREATE TABLE wb_ghost (cabinet_id INTEGER NOT NULL, k INTEGER NOT NULL)",
            "INSERT INTO wb_declared_datasets (dataset, table_name, owner, key, created_at) "
            "VALUES ('ghost', 'wb_ghost', 'elsewhere', '[]', CURRENT_TIMESTAMP)",
            f"INSERT INTO wb_ghost VALUES ({cabinet}, 1)",
            # And a fleet-wide one: no cabinet column to ask.
            "CREATE TABLE wb_fleet_ghost (k INTEGER NOT NULL)",
            "INSERT INTO wb_declared_datasets (dataset, table_name, owner, key, created_at) "
            "VALUES ('fleet_ghost', 'wb_fleet_ghost', 'elsewhere', '[]', CURRENT_TIMESTAMP)",
            "INSERT INTO wb_fleet_ghost VALUES (1)",
        ):
            await conn.execute(text(sql))
    try:
        assert await store.finish_removals() == 0
        assert (await store.cabinets.get(cabinet, removed=True)).removed_at is not None
        async with store.database.transaction() as conn:
            await conn.execute(text("DELETE FROM wb_ghost"))
        assert await store.finish_removals() == 1
    finally:
        async with store.database.transaction() as conn:
            await conn.execute(text("DROP TABLE wb_ghost"))
            await conn.execute(text("DROP TABLE wb_fleet_ghost"))
            await conn.execute(
                text("DELETE FROM wb_declared_datasets WHERE dataset IN ('ghost', 'fleet_ghost')")
            )
