"""Deferral on BullMQ with a real Redis: attempts, cursors, metrics, slot freedom, anti-overlap."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from prometheus_client import REGISTRY
from redis.asyncio import Redis

from tests.support.jobs import DEFER, ONE_PER_20S, ONE_PER_HOUR, SCALE, Harness, paging_processor
from tests.support.limiter import LimiterFactory
from tests.support.waiting import wait_for
from wbsync.jobs.fanout import FanOut, FanOutReport
from wbsync.jobs.handle import JobHandle, Processor
from wbsync.jobs.queue import SyncQueue
from wbsync.jobs.worker import SyncWorker
from wbsync.observability.context import correlation_id, current_job
from wbsync.ratelimit import BucketScope, Limit
from wbsync.system import clock


def reschedules(queue: str, scope: str) -> float:
    value = REGISTRY.get_sample_value(
        "wbsync_rate_limit_reschedules_total", {"queue": queue, "scope": scope}
    )
    return value or 0.0


async def open_windows(redis: Redis, prefix: str, queue: SyncQueue) -> None:
    """Open every bucket of the test (delete them: a missing bucket is full) and run the
    queue's delayed jobs now, so a test never waits out a window to see what follows it."""
    async for key in redis.scan_iter(match=f"{prefix}:rl:*", count=1000):
        await redis.delete(key)
    await queue.promote_delayed()


async def test_job_deferred_three_times_completes_without_spending_attempts(
    harness: Harness, limiter_factory: LimiterFactory
) -> None:
    limiter = limiter_factory(time_scale=SCALE)
    seen: list[tuple[str, int, int]] = []
    before = reschedules("q5", "finance")
    queue = harness.queue("q5")
    await harness.worker("q5", paging_processor(limiter, 4, seen))

    await queue.enqueue("cab-1")
    await wait_for(lambda: harness.count("completed") == 1)

    assert [cursor for _, cursor, _ in seen] == [1, 2, 3, 4]  # resumed from the cursor each time
    assert {attempts for _, _, attempts in seen} == {0}
    # At most one deferral per closed window; a page that reaches its window after it opened
    # (a busy machine) takes the token without one.
    deferrals = harness.count("deferred")
    assert 1 <= deferrals <= 3
    assert harness.count("failed") == 0
    assert reschedules("q5", "finance") - before == deferrals
    assert await queue.job("cab-1") is None  # completed jobs are removed


async def test_deferred_job_frees_its_slot(
    harness: Harness, limiter_factory: LimiterFactory, redis: Redis, prefix: str
) -> None:
    limiter = limiter_factory(time_scale=SCALE)
    slow = BucketScope("slow", "finance", ONE_PER_20S)
    await limiter.acquire(slow)
    await limiter.penalize(slow, 3_600_000)  # the slow cabinet's window stays closed
    seen: list[tuple[str, int, int]] = []
    queue = harness.queue("q6")
    await harness.worker("q6", paging_processor(limiter, 1, seen), concurrency=1)

    await queue.enqueue("slow")
    await wait_for(lambda: harness.count("deferred", "slow") == 1)
    for i in range(20):
        await queue.enqueue(f"fast-{i}")
    # The one slot runs all twenty while the slow job waits for its window in `delayed`.
    await wait_for(lambda: harness.count("completed") == 20)
    assert harness.count("completed", "slow") == 0
    assert (await queue.job("slow")).state == "delayed"  # type: ignore[union-attr]
    await open_windows(redis, prefix, queue)
    await wait_for(lambda: harness.count("completed", "slow") == 1)


