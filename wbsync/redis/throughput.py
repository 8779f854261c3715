"""Throughput history: pages stored and 429s from WB, per queue and wall-clock minute, in Redis.

Shared by every process (the status page shows the whole deployment, not one process), one
small hash per (queue, minute) that expires ``KEEP_S`` after the minute's first count.
Recording is one call of ``throughput.lua``: a ``HINCRBY`` per field, and the ``EXPIRE`` only at
a field's first count of the minute. A stored page is not recorded here: the job layer counts it
in the same script call that saves the page's cursor (``count_page``, ``wbsync.jobs.job_data``);
reading the last hour is one pipeline of ``HMGET``s.

A count that cannot be written (Redis failed) is dropped, never raised: after a failure no count
is written for a ``FailureBackoff`` pause (``wbsync.redis.redis_bounds``), so an outage costs one
WARNING and a bounded number of calls, not one of each per stored page.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from wbsync.errors import RedisUnavailableError
from wbsync.observability.context import current_job
from wbsync.redis import keys
from wbsync.redis.lua import lua_script
from wbsync.redis.redis_bounds import FailureBackoff
from wbsync.redis.redis_client import RedisClient, redis_failures
from wbsync.system import clock

__all__ = ["HISTORY_MINUTES", "KEEP_S", "Count", "History", "Throughput"]

log = logging.getLogger(__name__)

HISTORY_MINUTES = 60
"""How many minutes the history shows."""
KEEP_S = 2 * 3600
"""A minute's counts expire this long after their last write."""
_FIELDS = ("pages", "upstream_429")
_SCRIPT = lua_script("wbsync.redis", "throughput.lua")


@dataclass(frozen=True, slots=True)
class Count:
    """One addition to a (queue, minute) hash, for a script that writes it with other keys of
    the queue's slot (``throughput.lua``'s rule: the expiry is set at the field's first count)."""

    key: str
    field: str
    amount: int
    keep_s: int = KEEP_S


@dataclass(frozen=True, slots=True)
class History:
    """Per queue, counts per minute, oldest first; ``minutes``: the minutes' starts, epoch ms."""

    minutes: list[int]
    queues: dict[str, dict[str, list[int]]]


class Throughput:
    """Record and read the history (no I/O in the constructor)."""

    def __init__(self, redis: RedisClient, *, prefix: str) -> None:
        self._redis = redis
        self._prefix = prefix
        self._script = redis.register_script(_SCRIPT)
        self._backoff = FailureBackoff()
        self._paused_until = 0.0

    async def record(self, queue: str, *, pages: int = 0, upstream_429: int = 0) -> None:
        """Add to this minute's counts of ``queue``; a Redis failure is logged, never raised.

        The history is for people: losing a count must not fail the sync that made it.
        """
        if clock.monotonic() < self._paused_until:
            return  # Redis failed a moment ago: the count is dropped without a call
        added = [(f, n) for f, n in (("pages", pages), ("upstream_429", upstream_429)) if n]
        if not added:
            return
        args: list[str | int] = [KEEP_S]
        for field, amount in added:
            args += [field, amount]
        try:
            with redis_failures(f"throughput of {queue} not recorded"):
                await self._script(keys=[self._key(queue)], args=args)
        except RedisUnavailableError as exc:
            pause = self._backoff.failed()
            self._paused_until = clock.monotonic() + pause
            if self._backoff.failures == 1:  # once per outage
                log.warning("%s; counts are dropped until Redis answers", exc)
            return
        self._backoff.succeeded()

    def count_page(self, queue: str) -> Count:
        """One stored page of ``queue`` this minute, for the script that saves the page's
        cursor to write (one round trip for both)."""
        return Count(self._key(queue), "pages", 1)

    def _key(self, queue: str) -> str:
        return keys.throughput_key(self._prefix, queue, int(clock.now_ms() // 60_000))

    async def rate_limited(self) -> None:
        """WB answered 429 to the running job's request (nothing is recorded outside jobs)."""
        job = current_job()
        if job is not None:
            await self.record(job.queue, upstream_429=1)

    async def history(self, queues: Sequence[str], minutes: int = HISTORY_MINUTES) -> History:
        """The last ``minutes`` minutes (the current one last) of every queue."""
        now = int(clock.now_ms() // 60_000)
        span = list(range(now - minutes + 1, now + 1))
        with redis_failures("could not read the throughput history"):
            async with self._redis.pipeline(transaction=False) as pipe:
                for queue in queues:
                    for minute in span:
                        pipe.hmget(keys.throughput_key(self._prefix, queue, minute), list(_FIELDS))
                replies = iter(await pipe.execute())
        out: dict[str, dict[str, list[int]]] = {}
        for queue in queues:
            series: dict[str, list[int]] = {f: [] for f in _FIELDS}
            for _ in span:
                for field, value in zip(_FIELDS, next(replies), strict=True):
                    series[field].append(int(value or 0))
            out[queue] = series
        return History(minutes=[m * 60_000 for m in span], queues=out)
