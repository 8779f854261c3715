"""Fixtures for the loader tests: wbsync's API served on loopback over a fresh database.

Everything is real: Redis (the session's), the database (``database_factory``, per backend) and
uvicorn on a free port; a loader reads it over HTTP like any client. WB is not called: the
cabinets' tokens come from an emulator that is never started.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import cast

import pytest
from pydantic import SecretStr
from starlette.types import ASGIApp, Receive, Scope, Send

from tests.support.api import API_KEY, SECRET, SELLERS
from tests.support.databases import DatabaseFactory
from tests.support.runtimes import runtime_starter
from tests.support.waiting import wait_for
from wbsync.api.server import ApiServer, uvicorn_config
from wbsync.config import Settings
from wbsync.emulator import Emulator
from wbsync.shared.runtime import Runtime
from wbsync.store import Cabinet


@pytest.fixture(autouse=True)
def _no_dlt_telemetry(monkeypatch: pytest.MonkeyPatch) -> None:
    """dlt reports anonymous usage over the network unless told not to: the suite stays local."""
    monkeypatch.setenv("RUNTIME__DLTHUB_TELEMETRY", "false")


@pytest.fixture
async def feed_runtime(
    redis_url: str, prefix: str, db_backend: str, database_factory: DatabaseFactory
) -> AsyncIterator[Runtime]:
    """A started runtime with an API key on a database of its own."""
    settings = Settings(
        redis_url=redis_url,
        redis_prefix=prefix,
        secret_key=SecretStr(SECRET),
        api_keys=[SecretStr(API_KEY)],
        database_url=await database_factory.new_url(db_backend),
        wb_base_url="http://127.0.0.1:9",  # never called
    )
    async with runtime_starter(redis_url, prefix) as start:
        yield await start(settings)


@pytest.fixture
def feed_paths() -> list[str]:
    """The path of every HTTP request the API served (``feed_url``), in order."""
    return []


@pytest.fixture
async def feed_url(feed_runtime: Runtime, feed_paths: list[str]) -> AsyncIterator[str]:
    """The API on a free loopback port, in this event loop; yields its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn_config(feed_runtime, host="127.0.0.1", port=port)
    app = cast(ASGIApp, config.app)  # create_app's FastAPI, typed loosely by uvicorn

    async def recorded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            feed_paths.append(scope["path"])
        await app(scope, receive, send)

    config.app = recorded
    server = ApiServer(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))

    async def started() -> bool:
        assert not task.done(), "the API server stopped during startup"
        return bool(server.started)

    await wait_for(started, timeout_s=10)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task
        sock.close()


@pytest.fixture
def new_cabinet(feed_runtime: Runtime) -> Callable[[int], Awaitable[Cabinet]]:
    """Store a cabinet for ``SELLERS[i]`` with a token signed as the emulator signs them."""
    emulator = Emulator()

    async def add(i: int) -> Cabinet:
        seller = SELLERS[i]
        return await feed_runtime.store.cabinets.add(f"cab-{i + 1}", emulator.token(seller), seller)

    return add
