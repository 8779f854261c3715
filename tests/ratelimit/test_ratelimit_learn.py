"""The limiter's learned limits, level, refill margin and ceiling cap, against a real Redis."""

from __future__ import annotations

import asyncio
import math
import time

import pytest
from redis.asyncio import Redis

from tests.support.limiter import LimiterFactory
from tests.support.waiting import wait_for
from tests.support.wb import ANCHOR, SELLER_A
from wbsync.config import Settings
from wbsync.emulator import EmulatorConfig, running_emulator
from wbsync.errors import RateLimitExceeded
from wbsync.observability.metrics import sample
from wbsync.ratelimit import BucketScope, Limit, RateLimiter
from wbsync.redis import keys
from wbsync.shared.runtime import client_options, limiter_options
from wbsync.syncs.finance import FINANCE_DETAILED_REPORT
from wbsync.wb.client import WbClient

FINANCE = Limit(period_s=60, limit=1, burst=1)


def scope(limit: Limit, group: str = "g") -> BucketScope:
    return BucketScope(cabinet="seller-1", group=group, limit=limit)


async def test_a_learned_limit_paces_the_bucket_for_every_limiter(
    limiter_factory: LimiterFactory,
) -> None:
    one, other = limiter_factory(time_scale=0.01), limiter_factory(time_scale=0.01)
    bucket = scope(FINANCE, group="learn-pace")
    before = sample("wbsync_learned_limits_total", group="learn-pace")
    # The table's interval is 600 ms here; WB showed at least 600 + 300 ms.
    learned = await one.learn(bucket, extra_ms=300.0)
    assert learned is not None and learned.interval_ms == 900 and learned.burst == 1
    assert sample("wbsync_learned_limits_total", group="learn-pace") == before + 1
    assert (await other.try_acquire(bucket)).acquired
    refused = await other.try_acquire(bucket)
    assert not refused.acquired and 850 <= refused.wait_ms <= 900
    seen = await other.learned(bucket)
    assert seen is not None and seen.as_limit(0.01) == Limit(period_s=90, limit=1, burst=1)


async def test_learning_only_tightens_and_the_table_is_a_ceiling(
    limiter_factory: LimiterFactory, redis: Redis, prefix: str
) -> None:
    limiter = limiter_factory()
    bucket = scope(Limit(period_s=6, limit=10, burst=5), group="learn-ceiling")  # 600 ms a token
    # WB looser than the table (a shorter interval, a bigger burst): nothing is stored.
    assert await limiter.learn(bucket, seen_ms=300.0, burst=8) is None
    assert await redis.exists(keys.learned_key(prefix, bucket)) == 0
    tighter = await limiter.learn(bucket, seen_ms=1200.0, burst=3)
    assert tighter is not None and (tighter.interval_ms, tighter.burst) == (1200, 3)
    # Weaker evidence later does not loosen what was learned.
    assert await limiter.learn(bucket, seen_ms=700.0, burst=4) is None
    held = await limiter.learned(bucket)
    assert held is not None and (held.interval_ms, held.burst) == (1200, 3)
    results = [await limiter.try_acquire(bucket) for _ in range(5)]
    assert [r.acquired for r in results] == [True, True, True, False, False]
    assert await limiter.forget(bucket) is True
    assert await limiter.learned(bucket) is None


async def test_a_learned_limit_expires_and_the_table_applies_again(
    limiter_factory: LimiterFactory, redis: Redis, prefix: str
) -> None:
    # TTL 3600 WB seconds at scale 0.0001: 360 ms.
    limiter = limiter_factory(time_scale=0.0001, learned_ttl_s=3600.0)
    bucket = scope(Limit(period_s=60, limit=1, burst=2), group="learn-ttl")
    assert await limiter.learn(bucket, burst=1) is not None
    key = keys.learned_key(prefix, bucket)
    assert 0 < await redis.pttl(key) <= 360
    assert key.endswith(":rl-learned:{seller-1}:learn-ttl")
    assert (await limiter.peek(bucket)).remaining == 1

    async def expired() -> bool:
        return await limiter.learned(bucket) is None

    await wait_for(expired, 5)
    assert (await limiter.peek(bucket)).remaining == 2


async def test_level_holds_the_bucket_at_what_wb_showed(limiter_factory: LimiterFactory) -> None:
    limiter = limiter_factory()
    bucket = scope(Limit(period_s=60, limit=10, burst=5), group="level")
    await limiter.level(bucket, 2)
    assert (await limiter.peek(bucket)).remaining == 2
    await limiter.level(bucket, 4)  # a level never adds tokens
    assert (await limiter.peek(bucket)).remaining == 2


