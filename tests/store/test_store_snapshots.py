"""Snapshot runs: a complete run tombstones what it did not see; a failed or cut-short one, none."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import date
from typing import Any, cast

import pytest
from sqlalchemy import text

from tests.support.statements import sent_statements
from wbsync.catalog.registry import BUILTIN
from wbsync.errors import RateLimitDeferred
from wbsync.store import DATASETS, Store
from wbsync.store.datasets import dataset
from wbsync.store.seen import SLOT_DIGESTS
from wbsync.syncs import Sync, SyncInput, SyncPage, run_sync
from wbsync.syncs.base import Count, CursorShape
from wbsync.values.scope import BucketScope, Limit
from wbsync.wb.client import WbClient

PAGE = 3
RUNS = 5  # identical snapshot runs
_SCOPE = BucketScope("sid", "analytics", Limit(period_s=60, limit=3, burst=1))


class Upstream:
    """What WB returns for the stocks report this time: a list of items, paged by offset."""

    def __init__(self) -> None:
        self.items: list[int] = []
        self.fail_at: int | None = None
        self.defer_at: int | None = None
        self.empty_first = False  # a new run's first page holds no rows, then the run defers
        self.whole = False  # every item in one page, said to be the whole snapshot

    async def pages(self, inp: SyncInput) -> AsyncIterator[SyncPage]:
        if self.empty_first and inp.cursor is None:
            yield SyncPage("stocks", [], {"offset": 0})
            raise RateLimitDeferred(60_000, _SCOPE)
        if self.whole:
            yield SyncPage("stocks", _stock_rows(self.items), {"offset": 0}, whole=True)
            return
        offset = int((inp.cursor or {}).get("offset", 0))
        while offset < len(self.items):
            if offset == self.fail_at:
                raise RuntimeError("WB went away")
            if offset == self.defer_at:
                self.defer_at = None  # the resumed run gets past it
                raise RateLimitDeferred(60_000, _SCOPE)
            rows = _stock_rows(self.items[offset : offset + PAGE])
            offset += len(rows)
            yield SyncPage("stocks", rows, {"offset": offset})


def _stock_rows(items: list[int]) -> list[dict[str, Any]]:
    return [{"nmId": nm, "chrtId": 1, "warehouseId": 7, "quantity": 1} for nm in items]


class OffsetCursor(CursorShape):
    """The next offset of the stocks report."""

    offset: Count


@pytest.fixture
def upstream() -> Upstream:
    return Upstream()


async def _run(store: Store, upstream: Upstream, cabinet: int, cursor: Any = None) -> int:
    sync = Sync(
        name="stocks-test",
        long=True,
        interval_s=60,
        calls=(),
        stores=(dataset("stocks"),),
        pages=upstream.pages,
        cursor=OffsetCursor,
    )
    # This sync never calls WB: its pages come from ``upstream``.
    inp = SyncInput(
        client=cast(WbClient, None),
        store=store,
        cabinet_id=cabinet,
        cursor=cursor,
        today=date(2026, 8, 1),
    )
    return (await run_sync(sync, inp)).tombstoned


async def _live(store: Store, cabinet: int) -> list[int]:
    return [r["nmId"] for r in await store.fetch("stocks", cabinet)]


def test_the_declared_kinds() -> None:
    snapshots = {
        name
        for name, ds in DATASETS.items()
        if ds.kind == "snapshot" and DATASETS.owner(name) == BUILTIN
    }
    assert snapshots == {
        "adverts",
        "bids",
        "stocks",
        "prices",
        "acceptance_coefficients",
        "tariffs_commission",
        "warehouse_remains",
    }


async def test_a_complete_run_tombstones_what_it_did_not_see_and_the_feed_carries_it(
    store: Store, upstream: Upstream
) -> None:
    cabinet = (await store.cabinets.add("shop", "token", "sid")).id
    other = (await store.cabinets.add("other", "token2", "sid2")).id
    upstream.items = list(range(1, 8))
    assert await _run(store, upstream, cabinet) == 0
    assert await _run(store, upstream, other) == 0
    before = (await store.changes("stocks")).next

    upstream.items = [1, 2, 4, 5, 7]  # 3 and 6 left the warehouse
    assert await _run(store, upstream, cabinet) == 2
    assert await _live(store, cabinet) == [1, 2, 4, 5, 7]
    assert await _live(store, other) == list(range(1, 8))  # another cabinet's rows stay
    news = (await store.changes("stocks", after=before)).changes
    assert [(c.cabinet_id, c.key["nm_id"], c.deleted) for c in news] == [
        (cabinet, 3, True),
        (cabinet, 6, True),
    ]
    # The unchanged rows were confirmed without being written: the feed has only the deletes.
    assert await _run(store, upstream, cabinet) == 0
    assert (await store.changes("stocks", after=news[-1].seq)).changes == []


async def test_a_failed_run_tombstones_nothing(store: Store, upstream: Upstream) -> None:
    cabinet = (await store.cabinets.add("shop", "token", "sid")).id
    upstream.items = list(range(1, 8))
    await _run(store, upstream, cabinet)
    upstream.items = [1, 2, 3, 4, 5]  # would tombstone 6, 7; but it fails after its first page
    upstream.fail_at = PAGE
    with pytest.raises(RuntimeError):
        await _run(store, upstream, cabinet)
    assert await _live(store, cabinet) == list(range(1, 8))
    # The next run starts over: what the failed one saw does not count for it.
    upstream.fail_at = None
    upstream.items = [4, 5]
    assert await _run(store, upstream, cabinet) == 5
    assert await _live(store, cabinet) == [4, 5]


async def test_a_deferred_run_resumed_from_its_cursor_counts_what_it_saw_before(
    store: Store, upstream: Upstream
) -> None:
    cabinet = (await store.cabinets.add("shop", "token", "sid")).id
    upstream.items = list(range(1, 11))
    await _run(store, upstream, cabinet)
    upstream.items = [1, 2, 3, 5, 6, 7, 9]  # 4, 8 and 10 are gone
    upstream.defer_at = PAGE * 2
    with pytest.raises(RateLimitDeferred):
        await _run(store, upstream, cabinet)
    assert await _live(store, cabinet) == list(range(1, 11))  # cut short: nothing yet
    # The job resumes from the cursor saved after its second page (items 1..6 seen before).
    assert await _run(store, upstream, cabinet, cursor={"offset": PAGE * 2}) == 3
    assert await _live(store, cabinet) == [1, 2, 3, 5, 6, 7, 9]


async def test_a_run_whose_first_page_is_empty_is_begun_before_its_cursor_is_saved(
    store: Store, upstream: Upstream
) -> None:
    """A sync storing one snapshot dataset begins its run with its first stored page; a first
    page with no rows begins it too, before the job saves that page's cursor: the run resumed
    from the cursor begins nothing and still tombstones what it did not see."""
    cabinet = (await store.cabinets.add("shop", "token", "sid")).id
    upstream.items = list(range(1, 8))
    await _run(store, upstream, cabinet)
    upstream.items = [1, 2]
    upstream.empty_first = True
    with pytest.raises(RateLimitDeferred):
        await _run(store, upstream, cabinet)
    assert await _run(store, upstream, cabinet, cursor={"offset": 0}) == 5
    assert await _live(store, cabinet) == [1, 2]


async def test_a_run_begins_in_its_first_pages_statement_on_postgresql(
    store: Store, upstream: Upstream
) -> None:
    """A one-page run that missed nothing, of a sync storing one snapshot dataset, is two
    statements on PostgreSQL: the page (which begins the run) and the run's end."""
    if store.database.dialect != "postgresql":
        pytest.skip("the one-statement page write is PostgreSQL's")
    cabinet = (await store.cabinets.add("shop", "token", "sid")).id
    upstream.items = list(range(1, PAGE + 1))
    await _run(store, upstream, cabinet)
    with sent_statements() as statements:
        assert await _run(store, upstream, cabinet) == 0
    sent = [s.word for s in statements]
    assert sent == ["WITH", "WITH"]  # before: the run's begin (INSERT) first, its end in two
    upstream.items = [1, 2]  # and the run it began compares as a run begun on its own does
    assert await _run(store, upstream, cabinet) == 1
    assert await _live(store, cabinet) == [1, 2]


