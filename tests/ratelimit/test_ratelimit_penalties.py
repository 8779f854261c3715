"""WB's penalties in the limiter: honoured to the cap, recorded, listed, lifted; a seller's
global bucket taken with the method's in one pass."""

from __future__ import annotations

import asyncio
import functools
import math
import time

import pytest
from redis.asyncio import Redis
from redis.crc import key_slot

from tests.support.limiter import LimiterFactory
from wbsync.errors import RateLimitDeferred
from wbsync.observability.context import run_with_rate_limit_deferral
from wbsync.ratelimit import (
    GLOBAL_GROUP,
    BucketScope,
    Limit,
    LimiterOptions,
    RateLimiter,
)
from wbsync.ratelimit import limiter as limiter_module
from wbsync.ratelimit.limiter import MAX_BUCKETS_A_PASS
from wbsync.ratelimit.words import WORDS_MAX_CHARS
from wbsync.redis import keys
from wbsync.redis.redis_server import EmbeddedRedis
from wbsync.wb import endpoints as eps

FINANCE = Limit(period_s=60, limit=1, burst=1)
PRICES = Limit(period_s=6, limit=10, burst=10)
#: WB's longest penalty seen: a finance 429's X-Ratelimit-Retry (5 h 4 min).
LONGEST_SEEN_S = 18_236
SCALE = 0.0001  # 18,236 s -> 1,823.6 ms


def scope(limit: Limit, cabinet: str = "seller-1", group: str = "g") -> BucketScope:
    return BucketScope(cabinet=cabinet, group=group, limit=limit)


async def test_a_five_hour_penalty_is_honoured_to_the_second(
    limiter_factory: LimiterFactory,
) -> None:
    limiter = limiter_factory(time_scale=SCALE)  # the default cap: 6 h
    bucket = scope(PRICES, group="finance")
    wait_ms = LONGEST_SEEN_S * 1000.0 * SCALE
    before = time.monotonic()
    await limiter.penalize(bucket, wait_ms, words="limited by 1b6f")
    refused = await limiter.try_acquire(bucket)
    elapsed_ms = (time.monotonic() - before) * 1000.0
    # WB's whole wait, not the bucket's period (a minute is 6 ms at this scale).
    assert not refused.acquired
    assert wait_ms - elapsed_ms - 1 <= refused.wait_ms <= math.ceil(wait_ms)
    # The try right after the wait the refusal announced is the one admitted: the limiter adds
    # nothing of its own to WB's wait. (Redis's clock and this process's may part by a
    # millisecond over the wait: then one more try, a millisecond on.)
    await asyncio.sleep(refused.wait_ms / 1000.0)
    after = await limiter.try_acquire(bucket)
    if not after.acquired:
        assert after.wait_ms <= 2, after
        await asyncio.sleep(after.wait_ms / 1000.0)
        after = await limiter.try_acquire(bucket)
    assert after.acquired
    # Nothing was let through before the lift: the grant came after the whole wait (the
    # penalty began somewhere after ``before``).
    assert (time.monotonic() - before) * 1000.0 >= wait_ms


async def test_a_penalty_past_the_cap_is_clamped_and_none_shortens_another(
    limiter_factory: LimiterFactory,
) -> None:
    limiter = limiter_factory(time_scale=SCALE)
    cap_ms = limiter.max_wait_ms
    assert cap_ms == pytest.approx(21_600 * 1000.0 * SCALE)  # the default cap, scaled
    bucket = scope(FINANCE, group="clamp")
    await limiter.penalize(bucket, 1e12)
    assert cap_ms - 100 <= (await limiter.peek(bucket)).wait_ms <= cap_ms
    await limiter.penalize(bucket, 10.0, words="shorter")
    assert (await limiter.peek(bucket)).wait_ms > cap_ms - 200
    [penalty] = await limiter.penalties()
    assert penalty.words is None and penalty.remaining_ms > cap_ms - 200


@pytest.mark.parametrize("wait_ms", [math.nan, -5.0, 0.0, -math.inf])
async def test_no_wait_is_no_penalty(limiter_factory: LimiterFactory, wait_ms: float) -> None:
    limiter = limiter_factory(time_scale=SCALE)
    bucket = scope(FINANCE, group="none")
    await limiter.penalize(bucket, wait_ms)
    assert (await limiter.peek(bucket)).acquired
    assert await limiter.penalties() == []


