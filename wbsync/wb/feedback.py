"""What WB's rate-limit headers say about its real bucket, and what the shared bucket learns.

WB answers every request with ``X-Ratelimit-Remaining`` (tokens left after it), and a 429 with
``X-Ratelimit-Retry`` (seconds until a retry can succeed), ``X-Ratelimit-Limit`` (the burst)
and ``X-Ratelimit-Reset`` (seconds until the bucket is full). Our table is a ceiling: when
those show a stricter bucket than the table, the shared bucket of that (seller, group) learns
it for every process (``RateLimiter.learn``), until the learned limit expires or WB shows more
room than it allows. A looser WB changes nothing.

Reading a 429 as a token bucket of ``B`` tokens holding ``t`` (< 1) tokens, one per ``I``
seconds: Retry = (1 - t) I and Reset = (B - t) I, so I = (Reset - Retry) / (B - 1) when B > 1.
When B = 1 they are equal and only bound I from below; but our bucket let the request through
a whole interval of ours after the previous one, so WB's interval is about ours plus Retry,
less however much later than its token the previous request reached WB, plus however much
later this one did. The latter is at most this request's round trip, which is added: the
estimate errs long (a little slower until the learned limit expires), not short (another 429).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import httpx

from wbsync.ratelimit import Acquired, BucketScope, RateLimiter

__all__ = ["Feedback", "RateHeaders"]

log = logging.getLogger(__name__)

# WB's Remaining is whole tokens, ours too; a bucket refilling between the two readings or a
# request counted a moment apart makes them differ by one without either bucket being wrong.
_ROUNDING = 1


def _number(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) and number >= 0 else None


@dataclass(frozen=True, slots=True)
class RateHeaders:
    """WB's rate-limit headers of one reply (seconds are real, of the scaled world)."""

    remaining: int | None
    limit: int | None
    retry_s: float | None
    reset_s: float | None

    @classmethod
    def of(cls, response: httpx.Response) -> RateHeaders:
        """Read the headers; a missing or unreadable one is None."""
        h = response.headers
        remaining = _number(h.get("X-Ratelimit-Remaining"))
        limit = _number(h.get("X-Ratelimit-Limit"))
        retry = _number(h.get("X-Ratelimit-Retry"))
        return cls(
            remaining=int(remaining) if remaining is not None else None,
            limit=int(limit) if limit is not None and limit >= 1 else None,
            retry_s=retry if retry is not None else _number(h.get("Retry-After")),
            reset_s=_number(h.get("X-Ratelimit-Reset")),
        )


class Feedback:
    """Turns WB's headers into the shared bucket's learned limit, level or relaxation."""

    def __init__(self, limiter: RateLimiter, *, cabinet: str) -> None:
        self._limiter = limiter
        self._cabinet = cabinet

    async def on_429(self, scope: BucketScope, headers: RateHeaders, round_trip_ms: float) -> None:
        """A 429 that our bucket let through (``round_trip_ms`` after it did): WB's bucket is
        stricter than ours, learn it."""
        burst = headers.limit or scope.limit.burst
        retry, reset = headers.retry_s or 0.0, headers.reset_s or 0.0
        seen_s = extra_s = 0.0
        if burst > 1:
            seen_s = (reset - retry) / (burst - 1) if reset > retry else 0.0
        else:
            seen_s, extra_s = reset, retry + round_trip_ms / 1000.0
        learned = await self._limiter.learn(
            scope, seen_ms=seen_s * 1000.0, extra_ms=extra_s * 1000.0, burst=headers.limit or 0
        )
        if learned is not None:
            log.warning(
                "cabinet %s: WB's limit for %s is stricter than the table: 1 request per "
                "%.0f ms, burst %d; following it for %.0f s",
                self._cabinet,
                scope.group,
                learned.interval_ms,
                learned.burst,
                learned.expires_in_ms / 1000.0,
            )

    async def on_reply(self, scope: BucketScope, headers: RateHeaders, acquired: Acquired) -> None:
        """Any other reply: align our bucket with WB's ``Remaining`` when they disagree."""
        theirs, ours = headers.remaining, acquired.remaining
        if theirs is None:
            return
        if theirs + _ROUNDING < ours:
            # WB's bucket is clearly emptier (another client on the seller, a smaller bucket):
            # hold what it shows, so the next burst does not run into 429s.
            await self._limiter.level(scope, theirs)
        elif theirs > ours + _ROUNDING and await self._limiter.forget(scope):
            # WB has more room than our bucket: a learned limit (if any) was too strict.
            log.info(
                "cabinet %s: WB shows more room for %s than the learned limit; table again",
                self._cabinet,
                scope.group,
            )