async def _active_runs(store: Store) -> int:
    async with store.database.connection() as conn:
        found = await conn.scalar(text("SELECT count(*) FROM wb_snapshot_runs WHERE active"))
        return int(found or 0)


@pytest.mark.parametrize("path", ["statement", "transaction"])
async def test_a_whole_page_tombstones_what_it_lacks_in_its_own_write(
    store: Store, upstream: Upstream, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run of one ``whole`` page (a snapshot in one reply) tombstones the cabinet's rows it
    lacks in the page's write: the deletes are in the feed numbered after the page's own
    writes, no snapshot run is kept, and on PostgreSQL the run is one statement. ``transaction``
    forces the path a page past ``BATCH_ROWS`` takes on PostgreSQL (SQLite's always)."""
    if path == "transaction":
        monkeypatch.setattr("wbsync.store.rows.BATCH_ROWS", 1)
    cabinet = (await store.cabinets.add("shop", "token", "sid")).id
    other = (await store.cabinets.add("other", "token2", "sid2")).id
    upstream.whole = True
    upstream.items = list(range(1, 8))
    assert await _run(store, upstream, cabinet) == 0
    assert await _run(store, upstream, other) == 0
    before = (await store.changes("stocks")).next

    upstream.items = [1, 2, 4, 5, 7, 8]  # 3 and 6 left the warehouse, 8 came
    with sent_statements() as statements:
        assert await _run(store, upstream, cabinet) == 2
    if store.database.dialect == "postgresql" and path == "statement":
        assert [s.word for s in statements] == ["WITH"]  # before: the page and the run's end
    assert await _live(store, cabinet) == [1, 2, 4, 5, 7, 8]
    assert await _live(store, other) == list(range(1, 8))  # another cabinet's rows stay
    news = (await store.changes("stocks", after=before)).changes
    assert [(c.key["nm_id"], c.deleted) for c in news] == [(8, False), (3, True), (6, True)]
    assert {c.cabinet_id for c in news} == {cabinet}
    assert await _active_runs(store) == 0

    # Nothing changed: nothing written, nothing tombstoned, no entry in the feed.
    assert await _run(store, upstream, cabinet) == 0
    assert (await store.changes("stocks", after=news[-1].seq)).changes == []
    # A tombstoned row WB lists again is live again; an empty whole page tombstones every row.
    upstream.items = [1, 3]
    assert await _run(store, upstream, cabinet) == 5  # 2, 4, 5, 7 and 8
    assert await _live(store, cabinet) == [1, 3]
    upstream.items = []
    assert await _run(store, upstream, cabinet) == 2
    assert await _live(store, cabinet) == []
    assert await _live(store, other) == list(range(1, 8))


async def test_a_whole_page_leaves_an_unfinished_run_alone(
    store: Store, upstream: Upstream
) -> None:
    """A snapshot run left unfinished (a crash) is not completed by a whole page's run: it saw
    none of that page's keys, and completing it would tombstone rows the page just confirmed."""
    cabinet = (await store.cabinets.add("shop", "token", "sid")).id
    upstream.whole = True
    upstream.items = list(range(1, 8))
    await _run(store, upstream, cabinet)
    await store.snapshots.begin("stocks", cabinet)  # a run that never ended
    upstream.items = list(range(1, 6))
    assert await _run(store, upstream, cabinet) == 2
    assert await _live(store, cabinet) == list(range(1, 6))


async def test_a_whole_page_of_a_resumed_run_is_stored_as_any_page(
    store: Store, upstream: Upstream
) -> None:
    """A run resumed from its cursor goes on with the snapshot run it began: its whole page is
    recorded as seen, and the run's end tombstones what the run did not see."""
    cabinet = (await store.cabinets.add("shop", "token", "sid")).id
    upstream.items = list(range(1, 8))
    await _run(store, upstream, cabinet)
    upstream.empty_first = True  # the run begins, then defers
    with pytest.raises(RateLimitDeferred):
        await _run(store, upstream, cabinet)
    assert await _active_runs(store) == 1
    upstream.whole = True
    upstream.items = [1, 2]
    assert await _run(store, upstream, cabinet, cursor={"offset": 0}) == 5
    assert await _live(store, cabinet) == [1, 2]
    assert await _active_runs(store) == 0


async def test_completing_without_a_begun_run_tombstones_nothing(store: Store) -> None:
    cabinet = (await store.cabinets.add("shop", "token", "sid")).id
    await store.upsert("stocks", cabinet, [{"nmId": 1, "chrtId": 1, "warehouseId": 1}])
    assert await store.snapshots.complete("stocks", cabinet) == 0
    assert await store.count("stocks", cabinet) == 1


async def test_tombstones_go_in_bounded_batches(store: Store) -> None:
    cabinet = (await store.cabinets.add("shop", "token", "sid")).id
    events: list[int] = []

    async def listen(event: Any) -> None:
        events.append(event.rows)

    store.add_listener(listen)
    rows = [{"nmId": nm, "chrtId": 1, "warehouseId": 1} for nm in range(10)]
    await store.upsert("stocks", cabinet, rows)
    await store.snapshots.begin("stocks", cabinet)
    await store.write("stocks", cabinet, rows[:1], seen=True)
    assert await store.snapshots.complete("stocks", cabinet, batch=4) == 9
    assert events == [10, 4, 4, 1]  # the first page's write, then one event per batch


async def test_a_key_seen_on_two_pages_counts_once(store: Store) -> None:
    """Pages of a run may overlap (a boundary row sent twice): the run saw as many keys as the
    cabinet has live rows, but not the same ones, so the row it missed is still tombstoned."""
    cabinet = (await store.cabinets.add("shop", "token", "sid")).id
    rows = [{"nmId": nm, "chrtId": 1, "warehouseId": 1} for nm in range(3)]
    await store.upsert("stocks", cabinet, rows)
    await store.snapshots.begin("stocks", cabinet)
    await store.write("stocks", cabinet, rows[:2], seen=True)
    await store.write("stocks", cabinet, rows[1:2], seen=True)  # the boundary row again
    assert await store.snapshots.complete("stocks", cabinet) == 1
    assert await store.fetch("stocks", cabinet) == rows[:2]


async def test_a_run_that_saw_nothing_tombstones_every_row(store: Store) -> None:
    cabinet = (await store.cabinets.add("shop", "token", "sid")).id
    other = (await store.cabinets.add("other", "token-2", "sid-2")).id
    rows = [{"nmId": nm, "chrtId": 1, "warehouseId": 1} for nm in range(4)]
    await store.upsert("stocks", cabinet, rows)
    await store.upsert("stocks", other, rows)
    await store.snapshots.begin("stocks", cabinet)
    assert await store.snapshots.complete("stocks", cabinet) == 4
    assert await store.count("stocks", cabinet) == 0
    assert await store.count("stocks", other) == 4  # the count is the cabinet's own


async def test_a_run_that_missed_nothing_ends_in_one_statement_or_two(store: Store) -> None:
    """The common case, the dataset's keys not read: on PostgreSQL one statement counts the
    distinct keys seen (a key on two pages once) and finishes the run; on SQLite the run is
    read with its keys and the live count in one query, then marked finished."""
    cabinet = (await store.cabinets.add("shop", "token", "sid")).id
    rows = [{"nmId": nm, "chrtId": 1, "warehouseId": 1} for nm in range(2 * SLOT_DIGESTS)]
    await store.upsert("stocks", cabinet, rows)
    await store.snapshots.begin("stocks", cabinet)
    await store.write("stocks", cabinet, rows[: SLOT_DIGESTS + 3], seen=True)
    await store.write("stocks", cabinet, rows[SLOT_DIGESTS:], seen=True)  # 3 seen again
    with sent_statements() as statements:
        assert await store.snapshots.complete("stocks", cabinet) == 0
    sent = [s.word for s in statements]
    assert sent == (["WITH"] if store.database.dialect == "postgresql" else ["SELECT", "UPDATE"])
    assert await store.count("stocks", cabinet) == len(rows)
    assert await store.snapshots.complete("stocks", cabinet) == 0  # finished: nothing to do
    # One key unseen, another seen twice: the counts differ, the keys are compared.
    await store.snapshots.begin("stocks", cabinet)
    await store.write("stocks", cabinet, rows[:10], seen=True)
    await store.write("stocks", cabinet, rows[9:-1], seen=True)
    assert await store.snapshots.complete("stocks", cabinet) == 1
    assert await store.count("stocks", cabinet) == len(rows) - 1


async def test_a_run_counts_its_own_key_slots_only(store: Store) -> None:
    """Pages larger than one slot fill several; a later, shorter run overwrites the first slots
    and the earlier run's further slots do not count as seen by it."""
    cabinet = (await store.cabinets.add("shop", "token", "sid")).id
    rows = [{"nmId": nm, "chrtId": 1, "warehouseId": 1} for nm in range(3 * SLOT_DIGESTS + 50)]
    await store.snapshots.begin("stocks", cabinet)
    await store.write("stocks", cabinet, rows[: 2 * SLOT_DIGESTS + 1], seen=True)  # 3 slots
    await store.write("stocks", cabinet, rows[2 * SLOT_DIGESTS + 1 :], seen=True)  # 1 more
    assert await store.snapshots.complete("stocks", cabinet) == 0
    assert await store.snapshots.complete("stocks", cabinet) == 0  # finished: nothing to do
    await store.snapshots.begin("stocks", cabinet)
    await store.write("stocks", cabinet, rows[:10], seen=True)
    assert await store.snapshots.complete("stocks", cabinet) == len(rows) - 10
    assert await store.count("stocks", cabinet) == 10


async def test_a_page_written_with_no_run_in_progress_records_no_keys(store: Store) -> None:
    cabinet = (await store.cabinets.add("shop", "token", "sid")).id
    rows = [{"nmId": nm, "chrtId": 1, "warehouseId": 1} for nm in range(5)]
    await store.write("stocks", cabinet, rows, seen=True)
    await store.snapshots.begin("stocks", cabinet)
    await store.write("stocks", cabinet, rows[:2], seen=True)
    # Only what the run saw counts: the page before it began is not among its keys.
    assert await store.snapshots.complete("stocks", cabinet) == 3


async def _rows(store: Store, table: str) -> int:
    async with store.database.connection() as conn:
        return int(await conn.scalar(text(f"SELECT count(*) FROM {table}")) or 0)


async def test_identical_runs_keep_the_bookkeeping_rows_in_place(store: Store) -> None:
    """The bookkeeping rows are updated, never inserted and deleted per run: after any number
    of identical runs the tables hold a run row per (cabinet, dataset) and the slots of one run
    (what lets PostgreSQL reclaim their old versions by page pruning, without VACUUM)."""
    cabinets = [(await store.cabinets.add(f"shop{i}", f"token{i}", f"sid{i}")).id for i in (1, 2)]
    rows = [{"nmId": nm, "chrtId": 1, "warehouseId": 1} for nm in range(3000)]
    slots = len(cabinets) * 3 * -(-1000 // SLOT_DIGESTS)  # three 1,000-row pages a cabinet

    async def one_run() -> None:
        for cabinet in cabinets:
            await store.snapshots.begin("stocks", cabinet)
            for start in range(0, len(rows), 1000):
                await store.write("stocks", cabinet, rows[start : start + 1000], seen=True)
            assert await store.snapshots.complete("stocks", cabinet) == 0

    for run in range(RUNS):
        await one_run()
        assert await _rows(store, "wb_snapshot_runs") == len(cabinets), run
        assert await _rows(store, "wb_snapshot_keys") == slots, run


@pytest.mark.parametrize("path", ["statement", "transaction"])
async def test_a_whole_page_compares_keys_of_every_kind(
    store: Store, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The booking monitor's key (an int, a date, an int WB may omit): a whole page sent again
    keeps every row live, and a day that left the reply is tombstoned, on either write path."""
    if path == "transaction":
        monkeypatch.setattr("wbsync.store.rows.BATCH_ROWS", 1)
    cabinet = (await store.cabinets.add("shop", "token", "sid")).id

    def coefficients(days: range) -> list[dict[str, Any]]:
        return [
            {"warehouseID": w, "date": f"2026-08-{d:02d}T00:00:00Z", "coefficient": d, **box}
            for w in (1, 2)
            for d in days
            for box in ({"boxTypeID": 2}, {})  # no boxTypeID: stored as box type 0
        ]

    first = await store.write("acceptance_coefficients", cabinet, coefficients(range(1, 4)))
    assert first.changed == 12
    again = await store.write(
        "acceptance_coefficients", cabinet, coefficients(range(1, 4)), whole=True
    )
    assert (again.changed, again.tombstoned) == (0, 0)
    later = await store.write(
        "acceptance_coefficients", cabinet, coefficients(range(2, 5)), whole=True
    )
    assert (later.changed, later.tombstoned) == (4, 4)  # day 4 came, day 1 went
    assert await store.count("acceptance_coefficients", cabinet) == 12
