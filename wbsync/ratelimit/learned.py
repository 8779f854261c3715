"""Limits learned from WB's replies: stricter than the table, kept beside the bucket until a TTL.

``learn`` stores a learned limit beside its bucket (``learn.lua``), where every pass of
``bucket.lua`` applies it in the same round trip, and lists the bucket in an index of learned
limits (so the status page finds them without a scan); the limit expires after
``learned_ttl_s`` (scaled). A learned interval never exceeds ``max_wait_s`` (scaled), here and
in the Lua script. Beside them, the evidence ``learn`` is given on: a 429 seen again within a
window, and a WB limiter id that refused more than one group of a seller (its global limiter).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from wbsync.observability.metrics import LEARNED_LIMITS
from wbsync.redis import keys
from wbsync.redis.lua import lua_script
from wbsync.redis.redis_client import RedisClient, as_text, redis_failures
from wbsync.system import clock
from wbsync.values.scope import BucketScope, Limit

__all__ = ["Learned", "LearnedLimits", "index_member"]

_LEARN = lua_script("wbsync.ratelimit", "learn.lua")
#: What a limiter id is noted with once it refused two groups of a seller (no group is "-").
_MANY_GROUPS = "-"
_FAILED = "rate limiter: Redis failed"


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


class LearnedLimits:
    """The learned limits of one key prefix and the evidence they are learned on, shared by
    every process through Redis (``RateLimiter`` answers for them)."""

    def __init__(
        self,
        redis: RedisClient,
        prefix: str,
        *,
        time_scale: float,
        learned_ttl_ms: float,
        max_wait_ms: float,
    ) -> None:
        self._redis = redis
        self._prefix = prefix
        self._time_scale = time_scale
        self._learned_ttl_ms = learned_ttl_ms
        self._max_wait_ms = max_wait_ms
        self._learn = redis.register_script(_LEARN)
        self._learned_index = keys.learned_index_key(prefix)

    async def learn(
        self,
        scope: BucketScope,
        *,
        seen_ms: float = 0.0,
        extra_ms: float = 0.0,
        burst: int = 0,
        taken_ago_ms: float = 0.0,
        refill_margin_ms: float = 0.0,
    ) -> Learned | None:
        """Tighten the bucket to what WB showed, for every process, until the TTL passes; in
        the same pass the bucket keeps no more tokens than it held, at the stricter rate.

        ``seen_ms``: WB's interval is at least this; ``extra_ms``: at least the current one plus
        this; ``burst``: WB's burst (real ms of the scaled world; 0 = unknown).
        ``refill_margin_ms``: the bucket's margin on each token interval (real ms).
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
                    repr(refill_margin_ms),
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
            if as_text(first) == scope.group:
                return False
            if as_text(first) != _MANY_GROUPS:
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
            pipe.zadd(self._learned_index, {index_member(scope): now + self._learned_ttl_ms})
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
        return {as_text(m).rpartition(":")[0] for m in members}

    async def learned_many(self, scopes: Sequence[BucketScope]) -> list[Learned | None]:
        """The learned limit in force for each bucket (None: none), in the order given, in one
        pipeline."""
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
                pipe.zrem(self._learned_index, index_member(scope))
                deleted, _ = await pipe.execute()
            return bool(deleted)


def index_member(scope: BucketScope) -> str:
    """The bucket in the indexes of learned limits and penalties (group names hold no
    colon)."""
    return f"{scope.cabinet}:{scope.group}"
