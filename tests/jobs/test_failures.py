"""Failure semantics of the job layer on the real stack: the failure budget, cursors after a
failed run, the autobidder's resume, lock-checked writes and failed jobs coming back."""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr, ValidationError
from redis.asyncio import Redis
from sqlalchemy import update
from sqlalchemy.engine import make_url

from tests.support.databases import POSTGRES_ENV, TEST_SECRET_KEY, DatabaseFactory
from tests.support.relay import Relay
from tests.support.runtimes import runtime_maker
from tests.support.waiting import wait_for
from wbsync.composition.workers import build_workers
from wbsync.config import Settings
from wbsync.demo.expected import expected_datasets
from wbsync.emulator import Emulator, EmulatorConfig, SellerSizes, running_emulator
from wbsync.emulator.config import FaultRule
from wbsync.errors import (
    FailureBudgetExhausted,
    JobLockLostError,
    WbBadResponseError,
    WbServerError,
)
from wbsync.jobs.failures import FailureBudget, FailurePolicy, backoff_ms
from wbsync.jobs.fanout import FanOut
from wbsync.jobs.handle import JobHandle
from wbsync.jobs.leader import FanOutLeases
from wbsync.jobs.model import Outcome
from wbsync.jobs.queue import SyncQueue
from wbsync.jobs.views import JobView
from wbsync.jobs.worker import SyncWorker
from wbsync.observability.metrics import sample
from wbsync.redis.keys import bullmq_queue_name
from wbsync.redis.redis_server import EmbeddedRedis
from wbsync.shared.runtime import Runtime
from wbsync.store import ChangeEvent
from wbsync.store.datasets import DATASETS
from wbsync.store.db import Database
from wbsync.store.ledger import PriceTarget
from wbsync.store.schema import sync_cursors
from wbsync.syncs import SYNCS, BidRule, SyncInput, SyncOptions, SyncPage, run_sync
from wbsync.syncs.pricing import upload_prices
from wbsync.system import clock
from wbsync.wb.client import WbClient

SCALE = 0.005  # WB's minute is 300 ms
# The session's migrated databases are shared: every test that uses them uses one key.
SECRET = TEST_SECRET_KEY
SELLER = "0000000f-0000-4000-8000-000000000000"


@pytest.fixture
async def emulator() -> AsyncIterator[Emulator]:
    config = EmulatorConfig(
        serve_disabled_in_docs=True,  # the booking monitor polls acceptance coefficients
        time_scale=SCALE,
        anchor_date=clock.wb_today(),
        sizes=SellerSizes(report_rows=12, products=40, campaigns=200),
        page_size={"finance.detailed_report": 6},
    )
    async with running_emulator(config) as emu:
        yield emu


@pytest.fixture
async def runtime_factory(
    redis_url: str, prefix: str, database_factory: DatabaseFactory, emulator: Emulator
) -> AsyncIterator[Callable[..., Any]]:
    # A database of this test's own: the key-check row binds a database to one secret key.
    database_url = await database_factory.new_migrated_url("sqlite")
    async with runtime_maker(
        redis_url, prefix, database_url, emulator.base_url, time_scale=SCALE
    ) as make:
        yield make


def _name() -> str:
    """A cabinet name of its own (the tests share one migrated database)."""
    return f"cab-{uuid.uuid4().hex[:8]}"


async def _run_until_gone(runtime: Runtime, queue_name: str, cabinet_id: int) -> list[str]:
    """Run ``queue_name``'s worker on the cabinet's job until it leaves the live states."""
    outcomes: list[Outcome] = []
    [worker] = build_workers(runtime, [queue_name], concurrency=1, on_outcome=outcomes.append)
    queue = runtime.queue(queue_name)
    await worker.start()
    try:
        await queue.enqueue(str(cabinet_id))
        await wait_for(lambda: _not_live(queue, str(cabinet_id)))
    finally:
        await worker.close()
    return [o.outcome for o in outcomes]


def _answered(emulator: Emulator) -> int:
    """Requests WB answered other than with a 429."""
    return emulator.counters.total("requests") - emulator.counters.total("rate_limited")


async def _not_live(queue: SyncQueue, cabinet: str) -> bool:
    job = await queue.job(cabinet)
    return job is None or job.state in ("completed", "failed")


def test_the_retry_backoff_doubles_up_to_its_ceiling() -> None:
    waits = [backoff_ms(n, base_ms=1000, max_ms=60_000) for n in range(1, 10)]
    assert waits == [1000, 2000, 4000, 8000, 16_000, 32_000, 60_000, 60_000, 60_000]
    with pytest.raises(ValidationError, match="WBSYNC_INFRA_RETRY_MS"):
        Settings(infra_retry_ms=5000, infra_retry_max_ms=4000)


