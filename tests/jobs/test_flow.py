"""The main job end to end: crash recovery, deferral in the real flow, short queues, the demo."""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from tests.support.databases import TEST_SECRET_KEY, DatabaseFactory
from tests.support.runtimes import runtime_maker
from tests.support.waiting import wait_for
from wbsync.composition.workers import build_workers
from wbsync.config import Settings
from wbsync.demo.expected import expected_datasets
from wbsync.demo.progress import Progress, Tally
from wbsync.demo.run import run_demo
from wbsync.emulator import Emulator, EmulatorConfig, SellerSizes, running_emulator
from wbsync.errors import WbSyncError
from wbsync.jobs.lag import DUE_FIELD
from wbsync.jobs.model import Outcome
from wbsync.observability.metrics import SLOT_SLEEP, queue_value, sample
from wbsync.redis import keys
from wbsync.shared.runtime import Runtime
from wbsync.store import Database, Store
from wbsync.store.datasets import DATASETS
from wbsync.syncs import SyncOptions
from wbsync.system import clock

SCALE = 0.005  # WB's minute is 300 ms
# The session's migrated databases are shared: every test that uses them uses one key.
SECRET = TEST_SECRET_KEY
SELLERS = [f"0000000{i}-0000-4000-8000-000000000000" for i in range(1, 4)]
FINANCE = "rnp-finance-sync"


@pytest.fixture
async def emulator() -> AsyncIterator[Emulator]:
    config = EmulatorConfig(
        serve_disabled_in_docs=True,  # the booking monitor polls acceptance coefficients
        time_scale=SCALE,
        anchor_date=clock.wb_today(),
        sizes=SellerSizes(report_rows=60),
        page_size={"finance.detailed_report": 6},
        # A request may reach WB up to 100 ms after its token was taken (a busy machine) and
        # still be in its window; a limiter that did not pace would be 300 ms early and refused.
        grace_ms=100,
    )
    async with running_emulator(config) as emu:
        yield emu


@pytest.fixture
async def database_url(db_backend: str, database_factory: DatabaseFactory) -> str:
    # A database of the test's own: the secret key binds to the first token stored, and the
    # shared one holds other tests' cabinets under other keys (the runtime refuses to start).
    return await database_factory.new_migrated_url(db_backend)


@pytest.fixture
async def runtime_factory(
    redis_url: str, prefix: str, database_url: str, emulator: Emulator
) -> AsyncIterator[Callable[..., Any]]:
    async with runtime_maker(
        redis_url, prefix, database_url, emulator.base_url, time_scale=SCALE
    ) as make:
        yield make


def finance_rows(emu: Emulator, seller: str) -> dict[Any, Any]:
    rows = expected_datasets(emu, seller, today=clock.wb_today(), options=SyncOptions())
    spec = DATASETS["finance_report"]
    return {spec.row_key(r): r for r in rows["finance_report"]}


async def stored_finance(runtime: Runtime, cabinet_id: int) -> dict[Any, Any]:
    spec = DATASETS["finance_report"]
    rows = await runtime.store.fetch("finance_report", cabinet_id)
    return {spec.row_key(r): r for r in rows}


@pytest.mark.long
async def test_worker_killed_mid_sync_recovers_without_loss_or_duplicates(
    runtime_factory: Callable[..., Any],
    emulator: Emulator,
    redis_url: str,
    prefix: str,
    database_url: str,
) -> None:
    runtime: Runtime = await runtime_factory()
    cabinet = await runtime.store.cabinets.add("crash", emulator.token(SELLERS[0]), SELLERS[0])
    env = {
        **os.environ,
        "WBSYNC_REDIS_URL": redis_url,
        "WBSYNC_REDIS_PREFIX": prefix,
        "WBSYNC_DATABASE_URL": database_url,
        "WBSYNC_SECRET_KEY": SECRET,
        "WBSYNC_WB_BASE_URL": emulator.base_url,
        "WBSYNC_TIME_SCALE": str(SCALE),
        # Sleep in place between pages, so the job is active (holding its lock) when killed.
        "WBSYNC_DEFER_THRESHOLD_MS": "1000000",
        "WBSYNC_JOB_LOCK_MS": "1000",
    }
    command = [sys.executable, "-m", "wbsync", "run", "--queues", "rnp-finance-sync"]
    first = await asyncio.create_subprocess_exec(*command, env=env, stderr=subprocess.DEVNULL)
    try:
        # Generous: the process must start (imports take seconds on a loaded machine).
        await wait_for(lambda: _at_least(runtime, cabinet.id, 18), timeout_s=120)
    finally:
        first.kill()  # SIGKILL: no cleanup, the job stays active with a lock that will expire
        await first.wait()
    job = await runtime.queue("rnp-finance-sync").job(str(cabinet.id))
    assert job is not None and job.state == "active"
    killed_at = job.data["cursor"]["rrdId"]

    second = await asyncio.create_subprocess_exec(*command, env=env, stderr=subprocess.DEVNULL)
    try:
        queue = runtime.queue("rnp-finance-sync")
        await wait_for(lambda: _finished(queue, str(cabinet.id)), timeout_s=120)
    finally:
        second.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(second.wait(), 90) == 0  # stops cleanly on SIGTERM
    assert await stored_finance(runtime, cabinet.id) == finance_rows(emulator, SELLERS[0])
    cursor = await runtime.store.cursors.get(cabinet.id, "rnp-finance-sync")
    assert cursor is not None and cursor["rrdId"] > killed_at


