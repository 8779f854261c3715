"""PostgreSQL's one-statement page write: one round trip, numbered in commit order under
concurrent writers of one dataset."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import text

from tests.support.statements import sent_statements
from tests.support.waiting import wait_for
from wbsync.store import Database, Store
from wbsync.store.changes import ChangeEvent
from wbsync.store.rows import BATCH_ROWS
from wbsync.store.sequences import advance_sequence, lock_sequence
from wbsync.system import clock


@pytest.fixture
def postgres(database: Database) -> Database:
    if database.dialect != "postgresql":
        pytest.skip("the one-statement page write is PostgreSQL's")
    return database


async def _cabinet(store: Store, name: str = "shop") -> int:
    return (await store.cabinets.add(name, f"token-{name}", f"sid-{name}")).id


@contextmanager
def _statements() -> Iterator[list[str | None]]:
    """The isolation level of every statement this process sends, meanwhile (by either way)."""
    with sent_statements() as sent:
        levels: list[str | None] = []
        yield levels
    levels.extend(s.isolation for s in sent)


async def _sequence(database: Database, name: str) -> int:
    query = text("SELECT last_seq FROM wb_change_sequences WHERE dataset = :name")
    return int((await database.execute(query, {"name": name})).scalar_one())


async def _seqs(database: Database, table: str) -> list[int]:
    rows = await database.execute(text(f"SELECT seq FROM {table} ORDER BY seq"))
    return [int(s) for s in rows.scalars()]


async def test_a_page_with_its_cursor_and_seen_keys_is_one_autocommit_statement(
    store: Store, postgres: Database
) -> None:
    cabinet = await _cabinet(store)

    def stocks(keys: range) -> list[dict[str, Any]]:
        return [{"nmId": n, "chrtId": 1, "warehouseId": 7, "quantity": n} for n in keys]

    await store.upsert("stocks", cabinet, stocks(range(300)))
    await store.snapshots.begin("stocks", cabinet)
    # Two pages of the run: 210 keys (two slots), then 40 (the third slot) and a change.
    with _statements() as sent:
        first = await store.write(
            "stocks", cabinet, stocks(range(210)), seen=True, cursor=("s", {"p": 1})
        )
    assert sent == ["AUTOCOMMIT"]
    assert (first.rows, first.changed, first.last_seq) == (210, 0, None)
    assert await store.cursors.get(cabinet, "s") == {"p": 1}
    second = [*stocks(range(210, 249)), {"nmId": 249, "chrtId": 1, "warehouseId": 7, "quantity": 0}]
    with _statements() as sent:
        done = await store.write("stocks", cabinet, second, seen=True, cursor=("s", {"p": 2}))
    assert sent == ["AUTOCOMMIT"]
    assert (done.rows, done.changed) == (40, 1)
    assert done.last_seq == await _sequence(postgres, "stocks")
    assert await store.cursors.get(cabinet, "s") == {"p": 2}
    # Every key of both pages was seen: only the 50 others are tombstoned.
    assert await store.snapshots.complete("stocks", cabinet) == 50
    assert await store.count("stocks", cabinet) == 250


async def test_a_page_past_one_statement_takes_the_transaction(
    store: Store, postgres: Database
) -> None:
    cabinet = await _cabinet(store)
    page = [{"rrdId": i} for i in range(BATCH_ROWS + 1)]
    with _statements() as sent:
        done = await store.write("finance_report", cabinet, page)
    assert len(sent) > 1 and "AUTOCOMMIT" not in sent
    assert done.changed == BATCH_ROWS + 1
    assert await _sequence(postgres, "finance_report") == done.last_seq


async def test_a_page_waiting_on_another_writers_lock_numbers_after_its_commit(
    store: Store, postgres: Database
) -> None:
    cabinet = await _cabinet(store)
    await store.upsert("orders", cabinet, [{"srid": "first"}])
    page = [{"srid": f"o{i}"} for i in range(10)]
    async with postgres.transaction() as holder:
        locked = await lock_sequence(holder, postgres, "orders")
        base = locked.last
        writer = asyncio.create_task(store.write("orders", cabinet, page))
        waiting = text(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock' AND query LIKE '%wb_change_sequences%'"
        )

        async def blocked() -> bool:
            return bool((await postgres.execute(waiting)).scalar_one())

        await wait_for(blocked)
        # The holder gives out 100 numbers (as gaps), stamped later than the writer's clock
        # read, and commits while the writer waits.
        stamped = locked.stamp(clock.calendar_now()) + timedelta(hours=1)
        await advance_sequence(holder, "orders", base + 100, stamped)
    done = await writer
    # The waiting statement re-read the newest number and kept the holder's advance.
    assert done.last_seq == base + 100 + len(page)
    assert await _sequence(postgres, "orders") == base + 100 + len(page)
    assert await _seqs(postgres, "wb_orders") == [base, *range(base + 101, base + 111)]
    # Its rows are stamped no earlier than the holder's stamp: changed_at follows seq.
    stamps = await postgres.execute(
        text("SELECT min(changed_at) FROM wb_orders WHERE seq > :b"), {"b": base}
    )
    assert stamps.scalar_one() == stamped


async def test_concurrent_writers_of_one_dataset_number_uniquely_in_commit_order(
    store: Store, postgres: Database
) -> None:
    cabinets = [await _cabinet(store, f"c{i}") for i in range(2)]
    rounds, keys = 15, 30
    committed: list[ChangeEvent] = []

    async def writer(cabinet: int) -> list[int]:
        lasts = []
        for r in range(rounds):
            # New keys every round: each page takes ``keys`` consecutive numbers.
            page = [{"srid": f"r{r}k{k}"} for k in range(keys)]
            done = await store.write("orders", cabinet, page, announce=False)
            assert done.event is not None and done.changed == keys
            committed.append(done.event)
            lasts.append(done.event.last_seq)
        return lasts

    results = await asyncio.gather(*(writer(c) for c in cabinets))
    seqs = await _seqs(postgres, "wb_orders")
    assert len(seqs) == len(set(seqs)) == 2 * rounds * keys
    assert await _sequence(postgres, "orders") == max(seqs)
    for lasts in results:
        assert lasts == sorted(set(lasts))  # a writer's pages commit one after the other
    # A page's numbers are all above those of every page committed before it: the pages'
    # ranges never interleave, and together they are the table's numbers.
    ranges = sorted((e.last_seq - keys + 1, e.last_seq) for e in committed)
    assert all(a[1] < b[0] for a, b in itertools.pairwise(ranges))
    assert sorted(n for lo, hi in ranges for n in range(lo, hi + 1)) == seqs
    # Each event names the last number before it, taken under the lock: the events chain.
    events = sorted(committed, key=lambda e: e.last_seq)
    assert [e.prev_seq for e in events] == [0, *(e.last_seq for e in events[:-1])]


async def test_a_dataset_without_its_sequence_row_gets_one_and_the_page(
    store: Store, postgres: Database
) -> None:
    # A plugin's dataset added after the migration has no sequence row: the statement writes
    # nothing (not even the cursor), and the transaction creates the row and stores the page.
    cabinet = await _cabinet(store)
    await postgres.execute(text("DELETE FROM wb_change_sequences WHERE dataset = 'orders'"))
    with _statements() as sent:
        done = await store.write("orders", cabinet, [{"srid": "a"}], cursor=("s", {"p": 1}))
    assert sent[0] == "AUTOCOMMIT" and len(sent) > 1
    assert (done.changed, done.last_seq) == (1, 1)
    assert await _sequence(postgres, "orders") == 1
    assert await store.cursors.get(cabinet, "s") == {"p": 1}
    with _statements() as sent:
        await store.write("orders", cabinet, [{"srid": "b"}])
    assert sent == ["AUTOCOMMIT"]
    assert await _seqs(postgres, "wb_orders") == [1, 2]


async def test_a_page_sent_again_unchanged_takes_no_lock_and_writes_nothing(
    store: Store, postgres: Database
) -> None:
    """An unchanged page (most of a steady state's polls) does not wait behind the dataset's
    other writers: it takes no lock; a page with a changed row, or a whole page lacking a
    stored row, waits for the sequence lock as before."""
    cabinet = await _cabinet(store)
    page = [{"srid": f"o{i}", "n": i} for i in range(10)]
    await store.write("orders", cabinet, page)
    await store.write("acceptance_coefficients", cabinet, _coefficients(3), whole=True)
    async with postgres.transaction() as holder:
        await lock_sequence(holder, postgres, "orders")
        await lock_sequence(holder, postgres, "acceptance_coefficients")
        # Not waiting on the holder: each returns while the lock is still held.
        again = await asyncio.wait_for(store.write("orders", cabinet, page[::-1]), 60)
        assert (again.changed, again.last_seq, again.event) == (0, None, None)
        whole = store.write("acceptance_coefficients", cabinet, _coefficients(3), whole=True)
        assert (await asyncio.wait_for(whole, 60)).last_seq is None

        changed = [*page[:-1], {"srid": "o9", "n": -1}]
        waiting = [
            asyncio.create_task(store.write("orders", cabinet, changed)),
            asyncio.create_task(
                store.write("acceptance_coefficients", cabinet, _coefficients(2), whole=True)
            ),
        ]
        blocked = text(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock' AND query LIKE '%wb_change_sequences%'"
        )

        async def both_wait() -> bool:
            return int((await postgres.execute(blocked)).scalar_one()) == len(waiting)

        await wait_for(both_wait)
    done = await asyncio.gather(*waiting)
    assert (done[0].changed, done[1].tombstoned) == (1, 1)


def _coefficients(days: int) -> list[dict[str, Any]]:
    return [
        {"warehouseID": 1, "date": f"2026-08-{d + 1:02d}T00:00:00Z", "boxTypeID": 2, "k": d}
        for d in range(days)
    ]
