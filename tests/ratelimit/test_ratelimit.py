"""The limiter against a real Redis: atomicity, exact waits, the policy, penalties."""

from __future__ import annotations

import asyncio
import sys
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import REGISTRY
from redis.asyncio import Redis

from tests.support.limiter import LimiterFactory
from wbsync.errors import RateLimitDeferred, RateLimitExceeded, WbApiError
from wbsync.observability.context import run_with_rate_limit_deferral
from wbsync.ratelimit import BucketScope, Limit
from wbsync.redis import keys

FINANCE = Limit(period_s=60, limit=1, burst=1)
HOURLY = Limit(period_s=3600, limit=1, burst=1)  # 36 s at scale 0.01: no test waits it out


def ms_since(started: float) -> float:
    """Milliseconds since ``started`` (a ``time.monotonic()`` reading)."""
    return (time.monotonic() - started) * 1000


def deferred_waits(group: str) -> tuple[float, float]:
    """(count, seconds waited) of the limiter's deferrals of ``group`` so far."""
    labels = {"scope": group, "outcome": "deferred"}
    count = REGISTRY.get_sample_value("wbsync_limiter_wait_seconds_count", labels) or 0.0
    total = REGISTRY.get_sample_value("wbsync_limiter_wait_seconds_sum", labels) or 0.0
    return count, total


def scope(limit: Limit, cabinet: str = "seller-1", group: str = "g") -> BucketScope:
    return BucketScope(cabinet=cabinet, group=group, limit=limit)


async def test_concurrent_try_acquire_takes_exactly_burst(limiter_factory: LimiterFactory) -> None:
    limiter = limiter_factory()
    bucket = scope(Limit(period_s=3600, limit=1, burst=5))
    results = await asyncio.gather(*(limiter.try_acquire(bucket) for _ in range(100)))
    assert sum(r.acquired for r in results) == 5
    assert sorted(r.remaining for r in results if r.acquired) == [0, 1, 2, 3, 4]
    assert all(r.wait_ms > 0 for r in results if not r.acquired)


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    period_ms=st.integers(min_value=20, max_value=200),
    limit=st.integers(min_value=1, max_value=5),
    burst=st.integers(min_value=1, max_value=6),
    tasks=st.integers(min_value=1, max_value=8),
)
async def test_grants_never_exceed_burst_plus_rate(
    limiter_factory: LimiterFactory, period_ms: int, limit: int, burst: int, tasks: int
) -> None:
    limiter = limiter_factory()
    bucket = BucketScope(
        cabinet=f"prop-{period_ms}-{limit}-{burst}-{tasks}-{time.monotonic_ns()}",
        group="g",
        limit=Limit(period_s=period_ms / 1000, limit=limit, burst=burst),
    )
    duration_s = 0.3
    grants = tries = 0
    started = time.monotonic()

    async def hammer() -> None:
        nonlocal grants, tries
        while True:  # at least one try per task, however late the task starts
            tries += 1
            if (await limiter.try_acquire(bucket)).acquired:
                grants += 1
            if time.monotonic() - started >= duration_s:
                return

    await asyncio.gather(*(hammer() for _ in range(tasks)))
    elapsed = time.monotonic() - started
    allowed = burst + limit * elapsed / (period_ms / 1000)
    assert grants <= allowed + 1e-9
    assert grants >= min(burst, tries)  # the bucket started full


async def test_wait_equals_true_remaining_time(limiter_factory: LimiterFactory) -> None:
    limiter = limiter_factory()
    bucket = scope(Limit(period_s=1.0, limit=1, burst=1))
    started = time.monotonic()
    assert (await limiter.try_acquire(bucket)).acquired
    asked = time.monotonic()
    refused = await limiter.try_acquire(bucket)
    answered = time.monotonic()
    assert not refused.acquired
    # The token left somewhere in [started, answered]: it is back one second after that.
    assert 1000 - ms_since(started) <= refused.wait_ms <= 1000
    # Asked again later, the wait has shrunk by exactly the time between the two questions
    # (1 ms: waits are whole milliseconds, rounded up).
    await asyncio.sleep(0.2)
    again_asked = time.monotonic()
    again = await limiter.peek(bucket)
    shrunk_by = refused.wait_ms - again.wait_ms
    assert not again.acquired
    assert (again_asked - answered) * 1000 - 1 <= shrunk_by <= ms_since(asked) + 1
    # And once that wait has passed, the token is there (2 ms: the host's two clocks).
    await asyncio.sleep((again.wait_ms + 2) / 1000)
    assert (await limiter.try_acquire(bucket)).acquired


