"""The shared limiter: ``try_acquire`` (one Lua pass) and ``acquire`` (the wait policy on top).

Policy of ``acquire`` (see the README's "Rate limits" section):

==============================  =========================  ===================================
situation                       wait <= threshold          wait > threshold
==============================  =========================  ===================================
inside a deferral context       sleep, then take a token   raise ``RateLimitDeferred``
no context (HTTP paths)         sleep while the total wait stays under the ceiling (two periods
                                plus a margin); past it raise ``RateLimitExceeded``
==============================  =========================  ===================================
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources

from redis.asyncio.cluster import RedisCluster

from wbsync import clock, keys
from wbsync.context import current_job, deferral_threshold_ms
from wbsync.errors import RateLimitDeferred, RateLimitExceeded, RedisUnavailableError
from wbsync.metrics import LIMITER_WAIT, SLOT_SLEEP
from wbsync.ratelimit.scope import BucketScope
from wbsync.redis_client import REDIS_ERRORS, RedisClient, run_scripts

_SCRIPT = resources.files("wbsync.ratelimit").joinpath("bucket.lua").read_text(encoding="utf-8")


@dataclass(frozen=True, slots=True)
class TryResult:
    """The outcome of one bucket pass: acquired, or how long until a token is there."""

    acquired: bool
    remaining: int
    wait_ms: int


@dataclass(frozen=True, slots=True)
class Acquired:
    """A token taken by ``acquire``, and how long the caller slept for it."""

    remaining: int
    waited_ms: float


class RateLimiter:
    """Token buckets per (cabinet, limit group), shared by every process through Redis.

    ``time_scale`` multiplies every bucket's period and the ceiling margin, so tests and demos
    can turn WB's minutes into milliseconds. Penalties are real milliseconds, not scaled.

    ``refill_margin_ms`` (real milliseconds) is added to every token's refill interval: WB's
    bucket and ours see each request a few milliseconds apart (network, a busy event loop), and
    a request that reaches WB even slightly before WB's bucket refilled is refused with a 429.
    """

    def __init__(
        self,
        redis: RedisClient,
        *,
        prefix: str,
        time_scale: float = 1.0,
        ceiling_margin_ms: float = 5000.0,
        refill_margin_ms: float = 0.0,
    ) -> None:
        if time_scale <= 0:
            raise ValueError(f"time_scale must be > 0, got {time_scale}")
        self._redis = redis
        self._prefix = prefix
        self._time_scale = time_scale
        self._ceiling_margin_ms = ceiling_margin_ms * time_scale
        self._refill_margin_ms = refill_margin_ms
        self._script = redis.register_script(_SCRIPT)

    def ceiling_ms(self, scope: BucketScope) -> float:
        """The longest total wait ``acquire`` sleeps outside a deferral context."""
        return 2 * scope.limit.period_s * 1000.0 * self._time_scale + self._ceiling_margin_ms

    async def try_acquire(self, scope: BucketScope, *, cost: int = 1) -> TryResult:
        """Take ``cost`` tokens if they are there: one atomic round trip, no sleep, no raise."""
        if not 1 <= cost <= scope.limit.burst:
            raise ValueError(f"cost must be within 1..burst ({scope.limit.burst}), got {cost}")
        return await self._pass(scope, cost=cost, penalty_ms=0)

    async def peek(self, scope: BucketScope) -> TryResult:
        """Read the bucket without taking a token (``acquired`` = a token is there now)."""
        return await self._pass(scope, cost=0, penalty_ms=0)

    async def peek_many(self, scopes: Sequence[BucketScope]) -> list[TryResult]:
        """``peek`` of many buckets, in the order given, in two round trips.

        A full bucket has no key (``bucket.lua`` lets it expire), so one ``MGET`` finds the
        buckets worth a pass; only those get one, in one pipeline.
        """
        if not scopes:
            return []
        names = [keys.bucket_key(self._prefix, scope) for scope in scopes]
        try:
            stored = await (
                self._redis.mget_nonatomic(names)  # a cluster's buckets sit in many slots
                if isinstance(self._redis, RedisCluster)
                else self._redis.mget(names)
            )
            used = [i for i, value in enumerate(stored) if value is not None]
            replies = await run_scripts(
                self._redis,
                [
                    (self._script, [names[i]], self._args(scopes[i], cost=0, penalty_ms=0))
                    for i in used
                ],
            )
        except REDIS_ERRORS as exc:
            raise RedisUnavailableError(f"rate limiter: Redis failed: {exc}") from exc
        out = [TryResult(acquired=True, remaining=s.limit.burst, wait_ms=0) for s in scopes]
        for i, reply in zip(used, replies, strict=True):
            out[i] = _result(int(reply))
        return out

    async def penalize(self, scope: BucketScope, wait_ms: float) -> None:
        """Make the bucket's next token free no earlier than ``wait_ms`` from now, for everyone."""
        if wait_ms > 0:
            await self._pass(scope, cost=0, penalty_ms=wait_ms)

    async def acquire(self, scope: BucketScope) -> Acquired:
        """Take one token, waiting or deferring as the policy above says."""
        started = clock.monotonic()
        waited_ms = 0.0
        while True:
            result = await self._pass(scope, cost=1, penalty_ms=0)
            if result.acquired:
                self._observe(scope, "slept" if waited_ms else "acquired", waited_ms)
                return Acquired(remaining=result.remaining, waited_ms=waited_ms)
            threshold = deferral_threshold_ms()
            if threshold is not None:
                if result.wait_ms > threshold:
                    self._observe(scope, "deferred", waited_ms)
                    raise RateLimitDeferred(result.wait_ms, scope)
            elif waited_ms + result.wait_ms > self.ceiling_ms(scope):
                self._observe(scope, "refused", waited_ms)
                raise RateLimitExceeded(result.wait_ms / 1000.0, scope)
            await clock.sleep_ms(result.wait_ms)
            waited_ms = (clock.monotonic() - started) * 1000.0

    def _args(self, scope: BucketScope, *, cost: int, penalty_ms: float) -> list[str | int]:
        interval_ms = scope.limit.interval_ms * self._time_scale + self._refill_margin_ms
        return [repr(interval_ms), scope.limit.burst, cost, repr(float(penalty_ms))]

    async def _pass(self, scope: BucketScope, *, cost: int, penalty_ms: float) -> TryResult:
        try:
            reply = int(
                await self._script(
                    keys=[keys.bucket_key(self._prefix, scope)],
                    args=self._args(scope, cost=cost, penalty_ms=penalty_ms),
                )
            )
        except REDIS_ERRORS as exc:
            raise RedisUnavailableError(f"rate limiter: Redis failed: {exc}") from exc
        return _result(reply)

    def _observe(self, scope: BucketScope, outcome: str, waited_ms: float) -> None:
        LIMITER_WAIT.labels(scope.group, outcome).observe(waited_ms / 1000.0)
        job = current_job()
        if job is not None and waited_ms:
            SLOT_SLEEP.labels(job.queue).inc(waited_ms / 1000.0)


def _result(reply: int) -> TryResult:
    if reply >= 0:
        return TryResult(acquired=True, remaining=reply, wait_ms=0)
    return TryResult(acquired=False, remaining=0, wait_ms=-reply)
