"""Fixtures of the job-layer tests: queues and workers on the test's Redis and prefix."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.support.jobs import Harness


@pytest.fixture
async def harness(redis_url: str, prefix: str) -> AsyncIterator[Harness]:
    h = Harness(redis_url, prefix)
    try:
        yield h
    finally:
        await h.close()
