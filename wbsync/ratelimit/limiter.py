"""The shared limiter: ``try_acquire`` (one Lua pass) and ``acquire`` (the wait policy on top).

Policy of ``acquire`` (see docs/design.md):

==============================  =========================  ===================================
situation                       wait <= threshold          wait > threshold
==============================  =========================  ===================================
inside a deferral context       sleep, then take a token   raise ``RateLimitDeferred``
no context (HTTP paths)         sleep while the total wait stays under the ceiling (two periods
                                plus a margin, at most a cap); past it raise ``RateLimitExceeded``
==============================  =========================  ===================================

A bucket follows the table's limit unless WB's replies showed a stricter one: ``learn`` stores
that learned limit beside the bucket (``learn.lua``), every pass of ``bucket.lua`` applies it in
the same round trip, and it expires after ``learned_ttl_s`` (scaled). Nothing WB says pushes a
bucket further than ``max_wait_s`` (scaled): a penalty is clamped to it and a learned interval
never exceeds it, here and in the Lua scripts.

A call spends several buckets, taken in one pass (one ``EVALSHA``), all or nothing: its method
group's and its seller's global one (``GLOBAL_GROUP``: WB's per-seller limiter, which has no rate
of its own unless ``seller_limit`` gives one, only penalties). A deferral names the bucket that
made the wait. A penalty leaves a record beside its bucket (``penalty.py``): ``penalties`` lists
those in force, ``lift`` ends one for every process.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from redis.asyncio.cluster import RedisCluster

from wbsync.errors import RateLimitDeferred, RateLimitExceeded, RedisUnavailableError
from wbsync.observability.context import current_job, deferral_threshold_ms
from wbsync.observability.metrics import LEARNED_LIMITS, LIMITER_WAIT, SLOT_SLEEP
from wbsync.ratelimit.penalty import GLOBAL_GROUP, Penalty, PenaltyBook, bounded_words
from wbsync.redis import keys
from wbsync.redis.lua import lua_script
from wbsync.redis.redis_client import (
    RedisClient,
    describe,
    is_redis_failure,
    redis_failures,
    run_scripts,
)
from wbsync.system import clock
from wbsync.values.scope import BucketScope, Limit

_BUCKET = lua_script("wbsync.ratelimit", "bucket.lua")
_LEARN = lua_script("wbsync.ratelimit", "learn.lua")
#: The most buckets one pass may take (``bucket.lua`` encodes which one made the wait in the
#: low bits of its reply).
MAX_BUCKETS_A_PASS = 8
#: The most buckets whose keys and arguments a limiter keeps built (a few hundred bytes each).
PARTS_CACHE_SIZE = 16_384
#: What a limiter id is noted with once it refused two groups of a seller (no group is "-").
_MANY_GROUPS = "-"
#: The limit a seller's global bucket is named with when it has no rate (only penalties).
_PENALTIES_ONLY = Limit(period_s=1.0, limit=1, burst=1)
_FAILED = "rate limiter: Redis failed"


@dataclass(frozen=True, slots=True)
class TryResult:
    """The outcome of one bucket pass: acquired, or how long until a token is there."""

    acquired: bool
    remaining: int
    wait_ms: int
    blocking: int = 0  # of the buckets passed, the one that needs the longest wait


@dataclass(frozen=True, slots=True)
class Learned:
    """A limit learned from WB's replies: its interval (real ms, scaled world) and burst."""

    interval_ms: float
    burst: int
    expires_in_ms: int

    def as_limit(self, time_scale: float) -> Limit:
        """As an unscaled ``Limit`` of one token per interval (WB's seconds)."""
        period_s = self.interval_ms * self.burst / 1000.0 / time_scale
        return Limit(period_s=period_s, limit=self.burst, burst=self.burst)


