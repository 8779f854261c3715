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
that learned limit beside the bucket (``learn.lua``, ``learned.py``), every pass of
``bucket.lua`` applies it in the same round trip, and it expires after ``learned_ttl_s``
(scaled). Nothing WB says pushes a
bucket further than ``max_wait_s`` (scaled): a penalty is clamped to it and a learned interval
never exceeds it, here and in the Lua scripts.

A call spends several buckets, taken in one pass (one ``EVALSHA``), all or nothing: its method
group's and its seller's global one (``GLOBAL_GROUP``: WB's per-seller limiter, which has no rate
of its own unless ``seller_limit`` gives one, only penalties). A deferral names the bucket that
made the wait. A penalty leaves a record beside its bucket (``penalty.py``): ``penalties`` lists
those in force, ``lift`` ends one for every process.
"""

from __future__ import annotations

from collections.abc import Sequence

from redis.asyncio.cluster import RedisCluster

from wbsync.errors import RateLimitDeferred, RateLimitExceeded, RedisUnavailableError
from wbsync.observability.context import current_job, deferral_threshold_ms
from wbsync.observability.metrics import LIMITER_WAIT, SLOT_SLEEP
from wbsync.ratelimit.learned import Learned, LearnedLimits, index_member
from wbsync.ratelimit.options import LimiterOptions
from wbsync.ratelimit.penalty import GLOBAL_GROUP, Penalty, PenaltyBook
from wbsync.ratelimit.results import Acquired, TryResult
from wbsync.ratelimit.words import clean_words
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
#: The most buckets one pass may take (``bucket.lua`` encodes which one made the wait in the
#: low bits of its reply).
MAX_BUCKETS_A_PASS = 8
#: The most buckets whose keys and arguments a limiter keeps built (a few hundred bytes each).
PARTS_CACHE_SIZE = 16_384
#: The limit a seller's global bucket is named with when it has no rate (only penalties).
_PENALTIES_ONLY = Limit(period_s=1.0, limit=1, burst=1)
_FAILED = "rate limiter: Redis failed"


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
        self._max_wait_ms = options.max_wait_s * 1000.0 * time_scale
        self._max_wait_arg = repr(self._max_wait_ms)
        self._take_head = (b"1", b"0", b"-1", self._max_wait_arg.encode())
        self._script = redis.register_script(_BUCKET)
        self._learned_limits = LearnedLimits(
            redis,
            options.prefix,
            time_scale=time_scale,
            learned_ttl_ms=options.learned_ttl_s * 1000.0 * time_scale,
            max_wait_ms=self._max_wait_ms,
        )
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
        self,
        scope: BucketScope,
        wait_ms: float,
        *,
        words: str | None = None,
        given_back: int = 0,
    ) -> None:
        """Make the bucket's next token free no earlier than ``wait_ms`` from now, for everyone,
        and record the penalty with WB's ``words`` (``clean_words``) until it lifts. A wait
        past ``max_wait_ms`` is clamped to it; NaN or <= 0 changes nothing.

        ``given_back``: tokens of the bucket that the refused request took and WB did not count
        (WB serves nothing with a 429), returned in the same pass before the penalty applies,
        so the bucket frees when WB said a retry can succeed, not one interval later."""
        if not wait_ms > 0:
            return
        if given_back < 0:
            raise ValueError(f"given_back must be >= 0, got {given_back}")
        penalty_ms = min(float(wait_ms), self._max_wait_ms)
        text = clean_words(words) or ""
        with redis_failures(_FAILED):
            record = keys.penalty_key(self._prefix, scope.cabinet, scope.group)
            reply = await self._script(
                keys=[*self._keys((scope,)), record],
                args=[*self._args((scope,), cost=0, penalty_ms=penalty_ms), text, given_back],
            )
        await self._book.index(index_member(scope), float(reply[2]) + penalty_ms, float(reply[2]))

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
        """Tighten the bucket to what WB showed, for every process, until the TTL passes
        (``LearnedLimits.learn``): the learned limit now in force when it got stricter."""
        return await self._learned_limits.learn(
            scope,
            seen_ms=seen_ms,
            extra_ms=extra_ms,
            burst=burst,
            taken_ago_ms=taken_ago_ms,
            refill_margin_ms=self.refill_margin_ms(scope),
        )

    async def seen_again(self, scope: BucketScope, *, window_ms: float) -> bool:
        """Note a 429 on the bucket; True when another was noted within ``window_ms`` before
        (``LearnedLimits.seen_again``)."""
        return await self._learned_limits.seen_again(scope, window_ms=window_ms)

    async def limits_another_group(self, scope: BucketScope, limiter_id: str) -> bool:
        """Whether WB's limiter ``limiter_id`` has refused another group of the seller too
        (``LearnedLimits.limits_another_group``)."""
        return await self._learned_limits.limits_another_group(scope, limiter_id)

    async def learned_cabinets(self) -> set[str]:
        """The cabinets with a learned limit in force (``LearnedLimits.learned_cabinets``)."""
        return await self._learned_limits.learned_cabinets()

    async def learned(self, scope: BucketScope) -> Learned | None:
        """The learned limit in force for the bucket, if any."""
        [found] = await self._learned_limits.learned_many([scope])
        return found

    async def learned_many(self, scopes: Sequence[BucketScope]) -> list[Learned | None]:
        """``learned`` of many buckets, in the order given, in one pipeline."""
        return await self._learned_limits.learned_many(scopes)

    async def forget(self, scope: BucketScope) -> bool:
        """Drop the bucket's learned limit (the table applies again); True if there was one."""
        return await self._learned_limits.forget(scope)

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


def _names(encoded: list[bytes]) -> list[str]:
    return [key.decode() for key in encoded]
