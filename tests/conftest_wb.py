"""Fixtures for the WB client and emulator tests: an emulator on loopback, sellers, tokens.

Loaded by the test modules that need it with ``pytest_plugins = ["tests.conftest_wb"]``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from tests.wb_support import FAST
from wbsync.emulator import running_emulator
from wbsync.emulator.server import Emulator


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