@dataclass(frozen=True, slots=True)
class Acquired:
    """A token taken by ``acquire``, and how long the caller slept for it.

    ``taken_at`` (``clock.monotonic()`` seconds) is the start of the pass that took it: no
    later than the token was taken. ``ready_at`` is no later than the moment it could first be
    taken: ``taken_at``, or, when the caller slept for it, when the pass before said it would
    be there (a loaded event loop wakes a sleeper late, and the bucket stays idle meanwhile).
    So the previous token was taken no later than one interval before ``ready_at``, and a
    request that ran into WB's limit can tell how long after that it reached WB, at most
    (``Feedback.on_429``).
    """

    remaining: int
    waited_ms: float
    taken_at: float
    ready_at: float


@dataclass(frozen=True, slots=True)
class LimiterOptions:
    """What a limiter is configured by; the composition root builds it from the settings
    (``wbsync.shared.runtime.limiter_options``), so the limiter knows nothing of ``Settings``.

    ``time_scale`` multiplies every bucket's period, the ceiling's margin and cap and the
    learned limits' TTL, so tests and demos can turn WB's minutes into milliseconds. Penalties
    are real milliseconds, not scaled. ``seller_limit``: a rate of the seller's global bucket
    (WB publishes none; None = the bucket holds only WB's penalties).

    Each token's refill interval gets a margin, ``refill_margin_ratio`` of the interval and at
    most ``refill_margin_cap_ms``: WB's bucket and ours see each request a few milliseconds
    apart (network, a busy event loop), and a request that reaches WB even slightly before
    WB's bucket refilled is refused with a 429. The ratio follows the (scaled) interval, so a
    bucket never loses more than that share of its rate, at any time scale; the cap is real
    milliseconds, not scaled, because the jitter it absorbs is real time.
    """

    prefix: str
    time_scale: float = 1.0
    ceiling_margin_ms: float = 5000.0
    ceiling_cap_ms: float = 125_000.0
    refill_margin_ratio: float = 0.0
    refill_margin_cap_ms: float = 25.0
    learned_ttl_s: float = 3600.0
    max_wait_s: float = 21_600.0
    seller_limit: Limit | None = None

    def __post_init__(self) -> None:
        if self.time_scale <= 0:
            raise ValueError(f"time_scale must be > 0, got {self.time_scale}")
        if self.learned_ttl_s <= 0:
            raise ValueError(f"learned_ttl_s must be > 0, got {self.learned_ttl_s}")
        if not 0 < self.max_wait_s < math.inf:
            raise ValueError(f"max_wait_s must be > 0 and finite, got {self.max_wait_s}")


