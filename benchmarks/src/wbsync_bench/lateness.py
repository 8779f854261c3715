"""``lateness``: how late a deferred job starts again after the moment it may run.

The moment it may run is ``job.data["resume_at_ms"]`` (set by ``JobHandle.defer``); the start is
the processor's first line on the resumed run. Both are read from this host's clock.

Each job takes the one token of its own bucket (1 per 20 s at time scale 0.01: a 200 ms window),
asks for a second, is deferred by the real path (limiter -> ``RateLimitDeferred`` -> reschedule
service -> ``moveToDelayed``) and completes when resumed. Jobs are added ``stagger_ms`` apart and
the worker runs up to ``concurrency`` at once, so resumes rarely coincide and a slot is free when
one is due: the figure is the queue's wake-up delay, not jobs queueing behind one another.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis

from wbsync.jobs.handle import JobHandle
from wbsync.jobs.queue import SyncQueue
from wbsync.jobs.reschedule import RescheduleService
from wbsync.jobs.worker import SyncWorker
from wbsync.ratelimit import BucketScope, Limit, LimiterOptions, RateLimiter
from wbsync.system import clock
from wbsync_bench.common import delete_prefix, percentile, table, unique_prefix

TIME_SCALE = 0.01
_LIMIT = Limit(period_s=20, limit=1, burst=1)
_THRESHOLD_MS = 20.0
QUEUE = "bench-lateness"


@dataclass
class Params:
    """What to run."""

    samples: int = 200
    stagger_ms: float = 25.0
    concurrency: int = 4


async def run(url: str, params: Params | None = None) -> dict[str, Any]:
    """Defer ``samples`` jobs once each; lateness statistics in ms."""
    params = params or Params()
    prefix = unique_prefix("lateness")
    redis = Redis.from_url(url)
    limiter = RateLimiter(redis, LimiterOptions(prefix=prefix, time_scale=TIME_SCALE))
    lateness: list[float] = []
    done = asyncio.Event()

    async def process(job: JobHandle) -> None:
        resume_at = job.data.get("resume_at_ms")
        if resume_at is not None:
            lateness.append(clock.now_ms() - float(resume_at))
            if len(lateness) == params.samples:
                done.set()
            return
        scope = BucketScope(job.cabinet, "finance", _LIMIT)
        while True:  # the window is 200 ms: the second token (or a later one) defers the job
            await limiter.acquire(scope)

    service = RescheduleService(threshold_ms=_THRESHOLD_MS)
    queue = SyncQueue(QUEUE, redis_url=url, prefix=f"{prefix}:q")
    worker = SyncWorker(
        QUEUE,
        service.wrap(process),
        redis_url=url,
        prefix=f"{prefix}:q",
        concurrency=params.concurrency,
    )
    await worker.start()
    try:
        for i in range(params.samples):
            await queue.enqueue(f"cab-{i}")
            await asyncio.sleep(params.stagger_ms / 1000.0)
        await asyncio.wait_for(done.wait(), timeout=30 + params.samples * 0.1)
    finally:
        await worker.close()
        await queue.close()
        await delete_prefix(redis, prefix)
        await redis.aclose()
    return {
        "samples": len(lateness),
        "p50_ms": percentile(lateness, 50),
        "p95_ms": percentile(lateness, 95),
        "max_ms": max(lateness),
        "min_ms": min(lateness),
        "lateness_ms": [round(x, 2) for x in lateness],
        "params": {
            "stagger_ms": params.stagger_ms,
            "concurrency": params.concurrency,
            "window_ms": _LIMIT.period_s * 1000 * TIME_SCALE,
        },
    }


def tables(result: dict[str, Any]) -> list[Any]:
    """The distribution."""
    return [
        table(
            "lateness: deferred job start after resume_at_ms (ms)",
            ["samples", "p50", "p95", "max", "min"],
            [
                [
                    result["samples"],
                    result["p50_ms"],
                    result["p95_ms"],
                    result["max_ms"],
                    result["min_ms"],
                ]
            ],
        )
    ]