async def test_penalties_are_listed_for_every_process_and_lifted_for_all(
    limiter_factory: LimiterFactory, redis: Redis, prefix: str
) -> None:
    mine, theirs = limiter_factory(time_scale=0.01), limiter_factory(time_scale=0.01)
    finance = scope(FINANCE, cabinet="s-1", group="finance")
    other = scope(FINANCE, cabinet="s-2", group="finance")
    await mine.penalize(finance, 30_000, words="limited by\x00 abc\n\tdef \x1b[31m")
    await mine.penalize(other, 20_000)
    listed = await theirs.penalties()
    assert [(p.seller, p.group) for p in listed] == [("s-2", "finance"), ("s-1", "finance")]
    assert listed[1].words == "limited by abc def [31m"
    assert listed[1].remaining_ms <= 30_000 and listed[0].words is None
    record = keys.penalty_key(prefix, "s-1", "finance")
    assert 0 < await redis.pttl(record) <= 30_000  # the record expires when it lifts

    lifted = await theirs.lift("s-1", "finance")
    assert (
        lifted is not None and lifted.seller == "s-1" and lifted.words == "limited by abc def [31m"
    )
    assert (await mine.try_acquire(finance)).acquired  # at once, for every process
    assert [p.seller for p in await mine.penalties()] == ["s-2"]
    assert await theirs.lift("s-1", "finance") is None
    assert await redis.exists(record) == 0


#: A bucket whose interval (36 s at time scale 0.01) dwarfs any delay between two passes.
HOURLY = Limit(period_s=3600, limit=1, burst=1)


async def test_a_refused_requests_token_is_given_back_with_the_penalty(
    limiter_factory: LimiterFactory,
) -> None:
    """WB serves nothing with a 429, so it counts nothing: the token the refused request took
    is given back and the bucket frees when WB said a retry can succeed, not an interval
    later (kept, it would cost the whole interval)."""
    limiter = limiter_factory(time_scale=0.01)
    kept, given = scope(HOURLY, group="kept"), scope(HOURLY, group="given")
    for bucket in (kept, given):
        assert (await limiter.try_acquire(bucket)).acquired  # the request WB refused
        await limiter.penalize(bucket, 1000, given_back=int(bucket is given))
    assert (await limiter.peek(kept)).wait_ms > 30_000  # the token's whole interval
    assert (await limiter.peek(given)).wait_ms <= 1000  # WB's word
    assert all(p.remaining_ms <= 1000 for p in await limiter.penalties())  # the record is WB's
    with pytest.raises(ValueError, match="given_back"):
        await limiter.penalize(given, 10, given_back=-1)


async def test_a_token_given_back_never_shortens_a_penalty_in_force(
    limiter_factory: LimiterFactory,
) -> None:
    """A request sent before a penalty began, refused after it: its token is given back, but
    the bucket still frees no earlier than the penalty lifts."""
    limiter = limiter_factory(time_scale=0.01)
    bucket = scope(HOURLY, group="in-force")
    assert (await limiter.try_acquire(bucket)).acquired
    await limiter.penalize(bucket, 60_000)
    await limiter.penalize(bucket, 10, given_back=1)
    assert (await limiter.peek(bucket)).wait_ms > 50_000  # not 60 s less the 36 s interval


async def test_words_are_bounded(limiter_factory: LimiterFactory) -> None:
    limiter = limiter_factory()
    await limiter.penalize(scope(FINANCE, group="long"), 5000, words="x" * 10_000)
    [penalty] = await limiter.penalties()
    assert penalty.words is not None and len(penalty.words) == WORDS_MAX_CHARS


async def test_a_lapsed_penalty_leaves_the_list(limiter_factory: LimiterFactory) -> None:
    limiter = limiter_factory()
    bucket = scope(FINANCE, group="short")
    await limiter.penalize(bucket, 30)
    deadline = time.monotonic() + 30
    while await limiter.penalties():
        assert time.monotonic() < deadline
        await asyncio.sleep(0.01)
    assert (await limiter.try_acquire(bucket)).acquired


async def test_a_global_penalty_holds_every_group_of_the_seller_only(
    limiter_factory: LimiterFactory,
) -> None:
    limiter = limiter_factory(time_scale=0.01)
    seller = limiter.seller_scope("s-9")
    assert seller.group == GLOBAL_GROUP
    await limiter.penalize(seller, 60_000, words="global limiter")
    for group in ("prices", "finance", "statistics"):
        bucket = scope(PRICES, "s-9", group)
        with pytest.raises(RateLimitDeferred) as caught:
            await run_with_rate_limit_deferral(10, functools.partial(limiter.acquire, bucket))
        assert caught.value.scope == seller  # the deferral names the bucket that made it
        assert 59_000 <= caught.value.wait_ms <= 60_000
    assert (await limiter.peek(scope(PRICES, "s-9", "prices"))).remaining == PRICES.burst
    # Another seller is not held.
    await limiter.acquire(scope(PRICES, "s-10", "prices"))
    lifted = await limiter.lift("s-9", GLOBAL_GROUP)
    assert lifted is not None and lifted.words == "global limiter"
    await limiter.acquire(scope(PRICES, "s-9", "prices"))