def test_the_budget_counts_each_failure_once_and_raises_at_its_limit() -> None:
    budget = FailureBudget(limit=2)
    first = WbServerError("WB failed to answer", method="m", status=502)
    budget.spend(first)
    budget.spend(first)  # reported by the client, then seen escaping the processor: one failure
    assert budget.spent == 1
    with pytest.raises(FailureBudgetExhausted, match="method=m, status=503") as raised:
        budget.spend(WbServerError("WB failed to answer", method="m", status=503))
    assert raised.value.budget == 2 and raised.value.status == 503
    budget.reset()
    assert (budget.spent, budget.last) == (0, None)


@pytest.mark.parametrize(
    ("queue", "method", "status"),
    [
        # One request a minute: every failure's retry waits a window, so the job defers.
        ("rnp-finance-sync", "finance.detailed_report", 502),
        # A short queue on a fast method: the client's own retries give up, the job retries.
        ("booking-slot-monitor", "tariffs.acceptance_coefficients", 503),
    ],
)
async def test_a_method_that_always_fails_costs_exactly_the_budget_then_fails_the_job(
    runtime_factory: Callable[..., Any], emulator: Emulator, queue: str, method: str, status: int
) -> None:
    runtime: Runtime = await runtime_factory()
    budget = runtime.settings.job_failure_budget
    cabinet = await runtime.store.cabinets.add(_name(), emulator.token(SELLER), SELLER)
    emulator.set_faults([FaultRule(kind="error", method=method, status=status)])
    exhausted = sample("wbsync_job_failure_budget_exhausted_total", queue=queue)

    outcomes = await _run_until_gone(runtime, queue, cabinet.id)

    # Every answer WB gave was the failure, bar a 429 a busy machine's jitter may cause (a
    # request that reached WB a little early): those are waited out, not spent.
    assert _answered(emulator) == budget == 8
    assert outcomes[-1] == "failed" and outcomes.count("failed") == 1
    assert "deferred" in outcomes  # the count survived at least one deferral
    job = await runtime.queue(queue).job(str(cabinet.id))
    assert job is not None and job.state == "failed" and job.failed_reason is not None
    assert f"method={method}" in job.failed_reason
    assert f"status={status}" in job.failed_reason
    assert f"{budget} upstream failures" in job.failed_reason
    assert sample("wbsync_job_failure_budget_exhausted_total", queue=queue) == exhausted + 1


def _requests(emulator: Emulator, method: str) -> int:
    return sum(1 for e in emulator.counters.journal if e["method"] == method)


@pytest.mark.parametrize("kind", ["redirect", "error_body"])
async def test_a_reply_of_the_wrong_shape_costs_exactly_the_budget_and_fails_once(
    runtime_factory: Callable[..., Any],
    emulator: Emulator,
    caplog: pytest.LogCaptureFixture,
    kind: str,
) -> None:
    # A 307, or a 200 whose body is WB's error object instead of the report's list.
    runtime: Runtime = await runtime_factory()
    budget = runtime.settings.job_failure_budget
    cabinet = await runtime.store.cabinets.add(_name(), emulator.token(SELLER), SELLER)
    emulator.set_faults([FaultRule(kind=kind, method="finance.detailed_report")])  # type: ignore[arg-type]

    with caplog.at_level(logging.ERROR, logger="wbsync.jobs.failures"):
        outcomes = await _run_until_gone(runtime, "rnp-finance-sync", cabinet.id)

    assert _answered(emulator) == budget == 8
    assert outcomes[-1] == "failed" and outcomes.count("failed") == 1
    ended = [r for r in caplog.records if "failed for good" in r.getMessage()]
    assert len(ended) == 1 and ended[0].exc_info is None
    job = await runtime.queue("rnp-finance-sync").job(str(cabinet.id))
    assert job is not None and job.state == "failed" and job.attempts_made <= 1
    assert f"{budget} upstream failures" in (job.failed_reason or "")


@pytest.mark.parametrize("kind", ["redirect", "error_body"])
async def test_a_bid_update_wb_did_not_apply_is_never_recorded_as_sent(
    runtime_factory: Callable[..., Any], emulator: Emulator, kind: str
) -> None:
    runtime: Runtime = await runtime_factory(job_failure_budget=3)
    cabinet = await runtime.store.cabinets.add(_name(), emulator.token(SELLER), SELLER)
    bids_before = dict(emulator.state.seller(SELLER).bids)
    assert bids_before
    # A Personal token writes bids with v1.
    emulator.set_faults([FaultRule(kind=kind, method="promotion.set_bids_v1")])  # type: ignore[arg-type]

    outcomes = await _run_until_gone(runtime, "autobidder-sync", cabinet.id)

    assert outcomes[-1] == "failed" and outcomes.count("failed") == 1
    assert "completed" not in outcomes
    assert await runtime.store.ledger.sent_bids(cabinet.id, limit=10_000) == []
    # Each try sent one batch WB did not apply: the budget's worth of them, no more.
    assert _requests(emulator, "promotion.set_bids_v1") == 3
    assert dict(emulator.state.seller(SELLER).bids) == bids_before