async def _at_least(runtime: Runtime, cabinet_id: int, rows: int) -> bool:
    return await runtime.store.count("finance_report", cabinet_id) >= rows


async def _finished(queue: Any, cabinet: str) -> bool:
    return await queue.job(cabinet) is None


async def test_long_sync_on_an_empty_bucket_defers_and_frees_its_slot(
    runtime_factory: Callable[..., Any], emulator: Emulator
) -> None:
    runtime: Runtime = await runtime_factory()
    outcomes: list[Outcome] = []
    ids = []
    for i, seller in enumerate(SELLERS):
        cabinet = await runtime.store.cabinets.add(f"c{i}", emulator.token(seller), seller)
        ids.append(cabinet.id)
    # The first cabinet's finance bucket is empty for a while (another client used it up).
    client = runtime.client(await runtime.store.cabinets.get(ids[0]))
    from wbsync.syncs.finance import FINANCE_DETAILED_REPORT

    await runtime.limiter.penalize(client.scope(FINANCE_DETAILED_REPORT), 2000)
    sleep_before = queue_value(SLOT_SLEEP, "rnp-finance-sync")
    [worker] = build_workers(
        runtime, ["rnp-finance-sync"], concurrency=1, on_outcome=outcomes.append
    )
    await worker.start()
    try:
        queue = runtime.queue("rnp-finance-sync")
        for cabinet_id in ids:
            await queue.enqueue(str(cabinet_id))
        await wait_for(lambda: _all_finished(queue, ids), timeout_s=60)
    finally:
        await worker.close()
    completed = [o.cabinet for o in outcomes if o.outcome == "completed"]
    assert sorted(completed) == sorted(map(str, ids))
    # The first cabinet's first run deferred, and the slot ran the others before it came back.
    first = str(ids[0])
    mine = [k for k, o in enumerate(outcomes) if o.cabinet == first]
    assert outcomes[mine[0]].outcome == "deferred" and len(mine) >= 2
    assert any(o.cabinet != first for o in outcomes[mine[0] + 1 : mine[1]])
    # No slot slept through a window: at most one nap under the deferral threshold per request
    # (sleeping through the first cabinet's closed window alone would be 2 s).
    nap_s = runtime.settings.defer_threshold_ms * SCALE / 1000
    slept = queue_value(SLOT_SLEEP, "rnp-finance-sync") - sleep_before
    assert slept <= emulator.counters.total("requests") * nap_s < 2.0
    for cabinet_id, seller in zip(ids, SELLERS, strict=True):
        assert await stored_finance(runtime, cabinet_id) == finance_rows(emulator, seller)
    # A 429 here can only come from the machine's jitter (a request held up past the emulator's
    # grace); whatever their number, they cost no attempt.
    assert all(o.outcome != "failed" for o in outcomes)


async def _all_finished(queue: Any, ids: list[int]) -> bool:
    return all([await queue.job(str(i)) is None for i in ids])


