"""Fixtures of the WB client tests in tests/wb: clients of the emulator (the ``emulator``
fixture itself is in tests/conftest.py, the emulator's tests use it too)."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable

import pytest

from tests.support.wb import SELLER_A
from wbsync.config import Settings
from wbsync.emulator.server import Emulator
from wbsync.ratelimit import RateLimiter
from wbsync.shared.runtime import client_options
from wbsync.wb.client import WbClient
from wbsync.wb.retry import RetryPolicy


@pytest.fixture
def client_factory(
    emulator: Emulator, limiter_factory: Callable[..., RateLimiter]
) -> Callable[..., WbClient]:
    """``client_factory(token=None, seller=SELLER_A, retry=None)``: a WbClient on the emulator.

    Limiter and settings use the emulator's time scale, so both see the same windows.
    """
    scale = emulator.config.time_scale
    limiter = limiter_factory(time_scale=scale)
    options = client_options(Settings(wb_base_url=emulator.base_url, time_scale=scale))

    def make(
        *,
        token: str | None = None,
        seller: str = SELLER_A,
        retry: RetryPolicy | None = None,
        timeout_s: float = 10.0,
        cabinet: str = "cabinet-a",
    ) -> WbClient:
        raw = token if token is not None else emulator.token(seller)
        chosen = dataclasses.replace(
            options, retry=retry or RetryPolicy(), read_timeout_s=timeout_s
        )
        return WbClient(cabinet, raw, limiter, options=chosen, rng=random.Random(0))

    return make
