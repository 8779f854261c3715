"""The shared token-bucket limiter: buckets per (cabinet, limit group) and per seller, in Redis."""

from wbsync.ratelimit.limiter import Acquired, Learned, LimiterOptions, RateLimiter, TryResult
from wbsync.ratelimit.penalty import GLOBAL_GROUP, MAX_WORDS_CHARS, Penalty
from wbsync.values.scope import BucketScope, Limit

__all__ = [
    "GLOBAL_GROUP",
    "MAX_WORDS_CHARS",
    "Acquired",
    "BucketScope",
    "Learned",
    "Limit",
    "LimiterOptions",
    "Penalty",
    "RateLimiter",
    "TryResult",
]
