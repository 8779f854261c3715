"""Runtimes a test starts; at the end each is closed and its keys under the prefix deleted."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from pydantic import SecretStr

from tests.support.databases import TEST_SECRET_KEY
from wbsync.config import Settings
from wbsync.shared.runtime import Runtime

StartRuntime = Callable[[Settings], Awaitable[Runtime]]
MakeRuntime = Callable[..., Awaitable[Runtime]]


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


@asynccontextmanager
async def runtime_maker(
    redis_url: str, prefix: str, database_url: str, wb_base_url: str, **defaults: Any
) -> AsyncIterator[MakeRuntime]:
    """``make(**settings)`` starts a Runtime on the test's Redis prefix, database and emulator
    (the test secret key), ``defaults`` and ``settings`` on top; all cleaned up on exit."""
    async with runtime_starter(redis_url, prefix) as start:

        async def make(**extra: Any) -> Runtime:
            settings = Settings(
                redis_url=redis_url,
                redis_prefix=prefix,
                database_url=database_url,
                secret_key=SecretStr(TEST_SECRET_KEY),
                wb_base_url=wb_base_url,
                **{**defaults, **extra},
            )
            return await start(settings)

        yield make
