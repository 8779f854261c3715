"""Redis going away under the API: bounded 503s naming it, one WARNING, one INFO when it is back."""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import AsyncIterator

import httpx
import pytest
from prometheus_client import REGISTRY
from pydantic import SecretStr

from tests.support.api import API_KEY, AUTH, SECRET
from tests.support.databases import DatabaseFactory
from wbsync.api import create_app
from wbsync.config import Settings
from wbsync.observability import health
from wbsync.redis.redis_server import EmbeddedRedis
from wbsync.shared.runtime import Runtime

# Generous: a loaded machine may be slow; an outage without bounds takes 40-100 s.
REPLY_BOUND_S = 5.0
ROUTES = (
    "/",
    "/api/v1/status",
    "/api/v1/penalties",
    "/api/v1/attention",
    "/api/v1/cabinets/{id}/jobs",
)


def _redis_up() -> float | None:
    return REGISTRY.get_sample_value("wbsync_dependency_up", {"dependency": "redis"})


@pytest.fixture
async def outage_runtime(
    database_factory: DatabaseFactory,
) -> AsyncIterator[tuple[Runtime, EmbeddedRedis]]:
    server = EmbeddedRedis().start()
    settings = Settings(
        redis_url=server.url,
        secret_key=SecretStr(SECRET),
        api_keys=[SecretStr(API_KEY)],
        database_url=await database_factory.new_migrated_url("sqlite"),
    )
    runtime = await Runtime(settings, redis_url=server.url).start()
    try:
        yield runtime, server
    finally:
        await runtime.aclose()
        server.stop()


async def test_with_redis_down_every_route_answers_within_seconds(
    outage_runtime: tuple[Runtime, EmbeddedRedis], caplog: pytest.LogCaptureFixture
) -> None:
    runtime, server = outage_runtime
    cabinet = await runtime.store.cabinets.add("outage", "token-of-a-cabinet", "seller-1")
    transport = httpx.ASGITransport(app=create_app(runtime))
    async with httpx.AsyncClient(transport=transport, base_url="http://wbsync.test") as api:
        await api.get(f"/?key={API_KEY}", follow_redirects=True)  # the page's session cookie
        for route in ROUTES:
            reply = await api.get(route.format(id=cabinet.id), headers=AUTH)
            assert reply.status_code == 200, route
        assert (await api.get("/readyz")).status_code == 200
        assert _redis_up() == 1

        port = int(server.url.rsplit(":", 1)[1].split("/")[0])
        os.kill(server.pid, signal.SIGKILL)
        caplog.set_level(logging.INFO, logger="wbsync.observability.health")
        for route in ("/readyz", "/readyz", *ROUTES):
            began = time.monotonic()
            reply = await api.get(route.format(id=cabinet.id), headers=AUTH)
            assert time.monotonic() - began < REPLY_BOUND_S, route
            assert reply.status_code == 503, route
            assert "redis" in reply.text, route
        began = time.monotonic()
        metrics = await api.get("/metrics", headers=AUTH)
        assert time.monotonic() - began < REPLY_BOUND_S
        assert metrics.status_code == 200  # the process's own counters still
        assert 'wbsync_dependency_up{dependency="redis"} 0.0' in metrics.text
        # One line for the outage, not one per request (the cabinet's made-up token is
        # another matter: the page logs that it cannot show that cabinet's buckets).
        about_redis = [
            r.getMessage()
            for r in caplog.records
            if r.levelno >= logging.WARNING and "redis" in r.getMessage().lower()
        ]
        assert len(about_redis) == 1 and "Redis is not answering" in about_redis[0]

        with EmbeddedRedis(port=port):
            assert (await api.get("/readyz")).status_code == 200
            back = [
                r
                for r in caplog.records
                if r.name == "wbsync.observability.health" and r.levelno == 20
            ]
            assert len(back) == 1 and "Redis is back after" in back[0].getMessage()
            assert _redis_up() == 1
            assert runtime.health.down_now() == []
    assert health.PROBE_TIMEOUT_S < REPLY_BOUND_S
