"""Runtimes a test starts; at the end each is closed and its keys under the prefix deleted."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from wbsync.config import Settings
from wbsync.runtime import Runtime

StartRuntime = Callable[[Settings], Awaitable[Runtime]]


@asynccontextmanager
async def runtime_starter(redis_url: str, prefix: str) -> AsyncIterator[StartRuntime]:
    """``start(settings)`` starts a Runtime on ``redis_url``; all of them are cleaned up on exit."""
    runtimes: list[Runtime] = []

    async def start(settings: Settings) -> Runtime:
        runtime = await Runtime(settings, redis_url=redis_url).start()
        runtimes.append(runtime)
        return runtime

    try:
        yield start
    finally:
        for runtime in runtimes:
            async for key in runtime.redis.scan_iter(match=f"{prefix}*"):
                await runtime.redis.delete(key)
            await runtime.aclose()