async def test_acquire_sleeps_under_threshold_in_context(limiter_factory: LimiterFactory) -> None:
    limiter = limiter_factory(time_scale=0.01)  # 60 s -> 600 ms
    bucket = scope(FINANCE)
    started = time.monotonic()
    await limiter.acquire(bucket)
    # 600 ms is under the 1000 ms threshold: no deferral; the second token comes a window on.
    got = await run_with_rate_limit_deferral(1000, lambda: limiter.acquire(bucket))
    assert ms_since(started) >= 600 - 2
    assert got.waited_ms <= ms_since(started)


async def test_acquire_defers_over_threshold_in_context(limiter_factory: LimiterFactory) -> None:
    limiter = limiter_factory(time_scale=0.01)
    bucket = scope(HOURLY, group="defer-at-once")
    started = time.monotonic()
    await limiter.acquire(bucket)
    before = deferred_waits("defer-at-once")
    with pytest.raises(RateLimitDeferred) as caught:
        await run_with_rate_limit_deferral(50, lambda: limiter.acquire(bucket))
    assert 36_000 - ms_since(started) <= caught.value.wait_ms <= 36_000
    assert caught.value.scope == bucket
    # Raised at once: one deferral recorded, with no time slept before it.
    assert deferred_waits("defer-at-once") == (before[0] + 1, before[1])


async def test_acquire_without_context_sleeps_to_ceiling_then_refuses(
    limiter_factory: LimiterFactory,
) -> None:
    limiter = limiter_factory(time_scale=0.01, ceiling_margin_ms=5000)  # ceiling 1.2 s + 50 ms
    bucket = scope(FINANCE)
    started = time.monotonic()
    await limiter.acquire(bucket)
    slept = await limiter.acquire(bucket)  # one window: under the ceiling
    assert ms_since(started) >= 600 - 2 and slept.waited_ms <= ms_since(started)
    penalized = time.monotonic()
    await limiter.penalize(bucket, 3000)  # now far past the ceiling
    with pytest.raises(RateLimitExceeded) as caught:
        await limiter.acquire(bucket)
    assert 3000 - ms_since(penalized) <= caught.value.retry_after * 1000 <= 3000


async def test_deferral_is_not_a_wb_api_error(limiter_factory: LimiterFactory) -> None:
    limiter = limiter_factory(time_scale=0.01)
    bucket = scope(FINANCE)
    await limiter.acquire(bucket)
    attempts = 0

    async def retrying_call() -> None:
        nonlocal attempts
        for _ in range(3):
            attempts += 1
            try:
                await limiter.acquire(bucket)
                return
            except WbApiError:
                continue

    with pytest.raises(RateLimitDeferred):
        await run_with_rate_limit_deferral(10, retrying_call)
    assert attempts == 1


async def test_bucket_keys_expire_and_carry_a_hash_tag(
    limiter_factory: LimiterFactory, redis: Redis, prefix: str
) -> None:
    limiter = limiter_factory()
    bucket = scope(Limit(period_s=2, limit=1, burst=1), cabinet="c9", group="finance")
    started = time.monotonic()
    await limiter.try_acquire(bucket)
    key = keys.bucket_key(prefix, bucket)
    assert key.endswith(":rl:{c9}:finance")  # one tag for all of a seller's buckets
    # Redis keeps expiry times and answers PTTL in whole milliseconds: one of rounding.
    assert 2000 - ms_since(started) - 1 <= await redis.pttl(key) <= 2000


async def test_peek_takes_nothing(limiter_factory: LimiterFactory) -> None:
    limiter = limiter_factory()
    bucket = scope(Limit(period_s=60, limit=1, burst=2))
    assert (await limiter.peek(bucket)).remaining == 2
    assert (await limiter.try_acquire(bucket)).remaining == 1
    assert (await limiter.peek(bucket)).remaining == 1


PENALIZE = """
import asyncio, sys
from redis.asyncio import Redis
from wbsync.ratelimit import BucketScope, Limit, LimiterOptions, RateLimiter
async def main():
    redis = Redis.from_url(sys.argv[1])
    limiter = RateLimiter(redis, LimiterOptions(prefix=sys.argv[2]))
    await limiter.penalize(BucketScope("seller-x", "g", Limit(1, 10, 10)), 2000)
    await redis.aclose()
asyncio.run(main())
"""


async def test_penalize_from_another_process(
    limiter_factory: LimiterFactory, redis_url: str, prefix: str
) -> None:
    limiter = limiter_factory()
    bucket = scope(Limit(period_s=1, limit=10, burst=10), cabinet="seller-x")
    assert (await limiter.try_acquire(bucket)).acquired
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", PENALIZE, redis_url, prefix)
    assert await asyncio.wait_for(proc.wait(), 60) == 0
    refused = await limiter.try_acquire(bucket)
    elapsed_ms = (time.monotonic() - started) * 1000
    assert not refused.acquired
    # The other process penalized somewhere in the elapsed time, for 2 s from then.
    assert 2000 - elapsed_ms <= refused.wait_ms <= 2000
