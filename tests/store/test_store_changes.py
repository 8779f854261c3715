"""The change feed: unchanged rows are not rewritten, each write is sequenced, readers page."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import text

from wbsync.errors import FeedCursorError
from wbsync.store import Database, Store
from wbsync.store.changes import FEED_PAGE_MAX, ChangeEvent


async def _cabinet(store: Store, name: str = "shop") -> int:
    return (await store.cabinets.add(name, f"token-{name}", f"sid-{name}")).id


def _stocks(quantities: dict[int, int]) -> list[dict[str, Any]]:
    return [
        {"nmId": nm, "chrtId": 1, "warehouseId": 7, "quantity": q} for nm, q in quantities.items()
    ]


async def _row_versions(database: Database) -> dict[int, str]:
    """Each stocks row's physical version: PostgreSQL's (xmin, ctid), SQLite's write count."""
    async with database.connection() as conn:
        if database.dialect == "postgresql":
            rows = await conn.execute(text("SELECT nm_id, xmin::text || ctid::text FROM wb_stocks"))
        else:
            rows = await conn.execute(text("SELECT nm_id, writes FROM wb_stocks_writes"))
        return {int(nm): str(version) for nm, version in rows}


@pytest.fixture
async def counted(database: Database) -> AsyncIterator[Database]:
    """On SQLite, triggers count each stocks row's inserts and updates (PostgreSQL has xmin)."""
    if database.dialect == "sqlite":
        async with database.transaction() as conn:
            for sql in (
                "CREATE TABLE wb_stocks_writes (nm_id INTEGER PRIMARY KEY, writes INTEGER)",
                "CREATE TRIGGER wb_stocks_ins AFTER INSERT ON wb_stocks BEGIN "
                "INSERT INTO wb_stocks_writes VALUES (new.nm_id, 1); END",
                "CREATE TRIGGER wb_stocks_upd AFTER UPDATE ON wb_stocks BEGIN "
                "UPDATE wb_stocks_writes SET writes = writes + 1 WHERE nm_id = new.nm_id; END",
            ):
                await conn.execute(text(sql))
    try:
        yield database
    finally:
        if database.dialect == "sqlite":
            async with database.transaction() as conn:
                await conn.execute(text("DROP TRIGGER wb_stocks_ins"))
                await conn.execute(text("DROP TRIGGER wb_stocks_upd"))
                await conn.execute(text("DROP TABLE wb_stocks_writes"))


async def test_an_identical_page_writes_no_row_and_a_changed_field_is_written_and_sequenced(
    store: Store, counted: Database
) -> None:
    cabinet = await _cabinet(store)
    page = _stocks({1: 5, 2: 6, 3: 7})
    first = await store.write("stocks", cabinet, page)
    assert (first.rows, first.changed, first.last_seq) == (3, 3, 3)
    before = await _row_versions(counted)
    feed = await store.changes("stocks")

    # Same data, keys in another order: nothing written, no number given out.
    again = await store.write("stocks", cabinet, list(reversed(page)))
    assert (again.changed, again.last_seq) == (0, None)
    assert await _row_versions(counted) == before
    assert (await store.changes("stocks", after=feed.next)).changes == []

    changed = await store.write("stocks", cabinet, _stocks({1: 5, 2: 60, 3: 7}))
    assert changed.changed == 1
    assert changed.last_seq is not None and changed.last_seq > 3
    after = await _row_versions(counted)
    assert {nm for nm in before if before[nm] != after[nm]} == {2}
    news = (await store.changes("stocks", after=feed.next)).changes
    assert [(c.seq, c.key, c.data["quantity"], c.deleted) for c in news] == [
        (changed.last_seq, {"nm_id": 2, "chrt_id": 1, "warehouse_id": 7}, 60, False)
    ]
    assert news[0].changed_at >= feed.changes[0].changed_at


async def test_a_tombstoned_row_that_comes_back_is_written_live_again(store: Store) -> None:
    cabinet = await _cabinet(store)
    await store.snapshots.begin("stocks", cabinet)
    await store.write("stocks", cabinet, _stocks({1: 1, 2: 2}), seen=True)
    await store.snapshots.complete("stocks", cabinet)
    await store.snapshots.begin("stocks", cabinet)
    await store.write("stocks", cabinet, _stocks({1: 1}), seen=True)
    assert await store.snapshots.complete("stocks", cabinet) == 1
    assert await store.count("stocks", cabinet) == 1
    back = await store.write("stocks", cabinet, _stocks({2: 2}))
    assert back.changed == 1
    assert [r["nmId"] for r in await store.fetch("stocks", cabinet)] == [1, 2]
    last = (await store.changes("stocks", after=back.last_seq - 1)).changes  # type: ignore[operator]
    assert [(c.key["nm_id"], c.deleted) for c in last] == [(2, False)]


