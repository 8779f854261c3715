"""The shared token-bucket limiter: one bucket per (cabinet, limit group) in Redis."""

from wbsync.ratelimit.limiter import Acquired, Learned, LimiterOptions, RateLimiter, TryResult
from wbsync.scope import BucketScope, Limit

__all__ = [
    "Acquired",
    "BucketScope",
    "Learned",
    "Limit",
    "LimiterOptions",
    "RateLimiter",
    "TryResult",
]
