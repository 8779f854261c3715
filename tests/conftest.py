"""Shared fixtures: a real Redis (configured or embedded), per-test key prefixes, limiters."""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
from redis.asyncio import Redis

from wbsync.ratelimit import LimiterOptions, RateLimiter
from wbsync.redis_server import redis_url as resolve_redis_url

pytest_plugins = ["tests.conftest_store"]

# The suite runs stock wbsync: an installed plugin (the example, `make test` installs it) is
# loaded only by a test that allows it (tests/test_example_plugin.py), in its own processes;
# commands run in process would otherwise register it for every later test.
os.environ.setdefault("WBSYNC_PLUGINS", "[]")


@pytest.fixture(autouse=True)
def _restore_root_logging() -> Iterator[None]:
    """Commands under test reconfigure the root logger (often onto a captured stream that is
    closed afterwards); put it back so later tests' threads do not log into a closed file."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """WBSYNC_REDIS_URL if set, else a private redis-server for the whole session."""
    with resolve_redis_url(os.environ.get("WBSYNC_REDIS_URL")) as url:
        yield url


@pytest.fixture
def prefix() -> str:
    """A key prefix of this test's own; everything under it is deleted afterwards."""
    return f"wbsync-test:{uuid.uuid4().hex[:12]}"


@pytest.fixture
async def redis(redis_url: str, prefix: str) -> AsyncIterator[Redis]:
    """A client of the test Redis; on teardown it deletes the keys under the test's prefix."""
    client = Redis.from_url(redis_url, decode_responses=True)
    try:
        yield client
    finally:
        async for key in client.scan_iter(match=f"{prefix}:*", count=1000):
            await client.delete(key)
        await client.aclose()


LimiterFactory = Callable[..., RateLimiter]


@pytest.fixture
def limiter_factory(redis: Redis, prefix: str) -> LimiterFactory:
    """Build a RateLimiter on the test's Redis and prefix: ``limiter_factory(time_scale=0.01)``."""

    def make(**options: Any) -> RateLimiter:
        return RateLimiter(redis, LimiterOptions(prefix=prefix, **options))

    return make