async def test_a_queues_own_failure_budget_beats_the_global_one(
    runtime_factory: Callable[..., Any], emulator: Emulator
) -> None:
    # WBSYNC_QUEUE_FAILURE_BUDGET names the autobidder's queue: its jobs stop at 2 failures,
    # other queues keep WBSYNC_JOB_FAILURE_BUDGET's 5.
    runtime: Runtime = await runtime_factory(
        job_failure_budget=5, queue_failure_budget={"autobidder-sync": 2}
    )
    cabinet = await runtime.store.cabinets.add(_name(), emulator.token(SELLER), SELLER)
    emulator.set_faults([FaultRule(kind="error_body", method="promotion.set_bids_v1")])

    outcomes = await _run_until_gone(runtime, "autobidder-sync", cabinet.id)

    assert outcomes[-1] == "failed" and outcomes.count("failed") == 1
    assert _requests(emulator, "promotion.set_bids_v1") == 2


async def test_an_unusable_reply_found_outside_the_client_ends_the_job_at_its_budget(
    redis_url: str, prefix: str
) -> None:
    # A sync that finds a reply unusable itself (the client never reported it): the policy
    # counts it, and the failure that reaches the budget ends the job at once, not through
    # BullMQ's attempts.
    queue = SyncQueue("shape", redis_url=redis_url, prefix=f"{prefix}:q")
    policy = FailurePolicy(budget=3, retry_ms=1, retry_max_ms=1)
    runs: list[int] = []
    outcomes: list[Outcome] = []

    async def process(job: JobHandle) -> None:
        runs.append(job.attempts_made)
        raise WbBadResponseError("expected a list of objects at body", method="m", status=200)

    worker = SyncWorker(
        "shape",
        policy.wrap(process),
        redis_url=redis_url,
        prefix=f"{prefix}:q",
        on_outcome=outcomes.append,
    )
    await worker.start()
    try:
        await queue.enqueue("c1")
        await wait_for(lambda: _not_live(queue, "c1"))
        job = await queue.job("c1")
    finally:
        await worker.close()
        await queue.close()
    assert job is not None and job.state == "failed"
    assert "3 upstream failures" in (job.failed_reason or "")
    assert len(runs) == 3 and set(runs) == {0}  # one attempt, three tries
    assert [o.outcome for o in outcomes].count("failed") == 1


async def test_a_new_run_after_a_failed_one_starts_over_and_uploads_the_new_targets(
    runtime_factory: Callable[..., Any], emulator: Emulator
) -> None:
    runtime: Runtime = await runtime_factory(job_failure_budget=2)
    ledger = runtime.store.ledger
    cabinet = await runtime.store.cabinets.add(_name(), emulator.token(SELLER), SELLER)
    goods = emulator.expected(SELLER, "prices.goods_list")
    await ledger.set_price_targets(cabinet.id, [PriceTarget(g["nmID"], 501, 5) for g in goods[:3]])
    # The uploads go through, then the price list fails: the run dies past {"uploaded": true}.
    emulator.set_faults([FaultRule(kind="error", method="prices.goods_list", status=500)])
    assert (await _run_until_gone(runtime, "pricing-bulk", cabinet.id))[-1] == "failed"
    failed = await runtime.queue("pricing-bulk").job(str(cabinet.id))
    assert failed is not None and failed.data["cursor"]["uploaded"] is True

    emulator.set_faults([])
    await ledger.set_price_targets(cabinet.id, [PriceTarget(g["nmID"], 777, 7) for g in goods[3:5]])
    assert await _run_until_gone(runtime, "pricing-bulk", cabinet.id) == ["completed"]

    uploads = await ledger.price_uploads(cabinet.id)
    assert sorted(u.items_count for u in uploads) == [2, 3]
    assert await ledger.price_targets(cabinet.id) == []
    stored = {row["nmID"]: row for row in await runtime.store.fetch("prices", cabinet.id)}
    assert all(stored[g["nmID"]]["sizes"][0]["price"] == 777 for g in goods[3:5])


