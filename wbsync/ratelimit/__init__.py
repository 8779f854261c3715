"""The shared token-bucket limiter: buckets per (cabinet, limit group) and per seller, in Redis."""

from wbsync.ratelimit.limiter import Acquired, Learned, LimiterOptions, RateLimiter, TryResult
from wbsync.ratelimit.penalty import GLOBAL_GROUP, Penalty
from wbsync.scope import BucketScope, Limit

__all__ = [
    "GLOBAL_GROUP",
    "Acquired",
    "BucketScope",
    "Learned",
    "Limit",
    "LimiterOptions",
    "Penalty",
    "RateLimiter",
    "TryResult",
]
