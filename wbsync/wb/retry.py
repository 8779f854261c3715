"""The client's retry policy: what is retried, how often, and how long to wait.

- Transport errors and 5xx: retried with capped exponential backoff and jitter, within a fixed
  attempt budget per call (``attempts`` counts every try, the first included).
- 429: not a failure of the request but a window; the wait comes from WB's headers (each
  clamped to ``wb_rate_wait_max_s``, see ``feedback.RateHeaders``) and is pushed into the shared
  bucket, with a record of WB's words. It has its own budget (``rate_limit_attempts``).
- Any other 4xx: never retried.
- ``RateLimitDeferred`` / ``RateLimitExceeded`` from the limiter are not WB errors and are
  never caught here.

Durations are WB-world seconds multiplied by the time scale, like every wait policy.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from wbsync.values.scope import Limit
from wbsync.wb.feedback import RateHeaders

__all__ = ["RetryPolicy", "rate_limit_wait_ms"]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Budgets and backoff of one ``WbClient.call``."""

    attempts: int = 4
    rate_limit_attempts: int = 5
    base_delay_s: float = 0.5
    max_delay_s: float = 8.0
    jitter: float = 0.5

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.rate_limit_attempts < 0:
            raise ValueError("attempts must be >= 1 and rate_limit_attempts >= 0")
        if not 0.0 <= self.jitter <= 1.0 or self.base_delay_s < 0 or self.max_delay_s < 0:
            raise ValueError("jitter must be within 0..1 and delays >= 0")

    def backoff_s(self, failures: int, *, time_scale: float, rng: random.Random) -> float:
        """Seconds to wait after the ``failures``-th failure (1-based), jittered downwards."""
        ceiling = min(self.max_delay_s, self.base_delay_s * 2.0 ** max(0, failures - 1))
        # Jitter spreads clients that failed together, so they do not come back together.
        return ceiling * (1.0 - self.jitter * rng.random()) * time_scale


def rate_limit_wait_ms(headers: RateHeaders, limit: Limit, time_scale: float) -> int:
    """How long a 429 tells every process to wait, in real ms (already in the scaled world).

    ``X-Ratelimit-Retry``, else ``Retry-After`` (seconds or an HTTP date), else
    ``X-Ratelimit-Reset``, else (no usable wait header at all) one period of the bucket
    (scaled). ``RateHeaders`` has already clamped a wait past the cap to it and read one that
    is no number as absent, so this is finite and never shorter than what WB asked for.
    """
    seconds = headers.wait_s
    if seconds is not None and seconds > 0:
        return max(1, math.ceil(seconds * 1000.0))
    return max(1, math.ceil(limit.period_s * time_scale * 1000.0))