async def test_enqueue_while_delayed_adds_nothing(
    harness: Harness, limiter_factory: LimiterFactory
) -> None:
    limiter = limiter_factory(time_scale=SCALE)
    seen: list[tuple[str, int, int]] = []
    queue = harness.queue("q7")
    await harness.worker("q7", paging_processor(limiter, 2, seen, ONE_PER_HOUR))

    first = await queue.enqueue("cab-7")
    assert first.added
    await wait_for(lambda: harness.count("deferred") == 1)
    second = await queue.enqueue("cab-7")
    assert not second.added
    assert second.state == "delayed"
    assert second.job_id == first.job_id
    live = await queue.live_jobs()
    assert list(live) == ["cab-7"]
    view = live["cab-7"]
    assert view.state == "delayed"
    assert view.data["cursor"] == 1
    assert view.data["deferrals"] == 1
    assert view.data["deferred_by"] == "finance"
    assert view.run_at_ms is not None and view.run_at_ms > clock.now_ms()
    assert (await queue.counts())["delayed"] == 1


async def test_deferred_jobs_resume_once_due_never_before(
    harness: Harness, limiter_factory: LimiterFactory
) -> None:
    """Every resumed run starts once its window is due; how late is `wbsync bench lateness`."""
    limiter = limiter_factory(time_scale=SCALE)
    lateness: list[float] = []

    async def process(job: JobHandle) -> None:
        if "resume_at_ms" in job.data:
            lateness.append(clock.now_ms() - job.data["resume_at_ms"])
        if job.data.get("deferrals", 0) < 2:  # two deferrals per job, then done
            while True:  # take tokens until a closed window defers the job
                await limiter.acquire(BucketScope(job.cabinet, "g", ONE_PER_20S))

    queue = harness.queue("qlate")
    await harness.worker("qlate", DEFER.wrap(process))
    await queue.enqueue_many([f"c{i}" for i in range(5)])
    await wait_for(lambda: harness.count("completed") == 5)
    assert len(lateness) == 10  # two resumed runs per job
    assert min(lateness) >= -1  # never before it is due (1 ms: BullMQ keeps whole ms)


async def test_job_context_is_set_for_the_processor(harness: Harness) -> None:
    seen: dict[str, Any] = {}

    async def process(job: JobHandle) -> None:
        seen["job"] = current_job()
        seen["correlation"] = correlation_id()

    queue = harness.queue("qctx")
    await harness.worker("qctx", process)
    await queue.enqueue("cab-c")
    await wait_for(lambda: harness.count("completed") == 1)
    assert seen["job"].queue == "qctx" and seen["job"].cabinet == "cab-c"
    assert seen["correlation"]


async def test_fan_out_twice_while_delayed_adds_nothing_for_that_cabinet(
    harness: Harness, limiter_factory: LimiterFactory, redis: Redis, prefix: str
) -> None:
    limiter = limiter_factory(time_scale=SCALE)
    seen: list[tuple[str, int, int]] = []
    queue = harness.queue("qfan")
    processor = paging_processor(limiter, 2, seen, ONE_PER_HOUR)
    await harness.worker("qfan", processor, concurrency=2)
    cabinets = ["a", "b"]

    async def active() -> list[str]:
        return cabinets

    fanout = FanOut({"qfan": queue}, active, {"qfan": 60.0})
    first = await fanout.run_once()
    assert first == {"qfan": FanOutReport(added=2, skipped_live=0)}
    await wait_for(lambda: harness.count("deferred") == 2)
    cabinets.append("c")
    second = await fanout.run_once()
    assert second == {"qfan": FanOutReport(added=1, skipped_live=2)}
    assert (await queue.job("a")).state == "delayed"  # type: ignore[union-attr]
    await wait_for(lambda: harness.count("deferred") == 3)  # c's second page
    await open_windows(redis, prefix, queue)
    await wait_for(lambda: harness.count("completed") == 3)
    assert sorted(c for c, cursor, _ in seen if cursor == 2) == ["a", "b", "c"]
    assert len(seen) == 6  # two pages per cabinet, none fetched twice


