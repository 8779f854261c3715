"""WB's per-seller token buckets, in process (the emulator is one process, one event loop).

A bucket holds ``burst`` tokens and refills ``limit`` per ``period`` (already time-scaled).
Above them sits WB's global limiter per seller: no published rate, only penalties: while one is
in force every method of the seller is refused (``global_penalty``).
Nothing here awaits, so each check-and-take runs whole between two awaits: asyncio-safe
without a lock.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from wbsync.emulator.method import Rate

__all__ = ["BucketDecision", "Buckets", "format_seconds"]


@dataclass(frozen=True, slots=True)
class BucketDecision:
    """One check: allowed (and what remains) or refused (and when to retry / when full)."""

    allowed: bool
    remaining: int
    retry_s: float
    reset_s: float
    burst: int


@dataclass(slots=True)
class _Bucket:
    tokens: float
    at: float


class Buckets:
    """All buckets, keyed by (seller, group); ``limit`` arrives already scaled."""

    def __init__(self, *, grace_s: float = 0.0) -> None:
        self._buckets: dict[tuple[str, str], _Bucket] = {}
        self._grace_s = grace_s
        # seller -> (monotonic time the global penalty lifts, seconds a request extends it to)
        self._penalties: dict[str, tuple[float, float]] = {}

    def reset(self) -> None:
        """Forget every bucket (all full again) and every global penalty."""
        self._buckets.clear()
        self._penalties.clear()

    def penalise_seller(
        self, seller: str, seconds: float, *, extends: bool = False, now: float | None = None
    ) -> None:
        """Put ``seller`` under a global penalty of ``seconds`` (scaled); with ``extends``, a
        request during it restarts it (as sellers report WB doing)."""
        now = time.monotonic() if now is None else now
        self._penalties[seller] = (now + seconds, seconds if extends else 0.0)

    def global_penalty(self, seller: str, now: float | None = None) -> float:
        """Seconds left of ``seller``'s global penalty (0: none); a request asks this, so a
        penalty that extends restarts here."""
        now = time.monotonic() if now is None else now
        until, extends_s = self._penalties.get(seller, (0.0, 0.0))
        if until <= now:
            self._penalties.pop(seller, None)
            return 0.0
        if extends_s:
            until = now + extends_s
            self._penalties[seller] = (until, extends_s)
        return until - now

    def _refilled(self, seller: str, group: str, limit: Rate, now: float) -> _Bucket:
        bucket = self._buckets.get((seller, group))
        if bucket is None:
            bucket = self._buckets[(seller, group)] = _Bucket(tokens=float(limit.burst), at=now)
        rate = limit.limit / limit.period_s
        bucket.tokens = min(float(limit.burst), bucket.tokens + (now - bucket.at) * rate)
        bucket.at = now
        return bucket

    def remaining(self, seller: str, group: str, limit: Rate, now: float | None = None) -> int:
        """Whole tokens (seller, group) has now, taking none (WB's ``X-Ratelimit-Remaining``)."""
        now = time.monotonic() if now is None else now
        return max(0, math.floor(self._refilled(seller, group, limit, now).tokens))

    def take(
        self, seller: str, group: str, limit: Rate, now: float | None = None
    ) -> BucketDecision:
        """Take one token for (seller, group) if there is one."""
        now = time.monotonic() if now is None else now
        rate = limit.limit / limit.period_s
        bucket = self._refilled(seller, group, limit, now)
        # A request that is early by less than the grace is let through (the client's limiter
        # and this bucket see the same request a few ms apart), but the token it lacked stays
        # owed: the balance goes negative, so a client early on every request runs out of
        # grace after a few requests instead of having its debt written off each time.
        if bucket.tokens + self._grace_s * rate >= 1.0:
            bucket.tokens -= 1.0
            return BucketDecision(True, max(0, math.floor(bucket.tokens)), 0.0, 0.0, limit.burst)
        return BucketDecision(
            allowed=False,
            remaining=0,
            retry_s=(1.0 - bucket.tokens) / rate,
            reset_s=(limit.burst - bucket.tokens) / rate,
            burst=limit.burst,
        )


def format_seconds(seconds: float, time_scale: float) -> str:
    """A header value in seconds: whole and rounded up at scale 1, else fractional ("0.6")."""
    if time_scale == 1.0:
        return str(max(0, math.ceil(seconds)))
    # Rounded up to the millisecond: a client that waits exactly this long must succeed.
    millis = max(1, math.ceil(seconds * 1000.0 - 1e-9))
    return f"{millis / 1000.0:.3f}".rstrip("0").rstrip(".")
