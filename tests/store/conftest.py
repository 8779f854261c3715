"""Fixtures of the storage tests in tests/store (the shared database fixtures are in
tests/conftest.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio

from tests.support.databases import DatabaseFactory
from wbsync.store import Database


@pytest_asyncio.fixture(loop_scope="session")
async def empty_database(
    db_backend: str, database_factory: DatabaseFactory
) -> AsyncIterator[Database]:
    """A started Database on a brand new database with no tables at all."""
    async with Database(await database_factory.new_url(db_backend)) as db:
        yield db