async def test_a_price_upload_sent_before_a_crash_is_not_uploaded_again(
    runtime_factory: Callable[..., Any], emulator: Emulator
) -> None:
    runtime: Runtime = await runtime_factory()
    ledger = runtime.store.ledger
    cabinet = await runtime.store.cabinets.add(_name(), emulator.token(SELLER), SELLER)
    goods = emulator.expected(SELLER, "prices.goods_list")
    targets = [PriceTarget(g["nmID"], 640, 3) for g in goods[:4]]
    await ledger.set_price_targets(cabinet.id, targets)
    items = [{"nmID": t.nm_id, "price": t.price, "discount": t.discount} for t in targets]
    # What the sync does up to the crash: intent recorded, upload sent and taken by WB.
    await ledger.begin_price_upload(cabinet.id, {"data": items})
    async with runtime.client(cabinet) as client:
        task_id = await upload_prices(client, items)

    assert await _run_until_gone(runtime, "pricing-bulk", cabinet.id) == ["completed"]

    assert [u["id"] for u in emulator.expected(SELLER, "prices.upload_task")] == [task_id]
    [upload] = await ledger.price_uploads(cabinet.id)
    assert (upload.task_id, upload.items_count) == (task_id, 4)
    assert await ledger.price_targets(cabinet.id) == []


class _Killed(Exception):
    pass


async def test_the_autobidder_killed_mid_apply_moves_every_bid_exactly_once(
    runtime_factory: Callable[..., Any], emulator: Emulator
) -> None:
    runtime: Runtime = await runtime_factory()
    store = runtime.store
    cabinet = await store.cabinets.add(_name(), emulator.token(SELLER), SELLER)
    sync = SYNCS["autobidder-sync"]
    # Every bid reaches the target in one step: once moved, a bid needs no change any more.
    options = SyncOptions(bid_rule=BidRule(target=350, step=50))
    before: dict[tuple[Any, ...], int] = {}
    saved: list[Any] = []

    async def kill_after_first_batch(page: SyncPage, _event: ChangeEvent | None) -> None:
        saved.append(page.cursor)
        if page.cursor.get("applying") and not before:
            # All bids read, none changed yet: what the rule should move, once.
            rows = await store.fetch("bids", cabinet.id)
            before.update({(r["advert_id"], r["nm_id"], r["norm_query"]): r["bid"] for r in rows})
        if page.cursor.get("applying") and page.dataset == "bids":
            raise _Killed()  # after the first batch of changes was sent, recorded and stored

    async def run(cursor: Any, on_page: Any) -> None:
        async with WbClient(
            "bids", emulator.token(SELLER), runtime.limiter, options=runtime.client_options
        ) as client:
            inp = SyncInput(client, store, cabinet.id, cursor, emulator.config.anchor_date, options)
            await run_sync(sync, inp, on_page=on_page)

    with pytest.raises(_Killed):
        await run(None, kill_after_first_batch)
    await run(saved[-1], None)

    wanted = {
        key: options.bid_rule.next_bid(bid)
        for key, bid in before.items()
        if options.bid_rule.next_bid(bid) != bid
    }
    assert len(wanted) > 100  # more than one batch of 100: the kill fell between two batches
    sent = await store.ledger.sent_bids(cabinet.id, limit=10_000)
    keys = Counter((s.advert_id, s.nm_id, s.norm_query) for s in sent)
    assert max(keys.values()) == 1
    assert {(s.advert_id, s.nm_id, s.norm_query): s.new_bid for s in sent} == wanted
    stored = {
        (r["advert_id"], r["nm_id"], r["norm_query"]): r["bid"]
        for r in await store.fetch("bids", cabinet.id)
    }
    assert {k: stored[k] for k in wanted} == wanted


@pytest.mark.parametrize(
    ("queue_name", "cursor", "said"),
    [
        ("rnp-finance-sync", {"rrdId": "abc"}, "cursor field rrdId must be an integer, got 'abc'"),
        ("rnp-finance-sync", "abc", "cursor must be a JSON object, got 'abc'"),
        ("rnp-sections-sync", {"phase": 7}, "cursor field phase must be 'orders' or 'sales'"),
    ],
)
@pytest.mark.parametrize("kept_in", ["job", "cursors table"])
async def test_a_cursor_wbsync_did_not_write_fails_the_job_once_before_any_request(
    runtime_factory: Callable[..., Any],
    emulator: Emulator,
    queue_name: str,
    cursor: Any,
    said: str,
    kept_in: str,
) -> None:
    runtime: Runtime = await runtime_factory()
    cabinet = await runtime.store.cabinets.add(_name(), emulator.token(SELLER), SELLER)
    if kept_in == "cursors table":  # a hand edit of the row the last run saved
        await runtime.store.cursors.save(cabinet.id, queue_name, {})
        async with runtime.database.transaction() as conn:
            row = sync_cursors.c.cabinet_id == cabinet.id
            await conn.execute(update(sync_cursors).where(row).values(cursor=cursor))
    sent = emulator.counters.total(seller=SELLER)
    data = {"cursor": cursor} if kept_in == "job" else None
    job = await _run_once(runtime, queue_name, cabinet.id, data)
    assert job.state == "failed"
    assert job.failed_reason is not None and job.failed_reason.startswith(f"{queue_name}: {said}")
    assert job.attempts_made == 1  # at once: none of the attempts left was spent on it
    assert emulator.counters.total(seller=SELLER) == sent  # not followed: nothing asked of WB
    [run] = await runtime.store.runs.of_cabinets([cabinet.id])
    assert run.sync == queue_name and run.failure_reason is not None
    assert said in run.failure_reason