async def test_a_take_of_two_buckets_is_all_or_nothing_and_names_the_slowest(
    limiter_factory: LimiterFactory,
) -> None:
    limiter = limiter_factory(time_scale=0.01)
    prices, finance = scope(PRICES, "s-3", "prices"), scope(FINANCE, "s-3", "finance")
    assert (await limiter.try_acquire(finance)).acquired
    both = await limiter.try_acquire_all([prices, finance])
    assert not both.acquired and both.blocking == 1
    assert 500 <= both.wait_ms <= 600  # finance's window: 60 s x 0.01
    # prices gave nothing: all or nothing.
    assert (await limiter.peek(prices)).remaining == PRICES.burst


async def test_a_seller_rate_paces_every_group(redis: Redis, prefix: str) -> None:
    options = LimiterOptions(prefix=prefix, time_scale=0.01, seller_limit=FINANCE)
    limiter = RateLimiter(redis, options)
    await limiter.acquire(scope(PRICES, "s-4", "prices"))
    with pytest.raises(RateLimitDeferred) as caught:
        await run_with_rate_limit_deferral(10, lambda: limiter.acquire(scope(PRICES, "s-4", "x")))
    assert caught.value.scope.group == GLOBAL_GROUP


async def test_the_take_of_both_buckets_is_one_command() -> None:
    # A server of its own: commandstats count every client's commands, and the suite's other
    # processes share a configured Redis.
    with EmbeddedRedis() as server:
        redis = Redis.from_url(server.url)
        try:
            limiter = RateLimiter(redis, LimiterOptions(prefix="cost"))
            bucket = scope(PRICES, "s-5", "prices")
            await limiter.acquire(bucket)  # the script is loaded

            async def commands() -> dict[str, int]:
                info = await redis.info("commandstats")
                return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in info.items()}

            before = await commands()
            for _ in range(5):
                await limiter.acquire(bucket)
            after = await commands()
        finally:
            await redis.aclose()
    ran = {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}
    # Commands a script runs count too: each take read both buckets (GET) inside its one
    # EVALSHA; nothing else was sent but the first INFO.
    assert ran["evalsha"] == 5 and ran["get"] == 10
    assert set(ran) <= {"evalsha", "info", "time", "get", "hmget", "set"}


def test_no_limit_group_is_named_like_the_global_bucket() -> None:
    assert GLOBAL_GROUP not in {eps.ENDPOINTS[name].group for name in eps.ENDPOINTS}


async def test_a_pass_takes_at_most_eight_buckets(limiter_factory: LimiterFactory) -> None:
    limiter = limiter_factory()
    buckets = [scope(PRICES, "s-6", f"g{i}") for i in range(MAX_BUCKETS_A_PASS + 1)]
    with pytest.raises(ValueError, match=r"1\.\.8"):
        await limiter.try_acquire_all(buckets)
    # The last of eight is named when it makes the wait.
    await limiter.penalize(buckets[MAX_BUCKETS_A_PASS - 1], 5000)
    refused = await limiter.try_acquire_all(buckets[:MAX_BUCKETS_A_PASS])
    assert not refused.acquired and refused.blocking == MAX_BUCKETS_A_PASS - 1


def test_a_sellers_keys_share_one_cluster_slot_and_sellers_spread() -> None:
    # A Redis Cluster runs a script only on keys of one slot: the pass over a method's bucket
    # and the seller's global one, the learning, the record and the lift must all find theirs.
    def slots(seller: str) -> set[int]:
        found = set()
        for group in ("finance", GLOBAL_GROUP):
            bucket = scope(FINANCE, seller, group)
            names = [
                keys.bucket_key("p", bucket),
                keys.learned_key("p", bucket),
                keys.penalty_key("p", seller, group),
                keys.learn_evidence_key("p", bucket),
                keys.limiter_seen_key("p", seller),
            ]
            found |= {key_slot(name.encode()) for name in names}
        return found

    assert all(len(slots(f"seller-{i}")) == 1 for i in range(20))
    assert len(set().union(*(slots(f"seller-{i}") for i in range(20)))) > 10


async def test_the_built_keys_cache_is_bounded(
    limiter_factory: LimiterFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(limiter_module, "PARTS_CACHE_SIZE", 4)
    limiter = limiter_factory()
    buckets = [scope(PRICES, f"cache-{i}", "prices") for i in range(10)]
    for bucket in buckets + buckets:  # each bucket again after the cache was emptied
        assert (await limiter.try_acquire(bucket)).acquired
    assert len(limiter._built) <= 4
    assert (await limiter.peek(buckets[0])).remaining == PRICES.burst - 2