async def test_short_queue_over_its_ceiling_waits_its_retry_after_without_spending_attempts(
    runtime_factory: Callable[..., Any], emulator: Emulator
) -> None:
    runtime: Runtime = await runtime_factory(job_attempts=1)
    cabinet = await runtime.store.cabinets.add("slots", emulator.token(SELLERS[0]), SELLERS[0])
    client = runtime.client(cabinet)
    from wbsync.wb.methods import TARIFFS_ACCEPTANCE_COEFFICIENTS as COEFFICIENTS

    scope = client.scope(COEFFICIENTS)
    retries = sample("wbsync_job_retries_total", queue="booking-slot-monitor", reason="rate_limit")
    outcomes: list[Outcome] = []
    [worker] = build_workers(runtime, ["booking-slot-monitor"], on_outcome=outcomes.append)
    await worker.start()
    try:
        # Far past the ceiling, and closed until the test opens it, however slow the machine.
        await runtime.limiter.penalize(scope, runtime.limiter.ceiling_ms(scope) + 60_000)
        queue = runtime.queue("booking-slot-monitor")
        await queue.enqueue(str(cabinet.id))
        await wait_for(lambda: any(o.outcome == "deferred" for o in outcomes))
        # The window opens (a missing bucket is full) and the delayed job is due now.
        await runtime.redis.delete(keys.bucket_key(runtime.settings.redis_prefix, scope))
        await queue.promote_delayed()
        await wait_for(lambda: _finished(queue, str(cabinet.id)))
    finally:
        await worker.close()
    # One attempt only, yet no failure: the window was waited for in delayed, then the job ran.
    assert [o.outcome for o in outcomes] == ["deferred", "completed"]
    assert (
        sample("wbsync_job_retries_total", queue="booking-slot-monitor", reason="rate_limit")
        == retries + 1
    )
    assert emulator.counters.total("requests") >= 1
    assert emulator.counters.total("rate_limited") == 0


