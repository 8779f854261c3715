"""Fixtures of the storage tests in tests/store (the shared database fixtures are in
tests/conftest.py)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from tests.support.databases import POSTGRES_ENV, DatabaseFactory
from wbsync.store import Database


@pytest_asyncio.fixture(loop_scope="session")
async def empty_database(
    db_backend: str, database_factory: DatabaseFactory
) -> AsyncIterator[Database]:
    """A started Database on a brand new database with no tables at all."""
    async with Database(await database_factory.new_url(db_backend)) as db:
        yield db


@pytest.fixture
async def throwaway(database_factory: DatabaseFactory) -> AsyncIterator[str]:
    """The URL of a new database on the real PostgreSQL server (the test may lock it out)."""
    if not os.environ.get(POSTGRES_ENV):
        pytest.skip(f"set {POSTGRES_ENV} to make a real PostgreSQL refuse connections")
    url = await database_factory.new_url("postgresql")
    yield url
    await database_factory.let_in(url)  # the session's cleanup drops it