@pytest.mark.parametrize(
    ("data", "said"),
    [
        ({"failures": "many"}, "job data 'failures' must be an integer >= 0"),
        ({"pages": -1}, "job data 'pages' must be an integer >= 0"),
        ({"deferrals": 1.5}, "job data 'deferrals' must be an integer >= 0"),
    ],
)
async def test_a_job_whose_counts_are_not_counts_fails_once_before_any_request(
    runtime_factory: Callable[..., Any], emulator: Emulator, data: dict[str, Any], said: str
) -> None:
    runtime: Runtime = await runtime_factory()
    cabinet = await runtime.store.cabinets.add(_name(), emulator.token(SELLER), SELLER)
    sent = emulator.counters.total(seller=SELLER)
    job = await _run_once(runtime, "rnp-finance-sync", cabinet.id, data)
    assert job.state == "failed" and job.failed_reason is not None
    assert job.failed_reason.startswith(said)
    assert job.attempts_made == 1
    assert emulator.counters.total(seller=SELLER) == sent


async def _run_once(
    runtime: Runtime, queue_name: str, cabinet_id: int, data: dict[str, Any] | None
) -> JobView:
    """Add the cabinet's job with ``data`` and run the queue's worker until the job is done."""
    queue = runtime.queue(queue_name)
    [worker] = build_workers(runtime, [queue_name], concurrency=1)
    await worker.start()
    try:
        await queue.enqueue(str(cabinet_id), data)
        await wait_for(lambda: _not_live(queue, str(cabinet_id)))
    finally:
        await worker.close()
    job = await queue.job(str(cabinet_id))
    assert job is not None
    return job


async def test_a_worker_whose_lock_was_taken_over_cannot_write_the_job(
    redis_url: str, prefix: str, redis: Redis
) -> None:
    queue = SyncQueue("locks", redis_url=redis_url, prefix=f"{prefix}:q")
    results: dict[str, Any] = {}

    async def process(job: JobHandle) -> None:
        await job.save_cursor({"page": 1})
        # Another worker takes the job over (as after a stall): the lock is now its token.
        await redis.set(f"{prefix}:q:{bullmq_queue_name('locks')}:{job.id}:lock", "the-new-owner")
        try:
            await job.save_cursor({"page": 2})
        except JobLockLostError as exc:
            results["save"] = exc
        try:
            await job.defer(1000, note={"deferrals": 1})
        except JobLockLostError as exc:
            results["defer"] = exc

    worker = SyncWorker("locks", process, redis_url=redis_url, prefix=f"{prefix}:q")
    await worker.start()
    try:
        await queue.enqueue("c1")
        await wait_for(lambda: len(results) == 2)
        job = await queue.job("c1")
        assert job is not None
        assert job.data["cursor"] == {"page": 1}  # neither write reached the job
        assert "deferrals" not in job.data
        assert job.state == "active"  # the deferral moved nothing: the job is the owner's
    finally:
        await worker.close()
        await queue.close()
    assert set(results) == {"save", "defer"}


async def test_a_deferral_stores_data_and_timestamp_with_the_move(
    redis_url: str, prefix: str, redis: Redis
) -> None:
    queue = SyncQueue("atomic", redis_url=redis_url, prefix=f"{prefix}:q")
    deferred_at: list[float] = []

    async def process(job: JobHandle) -> None:
        if job.data.get("deferrals"):
            return
        deferred_at.append(clock.now_ms())
        await job.defer(60_000, note={"deferrals": 1})

    worker = SyncWorker("atomic", process, redis_url=redis_url, prefix=f"{prefix}:q")
    await worker.start()
    try:
        await queue.enqueue("c1")
        await wait_for(lambda: _state(queue, "c1", "delayed"))
        job = await queue.job("c1")
        fields = await redis.hgetall(f"{prefix}:q:{bullmq_queue_name('atomic')}:atomic.c1")
    finally:
        await worker.close()
        await queue.close()
    assert job is not None and job.run_at_ms is not None
    assert job.data["deferrals"] == 1 and job.data["resume_at_ms"] == job.run_at_ms
    assert job.attempts_made == 0
    # timestamp + delay is the resume time, as a dashboard reading BullMQ's fields shows it.
    assert int(fields["timestamp"]) >= int(deferred_at[0])  # the move's time, not the add's
    assert abs(int(fields["timestamp"]) + int(fields["delay"]) - job.run_at_ms) <= 1