def test_demo_json_stores_the_emulators_rows_and_reports_any_429(
    tmp_path: Path, prefix: str, redis_url: str
) -> None:
    env = {**os.environ, "WBSYNC_REDIS_URL": redis_url, "WBSYNC_REDIS_PREFIX": prefix}
    done = subprocess.run(
        [sys.executable, "-m", "wbsync", "demo", "--json", "--cabinets", "3"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    summary = json.loads(done.stdout)
    # A 429 means a request reached the emulator more than its grace (100 ms) after our limiter
    # granted it: an overloaded machine can stall a process that long. The client waits the
    # window out (the rows below are still exact) and the demo says so with exit status 1; any
    # other complaint is a failure.
    limited = summary["upstream_429_total"]
    assert done.returncode == (1 if limited else 0), done.stderr
    assert done.stderr.strip() == (f"error: {limited} upstream 429s" if limited else "")
    assert set(summary["queues"]) == {
        "rnp-finance-sync",
        "rnp-sections-sync",
        "rnp-ads-sync",
        "digitization-sync",
        "inventory-sync",
        "autobidder-sync",
        "catalog-sync",
        "pricing-bulk",
        "booking-slot-monitor",
        "wb-tariffs-sync",
        "paid-storage-sync",
        "warehouse-remains-sync",
        "acceptance-report-sync",
    }
    for row in summary["queues"].values():
        assert row["rows_stored"] == row["rows_expected"] > 0
    # The client counted every 429 the emulator sent.
    assert sum(row["upstream_429"] for row in summary["queues"].values()) == limited
    assert summary["failed_runs"] == 0
    assert summary["queues"]["rnp-finance-sync"]["deferrals"] > 0
    assert 0 < summary["lower_bound_s"] <= summary["makespan_s"]
    log = (tmp_path / "wbsync-demo.log").read_text()
    job_lines = [json.loads(line) for line in log.splitlines() if '"job_id"' in line]
    assert job_lines and all(line.get("correlation_id") for line in job_lines)
    # The demo cabinets' WB tokens are JWTs: no piece of one may reach a log line.
    assert not re.search(r"eyJ[\w-]{8,}", log)


def _last_live_rows(screen: str, queues: list[str]) -> dict[str, int]:
    """Each queue's "rows stored" cell in the last table the live view drew."""
    rows = {}
    for line in screen.splitlines():
        cells = [cell.strip() for cell in line.split("│")]
        if len(cells) > 2 and cells[1] in queues:
            rows[cells[1]] = int(cells[5])  # queue, done, deferred, live, rows stored
    return rows


async def test_the_demos_live_table_ends_with_the_summarys_stored_rows(
    tmp_path: Path, prefix: str, redis_url: str
) -> None:
    """The live view counts stored rows as the summary does, not rows written: the autobidder
    writes the bids it changes a second time."""
    screen = io.StringIO()
    summary = await run_demo(
        Settings(redis_url=redis_url, redis_prefix=prefix),
        cabinets=1,
        database=tmp_path / "demo.db",
        progress=Console(file=screen, force_terminal=True, color_system=None, width=200),
    )
    stored = {name: row["rows_stored"] for name, row in summary["queues"].items()}
    assert stored["autobidder-sync"] > 0
    assert _last_live_rows(screen.getvalue(), list(stored)) == stored


async def test_a_demo_past_its_time_says_which_queues_were_not_done(
    tmp_path: Path, prefix: str, redis_url: str
) -> None:
    """The finance pull needs several of WB's one-a-minute windows (0.6 s each here): a demo
    given 0.3 s stops, naming it with what its runs came to."""
    with pytest.raises(WbSyncError, match=r"did not finish within 0\.3 s; not done: ") as caught:
        await run_demo(
            Settings(redis_url=redis_url, redis_prefix=prefix),
            cabinets=1,
            database=tmp_path / "demo.db",
            progress=None,
            timeout_s=0.3,
        )
    assert re.search(
        r"rnp-finance-sync 0/1 completed \((deferred \d+|no run ended)\)", str(caught.value)
    )


class _CountsLosingACancel:
    """A queue's job counts as redis-py reads them on Python 3.11 when the reader is cancelled
    as a command's send completes: ``asyncio.wait_for`` loses the cancel and the counts come
    back. ``entered`` is set once a read is under way; the read ends at ``release``."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.lost = 0

    async def counts(self) -> dict[str, int]:
        self.entered.set()
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.lost += 1
        return dict.fromkeys(("active", "waiting", "delayed", "prioritized"), 0)


async def test_the_demos_live_table_stops_while_a_refresh_is_under_way(tmp_path: Path) -> None:
    """The live view's refresh loop is asked to stop, not cancelled: a refresh under way as the
    demo ends finishes, the loop ends, and the final table is drawn. Cancelled, a refresh whose
    Redis read lost the cancel went on refreshing forever (the demo never returned)."""
    queue = _CountsLosingACancel()
    ended = asyncio.Event()
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, color_system=None, width=200)
    async with Database(f"sqlite+aiosqlite:///{tmp_path / 'progress.db'}") as db:
        await db.migrate()
        state = Tally(cabinets=1, queues=(FINANCE,))
        store = Store(db, secret_key=None)
        queues: dict[str, Any] = {FINANCE: queue}

        async def show() -> None:
            async with Progress(state, queues, store, console=console):
                await ended.wait()

        showing = asyncio.ensure_future(show())
        await asyncio.wait_for(queue.entered.wait(), timeout=60)  # a refresh is under way
        ended.set()
        await asyncio.sleep(0)  # one turn of the loop: the block ends, its exit begins
        queue.release.set()
        await asyncio.wait_for(showing, timeout=60)
    assert queue.lost == 0
    assert _last_live_rows(screen.getvalue(), [FINANCE]) == {FINANCE: 0}


async def test_a_scheduled_job_tells_each_page_on_the_change_stream_and_its_lag_once(
    runtime_factory: Callable[..., Any], emulator: Emulator, redis: Any, prefix: str
) -> None:
    """The events and the lag go with the cursor saves (``wbsync.composition.workers``): one
    stream entry per page that changed rows, naming the cabinet and the page's last sequence
    number, and one lag sample for the run, however many pages and deferrals it took. A run that
    saves nothing (its cabinet is inactive) stores its lag on its own."""
    runtime: Runtime = await runtime_factory()
    seller = SELLERS[0]
    cabinet = await runtime.store.cabinets.add("stream", emulator.token(seller), seller)
    idle = await runtime.store.cabinets.add("idle", emulator.token(SELLERS[1]), SELLERS[1])
    await runtime.store.cabinets.deactivate(idle.id)
    outcomes: list[Outcome] = []
    [worker] = build_workers(runtime, [FINANCE], concurrency=1, on_outcome=outcomes.append)
    await worker.start()
    try:
        due = int(clock.now_ms()) - 1500
        await runtime.queue(FINANCE).enqueue_many([str(cabinet.id), str(idle.id)], {DUE_FIELD: due})
        await wait_for(lambda: sum(o.outcome == "completed" for o in outcomes) == 2, timeout_s=60)
    finally:
        await worker.close()
    entries: Any = await redis.xrange(keys.change_stream_key(prefix))
    rows = len(finance_rows(emulator, seller))
    pages = -(-rows // 6)  # pages of 6 rows
    assert len(entries) == pages and pages > 1
    assert {fields["cabinet"] for _id, fields in entries} == {str(cabinet.id)}
    seqs = [int(fields["last_seq"]) for _id, fields in entries]
    assert seqs == sorted(seqs) and sum(int(f["rows"]) for _id, f in entries) == rows
    # Sent with the cursor saves, the entries are numbered and chain like any other's.
    assert [int(f["prev_seq"]) for _id, f in entries] == [0, *seqs[:-1]]
    assert [int(f["stream_seq"]) for _id, f in entries] == list(range(1, pages + 1))
    lags = await redis.lrange(keys.lag_key(prefix, FINANCE), 0, -1)
    assert len(lags) == 2 and all(int(lag.partition(":")[2]) >= 1500 for lag in lags)
