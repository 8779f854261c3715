"""Sync lag: how late each scheduled run of a (cabinet, queue) starts after it was due.

The fan-out writes when a run is due into the job's data (``DUE_FIELD``, on the leader's Redis
clock); the run's first start measures ``start - due`` on the worker's clock (hosts keep NTP
time; a negative difference from clock skew counts as 0). Each measure goes two ways:

* the histogram ``wbsync_sync_lag_seconds{queue}`` of the process that ran the job;
* the queue's recent lags in Redis (the last ``LAG_SAMPLES`` runs, shared by every process), from
  which the status page shows each queue's p50, p95 and max over the last ``LAG_WINDOW_S``.
  The sample is written with the run's first cursor save, in the same script call
  (``wbsync.jobs.job_data``); a run that ends before saving a cursor writes it on its own.

A run is measured once: later starts of the same job (after a deferral, a retry or a crash)
carry ``STARTED_FIELD``. Jobs the fan-out did not schedule (an operator's "run now", a failed
job enqueued again) have no due time and are not measured.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from wbsync.errors import RedisUnavailableError
from wbsync.observability.metrics import SYNC_LAG
from wbsync.redis import keys
from wbsync.redis.redis_client import RedisClient, redis_failures
from wbsync.system import clock

__all__ = [
    "DUE_FIELD",
    "LAG_SAMPLES",
    "LAG_WINDOW_S",
    "STARTED_FIELD",
    "LagFigure",
    "LagHistory",
    "LagSample",
    "start_lag_ms",
]

log = logging.getLogger(__name__)

DUE_FIELD = "due_ms"
"""Job data: when the fan-out's run was due (epoch ms)."""
STARTED_FIELD = "started_ms"
"""Job data: when the run first started (epoch ms); its lag was measured then."""
LAG_SAMPLES = 1000
"""Recent lags kept in Redis per queue (the oldest are dropped)."""
LAG_WINDOW_S = 15 * 60
"""The status page's figures cover the runs that started this long ago or later (real s)."""
_KEEP_S = 2 * LAG_WINDOW_S  # a queue nobody runs any more drops its samples


def start_lag_ms(data: Mapping[str, Any], now_ms: float) -> float | None:
    """The lag of a run starting now: None unless the fan-out scheduled it and it never
    started before (or its due time is not a number)."""
    due = data.get(DUE_FIELD)
    if STARTED_FIELD in data or not isinstance(due, int | float) or isinstance(due, bool):
        return None
    return max(0.0, now_ms - float(due))


@dataclass(frozen=True, slots=True)
class LagFigure:
    """One queue's lags over the recent window, in seconds."""

    runs: int
    p50_s: float
    p95_s: float
    max_s: float


@dataclass(frozen=True, slots=True)
class LagSample:
    """One run's lag as the queue's list stores it, for a script that writes it with other keys
    of the queue's slot: ``LPUSH key entry``, keep ``samples``, expire in ``keep_s``."""

    queue: str
    key: str
    entry: str
    samples: int = LAG_SAMPLES
    keep_s: int = _KEEP_S


class LagHistory:
    """Record and read the recent lags (no I/O in the constructor)."""

    def __init__(self, redis: RedisClient, *, prefix: str) -> None:
        self._redis = redis
        self._prefix = prefix

    def sample(self, queue: str, lag_ms: float) -> LagSample:
        """Observe one run's lag in the histogram, and the sample to store with the run's first
        write (``write`` stores it alone)."""
        SYNC_LAG.labels(queue).observe(lag_ms / 1000.0)
        entry = f"{int(clock.now_ms())}:{int(lag_ms)}"
        return LagSample(queue, keys.lag_key(self._prefix, queue), entry)

    async def write(self, sample: LagSample) -> None:
        """Store ``sample`` on its own; a Redis failure is logged, never raised (the figure is
        for people: it must not fail the run)."""
        try:
            with redis_failures(f"lag of {sample.queue} not recorded"):
                async with self._redis.pipeline(transaction=False) as pipe:
                    pipe.lpush(sample.key, sample.entry)
                    pipe.ltrim(sample.key, 0, sample.samples - 1)
                    pipe.expire(sample.key, sample.keep_s)
                    await pipe.execute()
        except RedisUnavailableError as exc:
            log.warning("%s", exc)

    async def recent(
        self, queues: Sequence[str], window_s: float = LAG_WINDOW_S
    ) -> dict[str, LagFigure]:
        """The figures of the queues with runs in the last ``window_s`` (one pipeline)."""
        since = clock.now_ms() - window_s * 1000.0
        with redis_failures("could not read the sync lags"):
            async with self._redis.pipeline(transaction=False) as pipe:
                for queue in queues:
                    pipe.lrange(keys.lag_key(self._prefix, queue), 0, LAG_SAMPLES - 1)
                replies = await pipe.execute()
        out = {}
        for queue, entries in zip(queues, replies, strict=True):
            lags = sorted(_lag_s(entry) for entry in entries if _started(entry) >= since)
            if lags:
                out[queue] = LagFigure(
                    runs=len(lags),
                    p50_s=_percentile(lags, 0.50),
                    p95_s=_percentile(lags, 0.95),
                    max_s=lags[-1],
                )
        return out


def _text(entry: str | bytes) -> str:
    return entry.decode() if isinstance(entry, bytes) else entry


def _started(entry: str | bytes) -> float:
    return float(_text(entry).partition(":")[0])


def _lag_s(entry: str | bytes) -> float:
    return float(_text(entry).partition(":")[2]) / 1000.0


def _percentile(ordered: Sequence[float], q: float) -> float:
    """The nearest-rank percentile of an ascending, non-empty sequence."""
    rank = math.ceil(round(q * len(ordered), 9))  # round: 0.95 * 20 is 19.000000000000004
    return ordered[min(len(ordered), max(1, rank)) - 1]
