"""Fixtures for the HTTP API tests: an emulator, a started runtime with an API key, a client.

The fixtures of the tests in tests/api (pytest gives them to every module of the folder).
Everything is real: Redis (the session's), the database (``database_factory``, per backend),
the emulator on loopback; the API is called in process through httpx's ASGI transport.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest
from pydantic import SecretStr

from tests.support.api import API_KEY, SCALE, SECRET, SELLERS
from tests.support.databases import DatabaseFactory
from tests.support.runtimes import runtime_starter
from wbsync.api import create_app
from wbsync.config import Settings
from wbsync.emulator import Emulator, EmulatorConfig, SellerSizes, running_emulator
from wbsync.shared.runtime import Runtime
from wbsync.store import Cabinet
from wbsync.system import clock


@pytest.fixture
async def api_emulator() -> AsyncIterator[Emulator]:
    """A small emulator: a finance report of two pages, a few goods and campaigns."""
    config = EmulatorConfig(
        serve_disabled_in_docs=True,  # the booking monitor polls acceptance coefficients
        time_scale=SCALE,
        anchor_date=clock.wb_today(),
        sizes=SellerSizes(products=12, campaigns=3, report_rows=8, orders=6, sales=6),
        page_size={"finance.detailed_report": 4},
    )
    async with running_emulator(config) as emu:
        yield emu


@pytest.fixture
async def api_runtime(
    redis_url: str,
    prefix: str,
    db_backend: str,
    database_factory: DatabaseFactory,
    api_emulator: Emulator,
) -> AsyncIterator[Runtime]:
    """A started runtime on the test's Redis prefix, a database of its own and the emulator."""
    settings = Settings(
        redis_url=redis_url,
        redis_prefix=prefix,
        secret_key=SecretStr(SECRET),
        api_keys=[SecretStr(API_KEY)],
        database_url=await database_factory.new_migrated_url(db_backend),
        wb_base_url=api_emulator.base_url,
        time_scale=SCALE,
    )
    async with runtime_starter(redis_url, prefix) as start:  # migrates the new database
        yield await start(settings)


@pytest.fixture
async def api(api_runtime: Runtime) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the app (no key set: pass ``headers=AUTH``)."""
    transport = httpx.ASGITransport(app=create_app(api_runtime))
    async with httpx.AsyncClient(transport=transport, base_url="http://wbsync.test") as client:
        yield client


@pytest.fixture
def add_cabinet(api_runtime: Runtime, api_emulator: Emulator) -> Callable[..., Awaitable[Cabinet]]:
    """Store a cabinet with an emulator token for ``SELLERS[i]``."""

    async def add(i: int = 0, name: str | None = None) -> Cabinet:
        seller = SELLERS[i]
        token = api_emulator.token(seller)
        return await api_runtime.store.cabinets.add(name or f"cab-{i + 1}", token, seller)

    return add