async def _state(queue: SyncQueue, cabinet: str, state: str) -> bool:
    job = await queue.job(cabinet)
    return job is not None and job.state == state


async def test_the_fan_out_enqueues_a_failed_cabinet_again_after_the_retry_interval(
    redis_url: str, redis: Redis, prefix: str
) -> None:
    queue = SyncQueue("again", redis_url=redis_url, prefix=f"{prefix}:q", attempts=1)
    runs: list[float] = []

    async def process(job: JobHandle) -> None:
        runs.append(clock.now_ms())
        if len(runs) == 1:
            raise RuntimeError("first run fails")

    async def active() -> list[str]:
        return ["c1"]

    worker = SyncWorker("again", process, redis_url=redis_url, prefix=f"{prefix}:q")
    # The queue's own interval is an hour: only the failed-job retry can bring c1 back.
    fanout = FanOut({"again": queue}, active, {"again": 3600.0}, failed_retry_s=0.4)
    stop = asyncio.Event()
    await worker.start()
    leases = FanOutLeases(redis, prefix=prefix, lease_ms=60_000)
    task = asyncio.create_task(fanout.run(stop, leases))
    try:
        await wait_for(lambda: len(runs) == 2)
    finally:
        stop.set()
        await task
        await worker.close()
        await queue.close()
    assert runs[1] - runs[0] >= 400


async def _stored_any(runtime: Runtime, ids: list[int]) -> bool:
    return sum([await runtime.store.count("finance_report", i) for i in ids]) > 0


async def _infra_retries(queue: SyncQueue, ids: list[int], at_least: int) -> bool:
    jobs = [await queue.job(str(i)) for i in ids]
    return any(j is not None and j.data.get("infra_retries", 0) >= at_least for j in jobs)


async def _each_infra_retried(queue: SyncQueue, ids: list[int], at_least: int) -> bool:
    jobs = [await queue.job(str(i)) for i in ids]
    return all(j is not None and j.data.get("infra_retries", 0) >= at_least for j in jobs)


async def _all_gone(queue: SyncQueue, ids: list[int]) -> bool:
    return all([await queue.job(str(i)) is None for i in ids])


async def test_a_database_outage_delays_jobs_without_spending_budget_or_attempts(
    redis_url: str, prefix: str, database_factory: DatabaseFactory, emulator: Emulator
) -> None:
    if not os.environ.get(POSTGRES_ENV):
        pytest.skip(f"set {POSTGRES_ENV} to cut a real PostgreSQL away mid-run")
    url = make_url(await database_factory.new_url("postgresql"))
    async with Database(url.render_as_string(hide_password=False)) as db:
        await db.migrate()
    proxy = Relay(url.host or "127.0.0.1", url.port or 5432)
    await proxy.start()
    settings = Settings(
        redis_url=redis_url,
        redis_prefix=prefix,
        database_url=url.set(port=proxy.port).render_as_string(hide_password=False),
        secret_key=SecretStr(SECRET),
        wb_base_url=emulator.base_url,
        time_scale=SCALE,
    )
    runtime = await Runtime(settings, redis_url=redis_url).start()
    sellers = [f"0000000{i}-0000-4000-8000-00000000000d" for i in range(1, 4)]
    name = "rnp-finance-sync"
    retried = sample("wbsync_job_retries_total", queue=name, reason="infrastructure")
    outcomes: list[Outcome] = []
    [worker] = build_workers(runtime, [name], concurrency=3, on_outcome=outcomes.append)
    try:
        ids = [
            (await runtime.store.cabinets.add(_name(), emulator.token(s), s)).id for s in sellers
        ]
        await worker.start()
        queue = runtime.queue(name)
        await queue.enqueue_many([str(i) for i in ids])
        await wait_for(lambda: _stored_any(runtime, ids))
        await proxy.cut()  # the database is gone mid-run ...
        # ... until a job has backed off 8 times: 5 ms doubling to 300 ms, about 1.2 s.
        await wait_for(lambda: _infra_retries(queue, ids, 8))
        await proxy.start()
        await wait_for(lambda: _all_gone(queue, ids))
        spec = DATASETS["finance_report"]
        for cabinet_id, seller in zip(ids, sellers, strict=True):
            stored = await runtime.store.fetch("finance_report", cabinet_id)
            rows = expected_datasets(
                emulator, seller, today=clock.wb_today(), options=SyncOptions()
            )
            expected = rows["finance_report"]
            assert {spec.row_key(r): r for r in stored} == {spec.row_key(r): r for r in expected}
    finally:
        await worker.close()
        async for key in runtime.redis.scan_iter(match=f"{prefix}*"):
            await runtime.redis.delete(key)
        await runtime.aclose()
        await proxy.cut()
    assert sample("wbsync_job_retries_total", queue=name, reason="infrastructure") >= retried + 8
    # No attempt was spent (a failed attempt is a "failed" outcome even when retried).
    assert [o.outcome for o in outcomes].count("completed") == len(ids)
    assert "failed" not in [o.outcome for o in outcomes]


