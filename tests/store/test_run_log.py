"""Runs' successes written behind: together, within the flush time, the last of each (cabinet,
sync) kept; a deleted cabinet's left out; a refused flush loses nothing; the stop writes what
waits."""

from __future__ import annotations

import logging

import pytest

from tests.support.databases import TEST_SECRET_KEY, DatabaseFactory
from tests.support.waiting import wait_for
from wbsync.errors import StoreError, StoreUnavailableError
from wbsync.store import Database, Store
from wbsync.store.runs import RunLog, RunRecord, RunSuccess


async def _records(store: Store, ids: list[int]) -> dict[tuple[int, str], RunRecord]:
    return {(r.cabinet_id, r.sync): r for r in await store.runs.of_cabinets(ids)}


async def test_successes_are_written_together_within_the_flush_time(store: Store) -> None:
    ids = [(await store.cabinets.add(f"shop-{i}", f"token-{i}", f"sid-{i}")).id for i in range(3)]
    log = RunLog(store.runs, flush_s=0.05)
    try:
        for i, cabinet in enumerate(ids):
            log.succeeded(cabinet, "booking", pages=1, rows=i)
        log.succeeded(ids[0], "booking", pages=2, rows=9)  # a later run of the same pair
        log.succeeded(ids[0], "finance", pages=3, rows=4)
        assert log.waiting == 4  # the pair's later success replaced its earlier one

        async def written() -> bool:
            return len(await _records(store, ids)) == 4

        await wait_for(written)
        records = await _records(store, ids)
        later = records[ids[0], "booking"]
        assert (later.success_pages, later.success_rows) == (2, 9)
        assert records[ids[2], "booking"].success_rows == 2
        assert records[ids[0], "finance"].success_pages == 3
        assert all(r.success_at is not None and r.failure_at is None for r in records.values())
        assert log.waiting == 0
    finally:
        await log.aclose()


async def test_a_deleted_cabinets_success_is_left_out(store: Store) -> None:
    kept = await store.cabinets.add("kept", "token-k", "sid-k")
    gone = await store.cabinets.add("gone", "token-g", "sid-g")
    log = RunLog(store.runs, flush_s=3600)
    try:
        log.succeeded(kept.id, "booking", pages=1, rows=1)
        log.succeeded(gone.id, "booking", pages=1, rows=1)
        await store.cabinets.remove(gone.id)
        assert await log.flush() == 1
        assert list(await _records(store, [kept.id, gone.id])) == [(kept.id, "booking")]
        assert log.waiting == 0  # left out, not kept for ever
    finally:
        await log.aclose()


async def test_the_stop_writes_what_waits_and_refuses_later_successes(store: Store) -> None:
    cabinet = await store.cabinets.add("shop", "token", "sid")
    log = RunLog(store.runs, flush_s=3600)  # no flush before the stop
    log.succeeded(cabinet.id, "booking", pages=1, rows=5)
    await log.aclose()
    [record] = (await _records(store, [cabinet.id])).values()
    assert record.success_rows == 5
    with pytest.raises(StoreError, match="closed"):
        log.succeeded(cabinet.id, "booking", pages=1, rows=5)
    await log.aclose()  # again: nothing to do


async def test_a_flush_time_not_above_zero_is_refused(store: Store) -> None:
    with pytest.raises(ValueError, match="flush_s"):
        RunLog(store.runs, flush_s=0)


async def test_a_flush_the_database_refuses_keeps_its_successes_for_the_next(
    throwaway: str, database_factory: DatabaseFactory
) -> None:
    async with Database(throwaway) as database:
        await database.migrate()
        store = Store(database, secret_key=TEST_SECRET_KEY)
        ids = [(await store.cabinets.add(f"s{i}", f"t{i}", f"sid{i}")).id for i in range(2)]
        log = RunLog(store.runs, flush_s=3600)
        for cabinet in ids:
            log.succeeded(cabinet, "booking", pages=1, rows=cabinet)
        await database_factory.lock_out(throwaway)
        with pytest.raises(StoreUnavailableError):
            await log.flush()
        with pytest.raises(StoreUnavailableError):
            await log.flush()  # the pool's fresh connection is refused too
        assert log.waiting == 2  # nothing lost
        log.succeeded(ids[0], "booking", pages=7, rows=7)  # newer than the kept one: it wins
        await database_factory.let_in(throwaway)
        assert await log.flush() == 2
        records = await _records(store, ids)
        assert records[ids[0], "booking"].success_pages == 7
        assert records[ids[1], "booking"].success_rows == ids[1]
        await log.aclose()


async def test_an_outage_is_warned_of_once_and_its_end_told_once(
    throwaway: str,
    database_factory: DatabaseFactory,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.INFO, logger="wbsync.store.runs")
    async with Database(throwaway) as database:
        await database.migrate()
        store = Store(database, secret_key=TEST_SECRET_KEY)
        cabinet = await store.cabinets.add("shop", "token", "sid")
        tries = 0
        write = store.runs.succeeded_many

        async def counted(successes: list[RunSuccess]) -> int:
            nonlocal tries
            tries += 1
            return await write(successes)

        monkeypatch.setattr(store.runs, "succeeded_many", counted)
        log = RunLog(store.runs, flush_s=0.05)
        try:
            await database_factory.lock_out(throwaway)
            log.succeeded(cabinet.id, "booking", pages=1, rows=1)
            await wait_for(lambda: tries >= 4)  # refused again and again
            await database_factory.let_in(throwaway)
            await wait_for(lambda: "written again" in caplog.text)
        finally:
            await log.aclose()
        said = [r.getMessage() for r in caplog.records if r.name == "wbsync.store.runs"]
        assert len(said) == 2, said
        assert said[0].startswith("run records not written (1 kept, tried again every 0.05 s)")
        assert said[1] == "run records written again (1)"
        [record] = (await _records(store, [cabinet.id])).values()
        assert record.success_rows == 1
