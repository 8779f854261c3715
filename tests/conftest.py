"""Fixtures shared by the folders of the suite: a real Redis (configured or embedded), per-test
key prefixes, limiters, real databases (tests/support/databases.py) and an emulator on loopback.
A folder's own fixtures are in its conftest.py."""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import pytest_asyncio
from redis.asyncio import Redis
from sqlalchemy import delete

from tests.support import hangs
from tests.support.databases import (
    BACKENDS,
    POSTGRES_ENV,
    TEST_SECRET_KEY,
    DatabaseFactory,
    builtin_datasets,
)
from tests.support.limiter import LimiterFactory
from tests.support.wb import FAST
from wbsync import syncs
from wbsync.emulator import running_emulator
from wbsync.emulator.server import Emulator
from wbsync.ratelimit import LimiterOptions, RateLimiter
from wbsync.redis.redis_server import redis_url as resolve_redis_url
from wbsync.store import Database, Store
from wbsync.store.schema import model
from wbsync.system import eventloop

# The suite runs stock wbsync: an installed plugin (the example, `make test` installs it) is
# loaded only by a test that allows it (tests/test_example_plugin.py), in its own processes;
# commands run in process would otherwise register it for every later test.
os.environ.setdefault("WBSYNC_PLUGINS", "[]")

# The built-in syncs with their WB methods and datasets, registered as every command of wbsync
# registers them (each is declared in its sync's module); a test of the store alone needs them.
assert syncs.SYNCS


@pytest.fixture(autouse=True)
def _restore_root_logging() -> Iterator[None]:
    """Commands under test reconfigure the root logger (often onto a captured stream that is
    closed afterwards); put it back so later tests' threads do not log into a closed file."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


_FACTORY = pytest.StashKey[DatabaseFactory]()


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


@pytest.fixture
def limiter_factory(redis: Redis, prefix: str) -> LimiterFactory:
    """Build a RateLimiter on the test's Redis and prefix: ``limiter_factory(time_scale=0.01)``."""

    def make(**options: Any) -> RateLimiter:
        return RateLimiter(redis, LimiterOptions(prefix=prefix, **options))

    return make


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def database_factory(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> AsyncIterator[DatabaseFactory]:
    """The session's maker of throwaway databases; a test's own are dropped once it is over
    (``pytest_runtest_teardown``)."""
    factory = DatabaseFactory(tmp_path_factory.mktemp("store"), os.environ.get(POSTGRES_ENV))
    request.config.stash[_FACTORY] = factory
    yield factory
    del request.config.stash[_FACTORY]
    await factory.drop_all()


@pytest.fixture(params=BACKENDS)
def db_backend(request: pytest.FixtureRequest) -> str:
    """Each storage test runs once per backend; PostgreSQL only when configured."""
    backend: str = request.param
    if backend == "postgresql" and not os.environ.get(POSTGRES_ENV):
        pytest.skip(f"set {POSTGRES_ENV} to run storage tests on PostgreSQL")
    return backend


@pytest_asyncio.fixture(loop_scope="session")
async def database(db_backend: str, database_factory: DatabaseFactory) -> AsyncIterator[Database]:
    """A started Database migrated to head, with every table empty."""
    async with Database(await database_factory.migrated_url(db_backend)) as db:
        async with db.transaction() as conn:
            for table in reversed(model(builtin_datasets()).sorted_tables):
                await conn.execute(delete(table))
        yield db


@pytest.fixture
def store(database: Database) -> Store:
    """A Store on ``database`` with a fixed test secret key."""
    return Store(database, secret_key=TEST_SECRET_KEY)


@pytest.fixture
async def emulator() -> AsyncIterator[Emulator]:
    """A fresh emulator (scale 0.001, small statistics pages) on a free loopback port."""
    async with running_emulator(FAST) as emu:
        yield emu


@pytest.fixture
async def emu_http(emulator: Emulator) -> AsyncIterator[httpx.AsyncClient]:
    """A plain HTTP client of the emulator (no token set)."""
    async with httpx.AsyncClient(base_url=emulator.base_url, timeout=10.0) as client:
        yield client


def pytest_configure(config: pytest.Config) -> None:
    """pytest-xdist hands tests out one at a time (``--maxschedchunk 1``) unless told
    otherwise: by default its first hand-out is a chunk of consecutive tests per worker, a
    quarter of that worker's share, and the first chunk held every ``long`` test, one after
    the other in one worker, which then ended the run alone (docs/development.md)."""
    if config.pluginmanager.hasplugin("xdist") and config.getoption("maxschedchunk") is None:
        config.option.maxschedchunk = 1


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``long`` first, each group in its order: pytest-xdist hands tests out in
    this order, so the longest start while the others fill the workers around them, and none
    of them is left to run alone at the end (docs/development.md)."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)


# pytest-asyncio makes the loop factory a parameter of its session-scoped loop fixture
# (``_asyncio_loop_factory``, which the session's runner uses): a test whose parameter differs
# from the previous test's has every session-scoped fixture (the loop, the Redis, the
# databases and their migrations) torn down and made again around it. So there is one factory
# for the whole session, and every test carries it: an async test through pytest-asyncio's
# hook, a sync test (whose async fixtures run on the session's loop too) through
# ``pytest_generate_tests`` below.
_LOOP_FACTORY = hangs.tracked(eventloop.new_event_loop)
_LOOP_FIXTURE = "_asyncio_loop_factory"


def pytest_asyncio_loop_factories(config: pytest.Config, item: pytest.Item) -> dict[str, Any]:
    """The suite's tests run on the loop wbsync's processes run on (``wbsync.system.eventloop``)."""
    return {eventloop.NAME: _LOOP_FACTORY}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A sync test gets the session's loop factory as an async test does (see above)."""
    if _LOOP_FIXTURE not in metafunc.fixturenames:
        metafunc.fixturenames.append(_LOOP_FIXTURE)
        metafunc.parametrize(
            _LOOP_FIXTURE,
            [_LOOP_FACTORY],
            ids=[pytest.HIDDEN_PARAM],
            indirect=True,
            scope="session",
        )


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    hangs.setup_begins(item)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Once a test and its fixtures are torn down, the databases it made are dropped in the
    background (``DatabaseFactory.release``)."""
    try:
        return (yield)
    finally:
        factory = item.config.stash.get(_FACTORY, None)
        if factory is not None:
            factory.release()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """A test still running near the suite's bound fails with its loop's tasks in its report
    (``tests.support.hangs``)."""
    watch = hangs.watched(item)
    if watch is None:
        return (yield)
    with watch:
        try:
            return (yield)
        finally:
            if watch.tasks is not None:
                item.add_report_section("call", "asyncio tasks", watch.tasks)
