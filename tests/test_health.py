"""The dependency probes behind ``/readyz``: ready over a slow link, not ready when a dependency
is really down or answers past the probe's deadline.

Redis and PostgreSQL are reached through TCP relays on loopback that add latency each way (or
are cut), in front of the real servers.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest
from pydantic import SecretStr
from sqlalchemy.engine import make_url

from tests.support.api import API_KEY, SECRET
from tests.support.databases import POSTGRES_ENV, DatabaseFactory
from tests.support.relay import Relay
from wbsync.api import create_app
from wbsync.config import Settings
from wbsync.observability import health
from wbsync.shared.runtime import Runtime

# What the link adds each way: a database and a Redis in another region.
SLOW_LINK_S = 0.2


@dataclass
class Linked:
    """A started runtime whose Redis and PostgreSQL are behind ``redis`` and ``database``."""

    runtime: Runtime
    api: httpx.AsyncClient
    redis: Relay
    database: Relay

    def slow(self, latency_s: float) -> None:
        self.redis.latency_s = self.database.latency_s = latency_s

    async def ready(self) -> tuple[int, dict[str, bool]]:
        reply = await self.api.get("/readyz")
        return reply.status_code, reply.json()["checks"]


@pytest.fixture
async def linked(redis_url: str, database_factory: DatabaseFactory) -> AsyncIterator[Linked]:
    if not os.environ.get(POSTGRES_ENV):
        pytest.skip(f"set {POSTGRES_ENV} to probe a real PostgreSQL over a slow link")
    pg = make_url(await database_factory.new_url("postgresql"))
    database = Relay(pg.host or "127.0.0.1", pg.port or 5432)
    redis_at = make_url(redis_url)
    redis = Relay(redis_at.host or "127.0.0.1", redis_at.port or 6379)
    await database.start()
    await redis.start()
    proxied_redis = f"redis://127.0.0.1:{redis.port}/{redis_at.database or 0}"
    settings = Settings(
        redis_url=proxied_redis,
        secret_key=SecretStr(SECRET),
        api_keys=[SecretStr(API_KEY)],
        database_url=pg.set(port=database.port).render_as_string(hide_password=False),
    )
    runtime = await Runtime(settings, redis_url=proxied_redis).start()
    transport = httpx.ASGITransport(app=create_app(runtime))
    async with httpx.AsyncClient(transport=transport, base_url="http://wbsync.test") as api:
        try:
            yield Linked(runtime, api, redis, database)
        finally:
            redis.latency_s = database.latency_s = 0.0
            await runtime.aclose()
            await redis.cut()
            await database.cut()


async def test_readyz_is_ready_over_a_slow_link_and_not_ready_when_a_dependency_is_down(
    linked: Linked,
) -> None:
    linked.slow(SLOW_LINK_S)
    assert await linked.ready() == (200, {"redis": True, "database": True})

    # Really down (a relay cut resets every connection and refuses new ones), each in turn.
    linked.slow(0.0)
    await linked.database.cut()
    assert await linked.ready() == (503, {"redis": True, "database": False})
    await linked.redis.cut()
    assert await linked.ready() == (503, {"redis": False, "database": False})
    await linked.redis.start()
    assert await linked.ready() == (503, {"redis": True, "database": False})
    await linked.database.start()

    # Back, over the slow link: the probe opens its connection again within the deadline.
    linked.slow(SLOW_LINK_S)
    assert await linked.ready() == (200, {"redis": True, "database": True})


async def test_a_dependency_answering_past_the_probe_deadline_is_not_ready(
    linked: Linked, monkeypatch: pytest.MonkeyPatch
) -> None:
    deadline_s = 0.5
    monkeypatch.setattr(health, "PROBE_TIMEOUT_S", deadline_s)
    assert await linked.ready() == (200, {"redis": True, "database": True})
    # One round trip of each probe now takes longer than the deadline.
    linked.slow(deadline_s * 0.6)
    assert await linked.ready() == (503, {"redis": False, "database": False})