class RateLimiter:
    """Token buckets per (cabinet, limit group), shared by every process through Redis,
    configured by ``LimiterOptions``."""

    def __init__(self, redis: RedisClient, options: LimiterOptions) -> None:
        self._redis = redis
        self._prefix = options.prefix
        self._time_scale = time_scale = options.time_scale
        self._ceiling_margin_ms = options.ceiling_margin_ms * time_scale
        self._ceiling_cap_ms = options.ceiling_cap_ms * time_scale
        self._refill_margin_ratio = options.refill_margin_ratio
        self._refill_margin_cap_ms = options.refill_margin_cap_ms
        self._learned_ttl_ms = options.learned_ttl_s * 1000.0 * time_scale
        self._max_wait_ms = options.max_wait_s * 1000.0 * time_scale
        self._max_wait_arg = repr(self._max_wait_ms)
        self._take_head = (b"1", b"0", b"-1", self._max_wait_arg.encode())
        self._script = redis.register_script(_BUCKET)
        self._learn = redis.register_script(_LEARN)
        self._learned_index = keys.learned_index_key(options.prefix)
        self._book = PenaltyBook(redis, options.prefix)
        self._seller_limit = options.seller_limit
        self._built: dict[BucketScope, tuple[tuple[bytes, ...], tuple[bytes, ...]]] = {}

    @property
    def time_scale(self) -> float:
        """The factor every WB period is multiplied by."""
        return self._time_scale

    @property
    def max_wait_ms(self) -> float:
        """The furthest (real ms) a penalty or a learned interval may push a bucket."""
        return self._max_wait_ms

    def seller_scope(self, cabinet: str) -> BucketScope:
        """The seller's global bucket (WB's per-seller limiter above the method groups)."""
        return BucketScope(cabinet, GLOBAL_GROUP, self._seller_limit or _PENALTIES_ONLY)

    def spends(self, scope: BucketScope) -> tuple[BucketScope, ...]:
        """The buckets one call on ``scope`` takes a token of: its own and its seller's."""
        if scope.group == GLOBAL_GROUP:
            return (scope,)
        return (scope, self.seller_scope(scope.cabinet))

    def ceiling_ms(self, scope: BucketScope) -> float:
        """The longest total wait ``acquire`` sleeps outside a deferral context."""
        periods = 2 * scope.limit.period_s * 1000.0 * self._time_scale + self._ceiling_margin_ms
        return min(periods, self._ceiling_cap_ms)

    def refill_margin_ms(self, scope: BucketScope) -> float:
        """The real milliseconds added to each of the bucket's token intervals."""
        interval_ms = scope.limit.interval_ms * self._time_scale
        return min(self._refill_margin_ratio * interval_ms, self._refill_margin_cap_ms)

    async def try_acquire(self, scope: BucketScope, *, cost: int = 1) -> TryResult:
        """Take ``cost`` tokens if they are there: one atomic round trip, no sleep, no raise."""
        if not 1 <= cost <= scope.limit.burst:
            raise ValueError(f"cost must be within 1..burst ({scope.limit.burst}), got {cost}")
        return await self._pass((scope,), cost=cost, penalty_ms=0)

    async def try_acquire_all(self, scopes: Sequence[BucketScope]) -> TryResult:
        """Take one token of every bucket in ``scopes`` (one seller's) or none: one round trip;
        ``blocking`` names the bucket that needs the longest wait."""
        if not 1 <= len(scopes) <= MAX_BUCKETS_A_PASS:
            raise ValueError(f"a pass takes 1..{MAX_BUCKETS_A_PASS} buckets, got {len(scopes)}")
        return await self._pass(tuple(scopes), cost=1, penalty_ms=0)

    async def peek(self, scope: BucketScope) -> TryResult:
        """Read the bucket without taking a token (``acquired`` = a token is there now)."""
        return await self._pass((scope,), cost=0, penalty_ms=0)

    async def peek_many(self, scopes: Sequence[BucketScope]) -> list[TryResult]:
        """``peek`` of many buckets, in the order given, in two round trips.

        A full bucket has no key (``bucket.lua`` lets it expire), so one ``MGET`` finds the
        buckets worth a pass; only those get one, in one pipeline.
        """
        if not scopes:
            return []
        names = [keys.bucket_key(self._prefix, scope) for scope in scopes]
        with redis_failures(_FAILED):
            stored = await (
                self._redis.mget_nonatomic(names)  # a cluster's buckets sit in many slots
                if isinstance(self._redis, RedisCluster)
                else self._redis.mget(names)
            )
            used = [i for i, value in enumerate(stored) if value is not None]
            replies = await run_scripts(
                self._redis,
                [
                    (self._script, _names(self._keys((s,))), self._args((s,), cost=0, penalty_ms=0))
                    for s in (scopes[i] for i in used)
                ],
            )
        out = [TryResult(acquired=True, remaining=s.limit.burst, wait_ms=0) for s in scopes]
        for i, reply in zip(used, replies, strict=True):
            out[i] = _result(reply)
        return out

    async def penalize(
        self, scope: BucketScope, wait_ms: float, *, words: str | None = None
    ) -> None:
        """Make the bucket's next token free no earlier than ``wait_ms`` from now, for everyone,
        and record the penalty with WB's ``words`` (bounded, sanitised) until it lifts. A wait
        past ``max_wait_ms`` is clamped to it; NaN or <= 0 changes nothing."""
        if not wait_ms > 0:
            return
        penalty_ms = min(float(wait_ms), self._max_wait_ms)
        text = bounded_words(words) or ""
        with redis_failures(_FAILED):
            record = keys.penalty_key(self._prefix, scope.cabinet, scope.group)
            reply = await self._script(
                keys=[*self._keys((scope,)), record],
                args=[*self._args((scope,), cost=0, penalty_ms=penalty_ms), text],
            )
        await self._book.index(_member(scope), float(reply[2]) + penalty_ms, float(reply[2]))

    async def penalties(self) -> list[Penalty]:
        """Every penalty in force now, soonest lifted first: two round trips."""
        return await self._book.in_force()

    async def lift(self, seller: str, group: str) -> Penalty | None:
        """End the penalty of (seller, group) for every process: its bucket is full and may be
        used at once. Answers the penalty that was in force, None if there was none."""
        return await self._book.lift(seller, group)

    async def level(self, scope: BucketScope, tokens: int) -> None:
        """Hold no more than ``tokens`` tokens now (WB showed its bucket emptier than ours)."""
        await self._pass((scope,), cost=0, penalty_ms=0, level=max(0, tokens))

    async def learn(
        self,
        scope: BucketScope,
        *,
        seen_ms: float = 0.0,
        extra_ms: float = 0.0,
        burst: int = 0,
        taken_ago_ms: float = 0.0,
    ) -> Learned | None:
        """Tighten the bucket to what WB showed, for every process, until the TTL passes; in
        the same pass the bucket keeps no more tokens than it held, at the stricter rate.

        ``seen_ms``: WB's interval is at least this; ``extra_ms``: at least the current one plus
        this; ``burst``: WB's burst (real ms of the scaled world; 0 = unknown).
        ``taken_ago_ms``: the refused request took its token at least this long ago (0 =
        unknown): one that took it before the last tightening went at the replaced rate, and
        its ``extra_ms`` adds nothing; one that took it after went at the learned rate, and
        adds it again (unknown: within one interval of the tightening counts as before).
        Answers the learned limit now in force when it got stricter, else None (also when WB
        is no stricter than the table: nothing is stored).
        """
        with redis_failures(_FAILED):
            changed, interval_ms, burst_now, stored = await self._learn(
                keys=[keys.learned_key(self._prefix, scope), keys.bucket_key(self._prefix, scope)],
                args=[
                    repr(scope.limit.interval_ms * self._time_scale),
                    scope.limit.burst,
                    repr(self._bounded(seen_ms)),
                    repr(self._bounded(extra_ms)),
                    int(burst),
                    repr(self._learned_ttl_ms),
                    repr(self._max_wait_ms),
                    repr(self.refill_margin_ms(scope)),
                    repr(self._bounded(taken_ago_ms)),
                ],
            )
            if stored:
                await self._index_learned(scope)
        if not changed:
            return None
        LEARNED_LIMITS.labels(scope.group).inc()
        return Learned(float(interval_ms), int(burst_now), int(self._learned_ttl_ms))

    async def seen_again(self, scope: BucketScope, *, window_ms: float) -> bool:
        """Note a 429 on the bucket; True when another was noted within ``window_ms`` before
        (that one's note is then used up), False when this is the first."""
        key = keys.learn_evidence_key(self._prefix, scope)
        with redis_failures(_FAILED):
            first = await self._redis.set(key, 1, nx=True, px=max(1, math.ceil(window_ms)))
            if first:
                return False
            await self._redis.delete(key)
        return True

    async def limits_another_group(self, scope: BucketScope, limiter_id: str) -> bool:
        """Note that WB's limiter ``limiter_id`` refused a call of ``scope``; True when it has
        refused another group of the seller within ``learned_ttl_s``: then it is the seller's
        global limiter, not the method's. One round trip (two the first time it is found)."""
        key = keys.limiter_seen_key(self._prefix, scope.cabinet)
        with redis_failures(_FAILED):
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.hsetnx(key, limiter_id, scope.group)
                pipe.hget(key, limiter_id)
                pipe.pexpire(key, max(1, math.ceil(self._learned_ttl_ms)))
                _, first, _ = await pipe.execute()
            if _text(first) == scope.group:
                return False
            if _text(first) != _MANY_GROUPS:
                await self._redis.hset(key, limiter_id, _MANY_GROUPS)
        return True

    def _bounded(self, ms: float) -> float:
        """``ms`` within 0..max_wait_ms (NaN: 0), so no header reaches Lua as inf or nan."""
        return min(float(ms), self._max_wait_ms) if ms > 0 else 0.0

    async def _index_learned(self, scope: BucketScope) -> None:
        """List the bucket in the index of learned limits until its learned limit expires (a
        separate key: in a cluster it lives in another slot than the learned limit), dropping
        the entries that have expired."""
        now = clock.now_ms()
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.zadd(self._learned_index, {_member(scope): now + self._learned_ttl_ms})
            pipe.zremrangebyscore(self._learned_index, "-inf", now)
            await pipe.execute()

    async def learned_cabinets(self) -> set[str]:
        """The cabinets (WB seller ids, as in ``BucketScope.cabinet``) with a learned limit in
        force for any of their buckets: one read of the index, however many buckets exist."""
        with redis_failures(_FAILED):
            members = cast(
                "list[str | bytes]",
                await self._redis.zrangebyscore(self._learned_index, clock.now_ms(), "+inf"),
            )
        return {_text(m).rpartition(":")[0] for m in members}

    async def learned(self, scope: BucketScope) -> Learned | None:
        """The learned limit in force for the bucket, if any."""
        [found] = await self.learned_many([scope])
        return found

    async def learned_many(self, scopes: Sequence[BucketScope]) -> list[Learned | None]:
        """``learned`` of many buckets, in the order given, in one pipeline."""
        if not scopes:
            return []
        with redis_failures(_FAILED):
            async with self._redis.pipeline(transaction=False) as pipe:
                for scope in scopes:
                    key = keys.learned_key(self._prefix, scope)
                    pipe.hmget(key, "interval_ms", "burst")
                    pipe.pttl(key)
                replies = await pipe.execute()
        out: list[Learned | None] = []
        for (interval_ms, burst), ttl_ms in zip(replies[::2], replies[1::2], strict=True):
            found = interval_ms is not None and burst is not None and ttl_ms >= 0
            out.append(Learned(float(interval_ms), int(burst), int(ttl_ms)) if found else None)
        return out

    async def forget(self, scope: BucketScope) -> bool:
        """Drop the bucket's learned limit (the table applies again); True if there was one."""
        with redis_failures(_FAILED):
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.delete(keys.learned_key(self._prefix, scope))
                pipe.zrem(self._learned_index, _member(scope))
                deleted, _ = await pipe.execute()
            return bool(deleted)

    async def acquire(self, scope: BucketScope) -> Acquired:
        """Take one token of every bucket a call on ``scope`` spends (``spends``), waiting or
        deferring as the policy above says; a deferral names the bucket that made the wait."""
        scopes = self.spends(scope)
        started = clock.monotonic()
        waited_ms = 0.0
        ready_at: float | None = None
        while True:
            passed = clock.monotonic()
            result = await self._pass(scopes, cost=1, penalty_ms=0)
            if result.acquired:
                self._observe(scope, "slept" if waited_ms else "acquired", waited_ms)
                ready = passed if ready_at is None else min(passed, ready_at)
                return Acquired(
                    remaining=result.remaining, waited_ms=waited_ms, taken_at=passed, ready_at=ready
                )
            ready_at = passed + result.wait_ms / 1000.0
            threshold = deferral_threshold_ms()
            if threshold is not None:
                if result.wait_ms > threshold:
                    self._observe(scope, "deferred", waited_ms)
                    raise RateLimitDeferred(result.wait_ms, scopes[result.blocking])
            elif waited_ms + result.wait_ms > self.ceiling_ms(scope):
                self._observe(scope, "refused", waited_ms)
                raise RateLimitExceeded(result.wait_ms / 1000.0, scopes[result.blocking])
            await clock.sleep_ms(result.wait_ms)
            waited_ms = (clock.monotonic() - started) * 1000.0

    def _keys(self, scopes: Sequence[BucketScope]) -> list[bytes]:
        if len(scopes) == 1:
            return list(self._parts(scopes[0])[0])
        return [key for s in scopes for key in self._parts(s)[0]]

    def _args(
        self, scopes: Sequence[BucketScope], *, cost: int, penalty_ms: float, level: int = -1
    ) -> list[bytes | str | int]:
        if cost == 1 and penalty_ms == 0 and level == -1:
            out: list[bytes | str | int] = list(self._take_head)
        else:
            out = [cost, repr(float(penalty_ms)), level, self._max_wait_arg]
        for s in scopes:
            out += self._parts(s)[1]
        return out

    def _parts(self, scope: BucketScope) -> tuple[tuple[bytes, ...], tuple[bytes, ...]]:
        """The bucket's two keys and three arguments of ``bucket.lua``, built and encoded once:
        the hot path then only looks them up (building them cost a third of its client time)."""
        parts = self._built.get(scope)
        if parts is None:
            if len(self._built) >= PARTS_CACHE_SIZE:
                self._built.clear()  # a cache, not a registry: rebuilt on the next use
            parts = self._built[scope] = (self._keys_of(scope), self._args_of(scope))
        return parts

    def _keys_of(self, s: BucketScope) -> tuple[bytes, ...]:
        prefix = self._prefix
        return (keys.bucket_key(prefix, s).encode(), keys.learned_key(prefix, s).encode())

    def _args_of(self, s: BucketScope) -> tuple[bytes, ...]:
        if s.group == GLOBAL_GROUP and self._seller_limit is None:
            return (b"0", b"1", b"0")  # no rate of its own: only penalties
        limit = self._seller_limit if s.group == GLOBAL_GROUP else s.limit
        assert limit is not None
        interval_ms = limit.interval_ms * self._time_scale
        margin_ms = min(self._refill_margin_ratio * interval_ms, self._refill_margin_cap_ms)
        return (repr(interval_ms).encode(), str(limit.burst).encode(), repr(margin_ms).encode())

    async def _pass(
        self,
        scopes: Sequence[BucketScope],
        *,
        cost: int,
        penalty_ms: float,
        level: int = -1,
    ) -> TryResult:
        try:  # redis_failures, written out: the hot path saves the context manager
            reply = await self._script(
                keys=self._keys(scopes),
                args=self._args(scopes, cost=cost, penalty_ms=penalty_ms, level=level),
            )
        except Exception as exc:
            if not is_redis_failure(exc):
                raise
            raise RedisUnavailableError(f"{_FAILED}: {describe(exc)}") from exc
        return _result(reply)

    def _observe(self, scope: BucketScope, outcome: str, waited_ms: float) -> None:
        LIMITER_WAIT.labels(scope.group, outcome).observe(waited_ms / 1000.0)
        job = current_job()
        if job is not None and waited_ms:
            SLOT_SLEEP.labels(job.queue).inc(waited_ms / 1000.0)


def _result(reply: int | list[int]) -> TryResult:
    if isinstance(reply, list):  # a penalty's pass
        return TryResult(acquired=False, remaining=0, wait_ms=int(reply[0]), blocking=reply[1] - 1)
    if reply >= 0:
        return TryResult(acquired=True, remaining=reply, wait_ms=0)
    wait, blocking = divmod(-reply, MAX_BUCKETS_A_PASS)
    return TryResult(acquired=False, remaining=0, wait_ms=wait, blocking=blocking)


def _member(scope: BucketScope) -> str:
    """The bucket in the indexes of learned limits and penalties (group names hold no
    colon)."""
    return f"{scope.cabinet}:{scope.group}"


def _names(encoded: list[bytes]) -> list[str]:
    return [key.decode() for key in encoded]


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
