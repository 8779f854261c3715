"""Report tasks against the emulator, run as a job runs them (inside the deferral context, each
deferral resumed from the saved cursor): WB building a report defers, a crash or a deferral
resumes from the saved task id, a task WB lost is created again within the bound, a task WB
never builds fails after the deadline, and each window's report replaces its days."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass, field, replace
from datetime import date, timedelta
from typing import Any

import pytest

from tests.support.limiter import LimiterFactory
from wbsync.config import Settings
from wbsync.emulator.config import EmulatorConfig, SellerSizes
from wbsync.emulator.report_tasks import plan_tasks
from wbsync.emulator.server import Emulator, running_emulator
from wbsync.errors import RateLimitDeferred, ReportPending, WbReportError
from wbsync.observability.context import run_with_rate_limit_deferral
from wbsync.shared.runtime import client_options
from wbsync.store import Store
from wbsync.syncs import SYNCS, SyncInput, SyncOptions, SyncPage, run_sync
from wbsync.syncs.reports.task import ReportTask
from wbsync.wb.client import WbClient

SCALE = 0.005  # WB's minute is 0.3 s, a report is built in 0.1 s, the status poll is 25 ms
SELLER = "7a1c0a52-6b7e-4d2a-9c4e-1a2b3c4d5e70"
STORAGE = "paid-storage-sync"
OPTIONS = SyncOptions(report_horizon_days=16)  # two windows of 8 days
THRESHOLD_MS = 5000 * SCALE


@pytest.fixture
async def emulator() -> AsyncIterator[Emulator]:
    config = EmulatorConfig(time_scale=SCALE, sizes=SellerSizes(products=3))
    async with running_emulator(config) as emu:
        yield emu


@dataclass
class Job:
    """What running a sync as a job did: its slices, deferral reasons, last cursor, error."""

    runs: int = 0
    reasons: list[str] = field(default_factory=list)
    waiting_on: list[str] = field(default_factory=list)
    cursor: dict[str, Any] | None = None
    error: Exception | None = None


async def as_job(
    name: str,
    emu: Emulator,
    store: Store,
    limiter_factory: LimiterFactory,
    *,
    cabinet_id: int | None = None,
    options: SyncOptions = OPTIONS,
    cursor: dict[str, Any] | None = None,
) -> tuple[int, Job]:
    """Run sync ``name`` as the reschedule service would: every deferral waited out (here, in
    the test) and the run resumed from the last saved cursor."""
    if cabinet_id is None:
        cabinet_id = (await store.cabinets.add("shop", emu.token(SELLER), SELLER)).id
    settings = Settings(wb_base_url=emu.base_url, time_scale=SCALE)
    job = Job(cursor=cursor)

    async def saved(page: SyncPage, _: Any) -> None:
        job.cursor = page.cursor

    limiter = limiter_factory(time_scale=SCALE)
    async with WbClient("shop", emu.token(SELLER), limiter, options=client_options(settings)) as c:
        while True:
            job.runs += 1
            inp = SyncInput(c, store, cabinet_id, job.cursor, emu.config.anchor_date, options)

            def run(inp: SyncInput = inp) -> Awaitable[Any]:
                return run_sync(SYNCS[name], inp, on_page=saved)

            try:
                await run_with_rate_limit_deferral(THRESHOLD_MS, run)
                return cabinet_id, job
            except RateLimitDeferred as deferred:
                job.reasons.append(deferred.reason)
                job.waiting_on.append(deferred.waiting_on)
                await asyncio.sleep(deferred.wait_ms / 1000.0)
            except WbReportError as exc:
                job.error = exc
                return cabinet_id, job


def requests(emu: Emulator, method: str) -> int:
    sellers = emu.counters.snapshot()["sellers"]
    return int(sellers.get(SELLER, {}).get(method, {}).get("requests", 0))


def expected_storage(emu: Emulator, first: date, last: date) -> list[dict[str, Any]]:
    return emu.expected(SELLER, "analytics.paid_storage", date_from=first, date_to=last)


async def stored(store: Store, dataset: str, cabinet_id: int) -> dict[Any, Any]:
    spec = SYNCS[STORAGE].stores[0] if dataset == "paid_storage" else None
    rows = await store.fetch(dataset, cabinet_id)
    return {spec.row_key(r) if spec else i: r for i, r in enumerate(rows)}


async def test_a_report_defers_while_wb_builds_it_and_resumes_from_the_saved_task(
    emulator: Emulator, store: Store, limiter_factory: LimiterFactory
) -> None:
    cabinet_id, job = await as_job(STORAGE, emulator, store, limiter_factory)
    assert job.error is None
    today = emulator.config.anchor_date
    want = expected_storage(emulator, today - timedelta(days=15), today)
    assert await stored(store, "paid_storage", cabinet_id) == {
        SYNCS[STORAGE].stores[0].row_key(r): r for r in want
    }
    # One task a window, each polled, downloaded once: every wait on WB resumed the saved task.
    assert requests(emulator, "analytics.paid_storage") == 2
    assert requests(emulator, "analytics.paid_storage_download") == 2
    assert "report" in job.reasons
    assert any(w.startswith("waiting on WB's report paid storage (task ") for w in job.waiting_on)
    assert job.cursor == {"synced_to": today.isoformat()}

    # A later run asks WB again for the recent days only: one task.
    _, again = await as_job(
        STORAGE, emulator, store, limiter_factory, cabinet_id=cabinet_id, cursor=job.cursor
    )
    assert again.error is None
    assert requests(emulator, "analytics.paid_storage") == 3


async def test_a_crash_resumes_from_the_saved_task_id(
    emulator: Emulator, store: Store, limiter_factory: LimiterFactory
) -> None:
    cabinet = await store.cabinets.add("shop", emulator.token(SELLER), SELLER)
    settings = Settings(wb_base_url=emulator.base_url, time_scale=SCALE)
    limiter = limiter_factory(time_scale=SCALE)
    cursors: list[dict[str, Any]] = []

    async def saved(page: SyncPage, _: Any) -> None:
        cursors.append(page.cursor)

    async with WbClient(
        "shop", emulator.token(SELLER), limiter, options=client_options(settings)
    ) as client:
        inp = SyncInput(client, store, cabinet.id, None, emulator.config.anchor_date, OPTIONS)
        with pytest.raises(ReportPending) as pending:
            await run_with_rate_limit_deferral(
                THRESHOLD_MS, lambda: run_sync(SYNCS[STORAGE], inp, on_page=saved)
            )
    # The task's id was saved before the job gave its slot back; the process then died.
    [created] = cursors
    assert created["task_id"] == pending.value.task_id
    _, job = await as_job(
        STORAGE, emulator, store, limiter_factory, cabinet_id=cabinet.id, cursor=created
    )
    assert job.error is None
    assert requests(emulator, "analytics.paid_storage") == 2  # the saved task, then window two


@pytest.mark.parametrize(
    "fates", [("canceled",), ("lost", "purged"), ("canceled", "lost", "purged")]
)
async def test_a_task_wb_lost_is_created_again_within_the_bound(
    fates: tuple[str, ...], emulator: Emulator, store: Store, limiter_factory: LimiterFactory
) -> None:
    plan_tasks(emulator.state.seller(SELLER), *fates)
    cabinet_id, job = await as_job(STORAGE, emulator, store, limiter_factory)
    assert job.error is None
    assert requests(emulator, "analytics.paid_storage") == 2 + len(fates)
    today = emulator.config.anchor_date
    want = expected_storage(emulator, today - timedelta(days=15), today)
    assert len(await stored(store, "paid_storage", cabinet_id)) == len(want)
    # WB's 404 for a task it does not know is an answer: the analytics section did not stop.
    assert emulator.counters.snapshot()["unserved"] == {}


async def test_past_the_bound_a_lost_task_fails_the_attempt_and_the_next_starts_afresh(
    emulator: Emulator, store: Store, limiter_factory: LimiterFactory
) -> None:
    plan_tasks(emulator.state.seller(SELLER), "lost", "canceled")
    options = replace(OPTIONS, report_recreate_max=1)
    _, job = await as_job(STORAGE, emulator, store, limiter_factory, options=options)
    assert isinstance(job.error, WbReportError)
    assert "past WBSYNC_REPORT_RECREATE_MAX (1)" in str(job.error)
    assert job.cursor is not None and "task_id" not in job.cursor  # the next attempt: a new task
    assert "recreated" not in job.cursor


async def test_a_task_wb_never_builds_fails_after_the_deadline(
    emulator: Emulator, store: Store, limiter_factory: LimiterFactory
) -> None:
    plan_tasks(emulator.state.seller(SELLER), "stuck")
    options = replace(OPTIONS, report_deadline_s=0.3)  # scaled: a minute at SCALE
    cabinet_id, job = await as_job(STORAGE, emulator, store, limiter_factory, options=options)
    assert isinstance(job.error, WbReportError)
    said = str(job.error)
    assert "WB has not built report paid storage" in said and "'processing'" in said
    assert "past the 0.3 s deadline (WBSYNC_REPORT_DEADLINE_S, scaled)" in said
    assert job.reasons.count("report") >= 2  # it waited, slot free, until the deadline
    # The next attempt creates the window's task again, and WB builds that one.
    assert job.cursor is not None and "task_id" not in job.cursor
    _, again = await as_job(
        STORAGE, emulator, store, limiter_factory, cabinet_id=cabinet_id, cursor=job.cursor
    )
    assert again.error is None


async def test_a_window_report_replaces_its_days_only(
    emulator: Emulator, store: Store, limiter_factory: LimiterFactory
) -> None:
    cabinet = await store.cabinets.add("shop", emulator.token(SELLER), SELLER)
    today = emulator.config.anchor_date
    inside, outside = today - timedelta(days=3), today - timedelta(days=40)
    ghost = {"date": inside.isoformat(), "nmId": 1, "chrtId": 2, "giId": 3, "warehouse": "X"}
    old = {**ghost, "date": outside.isoformat()}
    await store.upsert("paid_storage", cabinet.id, [ghost, old])
    _, job = await as_job(STORAGE, emulator, store, limiter_factory, cabinet_id=cabinet.id)
    assert job.error is None
    rows = await stored(store, "paid_storage", cabinet.id)
    spec = SYNCS[STORAGE].stores[0]
    assert spec.row_key(ghost) not in rows  # WB's report of its day no longer has it
    assert spec.row_key(old) in rows  # a day no report of this run covered
    feed = await store.changes("paid_storage", cabinet_id=cabinet.id)
    deleted = [c for c in feed.changes if c.deleted]
    assert [spec.row_key(c.data) for c in deleted] == [spec.row_key(ghost)]


async def test_warehouse_remains_and_paid_acceptance_run_as_jobs(
    emulator: Emulator, store: Store, limiter_factory: LimiterFactory
) -> None:
    cabinet_id, job = await as_job("warehouse-remains-sync", emulator, store, limiter_factory)
    assert job.error is None and "report" in job.reasons
    items = emulator.expected(SELLER, "analytics.warehouse_remains")
    warehouses = sum(len(item["warehouses"]) for item in items)
    assert await store.count("warehouse_remains", cabinet_id) == warehouses > 0
    _, job = await as_job(
        "acceptance-report-sync", emulator, store, limiter_factory, cabinet_id=cabinet_id
    )
    assert job.error is None
    today = emulator.config.anchor_date
    want = emulator.expected(
        SELLER, "analytics.acceptance_report", date_from=today - timedelta(days=15), date_to=today
    )
    assert await store.count("acceptance_report", cabinet_id) == len(want)


def test_a_report_task_declaration_is_checked() -> None:
    storage = SYNCS[STORAGE]
    [create, status, download] = storage.calls
    [rows] = storage.stores
    with pytest.raises(ValueError, match="path must hold"):
        ReportTask("q", "r", create, create, download, rows, 60.0, window_days=8)
    with pytest.raises(ValueError, match="needs a key field of kind 'date'"):
        undated = replace(rows, name="undated", key=rows.key[1:], retention_days=None)
        ReportTask("q", "r", create, status, download, undated, 60.0, window_days=8)
    with pytest.raises(ValueError, match="must be a 'snapshot'"):
        ReportTask("q", "r", create, status, download, rows, 60.0)
