"""``scale``: a fan-out of many cabinets over the long queues, every job deferred once.

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

from wbsync.jobs.handle import JobHandle
from wbsync.jobs.queue import SyncQueue
from wbsync.jobs.reschedule import RescheduleService
from wbsync.jobs.worker import SyncWorker
from wbsync.ratelimit import BucketScope, Limit, LimiterOptions, RateLimiter
from wbsync_bench.common import delete_prefix, table, unique_prefix

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


@dataclass(frozen=True)
class _Memory:
    """``used_memory``, the part of it in client connection buffers, and the event streams."""

    used: int
    clients: int
    events: int

    def jobs_only(self) -> int:
        """What is left for keys other than the event streams."""
        return self.used - self.clients - self.events


async def _memory(redis: Redis, qprefix: str, queues: tuple[str, ...]) -> _Memory:
    info = await redis.info("memory")
    events = 0
    for name in queues:  # BullMQ's per-queue stream, <prefix>:<queue>:events, capped ~10,000
        events += int(await redis.memory_usage(f"{qprefix}:{name}:events", samples=0) or 0)
    return _Memory(int(info["used_memory"]), int(info["mem_clients_normal"]), events)


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


class _Scenario:
    """The queues, workers and tallies of one run."""

    def __init__(self, url: str, prefix: str, params: Params) -> None:
        self.url, self.params = url, params
        self.qprefix = f"{prefix}:q"
        self.redis = Redis.from_url(url)
        self.limiter = RateLimiter(self.redis, LimiterOptions(prefix=f"{prefix}:rl"))
        self.jobs = params.cabinets * len(params.queues)
        self.tally = _Tally()
        self.queues = {n: SyncQueue(n, redis_url=url, prefix=self.qprefix) for n in params.queues}
        self.workers: list[SyncWorker] = []

    async def memory(self) -> _Memory:
        return await _memory(self.redis, self.qprefix, self.params.queues)

    async def enqueue(self) -> float:
        cabinets = [f"cab-{i:06d}" for i in range(self.params.cabinets)]
        started = time.perf_counter()
        for queue in self.queues.values():
            await queue.enqueue_many(cabinets)
        return time.perf_counter() - started

    async def start_workers(self) -> None:
        processor = RescheduleService(threshold_ms=5000).wrap(_processor(self.limiter))
        for name in self.params.queues:
            worker = SyncWorker(
                name,
                processor,
                redis_url=self.url,
                prefix=self.qprefix,
                concurrency=self.params.concurrency,
                on_outcome=lambda o: self.tally.bump(o.outcome),
            )
            self.workers.append(worker)
            await worker.start()

    async def until(self, check: Callable[[], bool]) -> float:
        started = time.perf_counter()
        await self.tally.until(check, timeout_s=60 + self.jobs / 20)
        return time.perf_counter() - started

    async def close(self, prefix: str) -> None:
        for worker in self.workers:
            await worker.close()
        for queue in self.queues.values():
            await queue.obliterate()
            await queue.close()
        await delete_prefix(self.redis, prefix)
        await self.redis.aclose()


async def run(url: str, params: Params | None = None) -> dict[str, Any]:
    """The whole scenario; ``url`` must be a private server (see the module docstring)."""
    params = params or Params()
    prefix = unique_prefix("scale")
    sc = _Scenario(url, prefix, params)
    jobs, tally = sc.jobs, sc.tally
    try:
        per_job_rate = await _enqueue_sample(url, f"{prefix}:sample")
        empty = await sc.memory()
        enqueue_s = await sc.enqueue()
        waiting = await sc.memory()
        await sc.start_workers()
        defer_s = await sc.until(lambda: tally.deferred >= jobs)
        delayed = await sc.memory()
        await delete_prefix(sc.redis, f"{prefix}:rl")  # the windows open: buckets full again
        no_buckets = await sc.memory()
        started = time.perf_counter()  # from the windows opening to the last completion
        for queue in sc.queues.values():
            await queue.promote_delayed()
        await sc.until(lambda: tally.completed >= jobs)
        complete_s = time.perf_counter() - started
    finally:
        await sc.close(prefix)
    return {
        "cabinets": params.cabinets,
        "jobs": jobs,
        "enqueue_s": enqueue_s,
        "redis_bytes_per_delayed_job": (no_buckets.used - empty.used) / jobs,
        "jobs_per_s": jobs / complete_s,
        "detail": {
            "queues": len(params.queues),
            "worker_concurrency_per_queue": params.concurrency,
            "enqueue_many_jobs_per_s": jobs / enqueue_s,
            "enqueue_one_by_one_jobs_per_s": per_job_rate,
            "redis_bytes_per_waiting_job": (waiting.used - empty.used) / jobs,
            "redis_bytes_per_bucket": (delayed.used - no_buckets.used) / jobs,
            "redis_bytes_per_delayed_job_keys_only": (no_buckets.jobs_only() - empty.jobs_only())
            / jobs,
            "events_stream_bytes": no_buckets.events,
            "client_buffer_bytes": no_buckets.clients - empty.clients,
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
        [
            "enqueue (enqueue_many)",
            f"{result['enqueue_s']:.2f} s ({d['enqueue_many_jobs_per_s']:,.0f} jobs/s)",
        ],
        [
            "enqueue one by one (sample, 64 in flight)",
            f"{d['enqueue_one_by_one_jobs_per_s']:,.0f} jobs/s",
        ],
        ["Redis bytes per delayed job", f"{result['redis_bytes_per_delayed_job']:,.0f}"],
        [
            "  the job's own keys (no event streams, no client buffers)",
            f"{d['redis_bytes_per_delayed_job_keys_only']:,.0f}",
        ],
        ["Redis bytes per waiting job", f"{d['redis_bytes_per_waiting_job']:,.0f}"],
        ["first runs (each defers)", f"{d['first_runs_jobs_per_s']:,.0f} jobs/s"],
        ["resumed runs once windows open", f"{result['jobs_per_s']:,.0f} jobs/s"],
    ]
    return [table("scale: fan-out over the long queues", ["measure", "value"], rows)]
