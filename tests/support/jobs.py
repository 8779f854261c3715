"""Queues, workers and a deferring processor on the test's Redis, for the job-layer tests
(tests/jobs, tests/test_cluster.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from wbsync.jobs.handle import JobHandle, Processor
from wbsync.jobs.queue import SyncQueue
from wbsync.jobs.reschedule import RescheduleService
from wbsync.jobs.worker import SyncWorker
from wbsync.ratelimit import BucketScope, Limit, RateLimiter

SCALE = 0.01  # WB's 60 s window becomes 600 ms
ONE_PER_20S = Limit(period_s=20, limit=1, burst=1)  # 200 ms at SCALE
ONE_PER_HOUR = Limit(
    period_s=3600, limit=1, burst=1
)  # 36 s at SCALE: only opening its window ends it
DEFER = RescheduleService(threshold_ms=20)  # waits past 20 ms defer the job


class Harness:
    """Queues and workers on the test's Redis and prefix, closed at the end."""

    def __init__(self, redis_url: str, prefix: str) -> None:
        self.redis_url = redis_url
        self.prefix = prefix
        self.outcomes: list[tuple[str, str]] = []
        self._closers: list[Callable[[], Awaitable[None]]] = []

    def queue(self, name: str) -> SyncQueue:
        queue = SyncQueue(name, redis_url=self.redis_url, prefix=f"{self.prefix}:q")
        self._closers.append(queue.close)
        return queue

    async def worker(self, name: str, processor: Processor, concurrency: int = 1) -> SyncWorker:
        worker = SyncWorker(
            name,
            processor,
            redis_url=self.redis_url,
            prefix=f"{self.prefix}:q",
            concurrency=concurrency,
            on_outcome=lambda o: self.outcomes.append((o.outcome, o.cabinet)),
        )
        await worker.start()
        self._closers.insert(0, worker.close)
        return worker

    def count(self, outcome: str, cabinet: str | None = None) -> int:
        return sum(1 for o, c in self.outcomes if o == outcome and cabinet in (None, c))

    async def close(self) -> None:
        for close in self._closers:
            await close()


def paging_processor(
    limiter: RateLimiter, pages: int, seen: list[tuple[str, int, int]], limit: Limit = ONE_PER_20S
) -> Processor:
    """A deferring sync of ``pages`` pages, one token each, saving its cursor after every page."""

    async def process(job: JobHandle) -> int:
        cursor = int(job.cursor or 0)
        while cursor < pages:
            await limiter.acquire(BucketScope(job.cabinet, "finance", limit))
            cursor += 1
            seen.append((job.cabinet, cursor, job.attempts_made))
            await job.save_cursor(cursor)
        return cursor

    return DEFER.wrap(process)