@pytest.mark.parametrize(
    ("limit", "time_scale", "margin_ms"),
    [
        (Limit(period_s=1, limit=5, burst=5), 1.0, 4.0),  # adverts: 2 % of 200 ms
        (FINANCE, 1.0, 25.0),  # 2 % of a minute is 1.2 s: the cap
        (FINANCE, 0.01, 12.0),  # 2 % of 600 ms: under the real-ms cap
        (FINANCE, 0.1, 25.0),  # 2 % of 6 s: the cap again, jitter is real time
        (Limit(period_s=1, limit=5, burst=5), 0.01, 0.04),  # never more than 2 % of the rate
    ],
)
def test_refill_margin_is_a_ratio_of_the_interval_under_a_real_ms_cap(
    limiter_factory: LimiterFactory, limit: Limit, time_scale: float, margin_ms: float
) -> None:
    limiter = limiter_factory(
        time_scale=time_scale, refill_margin_ratio=0.02, refill_margin_cap_ms=25.0
    )
    assert limiter.refill_margin_ms(scope(limit)) == pytest.approx(margin_ms)


async def test_the_margin_spaces_tokens(limiter_factory: LimiterFactory) -> None:
    # Interval 10 s, margin 10 % = 1 s: the second token is 11 s after the first.
    limiter = limiter_factory(refill_margin_ratio=0.1, refill_margin_cap_ms=1000.0)
    bucket = scope(Limit(period_s=10, limit=1, burst=1), group="margin")
    assert (await limiter.try_acquire(bucket)).acquired
    assert 10_000 < (await limiter.try_acquire(bucket)).wait_ms <= 11_000


async def test_ceiling_cap_refuses_a_long_window_at_once(limiter_factory: LimiterFactory) -> None:
    # A 1-per-hour bucket at scale 0.001: two periods are 7.2 s, the cap 125 ms.
    limiter = limiter_factory(time_scale=0.001, ceiling_cap_ms=125_000.0)
    bucket = scope(Limit(period_s=3600, limit=1, burst=1), group="cap")
    assert limiter.ceiling_ms(bucket) == pytest.approx(125.0)
    await limiter.acquire(bucket)
    started = time.monotonic()
    with pytest.raises(RateLimitExceeded) as caught:
        await limiter.acquire(bucket)
    assert time.monotonic() - started < 1.0  # refused, not slept for the window
    assert 3.5 <= caught.value.retry_after <= 3.6  # the true wait, not the cap


async def test_limiter_options_wire_every_limiter_setting(redis: Redis, prefix: str) -> None:
    settings = Settings(
        redis_prefix=prefix,
        time_scale=0.5,
        wait_ceiling_margin_ms=1000,
        wait_ceiling_cap_ms=20_000,
        limiter_refill_margin_ratio=0.1,
        limiter_refill_margin_cap_ms=10.0,
        learned_limit_ttl_s=2.0,
        wb_seller_limit_per_min=2,
    )
    limiter = RateLimiter(redis, limiter_options(settings))
    assert limiter.seller_scope("s").limit == Limit(period_s=60.0, limit=2, burst=2)
    minute, second = scope(FINANCE), scope(Limit(period_s=1, limit=10, burst=1))
    assert limiter.ceiling_ms(minute) == pytest.approx(10_000.0)  # the cap, scaled
    assert limiter.ceiling_ms(second) == pytest.approx(1500.0)  # 2 x 0.5 s + 0.5 s
    assert limiter.refill_margin_ms(minute) == pytest.approx(10.0)  # the cap, real ms
    assert limiter.refill_margin_ms(second) == pytest.approx(5.0)  # 10 % of 50 ms
    assert await limiter.learn(minute, burst=0, seen_ms=60_000.0) is not None
    assert 0 < await redis.pttl(keys.learned_key(prefix, minute)) <= 1000  # 2 s x 0.5


@pytest.mark.parametrize("wait_ms", [1e12, 1e308, math.inf])
async def test_no_penalty_pushes_a_bucket_past_the_maximum(
    limiter_factory: LimiterFactory, redis: Redis, prefix: str, wait_ms: float
) -> None:
    # An hour of WB time at scale 0.001 is 3.6 s: the furthest anything may push a bucket.
    limiter = limiter_factory(time_scale=0.001, max_wait_s=3600.0)
    bucket = scope(FINANCE, group="penalty-max")
    await limiter.penalize(bucket, wait_ms)
    assert 3500 <= (await limiter.peek(bucket)).wait_ms <= 3600
    assert 0 < await redis.pttl(keys.bucket_key(prefix, bucket)) <= 3600


@pytest.mark.parametrize(("seen_ms", "extra_ms"), [(1e15, 0.0), (0.0, math.inf)])
async def test_no_learned_interval_passes_the_maximum(
    limiter_factory: LimiterFactory, seen_ms: float, extra_ms: float
) -> None:
    limiter = limiter_factory(time_scale=0.001, max_wait_s=3600.0)
    bucket = scope(FINANCE, group="learn-max")
    learned = await limiter.learn(bucket, seen_ms=seen_ms, extra_ms=extra_ms)
    assert learned is not None and learned.interval_ms == 3600
    assert (await limiter.try_acquire(bucket)).acquired
    assert (await limiter.try_acquire(bucket)).wait_ms <= 3600 + limiter.refill_margin_ms(bucket)


