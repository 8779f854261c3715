"""The one place that bounds how long any Redis call of wbsync may take.

Every Redis client wbsync makes comes from ``connect`` (the runtime's client, and the clients
BullMQ's queues and workers use), so a dead or hung Redis costs a caller a bounded time, never
minutes:

* ``CONNECT_TIMEOUT_S`` to open a connection, ``COMMAND_TIMEOUT_S`` for any reply, and at
  most ``POOL_SIZE`` connections per client (more concurrent commands wait for one);
* a refused or dropped connection (a Redis restart leaves stale pooled connections) is retried
  ``RETRIES`` times on a fresh connection, after a short exponential backoff (``BACKOFF_BASE_S``
  doubling up to ``BACKOFF_CAP_S``). A timeout is not retried: a server that did not answer in
  ``COMMAND_TIMEOUT_S`` is not expected to answer the same command sooner.

So against a Redis that refuses connections a command fails after the backoffs (well under a
second); against one that hangs, after ``COMMAND_TIMEOUT_S``. Blocking
commands (the worker's wait for jobs) must block for less than the command timeout:
``BLOCK_CEILING_S``. BullMQ's own defaults (20 retries up to 20 s apart; 15 s before a worker
asks again) are not used.

No loop spins while Redis (or one shard of a cluster) fails: each loop that calls Redis over and
over (a worker's fetch of jobs, the fan-out and its leader lease, the throughput counts) waits
after a failure with a ``FailureBackoff``: ``RECONNECT_DELAY_S`` doubling per failure in a row,
up to ``OUTAGE_BACKOFF_CAP_S``, back to nothing at the first success. So a loop makes at most
one call per ``RECONNECT_DELAY_S`` during an outage, and fewer the longer it lasts, and is back
at most ``OUTAGE_BACKOFF_CAP_S`` after Redis is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

from wbsync.redis import redis_client

CONNECT_TIMEOUT_S = 2.0
COMMAND_TIMEOUT_S = 3.0
RETRIES = 3
# Connections one client opens at most; more concurrent commands wait (up to the command
# timeout) for a free one instead of failing with "Too many connections".
POOL_SIZE = 50
BACKOFF_BASE_S = 0.05
BACKOFF_CAP_S = 0.5
# Longest blocking wait (BullMQ's BZPOPMIN on the queue's marker): below the command timeout,
# with room for Redis's 10 Hz timer and a loaded event loop.
BLOCK_CEILING_S = 2.0
# A loop whose Redis call failed calls again after this long, doubling per failure in a row...
RECONNECT_DELAY_S = 1.0
# ... up to this long.
OUTAGE_BACKOFF_CAP_S = 8.0


@dataclass(slots=True)
class FailureBackoff:
    """How long a loop waits after Redis failed ``failures`` times in a row (see above)."""

    base_s: float = RECONNECT_DELAY_S
    cap_s: float = OUTAGE_BACKOFF_CAP_S
    failures: int = 0

    def failed(self) -> float:
        """Count a failure; the seconds to wait before the next call."""
        self.failures += 1
        return float(min(self.cap_s, self.base_s * 2.0 ** (self.failures - 1)))

    def succeeded(self) -> None:
        """Redis answered: the next failure waits ``base_s`` again."""
        self.failures = 0


def retry_policy() -> Retry:
    """The bounded retry every client gets: refused or dropped connections only."""
    return Retry(
        ExponentialBackoff(cap=BACKOFF_CAP_S, base=BACKOFF_BASE_S),
        RETRIES,
        supported_errors=(RedisConnectionError,),
    )


def connect(url: str, *, decode_responses: bool = True) -> redis_client.RedisClient:
    """A client of ``url`` (one server or a cluster) with wbsync's bounds; no I/O yet."""
    options: dict[str, Any] = {
        "socket_connect_timeout": CONNECT_TIMEOUT_S,
        "socket_timeout": COMMAND_TIMEOUT_S,
        "retry": retry_policy(),
    }
    if redis_client.is_cluster(url):  # a cluster client keeps a pool per node itself
        return redis_client.connect(url, decode_responses=decode_responses, **options)
    pool = BlockingConnectionPool.from_url(
        url,
        decode_responses=decode_responses,
        max_connections=POOL_SIZE,
        timeout=COMMAND_TIMEOUT_S,
        **options,
    )
    return Redis.from_pool(pool)