async def test_enqueue_many_keeps_one_job_per_cabinet(
    harness: Harness, limiter_factory: LimiterFactory, redis: Redis, prefix: str
) -> None:
    limiter = limiter_factory(time_scale=SCALE)
    seen: list[tuple[str, int, int]] = []
    queue = harness.queue("qbulk")
    processor = paging_processor(limiter, 2, seen, ONE_PER_HOUR)

    first = await queue.enqueue_many(["a", "b", "a"], batch=1)
    assert [(r.job_id, r.added) for r in first] == [("qbulk.a", True), ("qbulk.b", True)]
    await harness.worker("qbulk", processor, concurrency=2)
    await wait_for(lambda: harness.count("deferred") == 2)

    second = await queue.enqueue_many(["a", "b", "c"])
    assert [(r.added, r.state) for r in second] == [
        (False, "delayed"),
        (False, "delayed"),
        (True, "waiting"),
    ]
    await wait_for(lambda: harness.count("deferred") == 3)  # c's second page
    await open_windows(redis, prefix, queue)
    await wait_for(lambda: harness.count("completed") == 3)
    assert len(seen) == 6  # two pages per cabinet, none fetched twice
    third = await queue.enqueue_many(["a"])  # completed jobs are removed: added again
    assert third[0].added


async def test_promote_delayed_runs_deferred_jobs_now(
    harness: Harness, limiter_factory: LimiterFactory
) -> None:
    limiter = limiter_factory(time_scale=1.0)  # a real 100 s window: only promotion ends it
    seen: list[tuple[str, int, int]] = []
    queue = harness.queue("qpromote")

    async def process(job: JobHandle) -> None:
        if job.data.get("deferrals"):
            seen.append((job.cabinet, 0, job.attempts_made))
            return
        scope = BucketScope(job.cabinet, "finance", Limit(period_s=100, limit=1, burst=1))
        await limiter.acquire(scope)
        await limiter.acquire(scope)

    await harness.worker("qpromote", DEFER.wrap(process))
    await queue.enqueue_many(["p1", "p2"])
    await wait_for(lambda: harness.count("deferred") == 2)
    await queue.promote_delayed()
    await wait_for(lambda: harness.count("completed") == 2, timeout_s=5)
    assert sorted(c for c, _, _ in seen) == ["p1", "p2"]


async def _cut_short_at_close(
    harness: Harness,
    redis_url: str,
    prefix: str,
    name: str,
    process: Processor,
    started: asyncio.Event,
) -> Mapping[str, Any]:
    """Run one job of ``process`` until it sets ``started``, then close the worker with a
    0.2 s grace; the job's data once it is put back: due now for the next worker, not failed,
    not left active, no attempt spent."""
    queue = harness.queue(name)
    worker = SyncWorker(name, process, redis_url=redis_url, prefix=f"{prefix}:q")
    await worker.start()
    await queue.enqueue("cab-s")
    await asyncio.wait_for(started.wait(), 10)
    await asyncio.wait_for(worker.close(grace_s=0.2), 30)
    job = await queue.job("cab-s")
    assert job is not None and job.state in ("delayed", "waiting")
    assert job.attempts_made == 0
    return job.data


async def test_close_cancels_runs_still_going_after_the_grace_and_puts_them_back(
    harness: Harness, redis_url: str, prefix: str
) -> None:
    started = asyncio.Event()

    async def endless(job: JobHandle) -> None:
        await job.save_cursor(1)
        started.set()
        await asyncio.sleep(3600)  # the run never ends by itself: close returns after the grace

    data = await _cut_short_at_close(harness, redis_url, prefix, "qstop", endless, started)
    assert data["cursor"] == 1


async def test_a_run_that_lost_its_cancel_stops_at_its_next_cursor_save(
    harness: Harness, redis_url: str, prefix: str
) -> None:
    """A run whose cancel was lost (on Python 3.11 redis-py's ``asyncio.wait_for`` drops one
    that lands as a command's send completes) stops at its next cursor save once the close
    cuts the runs short: put back with that cursor, no attempt spent, instead of running on."""
    started = asyncio.Event()
    lost = 0

    async def losing(job: JobHandle) -> None:
        nonlocal lost
        await job.save_cursor(1)
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            lost += 1  # dropped, as such a library does: the run goes on
        for page in range(2, 500):
            await job.save_cursor(page)

    data = await _cut_short_at_close(harness, redis_url, prefix, "qlost", losing, started)
    assert lost == 1
    assert data["cursor"] == 2
