"""WB's penalties as the limiter records them: what a 429 said, and when the bucket is free.

A penalty pushes a bucket's next token to when WB said a retry may succeed (``bucket.lua``),
and leaves a record beside the bucket (``until_ms`` on the Redis clock, WB's words) that
expires when it lifts, plus an entry in an index of penalised buckets, so every process and
the status page see it without a scan.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import cast

from wbsync.redis import keys
from wbsync.redis.lua import lua_script
from wbsync.redis.redis_client import RedisClient, as_text, redis_failures
from wbsync.system import clock

__all__ = ["GLOBAL_GROUP", "Penalty", "PenaltyBook"]

_LIFT = lua_script("wbsync.ratelimit", "lift.lua")
_FAILED = "rate limiter: Redis failed"

#: The group name of a seller's global bucket: WB's per-seller limiter above the method
#: groups. No method group is named so (a test checks the table).
GLOBAL_GROUP = "seller"


@dataclass(frozen=True, slots=True)
class Penalty:
    """A penalty WB gave a bucket, in force now."""

    seller: str  # WB seller id (BucketScope.cabinet)
    group: str  # the limit group, or GLOBAL_GROUP for the seller's global limiter
    until_ms: float  # epoch ms (Redis clock) when it lifts
    remaining_ms: int
    words: str | None  # what WB said, cleaned (``clean_words``); None if nothing


def penalty_of(member: str, until_ms: float, now_ms: float, words: str | None) -> Penalty:
    """The ``Penalty`` of an index member (``<seller>:<group>``) and its record."""
    seller, _, group = member.rpartition(":")
    remaining = max(0, math.ceil(until_ms - now_ms))
    return Penalty(seller, group, until_ms, remaining, words or None)


class PenaltyBook:
    """The index of penalised buckets and what reads or ends their records (``bucket.lua``
    writes a record in the pass that gives the penalty)."""

    def __init__(self, redis: RedisClient, prefix: str) -> None:
        self._redis = redis
        self._prefix = prefix
        self._index = keys.penalty_index_key(prefix)
        self._lift = redis.register_script(_LIFT)

    async def index(self, member: str, until_ms: float, now_ms: float) -> None:
        """List ``member`` (``<seller>:<group>``) until ``until_ms`` (never earlier than it
        was), dropping the entries lifted by ``now_ms`` (a separate key: in a cluster it lives
        in another slot than the record)."""
        with redis_failures(_FAILED):
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.zadd(self._index, {member: until_ms}, gt=True)
                pipe.zremrangebyscore(self._index, "-inf", now_ms)
                await pipe.execute()

    async def in_force(self) -> list[Penalty]:
        """Every penalty in force now, soonest lifted first: two round trips. Now is this
        host's clock (a cluster pipeline refuses TIME); the records' ``until_ms`` is Redis's,
        so a host whose clock is off shows a remaining time off by as much."""
        now_ms = clock.now_ms()
        with redis_failures(_FAILED):
            members = cast("list[str | bytes]", await self._redis.zrange(self._index, 0, -1))
            names = [as_text(m) for m in members]
            async with self._redis.pipeline(transaction=False) as pipe:
                for name in names:
                    seller, _, group = name.rpartition(":")
                    pipe.hmget(keys.penalty_key(self._prefix, seller, group), "until_ms", "words")
                records = await pipe.execute()
        found = [
            penalty_of(name, float(until), now_ms, as_text(words) if words else None)
            for name, (until, words) in zip(names, records, strict=True)
            if until is not None and float(until) > now_ms
        ]
        return sorted(found, key=lambda p: p.until_ms)

    async def lift(self, seller: str, group: str) -> Penalty | None:
        """End the penalty of (seller, group) for every process (its bucket is full again)."""
        tat = keys.bucket_key_of(self._prefix, seller, group)
        record = keys.penalty_key(self._prefix, seller, group)
        with redis_failures(_FAILED):
            reply = await self._lift(keys=[tat, record])
            await self._redis.zrem(self._index, f"{seller}:{group}")
        if not reply:
            return None
        until, words, now_ms = (as_text(v) for v in reply)
        return penalty_of(f"{seller}:{group}", float(until), float(now_ms), words or None)
