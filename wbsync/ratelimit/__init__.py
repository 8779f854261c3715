"""The shared token-bucket limiter: buckets per (cabinet, limit group) and per seller, in Redis."""

from wbsync.ratelimit.learned import Learned
from wbsync.ratelimit.limiter import RateLimiter
from wbsync.ratelimit.options import LimiterOptions
from wbsync.ratelimit.penalty import GLOBAL_GROUP, Penalty
from wbsync.ratelimit.results import Acquired, TryResult
from wbsync.values.scope import BucketScope, Limit

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