async def test_a_429_our_timing_explains_is_not_learned_and_its_repeat_is(
    redis: Redis, prefix: str
) -> None:
    # WB at the table's limit: finance's minute is 600 ms at 0.01. Our bucket forgetting its
    # last token (as a request delivered early would) sends one request too soon: WB's Retry
    # is within our own interval, which our timing explains.
    config = EmulatorConfig(time_scale=0.01, anchor_date=ANCHOR)
    settings = Settings(time_scale=0.01, redis_prefix=prefix)
    learned_before = sample("wbsync_learned_limits_total", group=FINANCE_DETAILED_REPORT.group)
    async with running_emulator(config) as emu:
        settings = settings.model_copy(update={"wb_base_url": emu.base_url})
        limiter = RateLimiter(redis, limiter_options(settings))
        async with WbClient(
            "a", emu.token(SELLER_A), limiter, options=client_options(settings)
        ) as client:
            bucket = client.scope(FINANCE_DETAILED_REPORT)
            body = {"dateFrom": "2026-08-01", "dateTo": "2026-08-17", "limit": 1}

            async def early_call() -> None:
                await redis.delete(keys.bucket_key(prefix, bucket))
                assert (await client.call(FINANCE_DETAILED_REPORT, json=body)).status == 200

            await client.call(FINANCE_DETAILED_REPORT, json=body)
            await early_call()
            single = await limiter.learned(bucket)
            await client.call(FINANCE_DETAILED_REPORT, json=body)
            await early_call()  # the same again, within ten intervals
            repeated = await limiter.learned(bucket)
        statuses = [e["status"] for e in emu.counters.journal]
    assert statuses == [200, 429, 200, 200, 429, 200]
    assert single is None
    assert repeated is not None and repeated.interval_ms > 600
    learned = sample("wbsync_learned_limits_total", group=FINANCE_DETAILED_REPORT.group)
    assert learned == learned_before + 1


@pytest.mark.parametrize("burst", [0, 5])
@pytest.mark.parametrize(("taken", "left"), [(10, 0), (5, 5), (9, 1)])
async def test_learning_a_slower_interval_gives_the_bucket_no_tokens(
    limiter_factory: LimiterFactory, taken: int, left: int, burst: int
) -> None:
    # 10 a minute at scale 0.1: 600 ms a token, 6 s to fill. WB shows 1200 ms (and a burst of
    # 5, or none: then the bucket's burst stays 10 and its capacity doubles). Nothing here
    # waits: the scale only keeps the time a loaded machine takes between the takes and the
    # look (tens of ms) far below a token's interval.
    limiter = limiter_factory(time_scale=0.1)
    bucket = scope(Limit(period_s=60, limit=10, burst=10), group=f"slower-{taken}-{burst}")
    for _ in range(taken):
        assert (await limiter.try_acquire(bucket)).acquired
    assert await limiter.learn(bucket, seen_ms=1200.0, burst=burst) is not None
    # The bucket holds what it held (at most the new burst), not what the slower interval
    # times the burst would make of its fill time: an emptied bucket stays empty.
    peeked = await limiter.peek(bucket)
    assert peeked.remaining <= left
    if left == 0:
        assert not peeked.acquired and 600 < peeked.wait_ms <= 1200 + 1
    grants = 0
    while (await limiter.try_acquire(bucket)).acquired:
        grants += 1
    assert grants <= left


async def test_two_processes_learning_from_one_moment_tighten_once(
    limiter_factory: LimiterFactory,
) -> None:
    # 60 ms a token at scale 0.001. Two processes each meet WB's limit at the same moment and
    # each add what their 429 showed: the second is the same evidence, not twice as much.
    first, second = limiter_factory(time_scale=0.001), limiter_factory(time_scale=0.001)
    bucket = scope(FINANCE, group="same-moment")
    learned = await first.learn(bucket, extra_ms=60.0)
    assert learned is not None and learned.interval_ms == 120
    assert await second.learn(bucket, extra_ms=60.0) is None
    found = await second.learned(bucket)
    assert found is not None and found.interval_ms == 120
    # A 429 a whole interval later is new evidence: WB is stricter still (the wait is time
    # passing, the condition itself).
    await asyncio.sleep(0.13)
    again = await second.learn(bucket, extra_ms=60.0)
    assert again is not None and again.interval_ms == 180


async def test_a_429_of_a_token_taken_after_the_tightening_tightens_again_at_once(
    limiter_factory: LimiterFactory,
) -> None:
    # 60 ms a token at scale 0.001. A request that took its token before the tightening went at
    # the rate learning replaced: the same evidence, however late its 429 comes. One that took
    # it after went at the learned rate and still met WB's limit: the learned interval is too
    # short, and it grows by what that 429 showed, even within one interval of the tightening.
    first, second = limiter_factory(time_scale=0.001), limiter_factory(time_scale=0.001)
    bucket = scope(FINANCE, group="taken-after")
    learned = await first.learn(bucket, extra_ms=60.0)
    assert learned is not None and learned.interval_ms == 120
    tightened = time.monotonic()
    assert await second.learn(bucket, extra_ms=60.0, taken_ago_ms=3_600_000.0) is None
    taken_ago_ms = (time.monotonic() - tightened) * 1000.0
    again = await second.learn(bucket, extra_ms=60.0, taken_ago_ms=taken_ago_ms)
    assert again is not None and again.interval_ms == 180
