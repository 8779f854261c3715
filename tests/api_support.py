"""Constants and helpers shared by the HTTP API tests (kept out of the fixture plugin)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

API_KEY = "test-api-key-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {API_KEY}"}
SECRET = "api-test-secret"
SCALE = 0.005  # WB's minute is 300 ms
SELLERS = [f"0000000{i}-0000-4000-8000-0000000000a0" for i in range(1, 5)]


async def wait_for(condition: Callable[[], Awaitable[Any]], timeout_s: float = 20.0) -> None:
    """Poll ``condition`` until it is truthy, failing after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not await condition():
        assert time.monotonic() < deadline, "condition not met before the deadline"
        await asyncio.sleep(0.02)
