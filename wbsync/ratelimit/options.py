"""What a limiter is configured by: small options, never the settings."""

from __future__ import annotations

import math
from dataclasses import dataclass

from wbsync.values.scope import Limit

__all__ = ["LimiterOptions"]


@dataclass(frozen=True, slots=True)
class LimiterOptions:
    """What a limiter is configured by; the composition root builds it from the settings
    (``wbsync.shared.runtime.limiter_options``), so the limiter knows nothing of ``Settings``.

    ``time_scale`` multiplies every bucket's period, the ceiling's margin and cap and the
    learned limits' TTL, so tests and demos can turn WB's minutes into milliseconds. Penalties
    are real milliseconds, not scaled. ``seller_limit``: a rate of the seller's global bucket
    (WB publishes none; None = the bucket holds only WB's penalties).

    Each token's refill interval gets a margin, ``refill_margin_ratio`` of the interval and at
    most ``refill_margin_cap_ms``: WB's bucket and ours see each request a few milliseconds
    apart (network, a busy event loop), and a request that reaches WB even slightly before
    WB's bucket refilled is refused with a 429. The ratio follows the (scaled) interval, so a
    bucket never loses more than that share of its rate, at any time scale; the cap is real
    milliseconds, not scaled, because the jitter it absorbs is real time.
    """

    prefix: str
    time_scale: float = 1.0
    ceiling_margin_ms: float = 5000.0
    ceiling_cap_ms: float = 125_000.0
    refill_margin_ratio: float = 0.0
    refill_margin_cap_ms: float = 25.0
    learned_ttl_s: float = 3600.0
    max_wait_s: float = 21_600.0
    seller_limit: Limit | None = None

    def __post_init__(self) -> None:
        if self.time_scale <= 0:
            raise ValueError(f"time_scale must be > 0, got {self.time_scale}")
        if self.learned_ttl_s <= 0:
            raise ValueError(f"learned_ttl_s must be > 0, got {self.learned_ttl_s}")
        if not 0 < self.max_wait_s < math.inf:
            raise ValueError(f"max_wait_s must be > 0 and finite, got {self.max_wait_s}")
