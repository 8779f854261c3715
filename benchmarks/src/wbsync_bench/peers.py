"""The implementations the ``limiter`` benchmark compares, each as "one call on key k".

Every implementation gets its own client (and so its own connection pool) on the same Redis,
and the same limit: 100 per second with a burst of 100. With many buckets each key sees a few
calls a second, so nearly every call is admitted (the writing path); on the hot bucket nearly
every call is refused (the reading path). Both paths are measured, for everyone.

* ``wbsync``: ``RateLimiter.try_acquire`` (GCRA in one EVALSHA).
* ``wbsync_two_buckets``: ``RateLimiter.try_acquire_all`` of the bucket and its seller's global
  bucket (what every WB call takes), in one EVALSHA.
* ``bare_evalsha``: one EVALSHA of ``return 0`` on the same key: the ceiling for any design
  that costs one round trip.
* ``limits_*``: the ``limits`` library's async strategies on its Redis storage, driven through
  redis-py (its ``redispy`` implementation) so the client library is the same as ours.
* ``pyrate_limiter``: ``Limiter.try_acquire_async(name, blocking=False)`` over ``RedisBucket``
  (a sorted-set log): the library's public async entry point, which holds a per-limiter
  ``asyncio.Lock`` around each acquisition, so one process has one call in flight at a time.
* ``pyrate_bucket``: ``RedisBucket.put`` called directly (its one EVALSHA, no lock): what the
  same storage costs without the limiter's serialisation. The leaker that trims the log is not
  run; the log only grows by admitted calls, and is deleted at the end.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from limits import RateLimitItemPerSecond
from limits.aio.storage import RedisStorage
from limits.aio.strategies import MovingWindowRateLimiter, SlidingWindowCounterRateLimiter
from pyrate_limiter import BucketFactory, Duration, Limiter, Rate, RateItem, RedisBucket
from pyrate_limiter.buckets.redis_bucket import LuaScript
from redis.asyncio import Redis

from wbsync.ratelimit import BucketScope, Limit, LimiterOptions, RateLimiter

#: Call on key number k; True/False = admitted or not, None = not a limiter (the bare call).
Op = Callable[[int], Awaitable[bool | None]]

LIMIT_PER_S = 100
IMPLEMENTATIONS = (
    "wbsync",
    "wbsync_two_buckets",
    "bare_evalsha",
    "limits_moving_window",
    "limits_sliding_window_counter",
    "pyrate_limiter",
    "pyrate_bucket",
)
_BARE = "return 0"


@dataclass
class Peer:
    """One implementation, ready to call, with what to close afterwards."""

    name: str
    op: Op
    closers: list[Callable[[], Awaitable[Any]]] = field(default_factory=list)

    async def close(self) -> None:
        """Release its connections."""
        for close in self.closers:
            await close()


async def build(name: str, url: str, prefix: str, n_keys: int) -> Peer:
    """Implementation ``name`` on ``url``, with keys under ``prefix``."""
    builders = {
        "wbsync": _wbsync,
        "wbsync_two_buckets": _wbsync_two,
        "bare_evalsha": _bare,
        "limits_moving_window": _limits_moving,
        "limits_sliding_window_counter": _limits_sliding,
        "pyrate_limiter": _pyrate_limiter,
        "pyrate_bucket": _pyrate_bucket,
    }
    return await builders[name](url, f"{prefix}:{name}", n_keys)


async def _wbsync(url: str, prefix: str, n_keys: int) -> Peer:
    redis = Redis.from_url(url)
    limiter = RateLimiter(redis, LimiterOptions(prefix=prefix))
    limit = Limit(period_s=1.0, limit=LIMIT_PER_S, burst=LIMIT_PER_S)
    scopes = [BucketScope(f"c{k}", "bench", limit) for k in range(n_keys)]

    async def op(k: int) -> bool:
        return (await limiter.try_acquire(scopes[k])).acquired

    return Peer("wbsync", op, [redis.aclose])


async def _wbsync_two(url: str, prefix: str, n_keys: int) -> Peer:
    redis = Redis.from_url(url)
    limiter = RateLimiter(redis, LimiterOptions(prefix=prefix))
    limit = Limit(period_s=1.0, limit=LIMIT_PER_S, burst=LIMIT_PER_S)
    pairs = [
        (BucketScope(f"c{k}", "bench", limit), limiter.seller_scope(f"c{k}")) for k in range(n_keys)
    ]

    async def op(k: int) -> bool:
        return (await limiter.try_acquire_all(pairs[k])).acquired

    return Peer("wbsync_two_buckets", op, [redis.aclose])


async def _bare(url: str, prefix: str, n_keys: int) -> Peer:
    redis = Redis.from_url(url)
    script = redis.register_script(_BARE)
    keys = [f"{prefix}:{{c{k}:bench}}" for k in range(n_keys)]

    async def op(k: int) -> None:
        await script(keys=[keys[k]])

    return Peer("bare_evalsha", op, [redis.aclose])


def _limits_storage(url: str, prefix: str) -> RedisStorage:
    return RedisStorage(f"async+{url}", implementation="redispy", key_prefix=prefix)


async def _limits_moving(url: str, prefix: str, n_keys: int) -> Peer:
    storage = _limits_storage(url, prefix)
    strategy = MovingWindowRateLimiter(storage)
    item = RateLimitItemPerSecond(LIMIT_PER_S)
    names = [f"c{k}" for k in range(n_keys)]

    async def op(k: int) -> bool:
        return await strategy.hit(item, names[k])

    return Peer("limits_moving_window", op, [_limits_closer(storage)])


async def _limits_sliding(url: str, prefix: str, n_keys: int) -> Peer:
    storage = _limits_storage(url, prefix)
    strategy = SlidingWindowCounterRateLimiter(storage)
    item = RateLimitItemPerSecond(LIMIT_PER_S)
    names = [f"c{k}" for k in range(n_keys)]

    async def op(k: int) -> bool:
        return await strategy.hit(item, names[k])

    return Peer("limits_sliding_window_counter", op, [_limits_closer(storage)])


def _limits_closer(storage: RedisStorage) -> Callable[[], Awaitable[Any]]:
    async def close() -> None:
        # limits keeps its redis-py client on the bridge; close its pool like ours.
        client = storage.bridge.get_connection()  # type: ignore[attr-defined]
        await client.aclose()

    return close


class _Buckets(BucketFactory):
    """Routes an item to its key's RedisBucket (pyrate's factories are user code by design)."""

    def __init__(self, buckets: dict[str, RedisBucket]) -> None:
        self._buckets = buckets

    def wrap_item(self, name: str, weight: int = 1) -> RateItem:
        return RateItem(name, time.time_ns() // 1_000_000, weight)

    def get(self, item: RateItem) -> RedisBucket:
        return self._buckets[item.name]


async def _pyrate_buckets(url: str, prefix: str, n_keys: int) -> tuple[Redis, list[RedisBucket]]:
    redis = Redis.from_url(url)
    rates = [Rate(LIMIT_PER_S, Duration.SECOND)]
    sha = await redis.script_load(LuaScript.PUT_ITEM)
    # The constructor with a loaded script is public API; init() would SCRIPT LOAD per bucket.
    buckets = [RedisBucket(rates, redis, f"{prefix}:c{k}", sha) for k in range(n_keys)]
    return redis, buckets


async def _pyrate_limiter(url: str, prefix: str, n_keys: int) -> Peer:
    redis, buckets = await _pyrate_buckets(url, prefix, n_keys)
    names = [f"c{k}" for k in range(n_keys)]
    limiter = Limiter(_Buckets(dict(zip(names, buckets, strict=True))))

    async def op(k: int) -> bool:
        return bool(await limiter.try_acquire_async(names[k], blocking=False))

    return Peer("pyrate_limiter", op, [redis.aclose])


async def _pyrate_bucket(url: str, prefix: str, n_keys: int) -> Peer:
    redis, buckets = await _pyrate_buckets(url, prefix, n_keys)
    names = [f"c{k}" for k in range(n_keys)]

    async def op(k: int) -> bool:
        item = RateItem(names[k], time.time_ns() // 1_000_000)
        admitted = buckets[k].put(item)
        assert not isinstance(admitted, bool)  # an async client: always an awaitable
        return bool(await admitted)

    return Peer("pyrate_bucket", op, [redis.aclose])