async def test_a_database_refusing_connections_costs_the_jobs_no_attempt(
    redis_url: str, prefix: str, database_factory: DatabaseFactory, emulator: Emulator
) -> None:
    """PostgreSQL refusing new connections (ALLOW_CONNECTIONS false, its backends terminated)
    answers 55000 or 57P01 as a plain DBAPIError: an infrastructure failure, no attempt spent."""
    if not os.environ.get(POSTGRES_ENV):
        pytest.skip(f"set {POSTGRES_ENV} to make a real PostgreSQL refuse connections")
    url = await database_factory.new_url("postgresql")
    name = make_url(url).database
    async with runtime_maker(
        redis_url, prefix, url, emulator.base_url, time_scale=SCALE, job_attempts=1
    ) as make:
        runtime: Runtime = await make()
        sellers = [f"0000000{i}-0000-4000-8000-00000000000e" for i in range(1, 4)]
        queue_name = "rnp-finance-sync"
        outcomes: list[Outcome] = []
        [worker] = build_workers(runtime, [queue_name], concurrency=3, on_outcome=outcomes.append)
        queue = runtime.queue(queue_name)
        ids = [
            (await runtime.store.cabinets.add(_name(), emulator.token(s), s)).id for s in sellers
        ]
        try:
            # The pooled connections are terminated, and no new one is accepted, before the
            # jobs run: each meets the refusal at its first query, whatever the machine's speed.
            await database_factory.admin(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
            await database_factory.admin(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                f"WHERE datname = '{name}' AND pid <> pg_backend_pid()"
            )
            await worker.start()
            await queue.enqueue_many([str(i) for i in ids])
            # Refused until every job has backed off 6 times (5 ms doubling: about 0.3 s).
            await wait_for(lambda: _each_infra_retried(queue, ids, 6))
            await database_factory.admin(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
            await wait_for(lambda: _all_gone(queue, ids))
        finally:
            await database_factory.admin(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
            await worker.close()
        spec = DATASETS["finance_report"]
        for cabinet_id, seller in zip(ids, sellers, strict=True):
            stored = await runtime.store.fetch("finance_report", cabinet_id)
            rows = expected_datasets(
                emulator, seller, today=clock.wb_today(), options=SyncOptions()
            )
            expected = rows["finance_report"]
            assert {spec.row_key(r): r for r in stored} == {spec.row_key(r): r for r in expected}
    # One attempt a job: a refusal that spent it would have failed the job.
    assert [o.outcome for o in outcomes].count("completed") == len(ids)
    assert "failed" not in [o.outcome for o in outcomes]


async def test_redis_restarted_empty_mid_run_the_fan_out_brings_the_lost_jobs_back(
    database_factory: DatabaseFactory, emulator: Emulator
) -> None:
    # Redis without persistence (the embedded default): a restart loses every job. The syncs
    # store their rows in the database and finance's cursor in wb_sync_cursors, so the fan-out's
    # next pass starts new jobs that go on from there.
    first = EmbeddedRedis().start()
    port = int(first.url.rsplit(":", 1)[1].split("/")[0])
    settings = Settings(
        redis_url=first.url,
        database_url=await database_factory.new_migrated_url("sqlite"),
        secret_key=SecretStr(SECRET),
        wb_base_url=emulator.base_url,
        time_scale=SCALE,
        job_lock_ms=1000,
    )
    runtime = await Runtime(settings, redis_url=first.url).start()
    sellers = [f"0000000{i}-0000-4000-8000-00000000000e" for i in range(1, 4)]
    name = "rnp-finance-sync"
    outcomes: list[Outcome] = []
    [worker] = build_workers(runtime, [name], concurrency=3, on_outcome=outcomes.append)
    second: EmbeddedRedis | None = None
    stop = asyncio.Event()
    try:
        ids = [
            (await runtime.store.cabinets.add(_name(), emulator.token(s), s)).id for s in sellers
        ]
        queue = runtime.queue(name)
        fanout = FanOut({name: queue}, lambda: _ids(ids), {name: 0.5})
        await worker.start()
        leases = FanOutLeases(runtime.redis, prefix=settings.redis_prefix, lease_ms=1000)
        fanning = asyncio.create_task(fanout.run(stop, leases))
        await wait_for(lambda: _stored_any(runtime, ids))
        first.stop()  # every job, lock and bucket is gone with it
        second = EmbeddedRedis(port=port).start()
        await wait_for(lambda: _all_complete(runtime, ids), timeout_s=60)
        stop.set()
        await fanning
        spec = DATASETS["finance_report"]
        for cabinet_id, seller in zip(ids, sellers, strict=True):
            stored = await runtime.store.fetch("finance_report", cabinet_id)
            rows = expected_datasets(
                emulator, seller, today=clock.wb_today(), options=SyncOptions()
            )
            assert {spec.row_key(r): r for r in stored} == {
                spec.row_key(r): r for r in rows["finance_report"]
            }
    finally:
        stop.set()
        await worker.close(grace_s=5)
        await runtime.aclose()
        first.stop()
        if second is not None:
            second.stop()
    assert "failed" not in [o.outcome for o in outcomes]


async def _ids(ids: list[int]) -> list[str]:
    return [str(i) for i in ids]


async def _all_complete(runtime: Runtime, ids: list[int]) -> bool:
    return all(
        [
            await runtime.store.count("finance_report", i) == 12
            and await runtime.queue("rnp-finance-sync").job(str(i)) is None
            for i in ids
        ]
    )


async def test_redis_restarted_with_its_aof_mid_run_the_jobs_resume_without_failing(
    tmp_path: Path,
    database_factory: DatabaseFactory,
    emulator: Emulator,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="wbsync.jobs.failures")
    first = EmbeddedRedis(aof_dir=tmp_path).start()
    port = int(first.url.rsplit(":", 1)[1].split("/")[0])
    settings = Settings(
        redis_url=first.url,
        database_url=await database_factory.new_migrated_url("sqlite"),
        secret_key=SecretStr(SECRET),
        wb_base_url=emulator.base_url,
        time_scale=SCALE,
        # Sleep for tokens in place: the jobs are running (not delayed) when Redis goes.
        defer_threshold_ms=10_000_000,
        job_lock_ms=10_000,  # outlives the restart: the jobs stay their workers'
    )
    runtime = await Runtime(settings, redis_url=first.url).start()
    sellers = [f"0000000{i}-0000-4000-8000-00000000000a" for i in range(1, 4)]
    name = "rnp-finance-sync"
    retried = sample("wbsync_job_retries_total", queue=name, reason="infrastructure")
    abandoned = sample("wbsync_job_duration_seconds_count", queue=name, outcome="abandoned")
    outcomes: list[Outcome] = []
    [worker] = build_workers(runtime, [name], concurrency=3, on_outcome=outcomes.append)
    second: EmbeddedRedis | None = None
    try:
        ids = [
            (await runtime.store.cabinets.add(_name(), emulator.token(s), s)).id for s in sellers
        ]
        await worker.start()
        await runtime.queue(name).enqueue_many([str(i) for i in ids])
        await wait_for(lambda: _stored_any(runtime, ids))
        first.stop()
        # A job met the outage and could not even defer: it holds on while Redis is away.
        await wait_for(lambda: any("trying again in" in r.message for r in caplog.records))
        second = EmbeddedRedis(port=port, aof_dir=tmp_path).start()
        await wait_for(lambda: _all_complete(runtime, ids), timeout_s=60)
        spec = DATASETS["finance_report"]
        for cabinet_id, seller in zip(ids, sellers, strict=True):
            stored = await runtime.store.fetch("finance_report", cabinet_id)
            rows = expected_datasets(
                emulator, seller, today=clock.wb_today(), options=SyncOptions()
            )
            assert {spec.row_key(r): r for r in stored} == {
                spec.row_key(r): r for r in rows["finance_report"]
            }
    finally:
        await worker.close(grace_s=5)
        await runtime.aclose()
        first.stop()
        if second is not None:
            second.stop()
    assert "failed" not in [o.outcome for o in outcomes]
    assert [o.outcome for o in outcomes].count("completed") == len(ids)
    assert sample("wbsync_job_retries_total", queue=name, reason="infrastructure") > retried
    # No job was given up to a takeover: each deferred itself once Redis was back.
    assert sample("wbsync_job_duration_seconds_count", queue=name, outcome="abandoned") == abandoned
