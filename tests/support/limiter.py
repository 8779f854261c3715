"""The type of the ``limiter_factory`` fixture (tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Callable

from wbsync.ratelimit import RateLimiter

LimiterFactory = Callable[..., RateLimiter]
"""``limiter_factory(time_scale=0.01)``: a RateLimiter on the test's Redis and prefix."""