@pytest.mark.parametrize(
    ("after", "message"),
    [
        ("abc", "must be a sequence number"),
        ("-1", "must be a sequence number"),
        (-5, ">= 0"),
        (1.5, "must be a sequence number"),
        (99, "beyond the end of the orders feed \\(1\\)"),
    ],
)
async def test_a_malformed_or_future_cursor_is_refused_naming_it(
    store: Store, after: Any, message: str
) -> None:
    await store.upsert("orders", await _cabinet(store), [{"srid": "a"}])
    with pytest.raises(FeedCursorError, match=message):
        await store.changes("orders", after=after)


async def test_page_size_is_bounded(store: Store) -> None:
    with pytest.raises(FeedCursorError, match=f"limit must be 1..{FEED_PAGE_MAX}"):
        await store.changes("orders", limit=FEED_PAGE_MAX + 1)


async def test_cabinet_and_fleet_feeds_page_by_seq_with_a_next_cursor(store: Store) -> None:
    first, second = await _cabinet(store, "first"), await _cabinet(store, "second")
    for i in range(5):
        await store.upsert("orders", first if i % 2 == 0 else second, [{"srid": f"o{i}"}])
    fleet = await store.changes("orders", limit=2)
    assert ([c.seq for c in fleet.changes], fleet.next, fleet.more) == ([1, 2], 2, True)
    rest = await store.changes("orders", after=fleet.next, limit=10)
    assert ([c.seq for c in rest.changes], rest.next, rest.more) == ([3, 4, 5], 5, False)
    mine = await store.changes("orders", cabinet_id=second)
    assert [c.data["srid"] for c in mine.changes] == ["o1", "o3"]
    assert (await store.changes("orders", after=5)).changes == []


async def test_a_reader_paging_while_writers_write_sees_every_change_once_in_order(
    store: Store,
) -> None:
    cabinets = [await _cabinet(store, f"c{i}") for i in range(3)]
    rounds, keys = 12, 40
    stop = asyncio.Event()
    events: list[ChangeEvent] = []

    async def listen(event: ChangeEvent) -> None:
        events.append(event)

    store.add_listener(listen)

    async def writer(cabinet: int) -> None:
        for r in range(rounds):
            # Each round changes a different half of the keys: updates and unchanged rows mixed.
            page = [{"srid": f"k{k}", "v": r if (k + r) % 2 else 0} for k in range(keys)]
            await store.upsert("orders", cabinet, page)
            await asyncio.sleep(0)

    seen: list[tuple[int, int | None, str, int]] = []

    async def reader() -> None:
        after = 0
        while True:
            done = stop.is_set()
            page = await store.changes("orders", after=after, limit=7)
            seen.extend(
                (c.seq, c.cabinet_id, str(c.data["srid"]), int(c.data["v"])) for c in page.changes
            )
            after = page.next
            if done and not page.more:
                return

    task = asyncio.create_task(reader())
    await asyncio.gather(*(writer(c) for c in cabinets))
    stop.set()
    await task

    seqs = [s for s, *_ in seen]
    assert seqs == sorted(set(seqs)), "read out of order or twice"
    replay = {(cab, srid): v for _, cab, srid, v in seen}
    for cabinet in cabinets:
        stored = {(cabinet, r["srid"]): r["v"] for r in await store.fetch("orders", cabinet)}
        assert {k: v for k, v in replay.items() if k[0] == cabinet} == stored
    # One event per committed page that changed rows, naming its last number: each writer's in
    # its commit order. Concurrent writers' events may interleave (each is told after its own
    # commit returns); the stream is a doorbell, and a consumer reads from its own cursor.
    assert sum(e.rows for e in events) >= len(set(replay))
    for cabinet in cabinets:
        own = [e.last_seq for e in events if e.cabinet_id == cabinet]
        assert own == sorted(own)
    assert max(e.last_seq for e in events) == seqs[-1]
