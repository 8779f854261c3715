"""A run's counts over its deferrals: rows fetched (every row WB sent) apart from rows written
(inserted or changed), the whole run's in the log line and the job's result, not the last
slice's."""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator

import pytest

from tests.support.databases import DatabaseFactory
from tests.support.runtimes import runtime_maker
from tests.support.waiting import wait_for
from wbsync.composition.workers import build_workers
from wbsync.emulator import Emulator, EmulatorConfig, SellerSizes, running_emulator
from wbsync.jobs.model import Outcome
from wbsync.shared.runtime import Runtime
from wbsync.system import clock

SCALE = 0.005  # WB's minute (finance: one request a minute) is 0.3 s: every page defers
SELLER = "0000000e-0000-4000-8000-0000000000cc"
FINANCE = "rnp-finance-sync"
ROWS, PAGE = 12, 5


@pytest.fixture
async def emulator() -> AsyncIterator[Emulator]:
    config = EmulatorConfig(
        time_scale=SCALE,
        anchor_date=clock.wb_today(),
        sizes=SellerSizes(report_rows=ROWS),
        page_size={"finance.detailed_report": PAGE},
    )
    async with running_emulator(config) as emu:
        yield emu


@pytest.fixture
async def runtime(
    redis_url: str, prefix: str, database_factory: DatabaseFactory, emulator: Emulator
) -> AsyncIterator[Runtime]:
    url = await database_factory.new_migrated_url("sqlite")
    async with runtime_maker(redis_url, prefix, url, emulator.base_url, time_scale=SCALE) as make:
        yield await make()


async def _run(runtime: Runtime, cabinet_id: int) -> list[Outcome]:
    outcomes: list[Outcome] = []
    [worker] = build_workers(runtime, [FINANCE], concurrency=1, on_outcome=outcomes.append)
    queue = runtime.queue(FINANCE)

    async def gone() -> bool:
        return await queue.job(str(cabinet_id)) is None

    await worker.start()
    try:
        await queue.enqueue(str(cabinet_id))
        await wait_for(gone, timeout_s=60)
    finally:
        await worker.close()
    return outcomes


async def test_a_deferred_run_counts_rows_fetched_and_written_over_the_whole_run(
    runtime: Runtime, emulator: Emulator, caplog: pytest.LogCaptureFixture
) -> None:
    cabinet = await runtime.store.cabinets.add(
        f"cab-{uuid.uuid4().hex[:8]}", emulator.token(SELLER), SELLER
    )
    with caplog.at_level(logging.INFO, logger="wbsync.syncs.runner"):
        first = await _run(runtime, cabinet.id)
    assert any(o.outcome == "deferred" for o in first)  # the run came in slices
    [done] = [o for o in first if o.outcome == "completed"]
    stored = await runtime.store.count("finance_report", cabinet.id)
    assert stored == ROWS
    assert done.result["rows_fetched"] == ROWS and done.result["rows_written"] == ROWS
    pages = done.result["job_pages"]
    assert done.result["rows"] < ROWS  # "rows" stays what it was: the last slice's writes
    [line] = [r.getMessage() for r in caplog.records if r.getMessage().startswith(FINANCE)]
    assert line == (
        f"{FINANCE} done: {pages} pages, {ROWS} rows fetched, {ROWS} rows written, 0 tombstoned"
    )
    await runtime.run_log.flush()
    [run] = [r for r in await runtime.store.runs.of_cabinets([cabinet.id]) if r.sync == FINANCE]
    assert run.success_rows == ROWS  # rows fetched, as documented

    # Again from the start, on the same data: every row fetched, none written.
    assert await runtime.store.cursors.reset(cabinet.id, FINANCE)
    again = await _run(runtime, cabinet.id)
    [done] = [o for o in again if o.outcome == "completed"]
    assert (done.result["rows_fetched"], done.result["rows_written"]) == (ROWS, 0)
