"""``scale``: a fan-out of many cabinets over the seven long queues, every job deferred once.

On a private embedded Redis (``used_memory`` is server-wide):

1. enqueue one job per (queue, cabinet), timed, with ``SyncQueue.enqueue_many`` (and, for
   comparison, the per-job ``SyncQueue.enqueue`` on a sample, 64 at a time);
2. one worker process (a ``SyncWorker`` per queue) runs every job: it takes its bucket's one
   token (1 per hour, burst 1), asks for another and is deferred by the real path: every job
   ends up delayed, its bucket empty;
3. ``used_memory`` is read with every job delayed; the bucket keys are then deleted (the
   windows open) and ``used_memory`` read again, so the delayed jobs' bytes exclude the buckets;
4. every delayed job is made due at once (``promote_delayed``) and the same worker process runs
   them to completion: jobs per second from that moment to the last completion.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis

from wbsync.bench.common import delete_prefix, table, unique_prefix
from wbsync.jobs.queue import JobHandle, SyncQueue, SyncWorker
from wbsync.jobs.reschedule import RescheduleService
from wbsync.ratelimit import BucketScope, Limit, RateLimiter

LONG_QUEUES = (
    "rnp-finance-sync",
    "rnp-sections-sync",
    "rnp-ads-sync",
    "digitization-sync",
    "inventory-sync",
    "autobidder-sync",
    "catalog-sync",
)
_HOURLY = Limit(period_s=3600, limit=1, burst=1)
_SAMPLE = 1000  # jobs added one by one with SyncQueue.enqueue, for comparison


@dataclass
class Params:
    """What to run."""

    cabinets: int = 10_000
    concurrency: int = 20
    queues: tuple[str, ...] = LONG_QUEUES


class _Tally:
    """Counts runs and signals when a count is reached."""

    def __init__(self) -> None:
        self.deferred = 0
        self.completed = 0
        self._waiters: list[tuple[Callable[[], bool], asyncio.Event]] = []

    def bump(self, outcome: str) -> None:
        if outcome == "deferred":
            self.deferred += 1
        elif outcome == "completed":
            self.completed += 1
        for check, event in self._waiters:
            if check():
                event.set()

    async def until(self, check: Callable[[], bool], timeout_s: float) -> None:
        event = asyncio.Event()
        self._waiters.append((check, event))
        if check():
            event.set()
        await asyncio.wait_for(event.wait(), timeout_s)


async def _used_memory(redis: Redis) -> int:
    info = await redis.info("memory")
    return int(info["used_memory"])


async def _enqueue_sample(url: str, prefix: str) -> float:
    """Per-job enqueue rate (jobs/s) on a scratch queue, 64 in flight."""
    queue = SyncQueue("bench-enqueue-sample", redis_url=url, prefix=prefix)
    gate = asyncio.Semaphore(64)

    async def one(i: int) -> None:
        async with gate:
            await queue.enqueue(f"s{i}")

    try:
        started = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(_SAMPLE)))
        rate = _SAMPLE / (time.perf_counter() - started)
        await queue.obliterate()
    finally:
        await queue.close()
    return rate


async def run(url: str, params: Params | None = None) -> dict[str, Any]:
    """The whole scenario; ``url`` must be a private server (see the module docstring)."""
    params = params or Params()
    prefix = unique_prefix("scale")
    qprefix = f"{prefix}:q"
    redis = Redis.from_url(url)
    limiter = RateLimiter(redis, prefix=f"{prefix}:rl")
    jobs = params.cabinets * len(params.queues)
    cabinets = [f"cab-{i:06d}" for i in range(params.cabinets)]
    tally = _Tally()
    queues = {n: SyncQueue(n, redis_url=url, prefix=qprefix) for n in params.queues}
    workers: list[SyncWorker] = []
    try:
        per_job_rate = await _enqueue_sample(url, f"{prefix}:sample")
        mem_empty = await _used_memory(redis)
        started = time.perf_counter()
        for queue in queues.values():
            await queue.enqueue_many(cabinets)
        enqueue_s = time.perf_counter() - started
        mem_waiting = await _used_memory(redis)

        processor = RescheduleService(threshold_ms=5000).wrap(_processor(limiter))
        for name in params.queues:
            worker = SyncWorker(name, processor, redis_url=url, prefix=qprefix,
                                concurrency=params.concurrency,
                                on_outcome=lambda o: tally.bump(o.outcome))  # fmt: skip
            workers.append(worker)
            await worker.start()
        started = time.perf_counter()
        await tally.until(lambda: tally.deferred >= jobs, timeout_s=60 + jobs / 20)
        defer_s = time.perf_counter() - started
        mem_delayed = await _used_memory(redis)
        await delete_prefix(redis, f"{prefix}:rl")  # the windows open: buckets full again
        mem_no_buckets = await _used_memory(redis)

        started = time.perf_counter()
        for queue in queues.values():
            await queue.promote_delayed()
        await tally.until(lambda: tally.completed >= jobs, timeout_s=60 + jobs / 20)
        complete_s = time.perf_counter() - started
    finally:
        for worker in workers:
            await worker.close()
        for queue in queues.values():
            await queue.obliterate()
            await queue.close()
        await delete_prefix(redis, prefix)
        await redis.aclose()
    return {
        "cabinets": params.cabinets,
        "jobs": jobs,
        "enqueue_s": enqueue_s,
        "redis_bytes_per_delayed_job": (mem_no_buckets - mem_empty) / jobs,
        "jobs_per_s": jobs / complete_s,
        "detail": {
            "queues": len(params.queues),
            "worker_concurrency_per_queue": params.concurrency,
            "enqueue_many_jobs_per_s": jobs / enqueue_s,
            "enqueue_one_by_one_jobs_per_s": per_job_rate,
            "redis_bytes_per_waiting_job": (mem_waiting - mem_empty) / jobs,
            "redis_bytes_per_bucket": (mem_delayed - mem_no_buckets) / jobs,
            "first_runs_s": defer_s,
            "first_runs_jobs_per_s": jobs / defer_s,
            "complete_s": complete_s,
        },
    }


def _processor(limiter: RateLimiter) -> Callable[[JobHandle], Any]:
    async def process(job: JobHandle) -> None:
        scope = BucketScope(job.cabinet, job.queue, _HOURLY)
        await limiter.acquire(scope)
        if not job.data.get("deferrals"):
            await limiter.acquire(scope)  # the bucket is empty now: deferred for the hour

    return process


def tables(result: dict[str, Any]) -> list[Any]:
    """The figures."""
    d = result["detail"]
    rows = [
        ["cabinets x queues = jobs", f"{result['cabinets']} x {d['queues']} = {result['jobs']}"],
        ["enqueue (enqueue_many)", f"{result['enqueue_s']:.2f} s "
                                   f"({d['enqueue_many_jobs_per_s']:,.0f} jobs/s)"],
        ["enqueue one by one (sample, 64 in flight)",
         f"{d['enqueue_one_by_one_jobs_per_s']:,.0f} jobs/s"],
        ["Redis bytes per delayed job", f"{result['redis_bytes_per_delayed_job']:,.0f}"],
        ["Redis bytes per waiting job", f"{d['redis_bytes_per_waiting_job']:,.0f}"],
        ["first runs (each defers)", f"{d['first_runs_jobs_per_s']:,.0f} jobs/s"],
        ["resumed runs once windows open", f"{result['jobs_per_s']:,.0f} jobs/s"],
    ]  # fmt: skip
    return [table("scale: fan-out over the long queues", ["measure", "value"], rows)]
